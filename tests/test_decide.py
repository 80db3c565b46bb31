"""``eventlog decide`` and ``eventlog sessions``: receipts under the lock, as the replay judges them."""

from __future__ import annotations

import getpass
import json
import multiprocessing
import shutil
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from eventlog.appender import EventLog
from eventlog.cli import main
from eventlog.cli.common import replay_log
from tests.conftest import run_cli, write_log

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
NAMES = ["restore_backoff", "incompatible_checkpoint", "startup_failed", "unknown_turn", "confirm_completed", "close"]
T = "2026-08-03T10:00:00+09:00"


def fixture(name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    lines = (FIXTURES / f"sessions_{name}.jsonl").read_text(encoding="utf-8").splitlines()
    expected = json.loads((FIXTURES / f"sessions_{name}.expected.json").read_text(encoding="utf-8"))
    return [json.loads(x) for x in lines], expected


def decide_args(log: Path | str, obj: dict[str, Any]) -> list[str]:
    """``eventlog decide`` arguments that write the fixture's decision line ``obj`` (without an actor: the OS user)."""
    args = ["decide", str(log), obj["session_id"], "--decision", obj["decision"],
            "--expected-revision", str(obj["expected_revision"]), "--idempotency-key", obj["idempotency_key"],
            "--reason", obj["reason"], "--json"]
    for key, flag in (("target_turn_id", "--target-turn"), ("evidence_ref", "--evidence-ref"), ("actor", "--actor")):
        if obj.get(key) is not None:
            args += [flag, obj[key]]
    return args


def as_written_by_decide(sessions: dict[str, Any]) -> dict[str, Any]:
    """The fixture's ``sessions``, a decision without an actor becoming the OS user's (``decide`` writes it)."""
    receipts = [{**r, "actor": r["actor"] if r["actor"] is not None else getpass.getuser()}
                for r in sessions["receipts"]]
    return {**sessions, "receipts": receipts}


@pytest.mark.parametrize("name", NAMES)
def test_decide_judges_exactly_as_the_replay(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each fixture rebuilt with ``eventlog decide`` for its decisions gives the fixture's receipts."""
    objs, expected = fixture(name)
    expected["sessions"] = as_written_by_decide(expected["sessions"])
    want = iter(expected["sessions"]["receipts"])
    log = tmp_path / "log.jsonl"
    log.touch()
    for obj in objs:
        if obj["type"] != "recovery_decision":
            EventLog(log).append([obj])
            continue
        status = main(decide_args(log, obj))
        printed = json.loads(capsys.readouterr().out)
        receipt = next(want)
        assert {k: printed[k] for k in receipt} == receipt
        assert status == (0 if receipt["result"] == "accepted" else 3)
    assert next(want, None) is None
    got = replay_log(str(log)).dump(str(log))
    assert got["sessions"] == expected["sessions"]
    assert got["rejected"] == []


def test_cli_exit_codes_and_the_audit_trail(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [
        {"type": "worker_claimed", "ts": T, "session_id": "s", "generation": 1, "worker": "w", "restore": True},
        {"type": "checkpoint_restore_failed", "ts": T, "session_id": "s", "generation": 1,
         "reason": "incompatible_checkpoint"},
    ])
    base = ["decide", str(log), "s", "--idempotency-key"]
    # stale revision: refused, exit 3, still written as the audit trail
    out = run_cli(*base, "a", "--decision", "retry_restore", "--expected-revision", "1", "--reason", "r", "--json")
    assert out.returncode == 3, out.stderr
    assert json.loads(out.stdout)["result"] == "REQUEST_STALE"
    assert len(log.read_text().splitlines()) == 3
    # accepted: exit 0
    out = run_cli(*base, "b", "--decision", "retry_restore", "--expected-revision", "2", "--reason", "r", "--json")
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)
    assert printed["line"] == 4 and printed["result"] == "accepted" and printed["replayed"] is False
    assert printed["session"]["admission_state"] == "admitted" and printed["session"]["revision"] == 3
    # same key again: the first receipt, replayed, exit 0; revision unchanged
    out = run_cli(*base, "b", "--decision", "retry_restore", "--expected-revision", "2", "--reason", "r", "--json")
    assert out.returncode == 0
    printed = json.loads(out.stdout)
    assert (printed["result"], printed["replayed"], printed["session"]["revision"]) == ("accepted", True, 3)
    # text output for people
    out = run_cli(*base, "c", "--decision", "close", "--expected-revision", "0", "--reason", "r")
    assert out.returncode == 3 and out.stdout.startswith("refused: REQUEST_STALE")
    assert len(log.read_text().splitlines()) == 6


def test_cli_bad_input_writes_nothing(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [{"type": "execution_gone", "ts": T, "session_id": "s"}])
    before = log.read_bytes()
    ok = ["--expected-revision", "1", "--idempotency-key", "k", "--reason", "r"]
    assert run_cli("decide", str(log), "s", "--decision", "resume", *ok).returncode == 2
    assert run_cli("decide", str(log), "s", "--decision", "close", "--expected-revision", "x",
                   "--idempotency-key", "k", "--reason", "r").returncode == 2
    assert run_cli("decide", str(log), "nobody", "--decision", "close", *ok).returncode == 2
    assert run_cli("decide", str(log), "s", "--decision", "close", "--expected-revision", "1",
                   "--idempotency-key", "", "--reason", "r").returncode == 2
    missing = tmp_path / "missing.jsonl"
    assert run_cli("decide", str(missing), "s", "--decision", "close", *ok).returncode == 2
    assert not missing.exists()
    assert log.read_bytes() == before


def _race(log: str, sid: str, key: str, barrier: Any, out: Any) -> None:
    barrier.wait(timeout=20)
    args = ["decide", log, sid, "--decision", "close", "--expected-revision", "1", "--idempotency-key", key,
            "--reason", "race", "--json"]
    sys.stdout = open("/dev/null", "w")  # the child's own stdout, closed at exit
    out.put((key, main(args)))


def test_two_deciders_with_the_same_revision_only_one_wins(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    rounds = 50  # issue 8: at least 50 rounds
    write_log(log, [{"type": "execution_gone", "ts": T, "session_id": f"s{i}"} for i in range(rounds)])
    ctx = multiprocessing.get_context("fork")
    for i in range(rounds):
        barrier = ctx.Barrier(2)
        out = ctx.Queue()
        procs = [ctx.Process(target=_race, args=(str(log), f"s{i}", f"k{i}-{n}", barrier, out)) for n in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=60)
            assert p.exitcode == 0
        codes = sorted(out.get(timeout=5)[1] for _ in procs)
        assert codes == [0, 3], f"round {i}: {codes}"
    sessions = replay_log(str(log)).dump(str(log))["sessions"]
    for i in range(rounds):
        results = sorted(r["result"] for r in sessions["receipts"] if r["session_id"] == f"s{i}")
        assert results == ["REQUEST_STALE", "accepted"]
        assert sessions["items"][f"s{i}"]["revision"] == 2
        assert sessions["items"][f"s{i}"]["admission_state"] == "closed"


# --- eventlog sessions ----------------------------------------------------------------------


def prefix(tmp_path: Path, name: str, n: int) -> Path:
    objs, _ = fixture(name)
    return write_log(tmp_path / f"{name}.jsonl", objs[:n])


def test_sessions_json_says_what_would_be_accepted(tmp_path: Path) -> None:
    log = prefix(tmp_path, "restore_backoff", 11)  # stopped at the limit, RESTORE_FAILED, revision 10
    out = run_cli("sessions", str(log), "--json")
    assert out.returncode == 1, out.stderr  # waits for an operator's decision
    got = json.loads(out.stdout)["items"]["s-restore"]
    assert got["admission_state"] == "recovery_required" and got["revision"] == 10
    assert [(e["decision"], e["expected_revision"]) for e in got["would_accept"]] == [
        ("retry_restore", 10), ("start_fresh", 10), ("close", 10)]
    refused = {e["decision"]: e["result"] for e in got["would_refuse"]}
    assert refused == {"abandon": "REQUEST_STALE", "confirm_completed": "REQUEST_STALE"}


def test_sessions_unknown_turn_after_execution_gone(tmp_path: Path) -> None:
    log = prefix(tmp_path, "unknown_turn", 12)
    got = json.loads(run_cli("sessions", str(log), "s-unk", "--json").stdout)["items"]["s-unk"]
    assert got["unknown_turns"] == ["t2"]
    assert [(e["decision"], e.get("target_turn_id")) for e in got["would_accept"]] == [
        ("close", None), ("abandon", "t2")]
    assert {(e["decision"], e["result"]) for e in got["would_refuse"]} == {
        ("retry_restore", "REQUEST_STALE"), ("start_fresh", "REQUEST_STALE"),
        ("confirm_completed", "CHECKPOINT_UNAVAILABLE")}


def test_sessions_retry_due_as_of(tmp_path: Path) -> None:
    log = prefix(tmp_path, "restore_backoff", 4)  # backoff until 10:01:30+09:00
    early = json.loads(run_cli("sessions", str(log), "--json", "--at", "log").stdout)["items"]["s-restore"]
    assert early["retry_at"] == "2026-08-03T10:01:30+09:00" and early["retry_due"] is False
    # now (the default): judged at the wall clock
    started = datetime.now().astimezone()
    now = json.loads(run_cli("sessions", str(log), "--json").stdout)
    assert datetime.fromisoformat(now["as_of"]) >= started
    assert now["items"]["s-restore"]["retry_due"] is (started >= datetime.fromisoformat(early["retry_at"]))
    late = run_cli("sessions", str(log), "--json", "--at", "2026-08-03T01:01:30+00:00")
    assert late.returncode == 1  # backoff, its retry due and no worker ready since: status calls a person too
    assert json.loads(late.stdout)["items"]["s-restore"]["retry_due"] is True
    assert [n["reason_code"] for n in json.loads(late.stdout)["items"]["s-restore"]["needs"]] == ["retry_due"]


def test_sessions_text_and_errors(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "sessions_confirm_completed.jsonl", tmp_path / "c.jsonl")
    out = run_cli("sessions", str(tmp_path / "c.jsonl"))
    assert out.returncode == 1  # s-gap and s-nockpt: context gap
    assert "s-ckpt: stopped" in out.stdout and "s-gap: stopped (CONTEXT_GAP)" in out.stdout
    assert "--decision start_fresh --expected-revision 7" in out.stdout
    assert run_cli("sessions", str(tmp_path / "c.jsonl"), "nobody").returncode == 2
    assert run_cli("sessions", str(tmp_path / "absent.jsonl")).returncode == 2


# --- idempotency keys and who decided (spec section 6, issue 13 point 5) ----------------------


def _restore_stopped(tmp_path: Path) -> Path:
    return write_log(tmp_path / "log.jsonl", [
        {"type": "worker_claimed", "ts": T, "session_id": "s", "generation": 1, "worker": "w", "restore": True},
        {"type": "checkpoint_restore_failed", "ts": T, "session_id": "s", "generation": 1,
         "reason": "incompatible_checkpoint"},
    ])


def test_a_key_reused_for_another_decision_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    """Issue 13's reproduction: the same key with a different decision printed "accepted ... close"."""
    log = _restore_stopped(tmp_path)
    base = ["decide", str(log), "s", "--idempotency-key", "k1", "--reason", "r", "--expected-revision", "2"]
    first = run_cli(*base, "--decision", "retry_restore", "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["session"]["admission_state"] == "admitted"
    out = run_cli(*base, "--decision", "close")
    assert out.returncode == 3, out.stdout
    assert out.stdout.startswith("refused: IDEMPOTENCY_KEY_REUSED: close of s by ")
    assert "key: idempotency key 'k1' was used at line 3 for another request (retry_restore, expected revision 2)" \
        in out.stdout
    assert "now: admitted, revision 3" in out.stdout  # not closed
    out = run_cli(*base, "--decision", "close", "--json")
    assert out.returncode == 3
    printed = json.loads(out.stdout)
    assert (printed["result"], printed["replayed"], printed["first_line"], printed["line"]) == (
        "IDEMPOTENCY_KEY_REUSED", False, 3, 5)
    assert printed["session"]["admission_state"] == "admitted" and printed["session"]["revision"] == 3
    # the same request again: the first receipt, exit 0, naming line 3
    again = run_cli(*base, "--decision", "retry_restore")
    assert again.returncode == 0
    assert again.stdout.startswith("accepted (repeated idempotency key: the first receipt): retry_restore of s")
    assert "first used at line 3" in again.stdout
    # every attempt is in the audit trail; the replay says the same
    dump = replay_log(str(log)).dump(str(log))
    assert [(r["line"], r["result"], r["replayed"], r["first_line"]) for r in dump["sessions"]["receipts"]] == [
        (3, "accepted", False, 3), (4, "IDEMPOTENCY_KEY_REUSED", False, 3), (5, "IDEMPOTENCY_KEY_REUSED", False, 3),
        (6, "accepted", True, 3)]
    assert dump["sessions"]["items"]["s"]["admission_state"] == "admitted"
    assert dump["sessions"]["items"]["s"]["revision"] == 3


def test_a_key_reused_with_other_evidence_or_turn_is_another_request(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [
        {"type": "turn_started", "ts": T, "session_id": "s", "turn_id": "t1"},
        {"type": "checkpoint_committed", "ts": T, "session_id": "s", "covers_turn": "t1"},
        {"type": "turn_finished", "ts": T, "session_id": "s", "turn_id": "t1", "outcome": "outcome_unknown"},
        {"type": "execution_gone", "ts": T, "session_id": "s"},
    ])
    base = ["decide", str(log), "s", "--idempotency-key", "k", "--reason", "r", "--expected-revision", "4",
            "--decision", "confirm_completed", "--target-turn", "t1", "--json"]
    assert run_cli(*base, "--evidence-ref", "pr/1").returncode == 0
    other = run_cli(*base, "--evidence-ref", "pr/2")
    assert other.returncode == 3 and json.loads(other.stdout)["result"] == "IDEMPOTENCY_KEY_REUSED"
    # the reason is not part of the request: the same request with another reason is a repeat
    same = run_cli(*[x if x != "r" else "another reason" for x in base], "--evidence-ref", "pr/1")
    assert same.returncode == 0 and json.loads(same.stdout)["replayed"] is True


def test_the_line_names_who_decided(tmp_path: Path) -> None:
    log = _restore_stopped(tmp_path)
    base = ["decide", str(log), "s", "--reason", "r", "--expected-revision", "2", "--decision", "retry_restore"]
    out = run_cli(*base, "--idempotency-key", "a", "--json")
    assert json.loads(out.stdout)["actor"] == getpass.getuser()
    out = run_cli(*base, "--idempotency-key", "b", "--actor", "ops-aiko", "--json")
    assert json.loads(out.stdout)["actor"] == "ops-aiko"
    assert run_cli(*base, "--idempotency-key", "c", "--actor", " ").returncode == 2
    written = [json.loads(x) for x in log.read_text().splitlines()]
    assert [w.get("actor") for w in written] == [None, None, getpass.getuser(), "ops-aiko"]
    shown = json.loads(run_cli("sessions", str(log), "s", "--json", "--at", "log").stdout)["items"]["s"]
    assert [(d["line"], d["actor"], d["result"]) for d in shown["decisions"]] == [
        (3, getpass.getuser(), "accepted"), (4, "ops-aiko", "REQUEST_STALE")]
    text = run_cli("sessions", str(log), "s", "--at", "log").stdout
    assert "decided at line 4: retry_restore by ops-aiko: REQUEST_STALE" in text
