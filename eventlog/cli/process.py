"""Running the user's commands for the runners: split without a shell, bounded in time, one runner at a time."""

from __future__ import annotations

import fcntl
import os
import shlex
import signal
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from eventlog.cli.common import UsageError
from eventlog.logs import lock_path


@dataclass
class Ran:
    """How a command ended: its exit status (negative: killed by that signal) and whether it timed out."""

    exit: int
    timed_out: bool
    stdout: str = ""


def command(text: str, option: str) -> list[str]:
    """A command line split as a shell would (no shell runs it)."""
    try:
        argv = shlex.split(text)
    except ValueError as err:
        raise UsageError(f"{option} {text!r}: {err}") from err
    if not argv:
        raise UsageError(f"{option} is empty")
    return argv


def run_bounded(
    argv: list[str],
    *,
    env: Mapping[str, str],
    timeout: float,
    grace: float,
    capture: bool = False,
) -> Ran:
    """Run ``argv`` in a new session and wait at most ``timeout`` seconds.

    Over the timeout its process group gets SIGTERM, then SIGKILL after
    ``grace`` seconds (and SIGKILL in any case, for what is left of the group).
    With ``capture`` its stdout is returned, else it goes to our stderr; stdin
    is empty. Raises OSError when it cannot start. An interruption of ours
    (KeyboardInterrupt) kills its group the same way before going on.
    """
    proc = subprocess.Popen(
        argv,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if capture else 2,
        start_new_session=True,
        text=True,
        errors="replace",
    )
    try:
        try:
            out, _ = proc.communicate(timeout=timeout)
            return Ran(proc.returncode, False, out or "")
        except subprocess.TimeoutExpired:
            out = _stop(proc, grace)
            return Ran(proc.returncode, True, out)
    except BaseException:
        if proc.returncode is None:
            _stop(proc, grace)
        raise


def _stop(proc: subprocess.Popen[str], grace: float) -> str:
    """SIGTERM the process group, SIGKILL it after ``grace``; reap the leader."""
    _killpg(proc.pid, signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=grace)
    except subprocess.TimeoutExpired:
        _killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    _killpg(proc.pid, signal.SIGKILL)  # whatever of the group outlived its leader
    return out or ""


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@contextmanager
def runner_lock(log: str, name: str, *, wait: bool) -> Iterator[bool]:
    """Hold ``LOG.<name>.lock`` exclusively; yields False when ``wait`` is off and another holds it.

    For a ``nats://`` LOG the lock file is on this host only (:func:`eventlog.logs.lock_path`).
    """
    fd = os.open(lock_path(log, name), os.O_RDWR | os.O_CREAT, 0o640)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)
