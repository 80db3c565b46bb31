"""A runner pass exits 1 for the log's bad lines only when they are new since its own previous pass.

OUTPUTS.md "Judging now": a runner exits 1 when its pass could not do its own
work or sent new work to a person (0: nothing new needs a person). A bad line
stays in an append-only log for ever: the pass that first reads it exits 1 (and
failback's heartbeat says ``exit: error``); later passes still name it on
stderr and exit 0. ``catchup`` writes no line on every pass, so it cannot tell
and every bad line counts (exit 1, as issue 17 asked). Real processes throughout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from conftest import ROOT, run_cli, write_log

AT = "2026-12-01T10:00:00+00:00"
CREATED = {"type": "handoff_created", "ts": "2026-12-01T09:00:00+00:00", "handoff_id": "h1", "account": "a"}
SKIP = {"type": "skip", "ts": "2026-12-01T09:01:00+00:00", "handoff_id": "h1", "reason": "done by hand"}
BOGUS = '{"type":"bogus","ts":"2026-12-01T09:00:30+00:00"}'
LANE = {"type": "status_updated", "ts": "2026-12-01T09:00:00+00:00", "product": "p", "state": "running"}
JOB = {"type": "job_registered", "ts": "2026-12-01T09:02:00+00:00", "label": "j", "guarded": True,
       "calendar": [{"Hour": 9}], "interval_s": None}
TRUE = f"{sys.executable} -c pass"


def log_with_bad_line(tmp_path: Path) -> Path:
    """A log whose line 2 is bad (an unknown type), between two good lines."""
    log = write_log(tmp_path / "log.jsonl", [CREATED])
    add_line(log, BOGUS)
    with log.open("a", encoding="utf-8") as f:
        f.write(json.dumps({**SKIP, "seq": 2}) + "\n")
    return log


def add_line(log: Path, raw: str) -> None:
    with log.open("a", encoding="utf-8") as f:
        f.write(raw + "\n")


def events(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def failback(log: Path) -> Any:
    return run_cli("failback", str(log), "--probe-cmd", TRUE, "--resume-cmd", TRUE, "--watcher", "w1",
                   "--at", AT, "--json")


def lanes(log: Path) -> Any:
    return run_cli("lanes", str(log), "--enqueue-cmd", TRUE, "--at", AT, "--json")


def test_failback_exits_1_once_per_new_bad_line(tmp_path: Path) -> None:
    log = log_with_bad_line(tmp_path)
    first = failback(log)
    assert first.returncode == 1
    assert first.stderr == (f"eventlog: {log}: 1 bad line(s) skipped, 1 new (no earlier pass of this runner in the "
                            "log); new: line 2: unknown_type: 'bogus'\n")
    assert events(log)[-1]["exit"] == "error"
    # the next pass read it before: named on stderr, exit 0, heartbeat ok
    second = failback(log)
    assert second.returncode == 0, second.stderr
    assert second.stderr == (f"eventlog: {log}: 1 bad line(s) skipped, 0 new since the last pass at line 4: "
                             "line 2: unknown_type: 'bogus'\n")
    heartbeat = events(log)[-1]
    assert heartbeat["exit"] == "ok" and "detail" not in heartbeat
    report = json.loads(second.stdout)
    assert report["bad_lines"]["count"] == 1 and report["bad_lines"]["new"] == 0
    assert report["bad_lines"]["since"] == 4
    # a new one after that pass: exit 1 again, naming the new one
    add_line(log, BOGUS.replace("bogus", "bogus2"))
    third = failback(log)
    assert third.returncode == 1
    assert third.stderr == (f"eventlog: {log}: 2 bad line(s) skipped, 1 new since the last pass at line 5; "
                            "new: line 6: unknown_type: 'bogus2'\n")
    assert events(log)[-1]["exit"] == "error" and "bogus2" in events(log)[-1]["detail"]
    assert failback(log).returncode == 0


def test_failback_counts_from_its_own_heartbeat_not_another_watchers(tmp_path: Path) -> None:
    log = log_with_bad_line(tmp_path)
    other = run_cli("failback", str(log), "--probe-cmd", TRUE, "--resume-cmd", TRUE, "--watcher", "w2", "--at", AT)
    assert other.returncode == 1
    # w1 never ran: the bad line is new to it, though w2 read it
    assert failback(log).returncode == 1
    assert failback(log).returncode == 0


def test_lanes_exits_1_once_per_new_bad_line(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [LANE])  # a lane: a check of a log with none is an error of its own
    add_line(log, BOGUS)
    add_line(log, json.dumps({**LANE, "seq": 2}))
    first = lanes(log)
    assert first.returncode == 1
    assert "1 bad line(s) skipped, 1 new (no earlier pass of this runner in the log)" in first.stderr
    second = lanes(log)
    assert second.returncode == 0, second.stderr
    assert second.stderr == (f"eventlog: {log}: 1 bad line(s) skipped, 0 new since the last pass at line 4: "
                             "line 2: unknown_type: 'bogus'\n")
    add_line(log, BOGUS)
    third = lanes(log)
    assert third.returncode == 1
    assert "2 bad line(s) skipped, 1 new since the last pass at line 5; new: line 6: " in third.stderr


def test_catchup_counts_every_bad_line_on_every_pass(tmp_path: Path) -> None:
    log = log_with_bad_line(tmp_path)
    add_line(log, json.dumps({**JOB, "seq": 3}))  # a guarded job: a pass over a log with none is an error of its own
    said = (f"eventlog: {log}: 1 bad line(s) skipped (this runner writes no line on every pass, so it cannot "
            "tell new from old: each counts): line 2: unknown_type: 'bogus'\n")
    for extra in (["--dry-run"], ["--probe-cmd", TRUE, "--kick-cmd", TRUE], ["--dry-run"]):
        out = run_cli("catchup", str(log), *extra, "--at", AT, "--json")
        assert out.returncode == 1, out.stderr
        assert out.stderr == said
        assert json.loads(out.stdout)["bad_lines"]["count"] == 1
    # status keeps an old bad line in view
    assert run_cli("status", str(log), "--at", AT).returncode == 1


def test_catchup_on_a_file_that_is_no_event_log_names_it_and_exits_1(tmp_path: Path) -> None:
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes((ROOT / "tests" / "conftest.py").read_bytes().replace(b"\n", b"\0")[:2000])
    text = tmp_path / "text.jsonl"
    text.write_text("hello\nworld\n", encoding="utf-8")
    for log in (binary, text):
        for extra in (["--dry-run"], ["--probe-cmd", TRUE, "--kick-cmd", TRUE]):
            out = run_cli("catchup", str(log), *extra, "--at", AT)
            assert out.returncode == 1, (log, extra)
            refused = [line for line in out.stderr.splitlines() if "every append is refused" in line]
            assert refused and refused[0].startswith(f"eventlog: {log} "), out.stderr
            assert out.stdout == "the log takes no append: nothing kicked\n"
