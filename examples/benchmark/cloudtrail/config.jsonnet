// CloudTrail events (one record a line, as a Kinesis or Firehose pipeline sees them once
// `Records` is split) enriched with a few Elastic Common Schema fields, the rest of each event
// passed on untouched: the mapping of benches/cloudtrail/cloudtrail.jq as a sluice pipeline.
// benches/cloudtrail/bench.py runs it against jq and checks the outputs match.
local sub = std.extVar('sub');

local event(read_only, refused) = {
  eventVersion: '1.09',
  userIdentity: {
    type: 'AssumedRole',
    principalId: 'AROAEXAMPLEROLEID0001:alice',
    arn: 'arn:aws:sts::111122223333:assumed-role/ci-deploy/alice',
    accountId: '111122223333',
    accessKeyId: 'ASIAEXAMPLEKEYID0001',
    sessionContext: {
      sessionIssuer: {
        type: 'Role',
        principalId: 'AROAEXAMPLEROLEID0001',
        arn: 'arn:aws:iam::111122223333:role/ci-deploy',
        accountId: '111122223333',
        userName: 'ci-deploy',
      },
      webIdFederationData: {},
      attributes: { creationDate: '2024-03-14T08:22:59Z', mfaAuthenticated: 'false' },
    },
  },
  eventTime: '2024-03-14T09:26:53Z',
  eventSource: 'ec2.amazonaws.com',
  eventName: if read_only then 'DescribeInstances' else 'RunInstances',
  awsRegion: 'eu-west-1',
  sourceIPAddress: '203.0.113.7',
  userAgent: 'aws-cli/2.15.30 Python/3.11.8',
  requestParameters: { instancesSet: {}, filterSet: {} },
  responseElements: null,
  requestID: '5dfbd3d1-2c4a-4698-aa2c-a1af6a107b75',
  eventID: 'c69d4bd8-b3fa-4aa7-a1fa-b9d78c7e134f',
  readOnly: read_only,
  eventType: 'AwsApiCall',
  managementEvent: true,
  recipientAccountId: '111122223333',
  eventCategory: 'Management',
  tlsDetails: {
    tlsVersion: 'TLSv1.3',
    cipherSuite: 'TLS_AES_128_GCM_SHA256',
    clientProvidedHostHeader: 'ec2.eu-west-1.amazonaws.com',
  },
} + (if refused then { errorCode: 'Client.UnauthorizedOperation', errorMessage: 'You are not authorized' } else {});

// What every output holds: the fields added, tlsDetails gone, the rest as it came (Jsonnet
// writes a test's keys sorted).
local enriched = [
  sub.cnd.str.eq({ obj: { src: '\\@timestamp' }, value: '2024-03-14T09:26:53Z' }),
  sub.cnd.str.eq({ obj: { src: 'event.kind' }, value: 'event' }),
  sub.cnd.str.eq({ obj: { src: 'source.address' }, value: '203.0.113.7' }),
  sub.cnd.str.eq({ obj: { src: 'cloud.region' }, value: 'eu-west-1' }),
  sub.cnd.str.eq({ obj: { src: 'cloud.account.id' }, value: '111122223333' }),
  sub.cnd.num.len.eq({ obj: { src: 'tlsDetails' }, value: 0 }),
  sub.cnd.str.eq({ obj: { src: 'userIdentity.sessionContext.sessionIssuer.userName' }, value: 'ci-deploy' }),
  sub.cnd.str.eq({ obj: { src: 'requestParameters' }, value: '{"filterSet":{},"instancesSet":{}}' }),
];

{
  tests: [
    {
      name: 'enriches-a-read',
      transforms: [sub.tf.test.message({ value: event(true, false) })],
      condition: sub.cnd.all(enriched + [
        sub.cnd.str.eq({ obj: { src: 'event.action' }, value: 'DescribeInstances' }),
        sub.cnd.str.eq({ obj: { src: 'event.type' }, value: '["access"]' }),
        sub.cnd.str.eq({ obj: { src: 'event.outcome' }, value: 'success' }),
      ]),
    },
    {
      name: 'enriches-a-refused-write',
      transforms: [sub.tf.test.message({ value: event(false, true) })],
      condition: sub.cnd.all(enriched + [
        sub.cnd.str.eq({ obj: { src: 'event.action' }, value: 'RunInstances' }),
        sub.cnd.str.eq({ obj: { src: 'event.type' }, value: '["change"]' }),
        sub.cnd.str.eq({ obj: { src: 'event.outcome' }, value: 'failure' }),
        sub.cnd.str.eq({ obj: { src: 'errorCode' }, value: 'Client.UnauthorizedOperation' }),
      ]),
    },
  ],
  transforms: [
    sub.tf.obj.cp({ obj: { src: 'eventTime', trg: '\\@timestamp' } }),
    sub.tf.obj.insert({ obj: { trg: 'event.kind' }, value: 'event' }),
    sub.tf.obj.cp({ obj: { src: 'eventName', trg: 'event.action' } }),
    // readOnly is a boolean: its text is `true` or `false` (a missing one is neither).
    sub.tf.meta.switch({ cases: [
      {
        condition: sub.cnd.str.eq({ obj: { src: 'readOnly' }, value: 'true' }),
        transforms: [sub.tf.obj.insert({ obj: { trg: 'event.type' }, value: ['access'] })],
      },
      { transforms: [sub.tf.obj.insert({ obj: { trg: 'event.type' }, value: ['change'] })] },
    ] }),
    // A refused call carries an errorCode (never empty).
    sub.tf.meta.switch({ cases: [
      {
        condition: sub.cnd.num.len.gt({ obj: { src: 'errorCode' }, value: 0 }),
        transforms: [sub.tf.obj.insert({ obj: { trg: 'event.outcome' }, value: 'failure' })],
      },
      { transforms: [sub.tf.obj.insert({ obj: { trg: 'event.outcome' }, value: 'success' })] },
    ] }),
    // source.address, not source.ip: an AWS service's calls name the service here.
    sub.tf.obj.cp({ obj: { src: 'sourceIPAddress', trg: 'source.address' } }),
    sub.tf.obj.cp({ obj: { src: 'awsRegion', trg: 'cloud.region' } }),
    sub.tf.obj.cp({ obj: { src: 'recipientAccountId', trg: 'cloud.account.id' } }),
    sub.tf.obj.del({ obj: { src: 'tlsDetails' } }),
    sub.tf.send.stdout(),
  ],
}
