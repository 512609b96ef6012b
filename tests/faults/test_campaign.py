#!/usr/bin/env python3
"""Tests of the campaign's own reading and judging (no emulators, no sluice):

    .emulators/venv/bin/python tests/faults/test_campaign.py

scripts/faults.sh runs them before every campaign, with the proxy's: a verdict that counted
the wrong thing would make the table meaningless.
"""
import sys
import tempfile
import unittest
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import campaign as c  # noqa: E402


class StopReportTest(unittest.TestCase):
    def report(self, text):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "err.txt"
            p.write_text(text)
            return c.stop_report(p)

    def test_the_lines_run_rs_prints(self):
        self.assertEqual(
            self.report("x\nsluice: stopped by SIGTERM: 5 lines read, 3 delivered (2 not: "
                        "listed in /tmp/u.txt); the first line not read: <stdin>:6\n"),
            {"signal": "SIGTERM", "out_of_time": False, "read": 5, "delivered": 3,
             "not_delivered": 2, "next_line": 6})
        self.assertEqual(
            self.report("sluice: stopped by SIGTERM, and the grace period (25s) ran out "
                        "before the pipeline finished: 12 lines read, 10 delivered (2 not: "
                        "listed in /tmp/u.txt); all input was read\n"),
            {"signal": "SIGTERM", "out_of_time": True, "read": 12, "delivered": 10,
             "not_delivered": 2, "next_line": None})
        self.assertIsNone(self.report("killed before the handler was installed\n"))


class ClockTest(unittest.TestCase):
    def test_the_refusal_is_told_from_the_warning(self):
        refusal = ("error: ... this host's clock is at least 29.1 s ahead of aws_dynamodb "
                   "table t's (its answers' Date headers), more than half the 10s clock_skew")
        warning = ("WARN ... this host's clock is measured between 3.9 s and 4.9 s off the "
                   "lock store's, more than a quarter of the 10s clock_skew")
        self.assertTrue(c.clock_refused(refusal))
        self.assertTrue(c.clock_refused(refusal.replace("ahead of", "behind")))
        self.assertFalse(c.clock_refused(warning))

    def test_skew_and_recurring_ttl(self):
        self.assertEqual(c.skew_s({"lease": "3s"}), 0.75)
        self.assertEqual(c.skew_s({"lease": "12s", "clock_skew": "10s"}), 10.0)
        # Lease, skew, pending_wait (20 s by default) and 5 s.
        self.assertEqual(c.recurring_ttl_s({"lease": "1s"}), 26.25)
        self.assertEqual(c.recurring_ttl_s(c.MIXES["clock"]), 67.0)


class EpochLocksTest(unittest.TestCase):
    def test_a_key_pending_in_an_epoch_is_what_its_epoch_record_says(self):
        # `lock_acquire: 'epochs'`: the keys' status stays `epoch`; the epoch record's sets
        # of committed and aborted slots decide, and the record itself is not a key.
        S, N, NS = (lambda v: {"S": v}), (lambda v: {"N": str(v)}), (lambda *v: {"NS": [str(x) for x in v]})

        def key(k, slot, epoch="3", owner="h/1/a"):
            return {"PK": S(k), "lock_status": S("epoch"), "lock_owner": S(owner),
                    "lock_epoch": N(epoch), "lock_slot": N(slot)}
        items = [key("fi:a", 0), key("fi:b", 1), key("fi:c", 2), key("fi:d", 0, epoch="4"),
                 {"PK": S("fi:e"), "lock_status": S("committed"), "lock_owner": S("h/2/b")},
                 {"PK": S("#epoch:h/1/a:3"), "lock_committed": NS(0), "lock_aborted": NS(2),
                  "lock_v": N(2)}]
        locks = c.dynamodb_locks(items)
        self.assertEqual({k: r["status"] for k, r in locks.items()},
                         {"fi:a": "committed", "fi:b": "pending", "fi:c": "aborted",
                          "fi:d": "pending", "fi:e": "committed"})
        self.assertEqual(locks["fi:a"]["epoch"], "#epoch:h/1/a:3/0")
        self.assertEqual(locks["fi:d"]["note"], "its epoch has no record (nothing committed or aborted in it)")
        # A record named in full, under a prefix.
        items = [dict(key("fi:f", 5), lock_epoch=S("fi:#epoch:h/1/a:9")),
                 {"PK": S("fi:#epoch:h/1/a:9"), "lock_committed": NS(4, 5)}]
        self.assertEqual(c.dynamodb_locks(items)["fi:f"]["status"], "committed")

    def test_the_epoch_mixes_mirror_the_statement_mixes(self):
        self.assertEqual([m.replace("_epoch", "") for m in c.EPOCH_MIXES],
                         [m.replace("_stmt", "") for m in c.STATEMENT_MIXES])
        for m in c.EPOCH_MIXES:
            stmt = c.MIXES[m.replace("_epoch", "_stmt")]
            self.assertEqual(c.MIXES[m], dict(stmt, lock_acquire="epochs"), m)
        self.assertIn(("kinesis", "all_epoch"), c.SIZES["small"]["cells"])
        self.assertIn(("file_after", "lock_epoch"), c.SIZES["small"]["cells"])
        self.assertTrue(set(c.EPOCH_MIXES) <= set(c.SIZES["large"]["mixes"]))


def nz(counts):
    """The non-zero counts."""
    return {k: v for k, v in dict(counts).items() if v}


class AttributeTest(unittest.TestCase):
    RUNS = [{"run": "a", "pid": 1, "start": 0.0, "end": 1.0},
            {"run": "b", "pid": 2, "start": 1.5, "end": 2.0},
            {"run": "z", "pid": 3, "start": 90.0, "end": 91.0}]

    def attribute(self, copies, killed=(), stopped=(), ttl_gap=None):
        return c.attribute(copies, {"u1": "u1"}, {"u1": "u1"}, {"fi:u1": ("committed", "vm/2/x")},
                           self.RUNS, set(killed), set(stopped), set(), set(), Counter(), ttl_gap)

    def test_a_stopped_runs_copy_is_its_own_window(self):
        dup, crash_by_run, unexplained, _ = self.attribute(
            [("u1", "a", "f1"), ("u1", "b", "f2")], stopped={"a"})
        self.assertEqual(nz(dup), {"stop": 1})
        self.assertEqual(dict(crash_by_run), {"a": 1})
        self.assertEqual(unexplained, [])

    def test_after_the_ttl_only_when_the_gap_proves_it(self):
        dup, _, _, _ = self.attribute([("u1", "b", "f1"), ("u1", "z", "f2")], ttl_gap=30.0)
        self.assertEqual(nz(dup), {"after_ttl": 1})
        dup, _, unexplained, _ = self.attribute([("u1", "a", "f1"), ("u1", "b", "f2")],
                                                ttl_gap=30.0)
        self.assertEqual(nz(dup), {"unattributed": 1})
        self.assertEqual(len(unexplained), 1)

    def test_after_the_ttl_when_the_later_run_committed_last(self):
        # The earlier run committed, the key's TTL passed, a later run took it as new and
        # committed last (the lock's owner at the end): the earlier copy is the extra one.
        dup, _, unexplained, _ = c.attribute(
            [("u1", "a", "f1"), ("u1", "z", "f2")], {"u1": "u1"}, {"u1": "u1"},
            {"fi:u1": ("committed", "vm/3/x")}, self.RUNS, set(), set(), set(), set(),
            Counter(), 30.0)
        self.assertEqual(nz(dup), {"after_ttl": 1})
        self.assertEqual(unexplained, [])


class ContentTest(unittest.TestCase):
    class Ctx:
        runs = [{"run": "k", "uids": ["m1", "m2"]}, {"run": "ok", "uids": ["m3"]}]

    WORK = {"valid": {"m1", "m2", "m3"}, "bad": {"m9"},
            "shape": {"cid": {"m1": "c1", "m2": "c1", "m3": "c2", "m9": "c9"}}}

    def judge(self, copies, killed=()):
        return c.judge_content("kinesis", [(u, r, "s") for u, r in copies], self.Ctx(),
                               self.WORK, set(), set(killed), set(), [])

    def test_counted_by_content_against_its_messages(self):
        j = self.judge([("c1", "k"), ("c1", "x"), ("c2", "ok")])
        self.assertEqual((j["lost"], j["duplicates"], j["once"]), ([], 0, 2))
        self.assertEqual(self.judge([("c1", "x"), ("c2", "ok")])["lost"], ["c1"])

    def test_extras_are_unprovable_within_the_chances_their_messages_had(self):
        # Two messages of content c1 in a killed run: up to two extra copies explained.
        j = self.judge([("c1", "k")] * 2 + [("c1", "x")] * 2 + [("c2", "ok")], killed={"k"})
        self.assertEqual(nz(j["dup"]), {"unprovable": 2})
        j = self.judge([("c1", "x")] * 5 + [("c2", "ok")], killed={"k"})
        self.assertEqual(nz(j["dup"]), {"unprovable": 2, "unattributed": 1})
        # Without a crash nothing explains an extra copy.
        j = self.judge([("c1", "x")] * 3 + [("c2", "ok")])
        self.assertEqual(nz(j["dup"]), {"unattributed": 1})

    def test_a_keyless_messages_content_is_a_delivery(self):
        j = self.judge([("c1", "x")] * 2 + [("c2", "ok"), ("c9", "x")])
        self.assertEqual(j["bad_delivered"], ["c9"])


class DiskTest(unittest.TestCase):
    def test_the_reserve_alone_may_end_well(self):
        reserve = ("ERROR sluice_transforms::kv_store::lock::sqlite: the lock store's disk is "
                   "full: its reserve (x.sqlite-reserve) was given up to settle the locks; "
                   "free space on that disk file=x.sqlite")
        self.assertEqual(c.disk_lines("INFO start\n" + reserve), (True, True))
        failed = "ERROR line 3: cannot take the lock: database or disk is full"
        self.assertEqual(c.disk_lines(reserve + "\n" + failed), (True, False))
        self.assertEqual(c.disk_lines("INFO nothing"), (False, False))
        retried = ("WARN sluice_transforms::meta::kv_store_lock::acquire: taking locks failed; "
                   "trying again keys=50 attempts=1 error=sqlite x: database or disk is full")
        self.assertEqual(c.disk_lines(retried + "\n" + reserve), (True, True))


class WorkloadTest(unittest.TestCase):
    def test_shapes(self):
        phases, valid, id_of, bad, _, shape = c.workload(200, 20, 5, "t", True, "fanout")
        self.assertEqual(len(phases), 1)
        self.assertTrue(all(2 <= shape["parts"][u] <= 6 for u in valid))
        phases, valid, id_of, bad, _, shape = c.workload(200, 20, 5, "t", True, "identical")
        sizes = Counter(shape["cid"][u] for u in valid)
        self.assertTrue(max(sizes.values()) > 1, "some contents are shared")
        self.assertTrue(all(sizes[shape["cid"][u]] == 0 for u in bad), "keyless: their own")
        phases, valid, id_of, bad, _, shape = c.workload(200, 20, 5, "t", True, "recurring")
        self.assertEqual(len(phases), 2)
        keys = Counter(id_of[u] for u in valid)
        self.assertGreater(sum(1 for n in keys.values() if n == 2), 90, "keys in both windows")
        first = {id_of[u] for u in valid if shape["phase"][u] == 0}
        self.assertTrue(all(id_of[u] in first or id_of[u] == u
                            for u in valid if shape["phase"][u] == 1))


if __name__ == "__main__":
    unittest.main()
