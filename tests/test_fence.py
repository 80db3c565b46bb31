"""Admission fencing (issue 18 point 1; docs/DECISIONS.md): a session waiting for a person does not move on by itself.

While a session is ``recovery_required`` (or ``backoff`` before its ``retry_at``,
judged by the event's own ``ts``), a stopped one with a context gap, or
``closed``, a new generation's ``worker_claimed``, a ``worker_ready`` and a
``turn_started`` are rejected with a reason naming the state; ``eventlog append``
refuses them (exit 3). After an accepted decision they apply again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eventlog.cli.common import replay_log
from tests.conftest import ROOT, run_cli, write_log

FIXTURES = ROOT / "fixtures"


def lines(name: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (FIXTURES / f"sessions_fence_{name}.jsonl").read_text("utf-8").splitlines()]


def dump_of(name: str) -> dict[str, Any]:
    path = FIXTURES / f"sessions_fence_{name}.jsonl"
    return replay_log(str(path)).dump(str(path))


def test_a_new_generation_claimed_while_recovery_is_required_is_rejected() -> None:
    """Issue 18's "done when": the claim is in ``rejected`` and the session stays ``recovery_required``."""
    dump = dump_of("recovery_required")
    rejected = {r["line"]: r for r in dump["rejected"]}
    assert rejected[3]["type"] == "worker_claimed" and "recovery_required" in rejected[3]["reason"]
    assert "no new generation (2)" in rejected[3]["reason"]
    # the ready of that worker and the queued input do not get through either
    assert (rejected[4]["type"], rejected[5]["type"]) == ("worker_ready", "turn_started")
    assert all("recovery_required" in rejected[n]["reason"] for n in (4, 5))
    s = dump["sessions"]["items"]["s-fence"]
    assert (s["admission_state"], s["attention"], s["generation"], s["revision"]) == (
        "recovery_required", "RESTORE_FAILED", 1, 2)


def test_after_an_accepted_decision_they_apply_again() -> None:
    dump = dump_of("recovery_required")
    rejected = [r["line"] for r in dump["rejected"]]
    # s-retry: its claim at line 8 is refused, the decision at line 9 accepted, lines 10-12 apply
    assert 8 in rejected and not {10, 11, 12} & set(rejected)
    assert (9, "accepted", "ops-aiko") in [(r["line"], r["result"], r["actor"]) for r in dump["sessions"]["receipts"]]
    s = dump["sessions"]["items"]["s-retry"]
    assert (s["admission_state"], s["generation"], s["revision"]) == ("admitted", 2, 6)


def test_an_unknown_turn_holds_queued_input_until_decided() -> None:
    """Seed 004: "queued 入力は dispatch されません"; stopped with a context gap needs start_fresh first."""
    dump = dump_of("recovery_required")
    rejected = {r["line"]: r["reason"] for r in dump["rejected"]}
    assert "turn 't2' is not dispatched" in rejected[17] and "recovery_required" in rejected[17]
    assert "recovery_required" in rejected[18]
    assert "stopped with a context gap" in rejected[21]  # after abandon, before start_fresh
    assert 25 not in rejected  # t2 dispatched after start_fresh and a ready worker
    s = dump["sessions"]["items"]["s-turn"]
    assert (s["admission_state"], s["unknown_turns"], s["revision"]) == ("admitted", [], 10)


def test_backoff_holds_until_retry_at_by_the_events_own_time() -> None:
    dump = dump_of("backoff_stopped_closed")
    rejected = {r["line"]: r["reason"] for r in dump["rejected"]}
    # 1st failure at 09:00:10 -> retry_at 09:00:40; a claim at 09:00:25 and a turn at 09:00:30 are early
    assert "in backoff until 2026-08-05T09:00:40+09:00" in rejected[3]
    assert "in backoff until" in rejected[4]
    # line 5 is 00:00:40 UTC: the same instant as retry_at, written in another offset: the retry is due
    assert 5 not in rejected and 6 not in rejected
    assert dump["sessions"]["items"]["s-back"]["admission_state"] == "admitted"


def test_a_stopped_resumable_session_resumes_with_a_worker_not_with_a_turn() -> None:
    dump = dump_of("backoff_stopped_closed")
    rejected = {r["line"]: r["reason"] for r in dump["rejected"]}
    assert "stopped until a resumed worker is ready" in rejected[14]
    assert not {15, 16, 17} & set(rejected)  # the resume: claim, ready, then the turn
    assert dump["sessions"]["items"]["s-resume"]["admission_state"] == "admitted"


def test_closed_admits_nothing_but_records_the_rest() -> None:
    dump = dump_of("backoff_stopped_closed")
    rejected = {r["line"]: r["reason"] for r in dump["rejected"]}
    assert rejected[21] == "session 's-closed' is closed: no new generation (2) is admitted"
    assert 22 not in rejected  # worker_stopped is only informational
    s = dump["sessions"]["items"]["s-closed"]
    assert (s["admission_state"], s["generation"], s["revision"]) == ("closed", 1, 4)


def test_append_refuses_a_fenced_transition_with_exit_3(tmp_path: Path) -> None:
    objs = lines("recovery_required")
    log = write_log(tmp_path / "log.jsonl", objs[:2])
    before = log.read_bytes()
    out = run_cli("append", str(log), stdin=json.dumps(objs[2]) + "\n")
    assert out.returncode == 3, out.stderr
    assert "worker_claimed rejected" in out.stderr and "recovery_required" in out.stderr
    assert log.read_bytes() == before
    # --no-check writes it (what happened is kept), and the replay lists it under rejected
    assert run_cli("append", str(log), "--no-check", stdin=json.dumps(objs[2]) + "\n").returncode == 0
    assert [r["line"] for r in replay_log(str(log)).dump(str(log))["rejected"]] == [3]


def test_append_accepts_the_claim_after_an_accepted_decision(tmp_path: Path) -> None:
    objs = [o for o in lines("recovery_required") if o["session_id"] == "s-retry"]
    log = write_log(tmp_path / "log.jsonl", objs[:2])
    stdin = "".join(json.dumps(o) + "\n" for o in objs[2:4])  # the early claim, then the decision
    assert run_cli("append", str(log), stdin=stdin).returncode == 3  # all or nothing: the claim is refused
    decided = run_cli("decide", str(log), "s-retry", "--decision", "retry_restore", "--expected-revision", "2",
                      "--idempotency-key", "f1", "--reason", "r")
    assert decided.returncode == 0, decided.stdout
    out = run_cli("append", str(log), stdin="".join(json.dumps(o) + "\n" for o in objs[4:]))
    assert out.returncode == 0, out.stderr
    item = replay_log(str(log)).dump(str(log))["sessions"]["items"]["s-retry"]
    assert (item["admission_state"], item["generation"]) == ("admitted", 2)


def test_sessions_says_what_is_fenced(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", lines("backoff_stopped_closed")[:2])
    early = json.loads(run_cli("sessions", str(log), "--json", "--at", "2026-08-05T09:00:39+09:00").stdout)
    assert early["items"]["s-back"]["fenced"].startswith("in backoff until 2026-08-05T09:00:40+09:00")
    due = json.loads(run_cli("sessions", str(log), "--json", "--at", "2026-08-05T09:00:40+09:00").stdout)
    assert due["items"]["s-back"]["fenced"] is None
    text = run_cli("sessions", str(log), "--at", "2026-08-05T09:00:39+09:00").stdout
    assert "new work refused: in backoff until" in text
