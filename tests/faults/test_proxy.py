#!/usr/bin/env python3
"""Tests of proxy.py against a recording upstream (stdlib only):

    .emulators/venv/bin/python tests/faults/test_proxy.py

scripts/faults.sh runs them before every campaign: a proxy that injected the wrong thing
would make the campaign's counts meaningless.
"""
import base64
import json
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import proxy  # noqa: E402


class Upstream(BaseHTTPRequestHandler):
    """Answers PutRecords / PutRecordBatch with success for every record it got, anything
    else with `{}`; keeps the bodies it received."""

    received = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        try:
            body = json.loads(raw)
        except ValueError:  # a Cloud Storage upload: the object's bytes
            body = raw
        Upstream.received.append(body)
        target = self.headers.get("X-Amz-Target", "")
        if target.endswith("PutRecords"):
            answer = {"FailedRecordCount": 0,
                      "Records": [{"SequenceNumber": str(i), "ShardId": "shardId-0"}
                                  for i, _ in enumerate(body["Records"])]}
        elif target.endswith("PutRecordBatch"):
            answer = {"FailedPutCount": 0, "Encrypted": False,
                      "RequestResponses": [{"RecordId": f"r{i}"} for i, _ in enumerate(body["Records"])]}
        else:
            answer = {}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def records(n):
    return [{"Data": base64.b64encode(json.dumps({"id": f"m{i}"}).encode()).decode(),
             "PartitionKey": "k"} for i in range(n)]


class ProxyTest(unittest.TestCase):
    def start(self, faults):
        self.upstream = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
        threading.Thread(target=self.upstream.serve_forever, daemon=True).start()
        Upstream.received = []
        self.dir = tempfile.TemporaryDirectory()
        fpath = Path(self.dir.name) / "faults.json"
        fpath.write_text(json.dumps({**faults, "seed": 3, "hold_s": 0.3}))
        self.log = Path(self.dir.name) / "log.jsonl"
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "proxy.py"), "--upstream",
             f"http://127.0.0.1:{self.upstream.server_address[1]}", "--faults", str(fpath),
             "--log", str(self.log)], stdout=subprocess.PIPE, text=True)
        self.url = "http://" + self.proc.stdout.readline().split()[1]

    def tearDown(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.proc.stdout.close()
        self.upstream.shutdown()
        self.upstream.server_close()
        self.dir.cleanup()

    def call(self, target, body, app="run7"):
        req = urllib.request.Request(self.url, data=json.dumps(body).encode(), method="POST",
                                     headers={"X-Amz-Target": target,
                                              "User-Agent": f"aws-sdk-rust/1 app/{app}"})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def entries(self):
        self.proc.terminate()
        self.proc.wait(10)
        return [json.loads(line) for line in self.log.read_text().splitlines()
                if "summary" not in line and "windows" not in line]

    def summary(self):
        self.proc.terminate()
        self.proc.wait(10)
        return [json.loads(line) for line in self.log.read_text().splitlines()
                if '"summary"' in line][-1]["summary"]

    def test_partial_failures_forward_the_rest_and_answer_in_position(self):
        self.start({"sink": {"partial": 1.0}, "partial_fraction": 0.4})
        status, answer = self.call("Kinesis_20131202.PutRecords",
                                   {"StreamName": "s", "Records": records(20)})
        self.assertEqual(status, 200)
        results = answer["Records"]
        self.assertEqual(len(results), 20)
        failed = [i for i, r in enumerate(results) if "ErrorCode" in r]
        self.assertTrue(failed)
        self.assertEqual(answer["FailedRecordCount"], len(failed))
        forwarded = [json.loads(base64.b64decode(r["Data"]))["id"]
                     for r in Upstream.received[0]["Records"]]
        self.assertEqual(forwarded, [f"m{i}" for i in range(20) if i not in failed])
        [e] = self.entries()
        self.assertEqual(e["fault"], "partial")
        self.assertEqual(e["app"], "run7")
        self.assertEqual(e["ids"], forwarded)
        self.assertEqual(e["refused"], [f"m{i}" for i in failed])
        # The upstream numbered the forwarded records 0, 1, ...: each id has its number.
        self.assertEqual(e["seqs"], [str(i) for i in range(len(forwarded))])

    def test_firehose_partial_failures_use_its_answer_shape(self):
        self.start({"sink": {"partial": 1.0}, "partial_fraction": 0.5})
        status, answer = self.call("Firehose_20150804.PutRecordBatch",
                                   {"DeliveryStreamName": "d", "Records": records(10)})
        self.assertEqual(status, 200)
        failed = [r for r in answer["RequestResponses"] if "ErrorCode" in r]
        self.assertEqual(answer["FailedPutCount"], len(failed))
        self.assertEqual(len(Upstream.received[0]["Records"]), 10 - len(failed))

    def upload(self, data):
        """A Cloud Storage media upload through the proxy: (status, answer)."""
        req = urllib.request.Request(
            self.url + "/upload/storage/v1/b/bkt/o?uploadType=media&name=out%2Fa.jsonl",
            data=data, method="POST", headers={"Content-Type": "text/plain; charset=utf-8"})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def test_cloud_storage_uploads_are_sink_calls_named_by_their_lines(self):
        lines = b'{"uid":"u1","id":"1","run":"r"}\n{"uid":"u2","id":"2","run":"r"}'
        self.start({"sink": {"throttle": 1.0}})
        status, answer = self.upload(lines)
        self.assertEqual((status, answer["error"]["code"]), (429, 429))
        self.assertEqual(Upstream.received, [])
        [e] = self.entries()
        self.assertEqual((e["class"], e["op"], e["fault"], e["applied"], e["ids"]),
                         ("sink", "upload", "throttle", False, ["u1", "u2"]))
        self.tearDown()
        self.start({"sink": {"error_after": 1.0}})
        status, answer = self.upload(lines)
        self.assertEqual((status, answer["error"]["code"]), (503, 503))
        self.assertEqual(Upstream.received, [lines], "forwarded before the error")
        [e] = self.entries()
        self.assertEqual((e["fault"], e["applied"], e["ids"]), ("error_after", True, ["u1", "u2"]))
        self.tearDown()
        self.start({})
        status, _ = self.upload(lines)
        self.assertEqual(status, 200)
        self.assertEqual(self.summary(), {"sink:None": 1})

    def test_faults_before_forwarding_never_reach_the_emulator(self):
        self.start({"acquire": {"throttle": 1.0}})
        status, answer = self.call("DynamoDB_20120810.UpdateItem",
                                   {"TableName": "t", "Key": {"PK": {"S": "fi:m1"}}})
        self.assertEqual(status, 400)
        self.assertTrue(answer["__type"].endswith("ProvisionedThroughputExceededException"))
        self.assertEqual(Upstream.received, [])
        [e] = self.entries()
        self.assertEqual((e["class"], e["fault"], e["applied"], e["keys"]),
                         ("acquire", "throttle", False, ["fi:m1"]))

    def test_faults_after_forwarding_are_applied_and_reported_as_errors(self):
        self.start({"sink": {"error_after": 1.0}})
        status, _ = self.call("Kinesis_20131202.PutRecords",
                              {"StreamName": "s", "Records": records(3)})
        self.assertEqual(status, 500)
        self.assertEqual(len(Upstream.received), 1)
        [e] = self.entries()
        self.assertEqual((e["fault"], e["applied"], e["ids"]), ("error_after", True, ["m0", "m1", "m2"]))
        self.assertEqual(e["seqs"], ["0", "1", "2"])

    def test_a_timeout_after_forwarding_closes_without_an_answer(self):
        self.start({"commit": {"timeout_after": 1.0}})
        item = {"Update": {"TableName": "t", "Key": {"PK": {"S": "fi:m1"}}}}
        with self.assertRaises((urllib.error.URLError, ConnectionError)):
            self.call("DynamoDB_20120810.TransactWriteItems", {"TransactItems": [item]})
        self.assertEqual(len(Upstream.received), 1)
        [e] = self.entries()
        self.assertEqual((e["class"], e["fault"], e["keys"]), ("commit", "timeout_after", ["fi:m1"]))

    def test_a_commit_held_before_forwarding_is_logged_with_its_ttl(self):
        # The first attempt at a commit, held and never applied, names the TTL it would
        # set, as its retry does: the campaign tells the attempts at one commit by it.
        self.start({"commit": {"timeout_before": 1.0}})
        item = {"Update": {"TableName": "t", "Key": {"PK": {"S": "fi:m1"}},
                           "UpdateExpression": "SET #status = :committed, #ttl = :ttl",
                           "ExpressionAttributeValues": {":committed": {"S": "committed"},
                                                         ":ttl": {"N": "1700000029"}}}}
        with self.assertRaises((urllib.error.URLError, ConnectionError)):
            self.call("DynamoDB_20120810.TransactWriteItems", {"TransactItems": [item]})
        self.assertEqual(Upstream.received, [])
        [e] = self.entries()
        self.assertEqual((e["class"], e["fault"], e["applied"], e["keys"], e["ttls"]),
                         ("commit", "timeout_before", False, ["fi:m1"], {"fi:m1": 1700000029}))

    def test_a_retried_transaction_with_an_applied_token_is_a_replay(self):
        self.start({})
        body = {"ClientRequestToken": "tok", "TransactItems": [
            {"Put": {"TableName": "e", "Item": {"event_id": {"S": "m1"}}}}]}
        self.call("DynamoDB_20120810.TransactWriteItems", body)
        self.call("DynamoDB_20120810.TransactWriteItems", body)
        first, second = self.entries()
        self.assertEqual((first["class"], first["ids"]), ("sink", ["m1"]))
        self.assertNotIn("replay", first)
        self.assertTrue(second["replay"])


    def test_epoch_records_updates_have_the_faults_of_their_class(self):
        # `lock_acquire: 'epochs'`: a batch's commit is one UpdateItem of its epoch record,
        # with the commits' faults (here an answer lost after the emulator applied it); a
        # taker's abort of a slot has the acquisitions' (here throttled).
        self.start({"commit": {"error_after": 1.0}, "acquire": {"throttle": 1.0}})
        key = {"PK": {"S": "fi:#epoch:host/7/x:3"}}
        names = {"#c": "lock_committed", "#a": "lock_aborted", "#v": "lock_v"}
        commit = {"TableName": "t", "Key": key, "UpdateExpression": "ADD #c :slots, #v :one",
                  "ExpressionAttributeNames": names}
        abort = dict(commit, UpdateExpression="ADD #a :slots, #v :one")
        self.assertEqual(self.call("DynamoDB_20120810.UpdateItem", commit)[0], 500)
        self.assertEqual(self.call("DynamoDB_20120810.UpdateItem", abort)[0], 400)
        self.assertEqual(len(Upstream.received), 1)  # the commit, applied
        [c, a] = self.entries()
        self.assertEqual((c["class"], c["op"], c["fault"], c["applied"], c["keys"]),
                         ("commit", "UpdateItem/commit", "error_after", True, ["fi:#epoch:host/7/x:3"]))
        self.assertEqual((a["class"], a["op"], a["fault"], a["applied"]),
                         ("acquire", "UpdateItem/abort", "throttle", False))

    def test_an_outage_fails_every_call_of_its_caller(self):
        self.start({"sink": {"outage": 1.0}})
        for _ in range(3):
            status, _ = self.call("Kinesis_20131202.PutRecords",
                                  {"StreamName": "s", "Records": records(2)})
            self.assertEqual(status, 500)
        self.assertEqual(Upstream.received, [])
        self.assertEqual([e["fault"] for e in self.entries()], ["outage"] * 3)

    def test_an_outage_window_fails_every_call_of_its_classes_from_every_caller(self):
        # Commits and releases are down for the first 1.5 s; acquisitions are not.
        self.start({"windows_at": [{"classes": ["commit", "release"], "start": 0, "length": 1.5}]})
        commit = {"TransactItems": [{"Update": {
            "Key": {"PK": {"S": "fi:a"}},
            "UpdateExpression": "SET #status = :committed, #ttl = :ttl REMOVE #lease, #since"}}]}
        release = {"TransactItems": [{"Delete": {"Key": {"PK": {"S": "fi:b"}}}}]}
        acquire = {"TableName": "t", "Key": {"PK": {"S": "fi:c"}}}
        tw = "DynamoDB_20120810.TransactWriteItems"
        t0 = time.time()
        for app in ("run1", "run2"):
            self.assertEqual(self.call(tw, commit, app=app)[0], 500)
            self.assertEqual(self.call(tw, release, app=app)[0], 500)
            self.assertEqual(self.call("DynamoDB_20120810.UpdateItem", acquire, app=app)[0], 200)
        self.assertLess(time.time() - t0, 1.5, "the calls took too long for the test's window")
        self.assertEqual(len(Upstream.received), 2)  # the acquisitions only
        time.sleep(max(0.0, 1.6 - (time.time() - t0)))
        self.assertEqual(self.call(tw, commit)[0], 200)
        self.assertEqual(len(Upstream.received), 3)
        log = self.log_lines()
        [windows] = [e["windows"] for e in log if "windows" in e]
        self.assertEqual(len(windows), 1)
        self.assertAlmostEqual(windows[0][1] - windows[0][0], 1.5, places=3)
        self.assertEqual(windows[0][2], ["commit", "release"])
        faults = [(e["class"], e["fault"], e["app"]) for e in log if "class" in e]
        self.assertEqual(faults, [("commit", "window", "run1"), ("release", "window", "run1"),
                                  ("acquire", None, "run1"),
                                  ("commit", "window", "run2"), ("release", "window", "run2"),
                                  ("acquire", None, "run2"), ("commit", None, "run7")])

    def test_renewals_and_abandonments_have_their_own_faults(self):
        self.start({"renew": {"error_before": 1.0}})
        renew = {"TransactItems": [{"Update": {
            "Key": {"PK": {"S": "fi:a"}}, "UpdateExpression": "SET #lease = :lease, #ttl = :ttl"}}]}
        abandon = {"TransactItems": [{"Update": {
            "Key": {"PK": {"S": "fi:b"}}, "UpdateExpression": "SET #lease = :ended"}}]}
        tw = "DynamoDB_20120810.TransactWriteItems"
        self.assertEqual(self.call(tw, renew)[0], 500)
        self.assertEqual(self.call(tw, abandon)[0], 200)
        self.assertEqual(len(Upstream.received), 1)
        self.assertEqual(self.summary(), {"renew:error_before": 1, "abandon:None": 1})

    def test_acquisitions_are_logged_with_their_keys_and_reads_only_when_faulted(self):
        self.start({})
        for i in range(3):
            self.call("DynamoDB_20120810.UpdateItem", {"TableName": "t", "Key": {"PK": {"S": f"fi:{i}"}}})
        self.call("Kinesis_20131202.GetRecords", {"ShardIterator": "x"})
        self.assertEqual(self.summary(), {"acquire:None": 3, "read:None": 1})
        self.assertEqual([(e["class"], e["keys"]) for e in self.log_lines() if "class" in e],
                         [("acquire", [f"fi:{i}"]) for i in range(3)])

    def test_a_lock_call_is_logged_with_its_arrival_and_its_epoch_slots(self):
        # `t_in`: when the proxy had the request, before the emulator could apply it; `t`:
        # once the emulator answered (or the fault was decided). A takeover into an epoch
        # names its slot.
        self.start({})
        take = {"TableName": "t", "Key": {"PK": {"S": "fi:e"}},
                "UpdateExpression": "SET #owner = :me, #epoch = :e, #slot = :s",
                "ExpressionAttributeNames": {"#owner": "lock_owner", "#epoch": "lock_epoch",
                                             "#slot": "lock_slot"},
                "ExpressionAttributeValues": {":me": {"S": "h/2/y"}, ":e": {"N": "4"}, ":s": {"N": "3"}}}
        before = time.time()
        self.call("DynamoDB_20120810.UpdateItem", take)
        [e] = self.entries()
        self.assertLessEqual(round(before, 4) - 0.0001, e["t_in"])
        self.assertLessEqual(e["t_in"], e["t"])
        self.assertEqual(e["epochs"], {"fi:e": ["#epoch:h/2/y:4", 3]})

    def test_records_are_named_by_their_unit(self):
        self.start({})
        data = [{"uid": "u1", "id": 1}, {"uid": "u2", "id": "1"}, {"id": "x"},
                {"uid": "u3", "id": "u3", "part": 2}, {"cid": "c7", "body": "same"}, {"x": 1}]
        recs = [{"Data": base64.b64encode(json.dumps(d).encode()).decode(), "PartitionKey": "k"}
                for d in data]
        self.call("Kinesis_20131202.PutRecords", {"StreamName": "s", "Records": recs})
        [e] = self.entries()
        self.assertEqual(e["ids"], ["u1", "u2", "x", "u3#2", "c7", None])

    def test_a_hot_caller_has_the_same_records_throttled_on_every_attempt(self):
        self.start({"hot": {"suffix": "-hot", "records": 0.5}})
        body = {"StreamName": "s", "Records": records(20)}
        answers = [self.call("Kinesis_20131202.PutRecords", body, app="r1a1-hot")[1]
                   for _ in range(2)]
        failed = [[i for i, r in enumerate(a["Records"]) if "ErrorCode" in r] for a in answers]
        self.assertTrue(failed[0])
        self.assertLess(len(failed[0]), 20)
        self.assertEqual(failed[0], failed[1], "the same records on every attempt")
        self.assertEqual(answers[0]["FailedRecordCount"], len(failed[0]))
        # Another caller (not hot) gets every record through.
        status, answer = self.call("Kinesis_20131202.PutRecords", body, app="r2a2")
        self.assertEqual((status, answer["FailedRecordCount"]), (200, 0))
        log = self.entries()
        self.assertEqual([e["fault"] for e in log], ["hot", "hot", None])
        self.assertEqual(log[0]["refused"], [f"m{i}" for i in failed[0]])
        self.assertEqual(len(Upstream.received[0]["Records"]), 20 - len(failed[0]))

    def log_lines(self):
        self.proc.terminate()
        self.proc.wait(10)
        return [json.loads(line) for line in self.log.read_text().splitlines()]


class ClassifyTest(unittest.TestCase):
    def test_lock_calls_and_sink_calls(self):
        upd = {"Update": {"Key": {"PK": {"S": "fi:a"}}}}
        dele = {"Delete": {"Key": {"PK": {"S": "fi:b"}}}}
        put = {"Put": {"Item": {"event_id": {"S": "a"}}}}
        tw = "DynamoDB_20120810.TransactWriteItems"
        self.assertEqual(proxy.classify(tw, {"TransactItems": [upd]}), ("commit", ["fi:a"]))
        self.assertEqual(proxy.classify(tw, {"TransactItems": [dele]}), ("release", ["fi:b"]))
        self.assertEqual(proxy.classify(tw, {"TransactItems": [put, upd]}), ("sink", ["a"]))
        self.assertEqual(proxy.classify("DynamoDB_20120810.Scan", {}), ("other", []))
        self.assertEqual(proxy.classify("Kinesis_20131202.GetRecords", {}), ("read", []))
        self.assertEqual(proxy.classify("Kinesis_20131202.GetShardIterator", {}), ("read", []))
        self.assertEqual(proxy.classify("Kinesis_20131202.ListShards", {}), ("other", []))

    def test_the_lock_updates_by_their_expressions(self):
        # The expressions of transforms/src/kv_store/aws_dynamodb/lock.rs.
        tw = "DynamoDB_20120810.TransactWriteItems"

        def one(expr, key="fi:a"):
            return {"TransactItems": [{"Update": {"Key": {"PK": {"S": key}}, "UpdateExpression": expr}}]}

        cases = [
            ("SET #status = :committed, #ttl = :ttl REMOVE #lease, #since", "commit"),
            ("SET #status = :committed, #ttl = :ttl, #note = :note REMOVE #lease, #since", "commit"),
            ("SET #lease = :lease, #ttl = :ttl", "renew"),
            ("SET #lease = :ended", "abandon"),
            # Held in an epoch ('epochs'): taken out of it, pending again, its lease ended.
            ("SET #lease = :ended, #status = :pending REMOVE #epoch, #slot", "abandon"),
            ("SET #lease = :ended, #status = :pending ADD #progress :progress REMOVE #epoch, #slot", "abandon"),
            ("SET #owner = :me, #status = :pending, #lease = :lease, #ttl = :ttl, "
             "#since = if_not_exists(#since, :now_ms) REMOVE #note", "acquire"),
        ]
        for expr, cls in cases:
            self.assertEqual(proxy.classify(tw, one(expr)), (cls, ["fi:a"]), expr)
            self.assertEqual(proxy.call_name(tw, one(expr)), "TransactWriteItems", expr)
        # A send's placements (lock.rs Op::Record): with the commits' faults, logged apart.
        record = one("ADD #progress :progress")
        self.assertEqual(proxy.classify(tw, record), ("commit", ["fi:a"]))
        self.assertEqual(proxy.call_name(tw, record), "TransactWriteItems/record")
        acquire = {"Key": {"PK": {"S": "fi:#1"}},
                   "UpdateExpression": "SET #owner = :me, #status = :pending, #lease = :lease"}
        self.assertEqual(proxy.classify("DynamoDB_20120810.UpdateItem", acquire), ("acquire", ["fi:#1"]))
        # The transactional sink: puts with the lock's commits in one transaction.
        sink = {"TransactItems": [{"Put": {"Item": {"event_id": {"S": "u1"}}}},
                                  one("SET #status = :committed, #ttl = :ttl REMOVE #lease, #since")["TransactItems"][0]]}
        self.assertEqual(proxy.classify(tw, sink), ("sink", ["u1"]))

    def test_statements_and_lock_reads(self):
        # The statements of transforms/src/kv_store/aws_dynamodb/statements.rs, in both
        # UPDATE forms.
        bes = "DynamoDB_20120810.BatchExecuteStatement"
        s, n = (lambda v: {"S": v}), (lambda v: {"N": str(v)})
        insert = {"Statement": "INSERT INTO \"locks\" VALUE {'PK': ?, 'lock_owner': ?, "
                               "'lock_status': ?, 'lock_lease_until': ?, 'ttl': ?, 'lock_since': ?}",
                  "Parameters": [s("fi:a"), s("me"), s("pending"), n(1), n(2), n(3)]}
        fresh = {"Statement": "UPDATE \"locks\" SET \"lock_owner\" = ? SET \"lock_status\" = ? "
                              "SET \"lock_lease_until\" = ? SET \"ttl\" = ? SET \"lock_since\" = ? "
                              "REMOVE \"lock_note\" WHERE \"PK\" = ? AND (\"lock_status\" IS MISSING "
                              "OR \"lock_status\" <> ?) AND \"ttl\" <= ?",
                 "Parameters": [s("me"), s("pending"), n(1), n(2), n(3), s("fi:b"), s("pending"), n(4)]}
        commit = {"Statement": "UPDATE \"locks\" SET \"lock_status\" = ?, \"ttl\" = ? REMOVE "
                               "\"lock_lease_until\", \"lock_since\", \"lock_progress\" WHERE \"PK\" = ? "
                               "AND \"lock_owner\" = ? AND \"lock_status\" = ?",
                  "Parameters": [s("committed"), n(2), s("fi:c"), s("me"), s("pending")]}
        self.assertEqual(proxy.classify(bes, {"Statements": [insert, fresh]}),
                         ("acquire", ["fi:a", "fi:b"]))
        self.assertEqual(proxy.classify(bes, {"Statements": [commit]}), ("commit", ["fi:c"]))
        read = {"RequestItems": {"locks": {"Keys": [{"PK": s("fi:a")}, {"PK": s("fi:b")}],
                                           "ConsistentRead": True}}}
        self.assertEqual(proxy.classify("DynamoDB_20120810.BatchGetItem", read),
                         ("lock_read", ["fi:a", "fi:b"]))
        # 'epochs': the same statements, writing the status `epoch`; the epoch records'
        # reads and updates.
        epoch = dict(insert, Parameters=[s("fi:d"), s("me"), s("epoch"), n(1), n(2), n(3)])
        self.assertEqual(proxy.classify(bes, {"Statements": [epoch]}), ("acquire", ["fi:d"]))
        records = {"RequestItems": {"locks": {"Keys": [{"PK": s("#epoch:me:1")}], "ConsistentRead": True}}}
        self.assertEqual(proxy.classify("DynamoDB_20120810.BatchGetItem", records),
                         ("lock_read", ["#epoch:me:1"]))
        self.assertEqual(proxy.call_name("DynamoDB_20120810.BatchGetItem", records), "BatchGetItem/epoch")
        self.assertEqual(proxy.call_name("DynamoDB_20120810.BatchGetItem", read), "BatchGetItem")
        ui = "DynamoDB_20120810.UpdateItem"
        for expr, cls, name in (("ADD lock_committed :s, lock_v :one", "commit", "UpdateItem/commit"),
                                ("ADD lock_aborted :s, lock_v :one", "acquire", "UpdateItem/abort"),
                                ("SET lock_lease_until = :l", "renew", "UpdateItem/renew")):
            body = {"Key": {"PK": s("#epoch:me:1")}, "UpdateExpression": expr}
            self.assertEqual(proxy.classify(ui, body), (cls, ["#epoch:me:1"]), expr)
            self.assertEqual(proxy.call_name(ui, body), name)
        take = {"Key": {"PK": s("fi:e")}, "UpdateExpression": "SET #status = :epoch"}
        self.assertEqual((proxy.classify(ui, take), proxy.call_name(ui, take)), (("acquire", ["fi:e"]), "UpdateItem"))
        answer = json.dumps({"Responses": [{"TableName": "locks"},
                                           {"Error": {"Code": "DuplicateItem", "Message": "x"}}]})
        self.assertEqual(proxy.acquire_answer("BatchExecuteStatement", ["fi:a", "fi:b"], 200, answer),
                         {"statement_errors": {"fi:b": "DuplicateItem"}})


class EpochSlotsTest(unittest.TestCase):
    """Where the epochs' calls put keys (transforms/src/kv_store/aws_dynamodb/statements.rs
    acquire_statement, epochs/mod.rs take_over, epochs/commit.rs commit_epoch): what the
    campaign needs to tell which commit committed a key."""
    s, n = staticmethod(lambda v: {"S": v}), staticmethod(lambda v: {"N": str(v)})

    def test_statements_in_both_update_forms_and_inserts(self):
        s, n = self.s, self.n
        insert = {"Statement": "INSERT INTO \"locks\" VALUE {'PK': ?, 'lock_owner': ?, "
                               "'lock_status': ?, 'lock_lease_until': ?, 'ttl': ?, 'lock_since': ?, "
                               "'lock_epoch': ?, 'lock_slot': ?}",
                  "Parameters": [s("fi:a"), s("h/1/x"), s("epoch"), n(1), n(2), n(3), n(7), n(0)]}
        where = ("WHERE \"PK\" = ? AND (\"lock_status\" IS MISSING OR (\"lock_status\" <> ? "
                 "AND \"lock_status\" <> ?)) AND \"ttl\" <= ?")
        attrs = ["lock_owner", "lock_status", "lock_lease_until", "ttl", "lock_since",
                 "lock_epoch", "lock_slot"]
        params = [s("h/1/x"), s("epoch"), n(1), n(2), n(3), n(7), n(1)]
        tail = [s("pending"), s("epoch"), n(9)]
        documented = {"Statement": "UPDATE \"locks\" " + " ".join(f'SET "{a}" = ?' for a in attrs)
                                   + ' REMOVE "lock_note" REMOVE "lock_progress" ' + where,
                      "Parameters": params + [s("fi:b")] + tail}
        comma = {"Statement": "UPDATE \"locks\" SET " + ", ".join(f'"{a}" = ?' for a in attrs)
                              + ' REMOVE "lock_note", "lock_progress" ' + where,
                 "Parameters": params[:-1] + [n(2), s("fi:c")] + tail}
        plain = {"Statement": insert["Statement"].replace(", 'lock_epoch': ?, 'lock_slot': ?", ""),
                 "Parameters": [s("fi:d"), s("h/1/x"), s("pending"), n(1), n(2), n(3)]}
        self.assertEqual(proxy.epoch_slots("BatchExecuteStatement",
                                           {"Statements": [insert, documented, comma, plain]}),
                         {"epochs": {"fi:a": ["#epoch:h/1/x:7", 0], "fi:b": ["#epoch:h/1/x:7", 1],
                                     "fi:c": ["#epoch:h/1/x:7", 2]}})
        self.assertEqual(proxy.epoch_slots("BatchExecuteStatement", {"Statements": [plain]}), {})

    def test_a_takeover_into_an_epoch_and_an_epoch_records_commit(self):
        s, n = self.s, self.n
        take = {"Key": {"PK": s("fi:e")},
                "UpdateExpression": "SET #owner = :me, #status = :epoch, #lease = :lease, #ttl = :ttl, "
                                    "#epoch = :e, #slot = :s, #since = :now_ms REMOVE #note, #progress",
                "ExpressionAttributeNames": {"#owner": "lock_owner", "#status": "lock_status",
                                             "#lease": "lock_lease_until", "#ttl": "ttl",
                                             "#epoch": "lock_epoch", "#slot": "lock_slot"},
                "ExpressionAttributeValues": {":me": s("h/2/y"), ":epoch": s("epoch"), ":e": n(4),
                                              ":s": n(3), ":lease": n(1), ":ttl": n(2), ":now_ms": n(5)}}
        self.assertEqual(proxy.epoch_slots("UpdateItem", take), {"epochs": {"fi:e": ["#epoch:h/2/y:4", 3]}})
        names = {"#committed": "lock_committed", "#v": "lock_v", "#ttl": "ttl"}
        commit = {"Key": {"PK": s("#epoch:h/2/y:4")}, "UpdateExpression": "ADD #committed :slots SET #ttl = :ttl",
                  "ExpressionAttributeNames": names,
                  "ExpressionAttributeValues": {":slots": {"NS": ["3", "10"]}, ":v": n(0), ":ttl": n(9)}}
        self.assertEqual(proxy.epoch_slots("UpdateItem", commit), {"slots": [3, 10]})
        abort = {"Key": {"PK": s("#epoch:h/2/y:4")},
                 "UpdateExpression": "ADD #aborted :slot, #v :one SET #ttl = if_not_exists(#ttl, :ttl)",
                 "ExpressionAttributeNames": {"#aborted": "lock_aborted", "#v": "lock_v", "#ttl": "ttl"},
                 "ExpressionAttributeValues": {":slot": {"NS": ["3"]}, ":one": n(1), ":ttl": n(9)}}
        self.assertEqual(proxy.epoch_slots("UpdateItem", abort), {})
        alone = {"Key": {"PK": s("fi:f")}, "UpdateExpression": "SET #owner = :me, #status = :pending",
                 "ExpressionAttributeNames": {"#owner": "lock_owner", "#status": "lock_status"},
                 "ExpressionAttributeValues": {":me": s("h/2/y"), ":pending": s("pending")}}
        self.assertEqual(proxy.epoch_slots("UpdateItem", alone), {})


class CommitTtlsTest(unittest.TestCase):
    """The TTL each commit call sets (lock.rs Op::Commit, statements.rs commit_statement,
    epochs/commit.rs commit_epoch): how the campaign tells one commit's attempts apart from
    a commit made again."""
    s, n = staticmethod(lambda v: {"S": v}), staticmethod(lambda v: {"N": str(v)})

    def test_transactions_set_it_per_key_and_only_in_commits(self):
        s, n = self.s, self.n

        def update(key, expr, values):
            return {"Update": {"Key": {"PK": s(key)}, "UpdateExpression": expr,
                               "ExpressionAttributeNames": {"#status": "lock_status", "#ttl": "ttl"},
                               "ExpressionAttributeValues": values}}

        commit = "SET #status = :committed, #ttl = :ttl REMOVE #lease, #since"
        body = {"TransactItems": [update("fi:a", commit, {":committed": s("committed"), ":ttl": n(100)}),
                                  update("fi:b", commit + ", #note", {":committed": s("committed"),
                                                                       ":ttl": n(101)})]}
        self.assertEqual(proxy.commit_ttls("TransactWriteItems", body),
                         {"ttls": {"fi:a": 100, "fi:b": 101}})
        renew = {"TransactItems": [update("fi:a", "SET #lease = :lease, #ttl = :ttl",
                                          {":lease": n(1), ":ttl": n(100)})]}
        record = {"TransactItems": [update("fi:a", "ADD #progress :progress", {":progress": {"SS": ["x"]}})]}
        for other in (renew, record):
            self.assertEqual(proxy.commit_ttls("TransactWriteItems", other), {})

    def test_statements_and_an_epoch_records_commit(self):
        s, n = self.s, self.n
        tail = " REMOVE \"lock_lease_until\", \"lock_since\" WHERE \"PK\" = ? AND \"lock_owner\" = ? AND \"lock_status\" = ?"
        comma = {"Statement": "UPDATE \"locks\" SET \"lock_status\" = ?, \"ttl\" = ?, \"lock_note\" = ?" + tail,
                 "Parameters": [s("committed"), n(200), s("note"), s("fi:c"), s("me"), s("pending")]}
        documented = {"Statement": "UPDATE \"locks\" SET \"lock_status\" = ? SET \"ttl\" = ?" + tail,
                      "Parameters": [s("committed"), n(201), s("fi:d"), s("me"), s("pending")]}
        take = {"Statement": "INSERT INTO \"locks\" VALUE {'PK': ?, 'lock_owner': ?, 'lock_status': ?, 'ttl': ?}",
                "Parameters": [s("fi:e"), s("me"), s("pending"), n(5)]}
        self.assertEqual(proxy.commit_ttls("BatchExecuteStatement",
                                           {"Statements": [comma, documented, take]}),
                         {"ttls": {"fi:c": 200, "fi:d": 201}})
        commit = {"Key": {"PK": s("fi:#epoch:h/2/y:4")}, "UpdateExpression": "ADD #committed :slots SET #ttl = :ttl",
                  "ExpressionAttributeNames": {"#committed": "lock_committed", "#ttl": "ttl"},
                  "ExpressionAttributeValues": {":slots": {"NS": ["3"]}, ":v": n(0), ":ttl": n(300)}}
        self.assertEqual(proxy.commit_ttls("UpdateItem", commit), {"ttls": {"fi:#epoch:h/2/y:4": 300}})
        abort = dict(commit, UpdateExpression="ADD #aborted :slots SET #ttl = if_not_exists(#ttl, :ttl)",
                     ExpressionAttributeNames={"#aborted": "lock_aborted", "#ttl": "ttl"})
        self.assertEqual(proxy.commit_ttls("UpdateItem", abort), {})


class WindowsTest(unittest.TestCase):
    SPEC = {"seed": 11, "windows": {"classes": ["acquire", "commit", "*"], "first_s": [0.5, 3],
                                    "gap_s": [2, 10], "length_s": [1, 8]}}

    def test_drawn_windows_are_reproducible_and_within_their_ranges(self):
        a = proxy.outage_windows(self.SPEC, 1000.0)
        self.assertEqual(a, proxy.outage_windows(self.SPEC, 1000.0))
        self.assertNotEqual(a, proxy.outage_windows({**self.SPEC, "seed": 12}, 1000.0))
        self.assertTrue(1000.5 <= a[0][0] <= 1003.0)
        for (s0, e0, c0), (s1, _, _) in zip(a, a[1:]):
            self.assertTrue(1.0 <= e0 - s0 <= 8.0)
            self.assertTrue(2.0 <= s1 - e0 <= 10.0)
            self.assertIn(c0, ({"acquire"}, {"commit"}, {"acquire", "commit"}))
        self.assertIn({"acquire", "commit"}, [c for _, _, c in a])  # "*": the whole store

    def test_a_call_is_inside_a_window_only_for_its_classes(self):
        class S(proxy.State):
            def __init__(self, faults):  # no upstream, no log
                self.windows = proxy.outage_windows(faults, 0.0)
                self.window_starts = [w[0] for w in self.windows]
                self.longest_window = max((b - a for a, b, _ in self.windows), default=0.0)

        st = S({"windows_at": [{"classes": ["commit"], "start": 10, "length": 8},
                               {"classes": ["release"], "start": 12, "length": 1}]})
        self.assertFalse(st.in_window("commit", 9.99))
        self.assertTrue(st.in_window("commit", 10.0))
        self.assertTrue(st.in_window("commit", 17.9))
        self.assertFalse(st.in_window("commit", 18.0))
        self.assertTrue(st.in_window("release", 12.5))
        self.assertFalse(st.in_window("release", 13.5))
        self.assertFalse(st.in_window("acquire", 12.5))


if __name__ == "__main__":
    unittest.main()
