"""Issue 13's three reproductions, run as a user runs them (the CLI in a subprocess).

``dead.jsonl``: one pending handoff, the last ``watcher_run`` (period 900 s) two hours ago. Silence
wrote no line, so it used to read as all-clear: ``status`` said "Nothing needs a person" and exit 0,
and ``follow`` wrote ``recovery_watcher_late 0`` and a pending age of 60 s, forever.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from tests.conftest import ROOT, run_cli
from tests.test_follow import _wait_for
from tests.test_follow_tick import dead_log, metric, read, run_follow, stop_follow

FIX = ROOT / "fixtures"


def test_1_status_of_dead_log_judges_now_and_names_the_late_watcher(tmp_path: Path) -> None:
    log = dead_log(tmp_path / "dead.jsonl", datetime.now().astimezone(), 2 * 3600)
    out = run_cli("status", str(log))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Needs a person: 1 (1 reason)." in out.stdout
    assert "Watchers that stopped reporting: 1" in out.stdout and "  watcher-a (for 2 h" in out.stdout
    assert "Nothing needs a person" not in out.stdout


def test_2_status_at_a_time_two_hours_on_names_the_late_watcher_and_at_log_does_not() -> None:
    # the fixture's last line (the watcher_run) is at 08:00:01; two hours on, it is late
    log = str(FIX / "handoffs_watcher_dead.jsonl")
    later = run_cli("status", log, "--at", "2026-08-03T10:00:01+09:00")
    assert later.returncode == 1
    assert later.stdout.splitlines()[:6] == [
        f"{log} as of 2026-08-03T10:00:01+09:00",
        "Needs a person: 1 (1 reason).",
        "",
        "Watchers that stopped reporting: 1",
        "  watcher-a (for 2 h): no run since 2026-08-03T08:00:01+09:00; it runs every 15 min and is late after 30 min",
        f"      eventlog explain {log} watcher-a",
    ]
    # not late as of the log's last line: what the replay (and its .expected.json) says
    at_log = run_cli("status", log, "--at", "log")
    assert at_log.returncode == 0 and "Nothing needs a person." in at_log.stdout
    # the boundary: late only when strictly more than 2 x 900 s old
    assert run_cli("status", log, "--at", "2026-08-03T08:30:01+09:00").returncode == 0
    assert run_cli("status", log, "--at", "2026-08-03T08:30:02+09:00").returncode == 1


def test_3_follow_of_dead_log_says_late_in_the_dump_and_the_metrics(tmp_path: Path) -> None:
    """The third reproduction: the last watcher_run two hours ago -> late now, in the dump and in recovery_*."""
    log = dead_log(tmp_path / "dead.jsonl", datetime.now().astimezone(), 2 * 3600)
    size = log.stat().st_size
    dump, prom = tmp_path / "d.json", tmp_path / "p.prom"
    proc = run_follow(str(log), dump, prom, "--tick", "0.2s")
    try:
        assert _wait_for(lambda: (read(dump) or {}).get("handoffs", {}).get("watcher", {}).get("late") is True)
        assert _wait_for(lambda: metric(prom, "recovery_watcher_late") == 1)
        d = read(dump)
        assert d is not None and d["handoffs"]["pending"]["oldest_age_s"] >= 2 * 3600 + 60  # really 2 h, not 60 s
        assert metric(prom, "recovery_watcher_heartbeat_late", watcher="watcher-a") == 1
        assert metric(prom, "recovery_follow_tick_seconds") == 0.2
    finally:
        stop_follow(proc)
    assert log.stat().st_size == size


