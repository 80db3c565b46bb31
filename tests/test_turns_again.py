"""A turn the operator abandoned and that is started again is shown by its route and explained; ``explain`` finds
every id a line names: a turn, an interrupt (a user review, seed 004).

``append`` and ``explain`` in a subprocess, and a real ``eventlog serve`` with a real HTTP client.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import ROOT, run_cli
from tests.serving import start_server

UNKNOWN_TURN = ROOT / "fixtures" / "sessions_unknown_turn.jsonl"


def test_a_turn_started_again_is_shown_by_its_route_and_explained(tmp_path: Path) -> None:
    """The fixture: t2 ends outcome_unknown (line 7), abandon t2 is accepted (line 14), start_fresh (line 17) and a
    ready worker (19). A new ``turn_started t2`` applies (exit 0); the route and explain show it."""
    log = tmp_path / "unk.jsonl"
    shutil.copy(UNKNOWN_TURN, log)
    n = len(log.read_text(encoding="utf-8").splitlines())
    appended = run_cli("append", str(log), stdin='{"type":"turn_started","session_id":"s-unk","turn_id":"t2"}\n')
    assert appended.returncode == 0, appended.stderr
    again = n + 1

    server = start_server(log, tmp_path)
    try:
        t2 = server.client("viewer").get("/v1/sessions/s-unk/turns/t2").json()
    finally:
        server.stop()
    assert (t2["started_line"], t2["resolution"], t2["resolved_line"]) == (6, "cancelled", 14)  # the earlier story
    assert (t2["last_started_line"], t2["starts"], t2["unknown"]) == (again, 2, False)  # and the latest start
    assert f"cancelled by an accepted abandon at line 14; started again at line {again}" in t2["says"]
    assert t2["says"].endswith("after its resolution; no end recorded since")

    explained = run_cli("explain", str(log), "t2", "--at", "log")
    assert explained.returncode == 0, explained.stderr
    named = [int(line.split(":")[1]) for line in explained.stdout.splitlines() if line.startswith(f"{log}:")]
    wanted = [i for i, text in enumerate(log.read_text(encoding="utf-8").splitlines(), 1) if '"t2"' in text]
    assert named == wanted and len(named) > 4  # every line that names t2 (as turn_id or target_turn_id)
    assert "  turn t2: in session s-unk: started at line 6 " in explained.stdout
    assert f"started again at line {again}" in explained.stdout
    assert f"    next: eventlog sessions {log} s-unk" in explained.stdout
    [verdict] = json.loads(run_cli("explain", str(log), "t2", "--at", "log", "--json").stdout)["verdicts"]
    assert (verdict["kind"], verdict["code"], verdict["facts"]["session_id"]) == ("turn", "started_again", "s-unk")
    assert verdict["facts"]["last_started_line"] == t2["last_started_line"]


def test_explain_finds_an_unknown_turn_and_an_interrupt(tmp_path: Path) -> None:
    log = ROOT / "fixtures" / "sessions_interrupt_capture_timeout.jsonl"
    turn = json.loads(run_cli("explain", str(log), "t1", "--at", "log", "--json").stdout)
    [v] = turn["verdicts"]
    assert (v["kind"], v["code"], v["facts"]["unknown"]) == ("turn", "outcome_unknown", True)
    assert "never re-run on its own" in v["says"]
    control = run_cli("explain", str(log), "c-cap", "--at", "log")
    assert control.returncode == 0, control.stderr
    assert "  interrupt c-cap: in session s-capture, turn t1: capture_timeout" in control.stdout
    assert "capture_finished" in control.stdout  # its timeline
