"""A turn of unknown outcome left while the session moved on is never silent (spec section 6, seed 004).

Two turns end ``outcome_unknown``; a decision on one (``abandon``) stops the session with a context gap, and
``start_fresh`` (accepted there, spec section 6) admits it again: the other turn is still in ``unknown_turns``,
never re-run on its own, and only ``abandon``, ``confirm_completed`` or ``close`` settle it. Every view must name
it with a command that works pasted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import run_cli, write_log
from tests.test_next_runs import typed

SID = "s-j"


def story() -> list[dict[str, Any]]:
    def ev(kind: str, second: int, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "ts": f"2026-12-02T02:00:{second:02d}+09:00", "session_id": SID, **fields}
    return [
        ev("worker_claimed", 0, generation=1, worker="w", restore=False),
        ev("worker_ready", 1, generation=1),
        ev("turn_started", 2, turn_id="t1"),
        ev("turn_started", 3, turn_id="t2"),
        ev("turn_finished", 4, turn_id="t1", outcome="outcome_unknown"),
        ev("turn_finished", 5, turn_id="t2", outcome="outcome_unknown"),
        ev("execution_gone", 6),
    ]


def decide(log: Path, decision: str, revision: int, *extra: str) -> None:
    out = run_cli("decide", str(log), SID, "--decision", decision, "--expected-revision", str(revision),
                  "--idempotency-key", f"{decision}-{revision}", "--reason", "test", *extra)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_turn_left_unknown_after_start_fresh_is_named_with_a_command_that_settles_it(tmp_path: Path) -> None:
    log = write_log(tmp_path / "s.jsonl", story())
    decide(log, "abandon", 7, "--target-turn", "t1")
    decide(log, "start_fresh", 8)
    out = run_cli("sessions", str(log), "--json")
    item = json.loads(out.stdout)["items"][SID]
    assert item["admission_state"] == "admitted" and item["unknown_turns"] == ["t2"]
    assert out.returncode == 1  # a session waits for a decision
    status = run_cli("status", str(log), "--json", "--at", "log")
    assert status.returncode == 1, status.stdout
    view = json.loads(status.stdout)
    [found] = [it for g in view["groups"] for it in g["items"] if it["domain"] == "sessions"]
    assert found["id"] == SID and found["reason_code"] == "outcome_unknown" and "t2" in found["reason"]
    # the command works pasted, and settles the turn (spec section 6: abandon -> stopped, a context gap left)
    pasted = typed(found["next"].replace("'<why>'", "'checked: no effect'"), tmp_path)
    assert pasted.returncode == 0, pasted.stdout + pasted.stderr
    settled = json.loads(run_cli("sessions", str(log), "--json").stdout)["items"][SID]
    assert settled["unknown_turns"] == [] and settled["admission_state"] == "stopped"
    after = json.loads(run_cli("status", str(log), "--json", "--at", "log").stdout)
    assert [it["reason_code"] for g in after["groups"] for it in g["items"]] == ["context_gap"]


def test_explain_lists_the_final_close_last(tmp_path: Path) -> None:
    """Seed 004: close cannot be undone; the turn's own decisions come first."""
    log = write_log(tmp_path / "s.jsonl", story())
    out = run_cli("explain", str(log), SID, "--at", "log", "--json")
    [verdict] = json.loads(out.stdout)["verdicts"]
    nexts = verdict["next"]
    decisions = [cmd.split("--decision ")[1].split()[0] for cmd in nexts]
    assert decisions[-1] == "close" and decisions[:2] == ["abandon", "abandon"], decisions


def test_a_pasted_placeholder_reason_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    """The copied command's ``--reason '<why>'`` would be kept in the log for the audit: it must be filled in."""
    log = write_log(tmp_path / "s.jsonl", story())
    before = log.read_bytes()
    for extra in (["--reason", "<why>"], ["--reason", "ok", "--decision", "confirm_completed", "--evidence-ref",
                                             "<evidence>"]):
        out = run_cli("decide", str(log), SID, "--decision", "abandon", "--expected-revision", "7",
                      "--target-turn", "t1", "--idempotency-key", "k", *extra)
        assert out.returncode == 2 and "placeholder" in out.stderr, out.stderr
    assert log.read_bytes() == before
