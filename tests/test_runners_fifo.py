"""A source that is a FIFO (or a device) is named and not read: it never hangs a runner.

Review R9: a FIFO matched by catch-up's ``--import-quota-log`` glob (or given as its circuit file, a plist of its
jobs directory, a lane's progress file or worker log, a lane's env file) made the runner wait for ever in ``open``,
SIGTERM included, holding its lock: the catch-up unit (``TimeoutStartSec=infinity``) never ended and no later one
started, with nothing said anywhere; the lanes pass judged no lane. Each such source is now a problem of the pass
("is a FIFO, not a regular file"), exit 1, and the others are read as before. Real processes throughout; the
subprocess timeout only keeps a hang from hanging the suite.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.conftest import run_cli, write_log

AT = "2026-08-21T11:30:00+09:00"  # the 9:00 slot passed
TOKYO = {"TZ": "Asia/Tokyo"}
RUN = ("--kick-cmd", "/bin/true", "--probe-cmd", "echo PING_OK")
SAID = "is a FIFO, not a regular file"


def events(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def registered(label: str) -> dict[str, Any]:
    return {"type": "job_registered", "ts": "2026-08-21T07:00:00+09:00", "label": label, "guarded": True,
            "calendar": [{"Hour": 9, "Minute": 0}], "interval_s": None}


def skipped_marker(label: str) -> str:
    ts = int(datetime.fromisoformat("2026-08-21T10:00:00+09:00").timestamp())
    return f"CLAUDE_QUOTA_JOB_SKIPPED job={label} reason=quota remaining=60s ts={ts}\n"


def catchup(log: Path, *extra: str) -> Any:
    return run_cli("catchup", str(log), *extra, *RUN, "--at", AT, env=TOKYO, timeout=30)


def kicked(log: Path) -> list[str]:
    return [e["label"] for e in events(log) if e["type"] == "catchup_kicked"]


def test_a_fifo_among_the_markers_is_named_and_the_other_files_still_feed_the_catchup(tmp_path: Path) -> None:
    log = write_log(tmp_path / "e.jsonl", [registered("com.lily.brief")])
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "brief.err").write_text(skipped_marker("com.lily.brief"))
    os.mkfifo(tmp_path / "jobs" / "pipe.err")
    out = catchup(log, f"--import-quota-log={tmp_path / 'jobs'}/*.err")
    assert out.returncode == 1
    assert f"{tmp_path / 'jobs' / 'pipe.err'}: {SAID}" in out.stderr
    assert kicked(log) == ["com.lily.brief"]  # the marker of the other file was imported, and the job re-run


def test_a_fifo_as_the_circuit_file_or_a_plist_is_named_and_not_read(tmp_path: Path) -> None:
    log = write_log(tmp_path / "e.jsonl", [registered("com.lily.brief")])
    (tmp_path / "markers.err").write_text(skipped_marker("com.lily.brief"))
    os.mkfifo(tmp_path / "state.json")
    (tmp_path / "agents").mkdir()
    os.mkfifo(tmp_path / "agents" / "com.lily.pipe.plist")
    out = catchup(log, f"--import-circuit={tmp_path / 'state.json'}", f"--import-launchd={tmp_path / 'agents'}",
                  f"--import-quota-log={tmp_path / 'markers.err'}")
    assert out.returncode == 1
    assert f"{tmp_path / 'state.json'}: {SAID}" in out.stderr
    assert f"{tmp_path / 'agents' / 'com.lily.pipe.plist'}: cannot read the plist: {SAID}" in out.stderr
    assert kicked(log) == ["com.lily.brief"]


def test_observe_lane_names_a_fifo_progress_file_or_worker_log_and_observes_the_rest(tmp_path: Path) -> None:
    log = tmp_path / "lanes.jsonl"
    os.mkfifo(tmp_path / "progress.json")
    worker = tmp_path / "worker.log"
    worker.write_text("JOB_FINISHED job=j1 ts=2026-08-21T09:00:00+09:00\n")
    out = run_cli("observe", "lane", str(log), "sashiko", f"--progress={tmp_path / 'progress.json'}",
                  f"--worker-log={worker}", env=TOKYO, timeout=30)
    assert out.returncode == 1
    assert f"{tmp_path / 'progress.json'}: {SAID}" in out.stderr
    assert [e["type"] for e in events(log)] == ["job_finished"]

    os.mkfifo(tmp_path / "worker.fifo")
    out = run_cli("observe", "lane", str(log), "sashiko", f"--worker-log={tmp_path / 'worker.fifo'}", env=TOKYO,
                  timeout=30)
    assert out.returncode == 1 and f"{tmp_path / 'worker.fifo'}: {SAID}" in out.stderr


def test_a_lanes_pass_names_a_fifo_lane_file_and_still_checks(tmp_path: Path) -> None:
    log = tmp_path / "lanes.jsonl"
    lanes = tmp_path / "lanes"
    lanes.mkdir()
    progress = tmp_path / "progress.json"
    progress.write_text('{"state": "running"}')
    (lanes / "good.env").write_text(f"LANE_PRODUCT=good\nLANE_PROGRESS={progress}\n")
    os.mkfifo(lanes / "pipe.env")
    out = run_cli("lanes", str(log), "--enqueue-cmd", "/bin/true", f"--observe={lanes}", timeout=30)
    assert out.returncode == 1
    assert f"{lanes / 'pipe.env'}: cannot read it: {SAID}" in out.stderr
    types = [e["type"] for e in events(log)]
    assert types == ["status_updated", "lane_check"]  # the other lane observed, and the lanes checked
