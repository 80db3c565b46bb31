"""Running the user's commands: the one way every runner starts a process.

:func:`run` starts a command without a shell, in its own process group (a new
session), with an empty stdin, and waits at most ``timeout_s``. Over the
timeout the whole group gets SIGTERM, then SIGKILL after ``grace_s``; whatever
of the group outlived its leader gets SIGKILL too. An interruption of ours
(KeyboardInterrupt, which the catch-up runner raises on SIGTERM) stops the
group the same way before going on. A command that cannot start is reported as
such (:attr:`Ran.started` false, :attr:`Ran.error`), never as an exit status.

A command's result is its own exit, and what it printed up to then: a command
that starts work in the background and exits at once (an asynchronous
enqueue or resume) has ended, even while the child it left running holds
its stdout or stderr open. Once it has exited its pipes are read for
:data:`AFTER_EXIT_S` more at most (what is there, or comes at once), then
closed: we never wait on a left-behind child, never stop it because the
command exited, and never call its exit a timeout. Such a child should write
elsewhere (a file, ``/dev/null``): after that moment a write to the pipe fails
(EPIPE, or SIGPIPE when it does not handle it).

What a command prints is read as it comes, but only its start (:data:`HEAD_BYTES`) and its end
(:data:`TAIL_BYTES`, from the first line that starts in it) are kept, with a line between that says how many
bytes were not (:attr:`Ran.stdout_cut`): only an excerpt of it is ever recorded or shown, and its last lines
(a resume's handshake, a task ref) are read. A command that prints 50 MB costs a runner a few MB, not 50.
"""

from __future__ import annotations

import os
import selectors
import shlex
import signal
import subprocess
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import IO

from eventlog.reader import MAX_LINE_BYTES

#: How long after SIGKILL a stopped command's leader is waited for (and its pipes read) before it is reaped anyway.
DRAIN_S = 5.0
#: How long a command's pipes are still read once it has exited (a child it left running may hold them open).
AFTER_EXIT_S = 0.5
#: How often a running command is looked at while its pipes are quiet.
POLL_S = 0.02
#: The most bytes of a command's output kept from its start, per pipe (what an excerpt of its start shows).
HEAD_BYTES = 64 * 1024
#: The most bytes kept from its end, per pipe: its last lines, where a resume's handshake and the lanes task
#: ref are read (a 2 MB ``failed`` answer is still read, and recorded cut: docs/DECISIONS.md).
TAIL_BYTES = 2 * MAX_LINE_BYTES


@dataclass(frozen=True)
class Ran:
    """How a command went: not started (``error``), or its exit status (negative: the signal that ended it)."""

    started: bool
    exit: int | None = None
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    #: Bytes of stdout (stderr) not kept: from between its start and its end, said by a line in their place.
    stdout_cut: int = 0
    stderr_cut: int = 0

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
            return self.ended()
        return None

    def ended(self) -> str:
        """How a command that started ended, in words: ``exit 3``, ``killed by SIGKILL``."""
        if self.exit is not None and self.exit < 0:
            try:
                return f"killed by {signal.Signals(-self.exit).name}"
            except ValueError:
                return f"killed by signal {-self.exit}"
        return f"exit {self.exit}"

    def no_answer(self, timeout_s: float) -> str | None:
        """Why the command gave no answer of its own, in a few words (None: it did, whatever it said).

        It could not start, ran over its timeout, was killed by a signal, or
        ended with 126 or 127: what a shell says when it could not run the
        command it was given.
        """
        if not self.started or self.timed_out:
            return self.failure(timeout_s)
        if self.exit is not None and (self.exit < 0 or self.exit in _SHELL_COULD_NOT_RUN):
            return self.ended()
        return None

    def said(self) -> str:
        """The end of what it printed on stderr (on stdout when stderr is empty), cut by :func:`excerpt`."""
        text, cut = (self.stderr, self.stderr_cut) if self.stderr else (self.stdout, self.stdout_cut)
        return excerpt(text, end=True, more=cut)


#: The exits a shell gives when it could not run the command: 126 found but not run, 127 not found (POSIX).
_SHELL_COULD_NOT_RUN = frozenset({126, 127})

#: The most characters of a command's output a runner copies into a line of the log or a message.
EXCERPT_CHARS = 200
#: The most characters of a ``detail`` a runner writes of its own (failback's heartbeat, the lanes runner's
#: ``lane_check``, a ``needs_human``): always cut by :func:`excerpt`, so a longer one says it was cut.
DETAIL_CHARS = 500


def excerpt(text: str, limit: int = EXCERPT_CHARS, *, end: bool = False, more: int = 0) -> str:
    """``text`` on one line (each run of whitespace one space), at most ``limit`` characters and a mark.

    A longer one keeps its first ``limit`` characters (``end``: its last) and
    says it was cut and how long it was: ``abc... [cut: 2097152 characters in
    all]``, ``[cut: 2097152 characters in all] ...xyz``. Every text a runner
    copies from a command's output into an event goes through it, so that no
    answer is too long to be recorded. ``more``: bytes of the output that were
    not kept at all (:attr:`Ran.stdout_cut`), said too: ``[cut: 2162000
    characters kept and 48234496 bytes more]``.
    """
    flat = " ".join(text.split())
    if len(flat) <= limit and not more:
        return flat
    if len(flat) <= limit:
        return f"{flat} [cut: {more} bytes more not kept]"
    mark = f"[cut: {len(flat)} characters kept and {more} bytes more]" if more else \
        f"[cut: {len(flat)} characters in all]"
    return f"{mark} ...{flat[-limit:]}" if end else f"{flat[:limit]}... {mark}"


class Interrupted(KeyboardInterrupt):
    """A SIGTERM or SIGINT stopped the runner: the command it waited for was stopped; none starts after it."""

    def __init__(self, signum: int) -> None:
        self.signal = signal.Signals(signum).name
        #: Whether a command had started (it was stopped), or none had yet (none started).
        self.started = False
        #: What was cut short, for a person (``while ...``), set by the runner that knows.
        self.what = ""
        super().__init__(self.signal)

    def said(self) -> str:
        """One line for a person: the signal and what it cut short."""
        return f"stopped by {self.signal}" + (f" {self.what}" if self.what else "")


#: The stop signals received while :func:`stop_on_signals` is held (the first one is the one said).
_received: list[int] = []
#: Whether the main thread is in a wait the signal may cut short (:func:`waiting`).
_waiting: list[bool] = [False]
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def stop_on_signals() -> Iterator[list[int]]:
    """Hold SIGTERM and SIGINT for a runner's pass (main thread only); yields the signals received so far.

    See the module docstring; afterwards the previous handlers are back and nothing is held.
    """
    _received.clear()
    previous = {sig: signal.signal(sig, _on_signal) for sig in STOP_SIGNALS}
    try:
        yield _received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _received.clear()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    if _waiting[0]:
        _waiting[0] = False  # raised once: the stop that follows (the grace) is not cut short again
        raise Interrupted(signum)


def started(err: BaseException) -> None:
    """Mark ``err``, when it is :class:`Interrupted`, as having cut a started command (or job) short."""
    if isinstance(err, Interrupted):
        err.started = True


def check_stop() -> None:
    """:class:`Interrupted` when a stop signal came: call before starting a command (:func:`run` does)."""
    if _received:
        raise Interrupted(_received[0])


@contextmanager
def waiting() -> Iterator[None]:
    """A wait a stop signal cuts short (:class:`Interrupted`), at once when one came before it."""
    check_stop()
    before = _waiting[0]
    _waiting[0] = True
    try:
        yield
    finally:
        _waiting[0] = before


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
    stoppable: bool = True,
) -> Ran:
    """Run ``argv`` (see the module docstring) and say how it went.

    ``env`` is added to our environment. Output not captured goes to our
    stderr (the command's stdout too: our stdout is for our own report).
    ``stoppable`` false: a short call that stopping itself needs (``launchctl
    kill``): it starts after a stop signal and is not cut short by one.
    """
    if stoppable:
        check_stop()
    # A stop is taken where the read checks for it, never raised from the handler inside this call (a wait around
    # it, :func:`waiting`, included): raised inside Popen or ``proc.poll()`` (after it took the Popen's waitpid lock,
    # before its ``try``), it left a child unknown or every later wait for it hung for good.
    outer, _waiting[0] = _waiting[0], False
    try:
        ran = _run(argv, timeout_s, grace_s, env, capture_stdout, capture_stderr, stoppable)
    finally:
        _waiting[0] = outer
    if outer:
        check_stop()  # the wait around this call is cut short here, as the handler would have cut it
    return ran


def _run(argv: Sequence[str], timeout_s: float, grace_s: float, env: Mapping[str, str] | None,
         capture_stdout: bool, capture_stderr: bool, stoppable: bool) -> Ran:
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
    output = _Output(proc)
    try:
        try:
            ended = output.read(proc, timeout_s, stoppable=stoppable)
            if not ended:
                _stop(proc, output, grace_s)
            (out, out_cut), (err, err_cut) = output.texts()
            return Ran(True, proc.returncode, not ended, out, err, stdout_cut=out_cut, stderr_cut=err_cut)
        except BaseException as stop:
            started(stop)
            if proc.returncode is None:
                _stop(proc, output, grace_s)
            raise
    finally:
        output.close()


class _Output:
    """What a command prints on the pipes we gave it, read as it comes (never waiting on a pipe alone).

    The pipes are read while the command runs; once it has exited, only for
    :data:`AFTER_EXIT_S` more or until they close: a child it left running may
    hold them open for as long as it likes, and is none of our business.
    """

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._selector = selectors.DefaultSelector()
        self._chunks: dict[int, _Kept] = {}
        self._pipes = [pipe for pipe in (proc.stdout, proc.stderr) if pipe is not None]
        self._order = [pipe.fileno() if pipe is not None else -1 for pipe in (proc.stdout, proc.stderr)]
        for pipe in self._pipes:
            os.set_blocking(pipe.fileno(), False)
            self._selector.register(pipe, selectors.EVENT_READ, pipe)
            self._chunks[pipe.fileno()] = _Kept()

    def read(self, proc: subprocess.Popen[bytes], within_s: float, *, stoppable: bool = False) -> bool:
        """Read until the command has exited (and :data:`AFTER_EXIT_S` more at most) or ``within_s`` passed.

        True when it exited (its status is then in ``proc.returncode``). ``stoppable``: a stop signal ends the
        read with :class:`Interrupted` at the next turn of the loop (every :data:`POLL_S`; see :func:`run`).
        """
        until = time.monotonic() + within_s
        exited_at: float | None = None
        while True:
            if stoppable:
                check_stop()
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
                until = min(until, now + AFTER_EXIT_S) if self._selector.get_map() else now
            if now >= until or (exited_at is not None and not self._selector.get_map()):
                return exited_at is not None
            wait = min(until - now, POLL_S)
            if not self._selector.get_map():
                time.sleep(wait)
                continue
            for key, _events in self._selector.select(wait):
                self._take(key.data)

    def _take(self, pipe: IO[bytes]) -> None:
        try:
            data = os.read(pipe.fileno(), 65536)
        except BlockingIOError:
            return
        if data:
            self._chunks[pipe.fileno()].add(data)
        else:
            self._selector.unregister(pipe)

    def texts(self) -> tuple[tuple[str, int], tuple[str, int]]:
        """What was kept of stdout and of stderr, as text, and how many bytes of each were not (:class:`_Kept`)."""
        out, err = (self._chunks.get(fd, _Kept()).text() for fd in self._order)
        return out, err

    def close(self) -> None:
        """Stop reading: close our ends of the pipes (a child that writes to them later gets EPIPE)."""
        self._selector.close()
        for pipe in self._pipes:
            pipe.close()


class _Kept:
    """One pipe's output as it comes: its first :data:`HEAD_BYTES` and its last :data:`TAIL_BYTES` (at most one
    read more, until :meth:`text`), and how many bytes came in all; never the whole."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.total = 0

    def add(self, data: bytes) -> None:
        """Take what one read gave."""
        self.total += len(data)
        room = HEAD_BYTES - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail.append(data)
            self.tail_size += len(data)
            while self.tail_size - len(self.tail[0]) >= TAIL_BYTES:  # the rest still holds the last TAIL_BYTES
                self.tail_size -= len(self.tail.popleft())

    def text(self) -> tuple[str, int]:
        """What was kept, as text, and how many bytes were not; a line in their place says how many.

        Of the end, the part of a line begun before it is left out too (a line's end alone might read as a
        line of its own, a handshake the command never wrote), unless the end is all one line.
        """
        tail = b"".join(self.tail)[-TAIL_BYTES:]
        cut = self.total - len(self.head) - len(tail)
        if not cut:
            return _text(bytes(self.head) + tail), 0
        head, newline = bytes(self.head), tail.find(b"\n")
        if 0 <= newline < len(tail) - 1:
            tail = tail[newline + 1:]
        last = head.rfind(b"\n")
        if last >= 0:  # the start of a line cut short, likewise
            head = head[:last + 1]
        cut = self.total - len(head) - len(tail)
        return f"{_text(head).removesuffix(chr(10))}\n[... {cut} bytes not kept ...]\n{_text(tail)}", cut


def _stop(proc: subprocess.Popen[bytes], output: _Output, grace_s: float) -> None:
    """SIGTERM the process group, SIGKILL it after ``grace_s``; reap the leader; ``output`` has what it printed."""
    _killpg(proc.pid, signal.SIGTERM)
    if not output.read(proc, grace_s):
        _killpg(proc.pid, signal.SIGKILL)
        if not output.read(proc, DRAIN_S):  # a leader SIGKILL did not end at once: reap it anyway
            proc.kill()
            proc.wait()
    _killpg(proc.pid, signal.SIGKILL)  # whatever of the group outlived its leader


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


__all__ = ["AFTER_EXIT_S", "DETAIL_CHARS", "DRAIN_S", "EXCERPT_CHARS", "HEAD_BYTES", "STOP_SIGNALS", "TAIL_BYTES",
           "Interrupted", "Ran", "check_stop", "excerpt", "run", "split_command", "started", "stop_on_signals",
           "waiting"]
