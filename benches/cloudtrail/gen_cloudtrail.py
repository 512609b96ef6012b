#!/usr/bin/env python3
"""Writes N CloudTrail events, one JSON object per line, to stdout: the records of CloudTrail's
log files as a Kinesis or Firehose pipeline sees them once `Records` is split, about 1.5 KB
each on average (0.6 KB to 2.8 KB).

A mix of services and calls (S3 and DynamoDB data events, EC2, STS, IAM, KMS, Lambda, CloudWatch
Logs, console sign-ins), each with its own shapes of requestParameters and responseElements
(often null), callers of each userIdentity type (assumed roles with a sessionContext, IAM
users, AWS services, the root user), some calls refused (errorCode, errorMessage), tlsDetails
on most, resources[] where CloudTrail gives them.

Usage: gen_cloudtrail.py N [SEED]
The events are deterministic for a given N and SEED.
"""
import json
import random
import sys
import uuid
from datetime import datetime, timedelta, timezone

ACCOUNTS = ["111122223333", "444455556666", "777788889999"]
REGIONS = ["us-east-1", "us-east-1", "us-west-2", "eu-west-1", "ap-southeast-2"]
ROLES = ["OrganizationAccountAccessRole", "ci-deploy", "DataPipelineWorker", "ReadOnlyAuditor"]
USERS = ["alice", "bob", "carol", "svc-backup", "terraform"]
AGENTS = [
    "aws-cli/2.15.30 Python/3.11.8 Linux/6.1.79-99.167.amzn2023.x86_64 exe/x86_64.amzn.2023 prompt/off command/{cmd}",
    "Boto3/1.34.69 md/Botocore#1.34.69 ua/2.0 os/linux#5.10.213-201.855.amzn2.x86_64 md/arch#x86_64 lang/python#3.12.2 md/pyimpl#CPython cfg/retry-mode#legacy Botocore/1.34.69",
    "aws-sdk-go-v2/1.25.3 os/linux lang/go#1.22.1 md/GOOS#linux md/GOARCH#amd64 api/{svc}#1.50.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/123.0.0.0 Safari/537.36",
    "APN/1.0 HashiCorp/1.0 Terraform/1.7.5 (+https://www.terraform.io) terraform-provider-aws/5.42.0 (+https://registry.terraform.io/providers/hashicorp/aws) aws-sdk-go-v2/1.25.3 os/linux lang/go#1.22.1",
]
TLS = [("TLSv1.3", "TLS_AES_128_GCM_SHA256"), ("TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256"), ("TLSv1.3", "TLS_AES_256_GCM_SHA384")]
ERRORS = [
    ("AccessDenied", "User: {arn} is not authorized to perform: {action} on resource: {resource} because no identity-based policy allows the {action} action"),
    ("Client.UnauthorizedOperation", "You are not authorized to perform this operation. User: {arn} is not authorized to perform: {action} with an explicit deny in a service control policy"),
    ("ThrottlingException", "Rate exceeded"),
]
KEYS = ["logs/2024/03/14/app.log.gz", "exports/report-{n}.csv", "images/thumbnails/{n}.png", "backups/db/snapshot-{n}.tar.zst", "uploads/ünïcode/résumé-{n}.pdf"]


class Gen:
    def __init__(self, seed):
        self.rnd = random.Random(seed)

    def pick(self, seq):
        return seq[self.rnd.randrange(len(seq))]

    def hexid(self, n):
        return "".join(self.pick("0123456789ABCDEF") for _ in range(n))

    def uuid(self):
        return str(uuid.UUID(int=self.rnd.getrandbits(128), version=4))

    def key_id(self, prefix):
        return prefix + "".join(self.pick("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16))

    def ip(self):
        r = self.rnd.randrange
        return self.pick([f"203.0.113.{r(256)}", f"198.51.100.{r(256)}", f"10.{r(256)}.{r(256)}.{r(256)}",
                          f"2001:db8:{r(65536):x}::{r(65536):x}"])

    def identity(self, account, when):
        """A caller: (userIdentity, sourceIPAddress, userAgent or None for the caller's own)."""
        kind = self.rnd.random()
        if kind < 0.55:
            role = self.pick(ROLES)
            session = self.pick(USERS) if self.rnd.random() < 0.5 else f"botocore-session-{self.rnd.randrange(10**10)}"
            role_id = self.key_id("AROA")
            created = (when - timedelta(seconds=self.rnd.randrange(60, 3600))).strftime("%Y-%m-%dT%H:%M:%SZ")
            return {
                "type": "AssumedRole",
                "principalId": f"{role_id}:{session}",
                "arn": f"arn:aws:sts::{account}:assumed-role/{role}/{session}",
                "accountId": account,
                "accessKeyId": self.key_id("ASIA"),
                "sessionContext": {
                    "sessionIssuer": {
                        "type": "Role",
                        "principalId": role_id,
                        "arn": f"arn:aws:iam::{account}:role/{role}",
                        "accountId": account,
                        "userName": role,
                    },
                    "webIdFederationData": {},
                    "attributes": {"creationDate": created, "mfaAuthenticated": "false"},
                },
            }, self.ip(), None
        if kind < 0.8:
            user = self.pick(USERS)
            ident = {
                "type": "IAMUser",
                "principalId": self.key_id("AIDA"),
                "arn": f"arn:aws:iam::{account}:user/{user}",
                "accountId": account,
                "accessKeyId": self.key_id("AKIA"),
                "userName": user,
            }
            if self.rnd.random() < 0.4:
                ident["sessionContext"] = {"attributes": {
                    "creationDate": (when - timedelta(minutes=self.rnd.randrange(1, 600))).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "mfaAuthenticated": self.pick(["true", "false"]),
                }}
            return ident, self.ip(), None
        if kind < 0.97:
            service = self.pick(["ec2.amazonaws.com", "lambda.amazonaws.com", "cloudformation.amazonaws.com"])
            return {"type": "AWSService", "invokedBy": service}, service, service
        return {
            "type": "Root",
            "principalId": account,
            "arn": f"arn:aws:iam::{account}:root",
            "accountId": account,
            "accessKeyId": self.key_id("ASIA"),
            "sessionContext": {"attributes": {"creationDate": when.strftime("%Y-%m-%dT%H:%M:%SZ"), "mfaAuthenticated": "true"}},
        }, self.ip(), None

    # Each call: (eventSource, eventName, readOnly, requestParameters, responseElements,
    # resources or None, extra top-level fields).
    def s3_get(self, account, region, n):
        bucket = f"{self.pick(['prod', 'staging', 'analytics'])}-data-{account[:4]}"
        key = self.pick(KEYS).format(n=n)
        arn = f"arn:aws:s3:::{bucket}/{key}"
        extra = {
            "additionalEventData": {
                "SignatureVersion": "SigV4",
                "CipherSuite": "TLS_AES_128_GCM_SHA256",
                "bytesTransferredIn": 0.0,
                "AuthenticationMethod": "AuthHeader",
                "x-amz-id-2": self.hexid(40),
                "bytesTransferredOut": float(self.rnd.randrange(100, 5_000_000)),
            },
            "eventCategory": "Data",
            "managementEvent": False,
        }
        name = self.pick(["GetObject", "GetObject", "PutObject", "HeadObject"])
        params = {"bucketName": bucket, "Host": f"{bucket}.s3.{region}.amazonaws.com", "key": key}
        if name == "PutObject":
            params["x-amz-server-side-encryption"] = "aws:kms"
        resp = {"x-amz-server-side-encryption": "aws:kms", "x-amz-version-id": self.hexid(32)} if name == "PutObject" else None
        resources = [
            {"type": "AWS::S3::Object", "ARN": arn},
            {"accountId": account, "type": "AWS::S3::Bucket", "ARN": f"arn:aws:s3:::{bucket}"},
        ]
        return "s3.amazonaws.com", name, name != "PutObject", params, resp, resources, extra

    def ec2_describe(self, account, region, n):
        params = {"instancesSet": {}, "filterSet": {"items": [
            {"name": "tag:Environment", "valueSet": {"items": [{"value": self.pick(["prod", "staging"])}]}},
            {"name": "instance-state-name", "valueSet": {"items": [{"value": "running"}, {"value": "stopped"}]}},
        ]}}
        if self.rnd.random() < 0.5:
            params = {"maxResults": 1000, "instancesSet": {}, "filterSet": {}}
        return "ec2.amazonaws.com", "DescribeInstances", True, params, None, None, {"managementEvent": True}

    def ec2_run(self, account, region, n):
        image = f"ami-{self.hexid(17).lower()}"
        instance = f"i-{self.hexid(17).lower()}"
        itype = self.pick(["t3.micro", "m6i.large", "c7g.xlarge"])
        subnet = f"subnet-{self.hexid(17).lower()}"
        params = {
            "instancesSet": {"items": [{"imageId": image, "minCount": 1, "maxCount": 1}]},
            "instanceType": itype,
            "blockDeviceMapping": {},
            "monitoring": {"enabled": False},
            "disableApiTermination": False,
            "subnetId": subnet,
            "tagSpecificationSet": {"items": [{"resourceType": "instance", "tags": [{"key": "Name", "value": f"worker-{n}"}]}]},
        }
        resp = {
            "requestId": self.uuid(),
            "reservationId": f"r-{self.hexid(17).lower()}",
            "ownerId": account,
            "groupSet": {},
            "instancesSet": {"items": [{
                "instanceId": instance,
                "imageId": image,
                "instanceState": {"code": 0, "name": "pending"},
                "privateDnsName": f"ip-10-0-{n % 256}-{n // 256 % 256}.{region}.compute.internal",
                "amiLaunchIndex": 0,
                "productCodes": {},
                "instanceType": itype,
                "launchTime": 1710408413000 + n,
                "placement": {"availabilityZone": region + "a", "tenancy": "default"},
                "monitoring": {"state": "disabled"},
                "subnetId": subnet,
                "privateIpAddress": f"10.0.{n % 256}.{n // 256 % 256}",
                "stateReason": {"code": "pending", "message": "pending"},
                "architecture": "x86_64",
                "rootDeviceType": "ebs",
                "rootDeviceName": "/dev/xvda",
                "virtualizationType": "hvm",
                "hypervisor": "xen",
                "ebsOptimized": False,
                "enaSupport": True,
                "cpuOptions": {"coreCount": 1, "threadsPerCore": 2},
                "metadataOptions": {"state": "pending", "httpTokens": "required", "httpPutResponseHopLimit": 2, "httpEndpoint": "enabled"},
            }]},
        }
        return "ec2.amazonaws.com", "RunInstances", False, params, resp, None, {"managementEvent": True}

    def sts_assume(self, account, region, n):
        role = self.pick(ROLES)
        session = f"session-{n}"
        role_arn = f"arn:aws:iam::{account}:role/{role}"
        params = {"roleArn": role_arn, "roleSessionName": session, "durationSeconds": 3600}
        resp = {
            "credentials": {
                "accessKeyId": self.key_id("ASIA"),
                "sessionToken": "IQoJb3JpZ2luX2VjE" + self.hexid(120),
                "expiration": "Mar 14, 2024, 10:26:53 AM",
            },
            "assumedRoleUser": {
                "assumedRoleId": f"{self.key_id('AROA')}:{session}",
                "arn": f"arn:aws:sts::{account}:assumed-role/{role}/{session}",
            },
        }
        resources = [{"accountId": account, "type": "AWS::IAM::Role", "ARN": role_arn}]
        return "sts.amazonaws.com", "AssumeRole", True, params, resp, resources, {"managementEvent": True}

    def sts_whoami(self, account, region, n):
        return "sts.amazonaws.com", "GetCallerIdentity", True, None, None, None, {"managementEvent": True}

    def iam(self, account, region, n):
        name = self.pick(["ListRoles", "AttachRolePolicy", "CreateUser", "GetPolicyVersion"])
        if name == "ListRoles":
            return "iam.amazonaws.com", name, True, {"maxItems": 100, "pathPrefix": "/"}, None, None, {"managementEvent": True}
        if name == "AttachRolePolicy":
            params = {"roleName": self.pick(ROLES), "policyArn": "arn:aws:iam::aws:policy/ReadOnlyAccess"}
            return "iam.amazonaws.com", name, False, params, None, None, {"managementEvent": True}
        if name == "CreateUser":
            user = f"user-{n}"
            resp = {"user": {"path": "/", "userName": user, "userId": self.key_id("AIDA"),
                             "arn": f"arn:aws:iam::{account}:user/{user}", "createDate": "Mar 14, 2024, 9:26:53 AM"}}
            return "iam.amazonaws.com", name, False, {"userName": user, "tags": []}, resp, None, {"managementEvent": True}
        params = {"policyArn": f"arn:aws:iam::{account}:policy/boundary-{n % 7}", "versionId": f"v{n % 5 + 1}"}
        return "iam.amazonaws.com", name, True, params, None, None, {"managementEvent": True}

    def kms_decrypt(self, account, region, n):
        key_arn = f"arn:aws:kms:{region}:{account}:key/{self.uuid()}"
        params = {
            "encryptionContext": {"aws:lambda:FunctionArn": f"arn:aws:lambda:{region}:{account}:function:handler-{n % 13}"},
            "encryptionAlgorithm": "SYMMETRIC_DEFAULT",
        }
        resources = [{"accountId": account, "type": "AWS::KMS::Key", "ARN": key_arn}]
        return "kms.amazonaws.com", "Decrypt", True, params, None, resources, {"managementEvent": True}

    def dynamodb_get(self, account, region, n):
        table = self.pick(["orders", "sessions", "inventory"])
        params = {"tableName": table, "key": {"pk": f"customer#{n % 9973}", "sk": f"order#{n}"},
                  "consistentRead": self.rnd.random() < 0.3, "projectionExpression": "#s, total, items"}
        resources = [{"accountId": account, "type": "AWS::DynamoDB::Table",
                      "ARN": f"arn:aws:dynamodb:{region}:{account}:table/{table}"}]
        return "dynamodb.amazonaws.com", "GetItem", True, params, None, resources, {"eventCategory": "Data", "managementEvent": False}

    def lambda_list(self, account, region, n):
        return "lambda.amazonaws.com", "ListFunctions20150331", True, {"maxItems": 50}, None, None, {"managementEvent": True}

    def logs_create(self, account, region, n):
        params = {"logGroupName": f"/aws/lambda/handler-{n % 13}", "logStreamName": f"2024/03/14/[$LATEST]{self.hexid(32).lower()}"}
        return "logs.amazonaws.com", "CreateLogStream", False, params, None, None, {"managementEvent": True}

    def event(self, i):
        r = self.rnd
        when = datetime(2024, 3, 14, 9, 0, 0, tzinfo=timezone.utc) + timedelta(milliseconds=i * 37 + r.randrange(37))
        account = self.pick(ACCOUNTS)
        region = self.pick(REGIONS)
        calls = [self.s3_get] * 5 + [self.ec2_describe] * 2 + [self.ec2_run, self.sts_assume, self.sts_whoami] + \
            [self.iam, self.kms_decrypt] * 2 + [self.dynamodb_get] * 3 + [self.lambda_list, self.logs_create]
        if r.random() < 0.02:
            return self.console_login(i, when, account)
        source, name, read_only, params, resp, resources, extra = self.pick(calls)(account, region, i)
        if source == "iam.amazonaws.com":
            region = "us-east-1"
        ident, ip, agent = self.identity(account, when)
        if agent is None:
            agent = self.pick(AGENTS).format(cmd=name.lower(), svc=source.split(".")[0])
        ev = {
            "eventVersion": self.pick(["1.08", "1.09", "1.10"]),
            "userIdentity": ident,
            "eventTime": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "eventSource": source,
            "eventName": name,
            "awsRegion": region,
            "sourceIPAddress": ip,
            "userAgent": agent,
        }
        if r.random() < 0.06 and ident["type"] != "AWSService":
            code, message = self.pick(ERRORS)
            ev["errorCode"] = code
            ev["errorMessage"] = message.format(arn=ident.get("arn", ""), action=f"{source.split('.')[0]}:{name}",
                                                resource=(resources or [{"ARN": "*"}])[0]["ARN"])
            resp = None
        ev["requestParameters"] = params
        ev["responseElements"] = resp
        if "additionalEventData" in extra:
            ev["additionalEventData"] = extra["additionalEventData"]
        ev["requestID"] = self.hexid(16) if source == "s3.amazonaws.com" else self.uuid()
        ev["eventID"] = self.uuid()
        ev["readOnly"] = read_only
        if resources:
            ev["resources"] = resources
        ev["eventType"] = "AwsApiCall" if ident["type"] != "AWSService" else self.pick(["AwsApiCall", "AwsServiceEvent"])
        ev["managementEvent"] = extra["managementEvent"]
        ev["recipientAccountId"] = account
        if r.random() < 0.1:
            ev["vpcEndpointId"] = f"vpce-{self.hexid(17).lower()}"
        if r.random() < 0.05:
            ev["sharedEventID"] = self.uuid()
        ev["eventCategory"] = extra.get("eventCategory", "Management")
        if ident["type"] != "AWSService":
            version, suite = self.pick(TLS)
            ev["tlsDetails"] = {"tlsVersion": version, "cipherSuite": suite,
                                "clientProvidedHostHeader": f"{source.split('.')[0]}.{region}.amazonaws.com"}
        if ident["type"] == "IAMUser" and r.random() < 0.3:
            ev["sessionCredentialFromConsole"] = "true"
        return ev

    def console_login(self, i, when, account):
        user = self.pick(USERS)
        ok = self.rnd.random() < 0.85
        return {
            "eventVersion": "1.09",
            "userIdentity": {"type": "IAMUser", "principalId": self.key_id("AIDA"),
                             "arn": f"arn:aws:iam::{account}:user/{user}", "accountId": account, "userName": user},
            "eventTime": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "eventSource": "signin.amazonaws.com",
            "eventName": "ConsoleLogin",
            "awsRegion": "us-east-1",
            "sourceIPAddress": self.ip(),
            "userAgent": AGENTS[3],
            **({} if ok else {"errorMessage": "Failed authentication"}),
            "requestParameters": None,
            "responseElements": {"ConsoleLogin": "Success" if ok else "Failure"},
            "additionalEventData": {"LoginTo": "https://console.aws.amazon.com/console/home", "MobileVersion": "No",
                                    "MFAUsed": self.pick(["Yes", "No"])},
            "eventID": self.uuid(),
            "readOnly": False,
            "eventType": "AwsConsoleSignIn",
            "managementEvent": True,
            "recipientAccountId": account,
            "eventCategory": "Management",
            "tlsDetails": {"tlsVersion": "TLSv1.3", "cipherSuite": "TLS_AES_128_GCM_SHA256",
                           "clientProvidedHostHeader": "signin.aws.amazon.com"},
        }


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    gen = Gen(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    out = sys.stdout.buffer  # UTF-8 whatever the locale, as CloudTrail writes it
    for i in range(n):
        out.write(json.dumps(gen.event(i), separators=(",", ":"), ensure_ascii=False).encode() + b"\n")


if __name__ == "__main__":
    main()
