"""The runners as library code: what a second front end (the HTTP server) calls, with no CLI in between."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from eventlog.clock import LAST_LINE, At
from eventlog.logs import open_log
from eventlog.runners import catchup, imports, lanes, sessions
from eventlog.runners.common import RunnerError
from tests.conftest import ROOT, write_log

FIX = ROOT / "fixtures"


def test_runners_import_no_argparse_and_print_nothing(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "import eventlog.runners.failback, eventlog.runners.lanes, eventlog.runners.catchup\n"
        "import eventlog.runners.sessions, eventlog.runners.imports, eventlog.runners.process\n"
        "assert 'argparse' not in sys.modules, 'a runner imports argparse'\n"
        "assert not any(m.startswith('eventlog.cli') for m in sys.modules), 'a runner imports the CLI'\n"
        "from eventlog.clock import At\n"
        "from datetime import datetime\n"
        "from eventlog.runners import lanes\n"
        f"r = lanes.judge_stalls(lanes.StallOptions(log={str(FIX / 'lanes_seed_sample.jsonl')!r}, "
        "at=At(datetime.fromisoformat('2026-08-08T10:40:01+09:00'))))\n"
        "assert r.status == 1\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and out.stderr == ""


def test_judge_stalls_as_of_the_last_line() -> None:
    report = lanes.judge_stalls(lanes.StallOptions(log=str(FIX / "lanes_seed_sample.jsonl"), at=LAST_LINE))
    assert report.stalled and report.status == 1 and report.problems == []
    assert report.record["results"][0]["kind"] == "status-quiet"


def test_catchup_dry_run_report(tmp_path: Path) -> None:
    opts = catchup.Options(log=str(FIX / "catchup_today_skip.jsonl"), dry_run=True, at=LAST_LINE)
    opts.check()
    report = catchup.run_catchup(opts)
    expected = json.loads((FIX / "catchup_today_skip.expected.json").read_text())["catchup"]
    assert report.candidates == expected["candidates"] and report.circuit == expected["circuit"]
    assert report.status == 0 and report.probe is None
    with pytest.raises(RunnerError, match="--probe-cmd and --kick-cmd are needed"):
        catchup.Options(log=str(FIX / "catchup_today_skip.jsonl")).check()


def test_decide_and_unknown_session(tmp_path: Path) -> None:
    log_path = tmp_path / "s.jsonl"
    log_path.write_bytes((FIX / "sessions_restore_backoff.jsonl").read_bytes())
    request = sessions.Decision(session_id="s-restore", decision="close", expected_revision=13,
                                idempotency_key="api-1", reason="retired")
    with open_log(log_path) as log:
        done = sessions.decide(log, request)
        assert done.accepted and done.status == 0 and done.session["admission_state"] == "closed"
        again = sessions.decide(log, request)
        assert (again.receipt["result"], again.receipt["replayed"], again.status) == ("accepted", True, 0)
        with pytest.raises(sessions.UnknownId):
            sessions.decide(log, sessions.Decision(session_id="nobody", decision="close", expected_revision=0,
                                                   idempotency_key="k", reason="r"))
        with pytest.raises(RunnerError):
            sessions.decide(log, sessions.Decision(session_id="s-restore", decision="resume", expected_revision=0,
                                                   idempotency_key="k", reason="r"))


def test_import_reports(tmp_path: Path) -> None:
    markers = tmp_path / "guard.err"
    markers.write_text("CLAUDE_QUOTA_JOB_SKIPPED job=a reason=quota remaining=5s ts=1787270405\n")
    log = str(tmp_path / "jobs.jsonl")
    first = imports.import_quota_log(imports.QuotaLogImport(log=log, files=[str(markers), str(tmp_path / "no")]))
    assert (first.imported, first.status) == (1, 1) and "cannot read" in first.problems[0]
    again = imports.import_quota_log(imports.QuotaLogImport(log=log, files=[str(markers)]))
    assert (again.imported, again.already, again.status) == (0, 1, 0)
    with pytest.raises(RunnerError, match="is not a directory"):
        imports.import_launchd(imports.LaunchdImport(log=log, directory=str(tmp_path / "none")))


def test_failback_log_that_cannot_be_written_exits_1(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [
        {"type": "handoff_created", "ts": "2026-08-03T09:00:00+09:00", "handoff_id": "h1", "account": "a"},
    ])
    size = log.stat().st_size

    def no_growth() -> None:  # every write past the file's size fails (EFBIG), even for root
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    out = subprocess.run(
        [sys.executable, "-m", "eventlog", "failback", str(log), "--probe-cmd", "echo PING_OK", "--resume-cmd", "true",
         "--at", "2026-08-03T10:00:00+09:00"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, preexec_fn=no_growth, check=False)
    assert out.returncode == 1
    assert f"eventlog: cannot append probe_result of a to the log: could not write {log}: File too large" in out.stderr
    assert f"eventlog: cannot append the heartbeat: could not write {log}: File too large" in out.stderr
    assert "heartbeat: NOT written" in out.stdout
    assert log.stat().st_size == size


def test_at_pins_a_runner_clock() -> None:
    from datetime import datetime

    when = datetime.fromisoformat("2026-08-03T10:00:00+09:00")
    assert At(when).clock(None)() == when
    assert LAST_LINE.clock(when)() == when
