"""Session recovery (spec section 6, seed 004): every value derived by hand from the spec."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog.cli.common import replay_log
from eventlog.events import RecoveryDecision
from eventlog.fold import NOT_APPLIED, Rejected
from eventlog.reader import validate_object
from projections.runner import Runner
from projections.sessions import Sessions

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


# --- helpers ----------------------------------------------------------------------------


def fixture_lines(name: str) -> list[dict[str, Any]]:
    text = (FIXTURES / f"sessions_{name}.jsonl").read_text(encoding="utf-8")
    return [json.loads(x) for x in text.splitlines()]


class Fold:
    """Folds event objects one by one (line numbers 1, 2, ...) through the replay's runner."""

    def __init__(self) -> None:
        self.runner = Runner()
        self.line = 0
        self.results: list[Any] = []
        self.fed: list[dict[str, Any]] = []

    def feed(self, *objs: dict[str, Any]) -> Fold:
        for obj in objs:
            decoded = validate_object(dict(obj))
            assert not isinstance(decoded, str), decoded
            ev, at = decoded
            self.line += 1
            self.results.append(self.runner.fold(ev, self.line, at))
            self.fed.append(obj)
        return self

    def applied(self) -> dict[str, int]:
        """Session id -> the events fed for it that the runner applied (counted here, from the fold results)."""
        counts: dict[str, int] = {}
        for obj, result in zip(self.fed, self.results, strict=True):
            if result is None and "session_id" in obj:
                counts[obj["session_id"]] = counts.get(obj["session_id"], 0) + 1
        return counts

    @property
    def sessions(self) -> Sessions:
        return self.runner.sessions

    def item(self, sid: str) -> dict[str, Any]:
        return self.sessions.sessions[sid].item()

    def receipts(self) -> list[tuple[int, str, str, bool]]:
        view = self.sessions.view(_EPOCH)
        return [(r["line"], r["session_id"], r["result"], r["replayed"]) for r in view["receipts"]]


_EPOCH = datetime.fromisoformat("2026-01-01T00:00:00+00:00")


def upto(name: str, n: int) -> Fold:
    """The fixture's first ``n`` lines folded."""
    return Fold().feed(*fixture_lines(name)[:n])


def item(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "admission_state": "admitted", "attention": None, "reason": None, "failures": 0, "retry_at": None,
        "generation": 0, "revision": 0, "resumable": False, "unknown_turns": [],
    }
    base.update(kw)
    return base


T = "2026-08-03T10:00:00+09:00"


def ev(type_: str, sid: str = "s", ts: str = T, **kw: Any) -> dict[str, Any]:
    return {"type": type_, "ts": ts, "session_id": sid, **kw}


def decision(d: str, rev: int, key: str, sid: str = "s", **kw: Any) -> dict[str, Any]:
    return ev("recovery_decision", sid, decision=d, expected_revision=rev, idempotency_key=key, reason="r", **kw)


# --- restore failures: 30 s, 60 s, then recovery_required; storage errors never count -----


def test_restore_failures_back_off_30_then_60_then_stop() -> None:
    # lines 1-3: claim and two storage_unavailable: nothing counted
    assert upto("restore_backoff", 3).item("s-restore") == item(generation=1, revision=3)
    # line 4: 1st failure at 10:01:00 -> backoff until 10:01:30, same offset
    assert upto("restore_backoff", 4).item("s-restore") == item(
        admission_state="backoff", attention="RESTORE_FAILED", reason="restore_refused", failures=1,
        retry_at="2026-08-03T10:01:30+09:00", generation=1, revision=4)
    # line 8: 2nd failure at 10:02:00 (storage error at line 7 not counted) -> 10:03:00
    assert upto("restore_backoff", 8).item("s-restore") == item(
        admission_state="backoff", attention="RESTORE_FAILED", reason="restore_refused", failures=2,
        retry_at="2026-08-03T10:03:00+09:00", generation=2, revision=7)
    # line 11: 3rd failure -> recovery_required, retry_at null; revision 10 (line 5 not applied)
    assert upto("restore_backoff", 11).item("s-restore") == item(
        admission_state="recovery_required", attention="RESTORE_FAILED", reason="restore_refused", failures=3,
        generation=3, revision=10)


def test_retry_restore_refused_in_backoff_accepted_at_the_limit_and_replayed() -> None:
    f = upto("restore_backoff", 15)
    assert f.receipts() == [
        (5, "s-restore", "REQUEST_STALE", False),  # backoff is not recovery_required
        (12, "s-restore", "accepted", False),
        (13, "s-restore", "accepted", True),  # same key: first receipt, nothing changes
    ]
    assert f.results[4] is NOT_APPLIED and f.results[11] is None and f.results[12] is NOT_APPLIED
    # accepted retry_restore: admitted, failures 0, attention null (revision 11), then claim + ready
    assert upto("restore_backoff", 13).item("s-restore") == item(reason="restore_refused", generation=3, revision=11)
    assert f.item("s-restore") == item(reason="restore_refused", generation=4, revision=13)
    assert f.runner.rejected == []


def test_incompatible_checkpoint_stops_at_once() -> None:
    f = upto("incompatible_checkpoint", 4)
    stopped = item(admission_state="recovery_required", attention="RESTORE_FAILED",
                   reason="incompatible_checkpoint", failures=1, revision=2)
    assert f.item("s-a") == {**stopped, "generation": 1}
    assert f.item("s-b") == {**stopped, "generation": 7}


def test_incompatible_checkpoint_retry_or_start_fresh_and_keys_per_session() -> None:
    f = upto("incompatible_checkpoint", 10)
    assert f.receipts() == [
        (5, "s-a", "REQUEST_STALE", False),  # expected revision 1, session at 2
        (6, "s-a", "accepted", False),
        (7, "s-b", "accepted", False),  # key k1 was used by s-a, not by s-b
    ]
    assert f.item("s-a") == item(reason="incompatible_checkpoint", generation=2, revision=5)
    assert f.item("s-b") == item(reason="incompatible_checkpoint", generation=8, revision=4)


# --- startup failures; drain and pause never count; worker_ready resets ----------------


def test_startup_failures_and_what_does_not_count() -> None:
    assert upto("startup_failed", 2).item("s-start") == item(
        admission_state="backoff", attention="STARTUP_FAILED", reason="git_clone_failed", failures=1,
        retry_at="2026-08-03T09:00:40+09:00", generation=1, revision=2)
    # worker_stopped failed: informational only
    assert upto("startup_failed", 3).item("s-start")["failures"] == 1
    # worker_ready: failures 0, retry_at and attention null, admitted; reason as it was
    assert upto("startup_failed", 5).item("s-start") == item(reason="git_clone_failed", generation=2, revision=5)
    # drain and pause do not count
    assert upto("startup_failed", 9).item("s-start") == item(reason="git_clone_failed", generation=4, revision=9)
    assert upto("startup_failed", 10).item("s-start") == item(
        admission_state="backoff", attention="STARTUP_FAILED", reason="repository_credentials_refused",
        failures=1, retry_at="2026-08-03T09:40:35+09:00", generation=4, revision=10)
    assert upto("startup_failed", 12).item("s-start")["retry_at"] == "2026-08-03T09:41:40+09:00"
    assert upto("startup_failed", 15).item("s-start") == item(
        admission_state="recovery_required", attention="STARTUP_FAILED", reason="repository_credentials_refused",
        failures=3, generation=6, revision=14)


def test_startup_failed_takes_start_fresh_not_retry_restore() -> None:
    f = upto("startup_failed", 19)
    assert f.receipts() == [
        (13, "s-start", "REQUEST_STALE", False),  # during backoff
        (16, "s-start", "REQUEST_STALE", False),  # STARTUP_FAILED, not RESTORE_FAILED
        (17, "s-start", "accepted", False),
    ]
    assert upto("startup_failed", 17).item("s-start") == item(
        reason="repository_credentials_refused", generation=6, revision=15)
    assert f.item("s-start") == item(reason="repository_credentials_refused", generation=7, revision=17)


# --- unknown outcomes -----------------------------------------------------------------


def test_outcome_unknown_requires_recovery() -> None:
    assert upto("unknown_turn", 7).item("s-unk") == item(
        admission_state="recovery_required", attention="RECOVERY_REQUIRED", reason="interrupt_unanswered",
        generation=1, revision=7, unknown_turns=["t2"])
    # storage recovering re-runs nothing
    assert upto("unknown_turn", 11).item("s-unk") == item(
        admission_state="recovery_required", attention="RECOVERY_REQUIRED", reason="interrupt_unanswered",
        generation=1, revision=9, unknown_turns=["t2"])


def test_abandon_waits_for_execution_gone_then_leaves_a_context_gap() -> None:
    f = upto("unknown_turn", 24)
    assert f.receipts() == [
        (9, "s-unk", "RECOVERY_REQUIRED", False),  # execution not yet confirmed gone
        (10, "s-unk", "REQUEST_STALE", False),  # t9 is not an unknown turn
        (13, "s-unk", "REQUEST_STALE", False),  # expected 8, session at 10
        (14, "s-unk", "accepted", False),
        (15, "s-unk", "accepted", True),  # key d4 again, the same request
        (16, "s-unk", "IDEMPOTENCY_KEY_REUSED", False),  # key d1 again, another expected_revision
        (17, "s-unk", "accepted", False),  # start_fresh after the context gap
        (23, "s-early-gone", "RECOVERY_REQUIRED", False),  # execution_gone came before the turn
        (24, "s-unk", "RECOVERY_REQUIRED", True),  # key d1, line 9's request again: its first receipt, refused
    ]
    receipts = f.sessions.view(_EPOCH)["receipts"]
    assert [(r["line"], r["first_line"]) for r in receipts if r["line"] in (14, 15, 16, 24)] == [
        (14, 14), (15, 14), (16, 9), (24, 9)]
    # abandon: t2 leaves unknown_turns; the checkpoint covers t1 only -> not resumable, CONTEXT_GAP
    assert upto("unknown_turn", 14).item("s-unk") == item(
        admission_state="stopped", attention="CONTEXT_GAP", reason="interrupt_unanswered",
        generation=1, revision=11)
    assert upto("unknown_turn", 17).item("s-unk") == item(reason="interrupt_unanswered", generation=1, revision=12)
    assert f.item("s-unk") == item(reason="interrupt_unanswered", generation=2, revision=14)
    assert f.results[15] is NOT_APPLIED and f.results[23] is NOT_APPLIED
    assert f.item("s-early-gone") == item(
        admission_state="recovery_required", attention="RECOVERY_REQUIRED", reason="outcome_unknown",
        revision=3, unknown_turns=["u1"])


def test_confirm_completed_needs_evidence_and_a_covering_checkpoint() -> None:
    f = upto("confirm_completed", 23)
    assert f.receipts() == [
        (12, "s-ckpt", "CHECKPOINT_UNAVAILABLE", False),  # no evidence_ref
        (13, "s-nockpt", "CHECKPOINT_UNAVAILABLE", False),  # no checkpoint
        (14, "s-ckpt", "accepted", False),
        (15, "s-nockpt", "accepted", False),  # abandon
        (22, "s-gap", "CHECKPOINT_UNAVAILABLE", False),  # checkpoint covers t1, not t2
        (23, "s-gap", "accepted", False),
    ]
    assert f.item("s-ckpt") == item(admission_state="stopped", reason="interrupt_unanswered",
                                    generation=1, revision=7, resumable=True)
    assert f.item("s-nockpt") == item(admission_state="stopped", attention="CONTEXT_GAP",
                                      reason="interrupt_checkpoint_unavailable", generation=1, revision=6)
    assert f.item("s-gap") == item(admission_state="stopped", attention="CONTEXT_GAP",
                                   reason="interrupt_unanswered", revision=7)


def test_close_then_close_again() -> None:
    f = upto("close", 11)
    assert f.receipts() == [
        (3, "s-close", "accepted", False),
        (4, "s-close", "REQUEST_STALE", False),  # already closed
        (5, "s-close", "REQUEST_STALE", False),  # stale revision
        (6, "s-close", "REQUEST_STALE", False),  # closed is not recovery_required
        (11, "s-close-unknown", "accepted", False),  # close does not wait for execution_gone
    ]
    assert f.item("s-close") == item(admission_state="closed", attention="RESTORE_FAILED",
                                     reason="incompatible_checkpoint", failures=1, generation=1, revision=4)
    assert f.item("s-close-unknown") == item(admission_state="closed", attention="RECOVERY_REQUIRED",
                                             reason="interrupt_unanswered", generation=4, revision=4,
                                             unknown_turns=["t7"])


# --- the dump and the runner agree --------------------------------------------------------

NAMES = ["restore_backoff", "incompatible_checkpoint", "startup_failed", "unknown_turn", "confirm_completed", "close"]


def test_revision_is_the_count_of_applied_events() -> None:
    for name in NAMES:
        f = upto(name, 10_000)
        applied = f.applied()
        assert applied, name
        for sid, s in f.sessions.sessions.items():
            assert s.revision == applied.get(sid, 0), (name, sid)
        assert dict(f.runner.revisions["session_id"]) == applied, name
        assert f.runner.rejected == []


def test_fixture_dumps_hold_the_sessions_shape() -> None:
    for name in NAMES:
        path = FIXTURES / f"sessions_{name}.jsonl"
        dump = replay_log(str(path)).dump(str(path))
        assert dump["rejected"] == []
        assert set(dump["sessions"]) >= {"items", "receipts", "controls"}
        for it in dump["sessions"]["items"].values():
            assert list(it) == list(item())
        for r in dump["sessions"]["receipts"]:
            # the spec's keys, then who decided and the line of the key's first request
            assert list(r) == ["line", "session_id", "decision", "result", "replayed", "first_line", "actor"]


# --- lead's decisions where the spec is silent ---------------------------------------------


def test_a_session_exists_from_its_first_event() -> None:
    assert Fold().feed(ev("turn_started", turn_id="t1")).item("s") == item(revision=1)


def test_generation_is_the_highest_seen() -> None:
    f = Fold().feed(ev("worker_claimed", generation=5, worker="w", restore=False),
                    ev("worker_stopped", generation=3, stop_kind="drain"))
    assert f.item("s")["generation"] == 5


def test_incompatible_after_an_earlier_failure_counts_normally() -> None:
    f = Fold().feed(ev("startup_failed", generation=1, reason="x"),
                    ev("checkpoint_restore_failed", generation=2, reason="incompatible_checkpoint"))
    assert f.item("s") == item(admission_state="recovery_required", attention="RESTORE_FAILED",
                               reason="incompatible_checkpoint", failures=2, generation=2, revision=2)


def test_retry_at_keeps_the_offset_and_fractions() -> None:
    f = Fold().feed(ev("startup_failed", ts="2026-08-03T23:59:45.5Z", generation=1, reason="x"))
    assert f.item("s")["retry_at"] == "2026-08-04T00:00:15.500000+00:00"


def test_closed_stays_closed() -> None:
    f = Fold().feed(
        ev("turn_started", turn_id="t1"),
        ev("turn_finished", turn_id="t1", outcome="outcome_unknown"),
        decision("close", 2, "k1"),
        ev("worker_ready", generation=1),
        ev("startup_failed", generation=1, reason="x"),
        ev("execution_gone"),
        decision("abandon", 5, "k2", target_turn_id="t1"),
        decision("start_fresh", 6, "k3"),
    )
    # a closed session admits no worker (fenced: rejected, not applied)
    assert f.results[3] == Rejected("session 's' is closed: a worker cannot admit it by being ready")
    assert f.receipts() == [(3, "s", "accepted", False), (7, "s", "accepted", False), (8, "s", "REQUEST_STALE", False)]
    assert f.item("s") == item(admission_state="closed", attention="CONTEXT_GAP", reason="x", failures=1,
                               retry_at="2026-08-03T10:00:30+09:00", generation=1, revision=6)


def test_checkpoint_naming_an_unstarted_turn_covers_every_started_turn() -> None:
    f = Fold().feed(
        ev("turn_started", turn_id="t1"),
        ev("turn_started", turn_id="t2"),
        ev("turn_finished", turn_id="t2", outcome="outcome_unknown"),
        ev("checkpoint_committed", covers_turn="never-started"),
        ev("execution_gone"),
        decision("confirm_completed", 5, "k", target_turn_id="t2", evidence_ref="e"),
    )
    assert f.receipts() == [(6, "s", "accepted", False)]
    assert f.item("s") == item(admission_state="stopped", reason="outcome_unknown", revision=6, resumable=True)


def test_checkpoint_covers_its_turn_and_every_earlier_one_only() -> None:
    f = Fold().feed(
        ev("turn_started", turn_id="a"),
        ev("turn_started", turn_id="b"),
        ev("turn_started", turn_id="c"),
        ev("turn_finished", turn_id="a", outcome="outcome_unknown"),
        ev("turn_finished", turn_id="c", outcome="outcome_unknown"),
        ev("checkpoint_committed", covers_turn="b"),
        ev("execution_gone"),
        decision("confirm_completed", 7, "k1", target_turn_id="c", evidence_ref="e"),
        decision("confirm_completed", 7, "k2", target_turn_id="a", evidence_ref="e"),
    )
    assert f.receipts() == [(8, "s", "CHECKPOINT_UNAVAILABLE", False), (9, "s", "accepted", False)]
    # c is still unknown and not covered: stopped, not resumable
    assert f.item("s") == item(admission_state="stopped", attention="CONTEXT_GAP", reason="outcome_unknown",
                               revision=8, unknown_turns=["c"])


def test_start_fresh_drops_the_checkpoint() -> None:
    f = Fold().feed(
        ev("turn_started", turn_id="t1"),
        ev("checkpoint_committed", covers_turn="t1"),
        ev("checkpoint_restore_failed", generation=1, reason="incompatible_checkpoint"),
        decision("start_fresh", 3, "k1"),
        ev("turn_finished", turn_id="t1", outcome="outcome_unknown"),
        ev("execution_gone"),
        decision("confirm_completed", 6, "k2", target_turn_id="t1", evidence_ref="e"),
        decision("abandon", 6, "k3", target_turn_id="t1"),
    )
    assert f.receipts() == [(4, "s", "accepted", False), (7, "s", "CHECKPOINT_UNAVAILABLE", False),
                            (8, "s", "accepted", False)]
    assert f.item("s")["resumable"] is False and f.item("s")["attention"] == "CONTEXT_GAP"


def test_execution_gone_must_follow_the_latest_unknown_finish() -> None:
    f = Fold().feed(
        ev("turn_finished", turn_id="t1", outcome="outcome_unknown"),
        ev("execution_gone"),
        ev("turn_finished", turn_id="t1", outcome="outcome_unknown"),
        decision("abandon", 3, "k1", target_turn_id="t1"),
        ev("execution_gone"),
        decision("abandon", 4, "k2", target_turn_id="t1"),
    )
    assert f.receipts() == [(4, "s", "RECOVERY_REQUIRED", False), (6, "s", "accepted", False)]


def test_decision_checks_follow_the_spec_order() -> None:
    base = Fold().feed(ev("turn_finished", turn_id="t1", outcome="outcome_unknown"))
    s = base.sessions
    # stale revision comes before the decision's own conditions
    assert s.judge("s", "confirm_completed", expected_revision=0, target_turn_id="nope").result == "REQUEST_STALE"
    # unknown-turn check before execution_gone before evidence/checkpoint
    assert s.judge("s", "abandon", expected_revision=1, target_turn_id="nope").result == "REQUEST_STALE"
    assert s.judge("s", "abandon", expected_revision=1).result == "REQUEST_STALE"
    assert s.judge("s", "confirm_completed", expected_revision=1, target_turn_id="t1").result == "RECOVERY_REQUIRED"
    # a seen key wins over everything: the same request gets its first receipt ...
    base.feed(decision("close", 1, "k"))
    j = s.judge("s", "close", expected_revision=1, idempotency_key="k")
    assert (j.result, j.replayed, j.first_line) == ("accepted", True, 2)
    # ... and any other request with it is IDEMPOTENCY_KEY_REUSED, before the revision is even looked at
    for other in ({"expected_revision": 99}, {"expected_revision": 1, "target_turn_id": "t1"},
                  {"expected_revision": 1, "evidence_ref": "e"}):
        j = s.judge("s", "close", idempotency_key="k", **other)  # type: ignore[arg-type]
        assert (j.result, j.replayed, j.first_line) == ("IDEMPOTENCY_KEY_REUSED", False, 2)
    j = s.judge("s", "abandon", expected_revision=1, idempotency_key="k")
    assert j.result == "IDEMPOTENCY_KEY_REUSED" and "line 2" in j.why and "close" in j.why


def test_options_are_what_would_be_accepted_now() -> None:
    f = upto("restore_backoff", 11)  # recovery_required, RESTORE_FAILED
    accepted = [(d, t) for d, t, j in f.sessions.options("s-restore") if j.accepted]
    assert accepted == [("retry_restore", None), ("start_fresh", None), ("close", None)]
    f = upto("unknown_turn", 12)  # t2 unknown, execution gone
    accepted = [(d, t) for d, t, j in f.sessions.options("s-unk") if j.accepted]
    assert accepted == [("close", None), ("abandon", "t2")]  # no checkpoint covers t2


# --- judging is pure and is what folding does ----------------------------------------------

_SESSION_EVENTS = st.one_of(
    st.builds(lambda g: ev("worker_claimed", generation=g, worker="w", restore=True), st.integers(1, 3)),
    st.builds(lambda g: ev("worker_ready", generation=g), st.integers(1, 3)),
    st.builds(lambda r: ev("checkpoint_restore_failed", generation=1, reason=r),
              st.sampled_from(["x", "incompatible_checkpoint"])),
    st.builds(lambda r: ev("startup_failed", generation=1, reason=r), st.sampled_from(["x", "y"])),
    st.just(ev("storage_unavailable", generation=1, cause="dns")),
    st.just(ev("worker_stopped", generation=1, stop_kind="drain")),
    st.builds(lambda t: ev("turn_started", turn_id=t), st.sampled_from(["a", "b", "c"])),
    st.builds(lambda t, o: ev("turn_finished", turn_id=t, outcome=o), st.sampled_from(["a", "b", "c"]),
              st.sampled_from(["completed", "outcome_unknown"])),
    st.builds(lambda t: ev("checkpoint_committed", covers_turn=t), st.sampled_from(["a", "b", "c", "z"])),
    st.just(ev("execution_gone")),
    st.builds(
        lambda d, dr, k, t, e: {**decision(d, 0, k, target_turn_id=t, evidence_ref=e), "_drift": dr},
        st.sampled_from(["retry_restore", "start_fresh", "close", "abandon", "confirm_completed"]),
        st.sampled_from([0, 0, 0, -1, 1]),
        st.sampled_from(["k1", "k2", "k3", "k4", "k5", "k6"]),
        st.sampled_from([None, "a", "b", "c"]),
        st.sampled_from([None, "evidence"]),
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_SESSION_EVENTS, max_size=30))
def test_judge_is_pure_and_agrees_with_the_fold(objs: list[dict[str, Any]]) -> None:
    f = Fold()
    decisions = 0
    fenced = 0
    ever_closed = False
    for obj in objs:
        obj = dict(obj)
        drift = obj.pop("_drift", None)
        if drift is not None:
            decisions += 1
            s = f.sessions.sessions.get("s")
            revision = s.revision if s is not None else 0
            obj["expected_revision"] = revision + drift
            before = (s.item(), dict(s.keys)) if s is not None else None
            decoded = validate_object(dict(obj))
            assert not isinstance(decoded, str)
            d = decoded[0]
            assert isinstance(d, RecoveryDecision)
            j = f.sessions.judge("s", d.decision, expected_revision=d.expected_revision,
                                 idempotency_key=d.idempotency_key, target_turn_id=d.target_turn_id,
                                 evidence_ref=d.evidence_ref)
            after = (s.item(), dict(s.keys)) if s is not None else None
            assert after == before  # judging changes nothing
            f.feed(obj)
            r = f.sessions.view(_EPOCH)["receipts"][-1]
            assert (r["result"], r["replayed"]) == (j.result, j.replayed)
            applied = j.accepted and not j.replayed
            assert (f.results[-1] is None) == applied
            assert (f.results[-1] is NOT_APPLIED) == (not applied)
            assert f.item("s")["revision"] == revision + int(applied)
            ever_closed = ever_closed or (applied and d.decision == "close")
        else:
            s = f.sessions.sessions.get("s")
            before_item = s.item() if s is not None else None
            held = s is not None and s.admission_state in ("recovery_required", "closed")
            f.feed(obj)
            result = f.results[-1]
            if isinstance(result, Rejected):  # only the fence rejects, and only what would admit new work
                fenced += 1
                assert obj["type"] in ("worker_claimed", "worker_ready", "turn_started")
                assert s is not None and s.item() == before_item
                assert s.admission_state.replace("_", " ") in result.reason.replace("_", " ")
            else:
                assert result is None
                assert not (held and obj["type"] in ("worker_ready", "turn_started")), "a held session moved on"
        assert f.item("s")["revision"] == f.applied().get("s", 0) == f.runner.revisions["session_id"].get("s", 0)
        if ever_closed:
            assert f.item("s")["admission_state"] == "closed"
    assert len(f.sessions.view(_EPOCH)["receipts"]) == decisions
    assert len(f.runner.rejected) == fenced


def test_state_survives_the_snapshot_codec() -> None:
    """The sidecar and snapshots encode the runner's typed state; folding goes on the same after a decode."""
    import msgspec

    objs = fixture_lines("unknown_turn")
    whole = upto("unknown_turn", len(objs))
    half = upto("unknown_turn", 13)
    again = Runner()
    again.load_state(msgspec.msgpack.decode(msgspec.msgpack.encode(half.runner.save_state()), type=Runner.State))
    half.runner = again
    half.feed(*objs[13:])
    assert half.sessions.view(_EPOCH) == whole.sessions.view(_EPOCH)
    assert half.runner.revisions == whole.runner.revisions
    assert [half.sessions.options(sid) for sid in sorted(whole.sessions.sessions)] == [
        whole.sessions.options(sid) for sid in sorted(whole.sessions.sessions)]


def test_only_a_decision_takes_a_turn_out_of_unknown_turns() -> None:
    f = Fold().feed(
        ev("turn_finished", turn_id="t1", outcome="outcome_unknown"),
        ev("turn_finished", turn_id="t1", outcome="completed"),
        ev("worker_ready", generation=1),
    )
    assert f.item("s")["unknown_turns"] == ["t1"]


def test_an_empty_evidence_ref_is_none() -> None:
    f = Fold().feed(
        ev("turn_started", turn_id="t1"),
        ev("checkpoint_committed", covers_turn="t1"),
        ev("turn_finished", turn_id="t1", outcome="outcome_unknown"),
        ev("execution_gone"),
        decision("confirm_completed", 4, "k1", target_turn_id="t1", evidence_ref=""),
    )
    assert f.receipts() == [(5, "s", "CHECKPOINT_UNAVAILABLE", False)]
