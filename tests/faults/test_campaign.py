#!/usr/bin/env python3
"""Tests of the campaign's own reading and judging (no emulators, no sluice):

    .emulators/venv/bin/python tests/faults/test_campaign.py

scripts/faults.sh runs them before every campaign, with the proxy's: a verdict that counted
the wrong thing would make the table meaningless.
"""
import math
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


class KeyTimesTest(unittest.TestCase):
    """After the key's TTL by the lock store's log: `recurring`, ttl_offset '28.75s' (a
    29 s window), retry-mix runs of tens of seconds that follow each other closely."""

    # Run a committed the key early in its 40 s; run b started 5 s after a ended (far
    # less than the gap) and took the key late in its run; z is far from both.
    RUNS = [{"run": "a", "pid": 1, "start": 0.0, "end": 40.0},
            {"run": "b", "pid": 2, "start": 45.0, "end": 90.0},
            {"run": "z", "pid": 3, "start": 200.0, "end": 201.0}]
    WINDOW, GAP = 29, 30.75

    @staticmethod
    def take(run, t_in, keys=("fi:u1",), **kw):
        return dict({"class": "acquire", "op": "TransactWriteItems", "app": run, "fault": None,
                     "t_in": t_in, "keys": list(keys), "applied": True, "t": t_in + 0.01}, **kw)

    @classmethod
    def commit(cls, run, t, keys=("fi:u1",), ttl=None, arrived=None, **kw):
        """A commit call answered at `t`, arrived 10 ms before (or at `arrived`), setting the
        TTL (`ttls`, as the proxy logs it) that the keeper computed just before its arrival
        (the second after, plus the window), or `ttl`."""
        t_in = t - 0.01 if arrived is None else arrived
        ttl = math.ceil(t_in) + cls.WINDOW if ttl is None else ttl
        return dict({"class": "commit", "op": "TransactWriteItems", "app": run, "fault": None,
                     "t_in": t_in, "keys": list(keys), "applied": True, "t": t,
                     "ttls": {k: ttl for k in keys}}, **kw)

    def attribute(self, entries, committer="vm/2/x", runs=None, log=True, copies=None):
        return c.attribute(copies or [("u1", "a", "f1"), ("u1", "b", "f2")], {"u1": "u1"},
                           {"u1": "u1"}, {"fi:u1": ("committed", committer)},
                           runs or self.RUNS, set(), set(), set(), set(), Counter(), self.GAP,
                           c.KeyTimes(entries) if log else None, self.WINDOW)

    def test_a_later_run_that_took_the_key_past_the_window_is_after_the_ttl(self):
        entries = [self.take("a", 1.0), self.commit("a", 2.0), self.take("b", 80.0),
                   self.commit("b", 81.0)]
        # Run boundaries alone cannot tell (b started 5 s after a ended): unattributed.
        dup, _, _, _ = self.attribute(entries, log=False)
        self.assertEqual(nz(dup), {"unattributed": 1})
        # The log can: b took the key 78 s after a's commit.
        dup, _, unexplained, _ = self.attribute(entries)
        self.assertEqual(nz(dup), {"after_ttl": 1})
        self.assertEqual(unexplained, [])
        # Whichever of the two is the lock's last owner (the copy counted extra is then b's).
        dup, _, _, _ = self.attribute(entries, committer="vm/1/x")
        self.assertEqual(nz(dup), {"after_ttl": 1})

    def test_a_take_inside_the_window_stays_unattributed(self):
        # b took the key 28.5 s after a's commit was answered: inside the 29 s window, a
        # duplicate the lock should have dropped, even though the runs are far apart.
        entries = [self.take("a", 1.0), self.commit("a", 2.0), self.take("b", 30.5)]
        runs = [dict(self.RUNS[0], end=2.5), dict(self.RUNS[1], start=30.4)]
        dup, _, unexplained, _ = self.attribute(entries, runs=runs)
        self.assertEqual(nz(dup), {"unattributed": 1})
        self.assertEqual(unexplained[0]["lock_times"],
                         {"a": {"took": [1.0], "committed": [[1.99, 2.0, 31]]},
                          "b": {"took": [30.5], "committed": []}})
        # Every take counts: an earlier one inside the window (an acquisition whose answer
        # was lost, then asked again) leaves it unproved.
        dup, _, _, _ = self.attribute(entries[:2] + [self.take("b", 20.0), self.take("b", 80.0)])
        self.assertEqual(nz(dup), {"unattributed": 1})
        # The window counts from the last commit made (a commit made again, with its TTL).
        dup, _, _, _ = self.attribute(entries[:2] + [self.commit("a", 60.0), self.take("b", 80.0)])
        self.assertEqual(nz(dup), {"unattributed": 1})
        # By the arrival of the take, not by when it was answered.
        late_answer = self.take("b", 30.5)
        late_answer["t"] = 40.0
        dup, _, _, _ = self.attribute(entries[:2] + [late_answer])
        self.assertEqual(nz(dup), {"unattributed": 1})

    def test_the_window_counts_from_the_commits_first_sending(self):
        # recurring/retry: a's commit first sent at 97.34 s was held by the proxy
        # (timeout_before: never applied) and sent again by the SDK, the same request with
        # the same TTL, which landed at 102.36 s. b took the key 26.3 s after the landing,
        # 31.3 s after the first sending: after the window, which counts from the commit.
        runs = [dict(self.RUNS[0], start=90.0, end=103.0),
                dict(self.RUNS[1], start=110.0, end=140.0)]
        held = self.commit("a", 97.35, arrived=97.34, applied=False, fault="timeout_before")
        landed = self.commit("a", 102.36, arrived=102.35, ttl=held["ttls"]["fi:u1"])
        entries = [self.take("a", 96.0), held, landed, self.take("b", 128.66)]
        dup, _, unexplained, _ = self.attribute(entries, runs=runs)
        self.assertEqual(nz(dup), {"after_ttl": 1})
        self.assertEqual(c.KeyTimes(entries).of("fi:u1")["a"]["committed"], [[97.34, 102.36, 127]])
        # b taking it 27 s after the first sending is inside the window: a duplicate.
        dup, _, unexplained, _ = self.attribute(entries[:3] + [self.take("b", 124.34)], runs=runs)
        self.assertEqual(nz(dup), {"unattributed": 1})
        self.assertEqual(unexplained[0]["lock_times"]["a"]["committed"], [[97.34, 102.36, 127]])

    def test_a_commit_sent_after_the_second_its_ttl_counts_from(self):
        # 'epochs': the keeper made a round's commits at 29.9 s (TTL 30 + 29 = 59) and the
        # call of this key's epoch left at 30.05 s, behind the others. A taker has the key
        # once its clock reaches 59 s: 28.97 s after that sending, a whole window after the
        # second its TTL counts from, which the log's TTL tells.
        runs = [dict(self.RUNS[0], end=31.0), dict(self.RUNS[1], start=50.0)]
        late = self.commit("a", 30.06, arrived=30.05, ttl=59)
        entries = [self.take("a", 1.0), late]
        dup, _, _, _ = self.attribute(entries + [self.take("b", 59.02)], runs=runs)
        self.assertEqual(nz(dup), {"after_ttl": 1})
        # No earlier than the TTL: a take before it is inside, whatever the sending.
        dup, _, _, _ = self.attribute(entries + [self.take("b", 58.99)], runs=runs)
        self.assertEqual(nz(dup), {"unattributed": 1})
        # Reported: the window from that sending was 50 ms short of the whole offset.
        times = c.KeyTimes(entries)
        self.assertEqual({k: round(v, 4) for k, v in times.late_sends(self.WINDOW).items()},
                         {("a", "fi:u1", 59): 0.05})
        # A commit sent in the second its TTL counts from is not.
        self.assertEqual(c.KeyTimes([self.commit("a", 29.95, arrived=29.94, ttl=59)])
                         .late_sends(self.WINDOW), {})

    def test_a_commit_made_again_counts_from_its_own_first_sending(self):
        # a's first commit failed (refused, not applied); the keeper made it again 8 s later
        # with a new TTL, which landed. b took the key 33 s after the first one was sent, 25 s
        # after the second: inside the window of the commit the store has.
        runs = [dict(self.RUNS[0], end=11.0), dict(self.RUNS[1], start=34.0)]
        refused = self.commit("a", 2.0, applied=False, fault="error_before")
        again = self.commit("a", 10.0)
        self.assertNotEqual(refused["ttls"], again["ttls"])
        dup, _, _, _ = self.attribute([self.take("a", 1.0), refused, again, self.take("b", 35.0)],
                                      runs=runs)
        self.assertEqual(nz(dup), {"unattributed": 1})
        # The same TTL is the same commit, whichever call carried it: a statement that was
        # throttled (its call applied, that statement failed), sent again by the store 5 s
        # later, counts from the first call. b took the key 29.5 s after it, 24.5 s after
        # the second.
        first = self.commit("a", 2.0, op="BatchExecuteStatement",
                            statement_errors={"fi:u1": "ThrottlingException"})
        second = self.commit("a", 7.0, op="BatchExecuteStatement", ttl=first["ttls"]["fi:u1"])
        runs = [dict(self.RUNS[0], end=8.0), dict(self.RUNS[1], start=30.0)]
        dup, _, _, _ = self.attribute([self.take("a", 1.0), first, second, self.take("b", 31.49)],
                                      runs=runs)
        self.assertEqual(nz(dup), {"after_ttl": 1})
        # A log without TTLs (an older proxy's) cannot tell the attempts at one commit apart
        # from a commit made again: each call counts from its own arrival.
        old = [dict(e) for e in (first, second)]
        for e in old:
            del e["ttls"]
        dup, _, _, _ = self.attribute([self.take("a", 1.0), *old, self.take("b", 31.49)], runs=runs)
        self.assertEqual(nz(dup), {"unattributed": 1})

    def test_an_epoch_commit_counts_from_its_first_sending(self):
        # 'epochs': the UpdateItem committing the key's slot, held and sent again by the SDK.
        record = "#epoch:h/1/x:3"
        took = self.take("a", 1.0, op="BatchExecuteStatement", epochs={"fi:u1": [record, 2]})
        held = self.commit("a", 2.0, op="UpdateItem/commit", keys=[record], slots=[2],
                           applied=False, fault="timeout_before")
        landed = self.commit("a", 7.0, op="UpdateItem/commit", keys=[record], slots=[2],
                             ttl=held["ttls"][record])
        runs = [dict(self.RUNS[0], end=8.0), dict(self.RUNS[1], start=30.0)]
        dup, _, _, _ = self.attribute([took, held, landed, self.take("b", 33.0)], runs=runs)
        self.assertEqual(nz(dup), {"after_ttl": 1})
        dup, _, _, _ = self.attribute([took, held, landed, self.take("b", 30.5)], runs=runs)
        self.assertEqual(nz(dup), {"unattributed": 1})

    def test_a_copy_inside_one_window_is_not_excused_by_another(self):
        # Three copies: b took the key 18 s after a's commit (inside a's window), z took it
        # past b's. b's or a's copy is a duplicate, though both are a window apart from z's.
        three = [("u1", "a", "f1"), ("u1", "b", "f2"), ("u1", "z", "f3")]
        entries = [self.take("a", 1.0), self.commit("a", 2.0), self.take("b", 20.0),
                   self.commit("b", 21.0), self.take("z", 200.5)]
        runs = [dict(self.RUNS[0], end=3.0), dict(self.RUNS[1], start=19.0, end=22.0), self.RUNS[2]]
        dup, _, unexplained, _ = self.attribute(entries, committer="vm/3/x", runs=runs, copies=three)
        self.assertEqual(nz(dup), {"unattributed": 2})
        self.assertEqual(len(unexplained), 2)
        # Three windows, each past the one before: two copies after the TTL.
        entries[2:4] = [self.take("b", 40.0), self.commit("b", 41.0)]
        runs[1] = dict(self.RUNS[1], start=39.0, end=42.0)
        dup, _, _, _ = self.attribute(entries, committer="vm/3/x", runs=runs, copies=three)
        self.assertEqual(nz(dup), {"after_ttl": 2})

    def test_every_commit_before_the_take_counts_whoever_made_it(self):
        # A run without a copy (m) took the key afresh after a's window and committed it;
        # b took it 14 s after m's commit: inside m's window, however long after a's.
        runs = [dict(self.RUNS[0], end=3.0), {"run": "m", "pid": 4, "start": 34.0, "end": 37.0},
                dict(self.RUNS[1], start=49.0)]
        entries = [self.take("a", 1.0), self.commit("a", 2.0), self.take("m", 35.0),
                   self.commit("m", 36.0), self.take("b", 50.0)]
        dup, _, unexplained, _ = self.attribute(entries, runs=runs)
        self.assertEqual(nz(dup), {"unattributed": 1})
        self.assertEqual(sorted(unexplained[0]["lock_times"]), ["a", "b", "m"])
        # a's delivery committed by m (which took the key over pending, with its history,
        # after a's commits failed), and b past m's window: after the TTL.
        runs = self.RUNS + [{"run": "m", "pid": 4, "start": 41.0, "end": 44.0}]
        entries = [self.take("a", 1.0), self.take("m", 42.0), self.commit("m", 43.0),
                   self.take("b", 80.0)]
        dup, _, _, _ = self.attribute(entries, runs=runs)
        self.assertEqual(nz(dup), {"after_ttl": 1})

    def test_takes_that_interleave_are_no_evidence_of_a_window(self):
        # b took the key between two takes of a's: neither came after the other.
        entries = [self.take("a", 1.0), self.commit("a", 2.0), self.take("b", 40.0),
                   self.take("a", 75.0)]
        runs = [dict(self.RUNS[0], end=80.0), dict(self.RUNS[1], start=35.0)]
        dup, _, _, _ = self.attribute(entries, runs=runs)
        self.assertEqual(nz(dup), {"unattributed": 1})

    def test_only_what_the_store_applied_counts(self):
        base = [self.take("a", 1.0), self.commit("a", 2.0)]
        # A take refused (its transaction cancelled), or one whose statement failed, is no
        # take; the log then has none of b's: the run boundaries decide (unattributed).
        for refused in (self.take("b", 80.0, applied=False),
                        self.take("b", 80.0, op="BatchExecuteStatement",
                                  statement_errors={"fi:u1": "ConditionalCheckFailed"})):
            dup, _, _, _ = self.attribute(base + [refused])
            self.assertEqual(nz(dup), {"unattributed": 1})
        # Progress recorded (a send's placements, classed with the commits) is no commit.
        dup, _, _, _ = self.attribute([self.take("a", 1.0),
                                       self.commit("a", 2.0, op="TransactWriteItems/record"),
                                       self.take("b", 80.0)])
        self.assertEqual(nz(dup), {"unattributed": 1})
        # A commit thrown back is none either.
        dup, _, _, _ = self.attribute([self.take("a", 1.0), self.commit("a", 2.0, applied=False),
                                       self.take("b", 80.0)])
        self.assertEqual(nz(dup), {"unattributed": 1})
        # A log without arrival times (an older proxy's) proves nothing.
        old = self.take("b", 80.0)
        del old["t_in"]
        dup, _, _, _ = self.attribute(base + [old])
        self.assertEqual(nz(dup), {"unattributed": 1})

    def test_the_run_boundaries_decide_where_the_log_lacks_the_key(self):
        dup, _, _, _ = self.attribute([self.take("z", 200.5, keys=["fi:other"])],
                                      copies=[("u1", "a", "f1"), ("u1", "z", "f2")])
        self.assertEqual(nz(dup), {"after_ttl": 1})
        dup, _, _, _ = self.attribute([], copies=[("u1", "a", "f1"), ("u1", "b", "f2")])
        self.assertEqual(nz(dup), {"unattributed": 1})

    def test_epochs_commit_a_keys_slot_in_its_epoch_record(self):
        # 'epochs': a's statement wrote the key pending in its epoch 3, slot 2; the epoch
        # record's UpdateItem committed that slot; b took the key past the window with a
        # takeover's UpdateItem into its own epoch.
        record = "#epoch:h/1/x:3"
        took = self.take("a", 1.0, op="BatchExecuteStatement",
                         epochs={"fi:u1": [record, 2], "fi:u2": [record, 1]}, keys=["fi:u1", "fi:u2"])
        retaken = self.take("b", 80.0, op="UpdateItem", epochs={"fi:u1": ["#epoch:h/2/y:0", 0]})
        commit = self.commit("a", 2.0, op="UpdateItem/commit", keys=[record], slots=[1, 2])
        dup, _, _, _ = self.attribute([took, commit, retaken])
        self.assertEqual(nz(dup), {"after_ttl": 1})
        # A commit of the epoch's other slots is not the key's: no commit of it in the log.
        dup, _, _, _ = self.attribute([took, dict(commit, slots=[1]), retaken])
        self.assertEqual(nz(dup), {"unattributed": 1})
        # Inside the window all the same.
        dup, _, _, _ = self.attribute([took, commit, dict(retaken, t_in=25.0)])
        self.assertEqual(nz(dup), {"unattributed": 1})
        # An epoch's abort (an UpdateItem of the record, an acquisition's) takes no key.
        times = c.KeyTimes([took, commit, self.take("b", 80.0, op="UpdateItem/abort", keys=[record])])
        self.assertEqual(dict(times.takes), {"fi:u1": [("a", 1.0, 1.01)], "fi:u2": [("a", 1.0, 1.01)]})
        self.assertEqual(dict(times.commits), {"fi:u1": [("a", 1.99, 1.99, 2.0, 31)],
                                               "fi:u2": [("a", 1.99, 1.99, 2.0, 31)]})

    def test_statements_commit_keys_whose_statement_did_not_fail(self):
        commit = self.commit("a", 2.0, op="BatchExecuteStatement")
        entries = [self.take("a", 1.0), commit, self.take("b", 80.0)]
        self.assertEqual(nz(self.attribute(entries)[0]), {"after_ttl": 1})
        commit["statement_errors"] = {"fi:u1": "ConditionalCheckFailed"}
        self.assertEqual(nz(self.attribute(entries)[0]), {"unattributed": 1})

    def test_a_committer_clock_ahead_of_the_takers_widens_the_window(self):
        # a's clock 4 s ahead, b's 4 s behind: a's TTL ends 8 s later by b's clock. a set
        # it by its own clock (1.99 s read 5.99 s: 6 + 29).
        runs = [dict(self.RUNS[0], clock="+4s"), dict(self.RUNS[1], clock="-4s")]
        entries = [self.take("a", 1.0), self.commit("a", 2.0, ttl=35)]
        dup, _, _, _ = self.attribute(entries + [self.take("b", 36.0)], runs=runs)
        self.assertEqual(nz(dup), {"unattributed": 1})
        dup, _, _, _ = self.attribute(entries + [self.take("b", 39.5)], runs=runs)
        self.assertEqual(nz(dup), {"after_ttl": 1})
        self.assertEqual(c.clock_offset_s("-4s"), -4.0)
        self.assertEqual(c.clock_offset_s("+30s"), 30.0)
        self.assertEqual(c.clock_offset_s(None), 0.0)

    def test_the_window_is_the_locks_whole_seconds(self):
        self.assertEqual(c.recurring_ttl_s(c.MIXES["retry"]), 28.75)
        self.assertEqual(c.recurring_window_s(c.MIXES["retry"]), 29)
        self.assertEqual(c.recurring_window_s(c.MIXES["clock"]), 67)


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
