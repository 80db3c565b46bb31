"""SIGTERM and SIGINT end every runner that runs commands the same way (eventlog.runners.process.stop_on_signals).

Real runners in a subprocess, a command that hangs (its own child too, in its process group): the signal
stops the command's whole group, no other command starts, the runner records what it must, says what was
cut short on stderr, and exits 1 (docs/DECISIONS.md "Stop signals").
"""

from __future__ import annotations

import fcntl
import json
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, write_log

#: A command that hangs: it writes its pid and its child's (both in its process group), then waits.
HANG = """#!/bin/sh
sleep 60 &
echo "$$ $!" >> "{pids}"
wait
"""


def hanging(tmp_path: Path) -> tuple[Path, Path]:
    """The hanging command, and the file each of its runs writes ``PID CHILD_PID`` to."""
    pids = tmp_path / "pids"
    script = tmp_path / "hang.sh"
    script.write_text(HANG.format(pids=pids))
    script.chmod(0o755)
    return script, pids


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie nobody reaped yet does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_for(check: Callable[[], bool], timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


def signalled(argv: list[str], started: Callable[[], bool], sig: int = signal.SIGTERM) -> tuple[int, str, str]:
    """Run ``eventlog ARGV``, send ``sig`` once ``started()``; its exit status, stdout and stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "eventlog", *argv], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(started), "the command never started"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def runs(pids: Path) -> list[list[int]]:
    """Each run of the hanging command: its pid and its child's."""
    if not pids.exists():
        return []
    return [[int(p) for p in line.split()] for line in pids.read_text().splitlines()]


def events(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def ago(minutes: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() - minutes * 60))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_failback_stopped_while_resuming_records_it_and_writes_its_heartbeat(tmp_path: Path, sig: int) -> None:
    log = write_log(tmp_path / "f.jsonl", [
        {"type": "handoff_created", "ts": ago(60), "handoff_id": h, "account": "acct"} for h in ("h1", "h2")
    ])
    script, pids = hanging(tmp_path)
    status, out, err = signalled(["failback", str(log), "--probe-cmd", "echo PING_OK", "--resume-cmd", str(script),
                                  "--kill-grace", "1s"], lambda: bool(runs(pids)), sig)
    name = signal.Signals(sig).name
    assert status == 1, err
    assert f"stopped by {name} while the resume command for h1 (attempt 1) ran" in err
    [[leader, child]] = runs(pids)  # h2 was never resumed: no command starts after the signal
    assert not alive(leader) and not alive(child)
    added = events(log)[2:]
    assert [e["type"] for e in added] == ["probe_result", "claimed", "resume_requested", "resume_failed",
                                          "watcher_run"]
    failed, beat = added[3], added[4]
    assert failed["handoff_id"] == "h1" and failed["effect"] == "unknown" and name in failed["error"]
    assert beat["exit"] == "error" and f"stopped by {name}" in beat["detail"]
    assert "heartbeat: " in out and "NOT written" not in out


def test_lanes_stopped_while_enqueuing_enqueues_nothing_and_starts_no_other(tmp_path: Path) -> None:
    log = write_log(tmp_path / "l.jsonl", [
        e for p in ("p1", "p2") for e in (
            {"type": "status_updated", "ts": ago(600), "product": p, "state": "running"},
            {"type": "job_finished", "ts": ago(600), "product": p, "job_id": f"j-{p}"},
        )
    ])
    script, pids = hanging(tmp_path)
    status, out, err = signalled(["lanes", str(log), "--enqueue-cmd", str(script), "--kill-grace", "1s"],
                                 lambda: bool(runs(pids)))
    assert status == 1, err
    assert "lanes run stopped by SIGTERM while p1 job-unpicked's --enqueue-cmd ran" in err
    assert "its resume may have gone out" in err and "p1: job-unpicked: the send was stopped by SIGTERM: did it " \
        "arrive?" in err  # never sent again on its own (tests/test_lanes_send_cut_short.py)
    [[leader, child]] = runs(pids)  # p2's was never started
    assert not alive(leader) and not alive(child)
    intent, check = events(log)[4:]  # the pass's lane_check before any send, then its trace: it ended in error
    assert (intent["type"], intent["exit"], check["type"]) == ("lane_check", "sending", "lane_check")
    # its trace: the send stopped is open (unsure: its outcome is unknown), the stop itself in its detail
    assert check["exit"] == "sending" and "lanes run stopped by SIGTERM while p1 job-unpicked's" in check["detail"]
    assert check["unsure"] == {"p1": "job-unpicked"} and check["unsent"] == {"p2": "job-unpicked"}
    assert "p2: job-unpicked, not enqueued (the run stopped)" in out


def test_lanes_waiting_for_the_lock_stops_on_sigterm_and_does_nothing(tmp_path: Path) -> None:
    log = write_log(tmp_path / "l.jsonl", [{"type": "status_updated", "ts": ago(600), "product": "p1",
                                            "state": "running"}])
    before = log.read_text()
    with open(f"{log}.lanes.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        # it waits for the lock: give it the time to get there, then stop it
        status, _out, err = signalled(["lanes", str(log), "--enqueue-cmd", "true"],
                                      lambda: time.sleep(1.5) is None)
    assert status == 1, err
    assert f"stopped by SIGTERM while waiting for {log}.lanes.lock" in err
    assert log.read_text() == before


def failback_once(tmp_path: Path, probe_cmd: str) -> subprocess.CompletedProcess[str]:
    log = write_log(tmp_path / "f.jsonl", [
        {"type": "handoff_created", "ts": ago(60), "handoff_id": "h1", "account": "acct"},
    ])
    return subprocess.run([sys.executable, "-m", "eventlog", "failback", str(log), "--probe-cmd", probe_cmd,
                           "--resume-cmd", "true"], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_failback_says_a_limit_with_no_reset_time_in_words(tmp_path: Path) -> None:
    ran = failback_once(tmp_path, "echo usage limit reached")
    assert "  probe acct: quota_limited; limit recorded, no reset time stated (unknown)" in ran.stdout.splitlines()
    assert "None" not in ran.stdout


def test_a_failback_pass_that_sent_work_to_a_person_does_not_say_just_ok(tmp_path: Path) -> None:
    ran = failback_once(tmp_path, shlex.join([sys.executable, str(ROOT / "tests" / "fakes" / "failback_probe.py"),
                                              "auth"]))
    assert ran.returncode == 1
    assert ran.stdout.splitlines()[0].endswith(": ok, but it sent work to a person"), ran.stdout
    assert "auth_error" in ran.stderr
