"""A runner that waits for its lock says so, and who holds it (review R9).

``lanes``, ``observe`` and the imports waited for their runner lock without a word: a ``lanes --resend`` typed while
another pass sat in a 5-minute enqueue looked hung. Now one that waits says once on stderr what for (the lock file,
the pid and command holding it) and that it goes on when that pass ends; a second catch-up, which does not wait,
names the holder too. Real processes throughout; the deadlines only keep a failure from hanging the suite.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.test_catchup_reruns import Jobs
from tests.test_follow import _wait_for
from tests.test_lanes_pass import quiet_lane

WAITING = "waiting for the lock"


class Stderr:
    """A process's stderr, read line by line as it comes (a thread), so a test can see what it says while it runs."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert proc.stderr is not None
        self._thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self._thread.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.lines.append(line.rstrip("\n"))

    def said(self, words: str) -> list[str]:
        return [line for line in self.lines if words in line]

    def done(self) -> str:
        self._thread.join(timeout=30)
        return "\n".join(self.lines)


@contextmanager
def held(log: Path, name: str) -> Iterator[subprocess.Popen[str]]:
    """A process that holds ``LOG.<name>.lock`` as a runner does (:func:`runner_lock`) until the block ends."""
    code = ("import sys; from eventlog.runners.common import runner_lock\n"
            f"with runner_lock({str(log)!r}, {name!r}, wait=False) as mine:\n"
            "    print('held' if mine else 'busy', flush=True); sys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        release(proc)
        proc.wait(timeout=30)
        assert proc.stdout is not None
        proc.stdout.close()


def release(holder: subprocess.Popen[str]) -> None:
    """Let the holder of :func:`held` end, and with it its lock."""
    if holder.stdin is not None and not holder.stdin.closed:
        holder.stdin.close()


def popen_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "eventlog", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_a_lanes_pass_waiting_for_another_says_what_it_waits_for_once(tmp_path: Path) -> None:
    log = quiet_lane(tmp_path)
    started, release = tmp_path / "started", tmp_path / "release"
    blocking = shlex.join(["sh", "-c", f"touch {shlex.quote(str(started))}; "
                                       f"while [ ! -e {shlex.quote(str(release))} ]; do sleep 0.05; done"])
    first = popen_cli("lanes", str(log), "--enqueue-cmd", blocking)
    second = None
    try:
        assert _wait_for(started.exists)  # the first pass holds the lock, sending its resume
        second = popen_cli("lanes", str(log), "--enqueue-cmd", "true")
        err = Stderr(second)
        assert _wait_for(lambda: err.said(WAITING)), "the waiting pass said nothing"
        [said] = err.said(WAITING)
        assert f"{os.path.realpath(log)}.lanes.lock" in said
        assert f"eventlog lanes, pid {first.pid}" in said  # the pass that holds it, and how to find it
        assert "goes on when that one ends" in said
        assert second.poll() is None  # it still waits: nothing done yet
        release.touch()
        assert first.wait(timeout=60) == 0
        second.wait(timeout=60)
        assert len([line for line in err.done().splitlines() if WAITING in line]) == 1  # once
    finally:
        release.touch()
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
            if proc is not None:
                proc.communicate()


@pytest.mark.parametrize("runner", ["observe", "import"])
def test_observe_and_the_imports_waiting_for_the_lock_say_so(tmp_path: Path, runner: str) -> None:
    log = tmp_path / "e.jsonl"
    log.write_text("")
    if runner == "observe":
        progress = tmp_path / "progress.md"
        progress.write_text("state: idle\n")
        args = ["observe", "lane", str(log), "p1", f"--progress={progress}"]
    else:
        markers = tmp_path / "guard.err"
        markers.write_text("CLAUDE_QUOTA_JOB_SKIPPED job=com.x reason=quota remaining=60s ts=1796100000\n")
        args = ["import", "quota-log", str(log), str(markers)]
    with held(log, runner) as holder:
        proc = popen_cli(*args)
        err = Stderr(proc)
        try:
            assert _wait_for(lambda: err.said(WAITING)), "the waiting runner said nothing"
            [said] = err.said(WAITING)
            assert f"{os.path.realpath(log)}.{runner}.lock" in said and f"pid {holder.pid}" in said
            assert proc.poll() is None
        finally:
            release(holder)
    try:
        assert proc.wait(timeout=60) == 0, err.done()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert log.read_text()  # it went on and did its work


def test_a_second_catchup_names_the_one_holding_the_lock(tmp_path: Path) -> None:
    j = Jobs(tmp_path / "j", com_x="exit 0")
    with held(j.log, "catchup") as holder:
        out = j.catchup("--json")
    assert out.returncode == 0 and json.loads(out.stdout)["busy"] is True
    assert f"another catch-up holds the lock of {j.log} (eventlog catchup, pid {holder.pid}): nothing done" \
        in out.stderr
