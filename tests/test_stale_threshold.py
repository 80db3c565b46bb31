"""The screen and the watcher agree on when a claim is stale (run as a user runs them: the CLI in a subprocess).

The README runs the failback watcher with ``--stale-after 2h`` for cloud sessions that report late. Its pass
hands a silent ``resume_requested`` to a person only after two hours, and exits 0 before that (nothing new
needs a person). ``status``, ``explain``, ``follow`` and the dump must say the same thing, not judge the
same log with the spec's default 30 minutes and call a person (and fire an alert) an hour and a half early.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli, write_log

T0 = "2026-08-03T09:00:00+09:00"
PASS = "2026-08-03T09:50:00+09:00"        # 45 min after the request: stale at 30 min, not at 2 h
AFTER = "2026-08-03T11:06:00+09:00"       # 2 h 1 min after the request: stale either way


def silent_request(tmp_path: Path) -> Path:
    return write_log(tmp_path / "work.jsonl", [
        {"type": "handoff_created", "ts": T0, "handoff_id": "h1", "account": "cloud-account-a"},
        {"type": "claimed", "ts": "2026-08-03T09:04:00+09:00", "handoff_id": "h1", "watcher": "w1", "attempt": 1},
        {"type": "resume_requested", "ts": "2026-08-03T09:05:00+09:00", "handoff_id": "h1", "attempt": 1},
    ])


def failback(log: Path, at: str) -> object:
    return run_cli("failback", str(log), "--probe-cmd", "echo PING_OK", "--resume-cmd", "true",
                   "--watcher", "w1", "--stale-after", "2h", "--at", at)


def test_status_explain_and_the_dump_judge_stale_as_the_watcher_does(tmp_path: Path) -> None:
    log = silent_request(tmp_path)
    quiet = failback(log, PASS)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr  # the watcher: nothing new needs a person
    beat = json.loads(log.read_text().splitlines()[-1])
    assert beat["type"] == "watcher_run" and beat["stale_after_s"] == 7200

    status = run_cli("status", str(log), "--at", PASS)
    assert status.returncode == 0, status.stdout
    assert "Nothing needs a person." in status.stdout and "silence" not in status.stdout
    dump = json.loads(run_cli("replay", str(log), "--at", PASS).stdout)
    assert dump["handoffs"]["items"]["h1"]["stale"] is None
    assert dump["handoffs"]["stale_claims"] == {"retryable": [], "unknown_effect": []}
    explained = json.loads(run_cli("explain", str(log), "h1", "--at", PASS, "--json").stdout)
    [verdict] = explained["verdicts"]
    assert verdict["needs_person"] == []

    # an explicit --stale-after still wins over the heartbeat's
    strict = json.loads(run_cli("replay", str(log), "--at", PASS, "--stale-after", "30m").stdout)
    assert strict["handoffs"]["stale_claims"]["unknown_effect"] == ["h1"]

    # past the watcher's two hours: the screen names it, and the watcher's next pass hands it over
    late = run_cli("status", str(log), "--at", AFTER, "--json")
    assert late.returncode == 1
    items = [(i["id"], i["reason_code"]) for g in json.loads(late.stdout)["groups"] for i in g["items"]]
    assert ("h1", "stale_unknown_effect") in items
    handed = failback(log, AFTER)
    assert handed.returncode == 1 and "h1" in handed.stderr


def test_without_a_heartbeat_that_says_otherwise_stale_is_the_spec_s_30_minutes(tmp_path: Path) -> None:
    log = silent_request(tmp_path)
    status = run_cli("status", str(log), "--at", "2026-08-03T09:35:01+09:00", "--json")
    assert status.returncode == 1
    items = [(i["id"], i["reason_code"]) for g in json.loads(status.stdout)["groups"] for i in g["items"]]
    assert ("h1", "stale_unknown_effect") in items
    assert run_cli("status", str(log), "--at", "2026-08-03T09:35:00+09:00", "--domain", "handoffs").returncode == 0
