"""Every command that writes to a log names the log it could not write, the one way ``append`` does.

A write that fails (a file size limit, a full disk) leaves the log as it was; the person must learn which file
(decide, handoff, an import and append may each be pointed at several logs by their units). Run as a user runs
them, under a file size limit the log is already at (every write past its end fails with EFBIG, even for root).
"""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

EVENT = '{"type":"handoff_created","handoff_id":"h9","account":"cloud-account-a"}\n'
QUOTA = "CLAUDE_QUOTA_JOB_SKIPPED job=com.lily.test reason=quota remaining=1800s ts=1785715200\n"  # 2026-08-03T00:00Z

#: A command (LOG and the directory filled in), the fixture it writes to, and its stdin.
COMMANDS: dict[str, tuple[list[str], str, str | None]] = {
    "append": (["append", "LOG"], "handoffs_network_cut", EVENT),
    "decide": (["decide", "LOG", "s-start", "--decision", "close", "--expected-revision", "17",
                "--idempotency-key", "k1", "--reason", "done"], "sessions_startup_failed", None),
    "handoff requeue": (["handoff", "requeue", "LOG", "h2", "--reason", "checked"], "handoffs_network_cut", None),
    "handoff probe": (["handoff", "probe", "LOG", "cloud-account-a", "--probe-cmd", "echo PING_OK"],
                      "handoffs_network_cut", None),
    "import quota-log": (["import", "quota-log", "LOG", "DIR/quota.log"], "handoffs_network_cut", None),
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_write_that_fails_names_the_log(tmp_path: Path, name: str) -> None:
    args, fixture, stdin = COMMANDS[name]
    log = tmp_path / "the log.jsonl"
    shutil.copy(ROOT / "fixtures" / f"{fixture}.jsonl", log)
    (tmp_path / "quota.log").write_text(QUOTA)
    before = log.read_bytes()

    def no_growth() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(before), len(before)))

    argv = [str(log) if a == "LOG" else a.replace("DIR", str(tmp_path)) for a in args]
    out = subprocess.run([sys.executable, "-m", "eventlog", *argv], input=stdin, cwd=ROOT, capture_output=True,
                         text=True, timeout=60, preexec_fn=no_growth, check=False)
    assert out.returncode == 1, out.stderr
    [said] = [line for line in out.stderr.splitlines() if "File too large" in line]
    assert said.startswith("eventlog: ")
    assert said.endswith(f"could not write {log}: File too large; nothing was written")
    assert said.count(str(log)) == 1  # once, not "LOG: could not write LOG"
    assert log.read_bytes() == before
