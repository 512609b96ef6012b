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
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
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

    def call(self, target, body):
        req = urllib.request.Request(self.url, data=json.dumps(body).encode(), method="POST",
                                     headers={"X-Amz-Target": target,
                                              "User-Agent": "aws-sdk-rust/1 app/run7"})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def entries(self):
        self.proc.terminate()
        self.proc.wait(10)
        return [json.loads(line) for line in self.log.read_text().splitlines()
                if "summary" not in line]

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

    def test_firehose_partial_failures_use_its_answer_shape(self):
        self.start({"sink": {"partial": 1.0}, "partial_fraction": 0.5})
        status, answer = self.call("Firehose_20150804.PutRecordBatch",
                                   {"DeliveryStreamName": "d", "Records": records(10)})
        self.assertEqual(status, 200)
        failed = [r for r in answer["RequestResponses"] if "ErrorCode" in r]
        self.assertEqual(answer["FailedPutCount"], len(failed))
        self.assertEqual(len(Upstream.received[0]["Records"]), 10 - len(failed))

    def test_faults_before_forwarding_never_reach_the_emulator(self):
        self.start({"acquire": {"throttle": 1.0}})
        status, answer = self.call("DynamoDB_20120810.PutItem",
                                   {"TableName": "t", "Item": {"PK": {"S": "fi:m1"}}})
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

    def test_a_timeout_after_forwarding_closes_without_an_answer(self):
        self.start({"commit": {"timeout_after": 1.0}})
        item = {"Update": {"TableName": "t", "Key": {"PK": {"S": "fi:m1"}}}}
        with self.assertRaises((urllib.error.URLError, ConnectionError)):
            self.call("DynamoDB_20120810.TransactWriteItems", {"TransactItems": [item]})
        self.assertEqual(len(Upstream.received), 1)
        [e] = self.entries()
        self.assertEqual((e["class"], e["fault"], e["keys"]), ("commit", "timeout_after", ["fi:m1"]))

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


    def test_an_outage_fails_every_call_of_its_caller(self):
        self.start({"sink": {"outage": 1.0}})
        for _ in range(3):
            status, _ = self.call("Kinesis_20131202.PutRecords",
                                  {"StreamName": "s", "Records": records(2)})
            self.assertEqual(status, 500)
        self.assertEqual(Upstream.received, [])
        self.assertEqual([e["fault"] for e in self.entries()], ["outage"] * 3)


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


if __name__ == "__main__":
    unittest.main()
