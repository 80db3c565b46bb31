"""Running the user's commands: the one way every runner starts a process.

:func:`run` starts a command without a shell, in its own process group (a new
session), with an empty stdin, and waits at most ``timeout_s``. Over the
timeout the whole group gets SIGTERM, then SIGKILL after ``grace_s``; whatever
of the group outlived its leader gets SIGKILL too. An interruption of ours
(KeyboardInterrupt, which the catch-up runner raises on SIGTERM) stops the
group the same way before going on. A command that cannot start is reported as
such (:attr:`Ran.started` false, :attr:`Ran.error`), never as an exit status.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: How long a stopped command's pipes are still read after SIGKILL (a process that left the group may hold them).
DRAIN_S = 5.0


@dataclass(frozen=True)
class Ran:
    """How a command went: not started (``error``), or its exit status (negative: the signal that ended it)."""

    started: bool
    exit: int | None = None
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Started, ended in time, exit 0."""
        return self.started and not self.timed_out and self.exit == 0

    def failure(self, timeout_s: float) -> str | None:
        """Why it failed, in a few words (None: it did not)."""
        if not self.started:
            return f"could not start: {self.error}"
        if self.timed_out:
            return f"timed out after {timeout_s:g} s; its process group was stopped"
        if self.exit != 0:
            return f"exit {self.exit}"
        return None


def split_command(text: str, option: str) -> list[str]:
    """A command line split as a shell would (no shell runs it); ValueError naming ``option`` when it cannot be."""
    try:
        argv = shlex.split(text)
    except ValueError as err:
        raise ValueError(f"{option} {text!r}: {err}") from None
    if not argv:
        raise ValueError(f"{option} is empty")
    return argv


def run(
    argv: Sequence[str],
    *,
    timeout_s: float,
    grace_s: float,
    env: Mapping[str, str] | None = None,
    capture_stdout: bool = True,
    capture_stderr: bool = False,
) -> Ran:
    """Run ``argv`` (see the module docstring) and say how it went.

    ``env`` is added to our environment. Output not captured goes to our
    stderr (the command's stdout too: our stdout is for our own report).
    """
    try:
        proc = subprocess.Popen(
            list(argv),
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if capture_stdout else 2,
            stderr=subprocess.PIPE if capture_stderr else None,
            start_new_session=True,
        )
    except OSError as problem:
        return Ran(False, error=f"{argv[0] if argv else '(empty)'}: {problem.strerror or problem}")
    out: bytes | None
    err: bytes | None
    try:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            out, err = _stop(proc, grace_s)
            return Ran(True, proc.returncode, True, _text(out), _text(err))
        return Ran(True, proc.returncode, False, _text(out), _text(err))
    except BaseException:
        if proc.returncode is None:
            _stop(proc, grace_s)
        raise


def _stop(proc: subprocess.Popen[bytes], grace_s: float) -> tuple[bytes | None, bytes | None]:
    """SIGTERM the process group, SIGKILL it after ``grace_s``; reap the leader; what it printed."""
    out: bytes | None
    err: bytes | None
    _killpg(proc.pid, signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=grace_s)
    except subprocess.TimeoutExpired:
        _killpg(proc.pid, signal.SIGKILL)
        try:
            out, err = proc.communicate(timeout=DRAIN_S)
        except subprocess.TimeoutExpired as late:  # a process that left the group holds the pipes
            proc.kill()
            proc.wait()
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            out, err = late.stdout, late.stderr
    _killpg(proc.pid, signal.SIGKILL)  # whatever of the group outlived its leader
    return out, err


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", "replace")


__all__ = ["DRAIN_S", "Ran", "run", "split_command"]
