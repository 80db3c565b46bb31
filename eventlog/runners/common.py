"""What the runners share: usage errors, the per-log runner lock, the log's state and its bad lines."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import socket
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, tzinfo
from typing import IO, Any, Protocol

import msgspec

from eventlog.appender import LogFileError
from eventlog.clock import zone_name
from eventlog.events import Event
from eventlog.importers import unfinished_problem
from eventlog.logs import Log, LogUnavailable, Unreachable, is_url, lock_path, no_event_log, open_log
from eventlog.reader import Reader
from eventlog.replay import Replay
from eventlog.runners.process import Interrupted, split_command, waiting
from projections.runner import Runner
from projections.triage import LogArg, LogFacts, append_cmd, command, line_cmd

#: How many bad lines a runner names (it counts them all).
BAD_LINES_SHOWN = 3


class RunnerError(ValueError):
    """Options a runner cannot run with, or a log that is not there: nothing was done (a CLI's exit 2)."""

    #: The CLI's exit status for it.
    exit_code = 2


class LogNotReached(RunnerError):
    """The log's server cannot be reached now: nothing was done; a log that could not be read (exit 1), not bad
    usage, as a log file that cannot be read is."""

    exit_code = 1


#: A placeholder of a command to copy (``--reason '<why>'``, ``--evidence-ref '<evidence>'``), never a real value.
PLACEHOLDER = re.compile(r"<[^<>]*>")


def check_filled(name: str, value: str | None) -> None:
    """RunnerError when a person's ``value`` for option ``name`` is the ``<...>`` placeholder a view printed for
    them to fill in, pasted as it is (``--probe-cmd '<your probe command>'``, ``--reason '<why>'``): nothing is
    run or written then. Every option a printed command leaves to a person is checked here (its commands, a
    reason, evidence, the name a pass writes); None (not given) passes."""
    if value is not None and PLACEHOLDER.fullmatch(value.strip()):
        raise RunnerError(f"{name} {value!r} is the placeholder of a copied command: write the real one "
                          "(nothing was run or written)")


def check_said(name: str, value: str | None) -> None:
    """RunnerError when a person's ``value`` for option ``name`` (a reason, evidence) says nothing: empty, or the
    ``<...>`` placeholder of a copied command pasted as it is (:func:`check_filled`). It is kept in the log for
    the audit, as if someone had checked; None (not given) passes."""
    if value is not None and not value.strip():
        raise RunnerError(f"{name} is empty: say why")
    check_filled(name, value)


def command_words(text: str, option: str) -> list[str]:
    """The words of a person's command option (``--probe-cmd CMD``): split as a shell would (no shell runs it);
    RunnerError for a placeholder pasted as it is (:func:`check_filled`), ValueError for a text that cannot be
    split or is empty."""
    check_filled(option, text)
    return split_command(text, option)


class BadLines(msgspec.Struct, kw_only=True):
    """The bad lines of the log a runner read: how many, and the first few (``line``, ``reason``)."""

    count: int = 0
    first: list[dict[str, Any]] = msgspec.field(default_factory=list)

    @classmethod
    def of(cls, records: Sequence[Mapping[str, Any]]) -> BadLines:
        """Count ``records`` (``line``, ``reason``) and keep the first few."""
        return cls(count=len(records), first=[dict(b) for b in records[:BAD_LINES_SHOWN]])

    def problem(self, log: str) -> str | None:
        """One line for a person, or None when there is none."""
        if not self.count:
            return None
        shown = "; ".join(f"line {b['line']}: {b['reason']}" for b in self.first)
        more = ", first" if self.count > len(self.first) else ""
        return f"{log}: {self.count} bad line(s) skipped{more}: {shown}"


class PassBadLines(BadLines, kw_only=True):
    """The bad lines a runner pass read, and how many are new since its previous pass (:meth:`seen`).

    A bad line stays in an append-only log for ever, so only a new one needs a
    person: the pass that first reads it exits 1; later passes name it on
    stderr and leave it to ``status`` and the ``RecoveryBadLines`` alert (both while the log holds any).
    """

    #: The line of this runner's previous pass (the last line it writes on every pass; 0: none in the log yet,
    #: so every bad line is new); None: the runner writes no line on every pass and cannot tell new from old,
    #: so every bad line counts as new (loud rather than silent: issue 17, "exits 1 when any line it needed
    #: was bad").
    since: int | None = 0
    #: How many bad lines are after ``since`` (all of them when it is None): they make the pass exit 1.
    new: int = 0
    #: The first few of them (``line``, ``reason``).
    first_new: list[dict[str, Any]] = msgspec.field(default_factory=list)

    @classmethod
    def seen(cls, records: Sequence[Mapping[str, Any]], since: int | None) -> PassBadLines:
        """``records`` (``line``, ``reason``: the log's bad lines) as seen by a pass whose previous one is at ``since``.

        The one rule of every runner: a bad line is new when it is after the runner's own previous
        pass line (all are, before its first); a runner that writes no line on every pass (``since``
        None) cannot tell, and counts every one as new.
        """
        fresh = list(records) if since is None else [b for b in records if int(b["line"]) > since]
        return cls(count=len(records), first=[dict(b) for b in records[:BAD_LINES_SHOWN]], since=since,
                   new=len(fresh), first_new=[dict(b) for b in fresh[:BAD_LINES_SHOWN]])

    def problem(self, log: str) -> str | None:
        """One line for a person (how many, how many new and since which line, the first few), or None."""
        if not self.count:
            return None
        if self.since is None:
            how = " (this runner writes no line on every pass, so it cannot tell new from old: each counts)"
        elif self.since == 0:
            how = f", {self.new} new (no earlier pass of this runner in the log)"
        else:
            how = f", {self.new} new since the last pass at line {self.since}"
        shown_of, total = (self.first_new, self.new) if self.new else (self.first, self.count)
        shown = "; ".join(f"line {b['line']}: {b['reason']}" for b in shown_of)
        more = ", first" if total > len(shown_of) else ""
        which = "; new" if self.new and self.since is not None else ""  # (with since None, all of them)
        return f"{log}: {self.count} bad line(s) skipped{how}{which}{more}: {shown}"

    def tell(self, log: str, problems: list[str], notes: list[str]) -> None:
        """Say them among ``problems`` when some are new (the pass exits 1), else among ``notes`` (stderr only)."""
        said = self.problem(log)
        if said:
            (problems if self.new else notes).append(said)


class Unwritten(msgspec.Struct, kw_only=True):
    """What an act outside (a probe, a resume, a re-run) gave that the log did not take (a full disk, a file it may
    not write): it happened, yet no line says so, so the line(s) that say it are kept for a person to append.

    Every runner says its own in the same words (:meth:`problem`), after the line that says why the append failed.
    """

    #: What happened, for a person: ``the resume of h1 (attempt 1) answered verified (main abc1234)``.
    act: str
    #: The events the runner tried to append, as it would have written them (their ``ts`` the act's).
    events: list[dict[str, Any]]
    #: ``eventlog append LOG`` with them on stdin, to paste once the log takes writes again.
    command: str

    @classmethod
    def of(cls, log: str | LogArg, act: str, events: Sequence[Mapping[str, Any]]) -> Unwritten:
        """``events`` that say ``act``, which ``log`` did not take."""
        return cls(act=act, events=[dict(e) for e in events], command=append_cmd(log, events))

    def problem(self, log: str) -> str:
        """One line for a person: what happened, and what to paste."""
        return f"{self.act}: no line of {log} says so; once it takes writes again, append it: {self.command}"

    @staticmethod
    def mark(done: Mapping[str, Any]) -> str:
        """What a report's line for ``done`` (a probe, a resume, a re-run) adds when its ``written`` is false."""
        return "" if done.get("written", True) else " (NOT written to the log: the line to append is on stderr)"


class NamedBadLine(msgspec.Struct, kw_only=True):
    """A bad line whose text names an id: its number, its reason, and the command that prints it."""

    line: int
    reason: str
    next: str

    @classmethod
    def of(cls, log: str, line: int, reason: str) -> NamedBadLine:
        """Line ``line`` of ``log``, bad for ``reason``."""
        return cls(line=line, reason=reason, next=line_cmd(LogFacts(name=log), line))


def id_pattern(ident: str) -> re.Pattern[bytes]:
    """What :func:`naming` looks for: ``ident`` as a JSON string (UTF-8 or ``\\u`` escapes), not a key."""
    quoted = {json.dumps(ident, ensure_ascii=False).encode(errors="surrogatepass"), json.dumps(ident).encode()}
    return re.compile(b"(?:" + b"|".join(re.escape(q) for q in sorted(quoted)) + rb")(?!\s*:)")


def naming(log: Log, bad: Sequence[Mapping[str, Any]], ident: str) -> list[NamedBadLine]:
    """The lines of ``bad`` (``line``, ``reason``: the log's bad lines) whose text names ``ident``, in order.

    What those lines said is unknown, so their text is searched, cheaply, for
    ``ident`` as a JSON string value (:func:`id_pattern`). ``log`` is read up to
    the last bad line, and only when there is one: call it on the paths where a
    bad line may be what names the id (a command about one id).
    """
    reasons = {int(b["line"]): str(b["reason"]) for b in bad}
    if not reasons:
        return []
    last, pattern = max(reasons), id_pattern(ident)
    found: list[NamedBadLine] = []
    for number, raw in log.lines():
        if number > last:
            break
        if number in reasons and pattern.search(raw):
            found.append(NamedBadLine.of(log.name, number, reasons[number]))
    return found


def named_problem(log: str, ident: str, named: Sequence[NamedBadLine], *, only: bool = False) -> str:
    """One line for a person: the bad lines that name ``ident`` (the first few), each reason and how to see it.

    ``only``: no applied line names ``ident`` (it is unknown but for them).
    """
    n = len(named)
    lead = f"no applied line names {ident!r}, only {n} bad line(s)" if only else f"{n} bad line(s) name {ident!r}"
    shown = "; ".join(f"line {b.line}: {b.reason} (see it: {b.next})" for b in named[:BAD_LINES_SHOWN])
    more = f", first {BAD_LINES_SHOWN}" if n > BAD_LINES_SHOWN else ""
    return f"{log}: {lead}, left out of every verdict{more}: {shown}"


def bad_lines_said(log: str, ident: str | None, bad: BadLines, named: Sequence[NamedBadLine], *,
                   then: str = "") -> list[str]:
    """What a person is told of the bad lines of ``log``: how many (one line), and those that name ``ident``
    (one more, ending with ``then``); nothing when there are none."""
    said = [bad.problem(log)]
    if named and ident is not None:
        said.append(named_problem(log, ident, named) + then)
    return [line for line in said if line]


class Unfinishing(Protocol):
    """A report of a line reader: the last lines it held back (``FILE:LINE``), and its problems."""

    unfinished: list[str]
    problems: list[str]


def count_unfinished(report: Unfinishing, path: str, f: IO[Any], line: int | None) -> None:
    """Count the last line of ``path`` (open as ``f``) held back as not ended (``line``: its number, None: none;
    :class:`eventlog.importers.EndedLines`) in ``report.unfinished``, and say it among the problems when the
    file has not changed for a minute (:func:`eventlog.importers.unfinished_problem`)."""
    if line is None:
        return
    where = f"{path}:{line}"
    report.unfinished.append(where)
    said = unfinished_problem(where, os.fstat(f.fileno()).st_mtime, time.time())
    if said is not None:
        report.problems.append(said)


def unfinished_words(unfinished: Sequence[str]) -> str:
    """The lines held back as not ended, for people (empty when none)."""
    return f"{len(unfinished)} line(s) not ended yet, read once they end: {', '.join(unfinished)}" if unfinished else ""


class Named(Protocol):
    """A report that counts the log's bad lines and says them among its problems."""

    bad_lines: BadLines
    problems: list[str]


def name_bad_lines(report: Named, log: str, bad: Sequence[Mapping[str, Any]]) -> None:
    """Count ``bad`` (a ``log_events`` list) in ``report.bad_lines`` and say them in its problems (so it exits 1).

    What those lines said is unknown: the rest is still done, and a person is told.
    """
    report.bad_lines = BadLines.of(bad)
    said = report.bad_lines.problem(log)
    if said:
        report.problems.append(said)


class ReadsLog(Protocol):
    """A runner's options: its LOG, and the zone of ``--assume-tz`` it reads it in."""

    @property
    def log(self) -> str: ...

    @property
    def assume_tz(self) -> tzinfo | None: ...


def log_arg(opts: ReadsLog) -> LogArg:
    """LOG in the ``eventlog`` commands a runner prints: with ``--assume-tz`` when it reads the log with one
    (:class:`~projections.triage.LogArg`), so that pasted they read it as the runner did."""
    return LogArg(opts.log, zone_name(opts.assume_tz))


def refuses_appends(log: str, replay: Replay) -> str | None:
    """Why every append to ``log`` is refused, for a person (a file that is no event log, or a torn tail no
    append cuts: ``status`` names both); None when it may take one."""
    why = no_event_log(log, replay) or (replay.stuck_tail.why if replay.stuck_tail is not None else None)
    status = command("eventlog status", [LogArg(log, zone_name(replay.reader.assume_tz))])
    return None if why is None else f"{log} {why}: every append is refused (see {status})"


def check_bounds(kill_grace_s: float, **timeouts: float) -> None:
    """RunnerError unless every timeout (``timeout_s=...``: ``--timeout``) is over 0 and the grace is not negative."""
    for name, value in timeouts.items():
        if value <= 0:
            raise RunnerError(f"--{name.removesuffix('_s').replace('_', '-')} must be more than 0")
    if kill_grace_s < 0:
        raise RunnerError("--kill-grace must not be negative")


def bad_lines(replay: Replay) -> BadLines:
    """The bad lines of a replayed log."""
    return BadLines.of(replay.bad_lines)


def folder(replay: Replay) -> Runner:
    """The projections of a replayed log."""
    runner = replay.folder
    assert isinstance(runner, Runner)
    return runner


def not_a_directory(target: str) -> None:
    """RunnerError when a LOG argument names a directory: a log that cannot be read (bad usage, exit 2), said
    before anything is read, locked or written."""
    if os.path.isdir(target):
        raise RunnerError(f"{target} is a directory, not a log file")


def require_log(target: str, assume_tz: tzinfo | None = None) -> None:
    """RunnerError unless the log a LOG argument names is there (a file, or a stream that exists); LogNotReached when
    its server cannot be reached to tell."""
    try:
        with open_log(target, assume_tz=assume_tz) as log:
            there = log.exists()
    except Unreachable as err:
        raise LogNotReached(f"cannot read {target}: {err}") from err
    except LogUnavailable as err:
        raise RunnerError(str(err)) from err
    not_a_directory(target)
    if not there:
        raise RunnerError(f"cannot read {target}: no such log")


def log_events(target: str, assume_tz: tzinfo | None = None,
               bad: list[dict[str, Any]] | None = None) -> Iterator[tuple[Event, datetime]]:
    """The decoded events of a log (a file or a stream; none when it does not exist).

    Bad lines are left out, and added to ``bad`` (``line``, ``reason``) when it is given.
    """
    if not is_url(target) and not os.path.exists(target):
        return
    reader = Reader(assume_tz)
    with open_log(target) as log:
        if not log.exists():
            return
        for number, raw in log.lines():
            decoded = reader.decode(raw, number)
            if not isinstance(decoded, str):
                yield decoded
            elif bad is not None:
                bad.append({"line": number, "reason": decoded})


class LockUnavailable(LogFileError):
    """A runner's lock file (:func:`runner_lock`) that cannot be created or opened (a directory this user may not
    write, another user's file, no space or inode left, a symbolic link at its name, a stream's lock directory that
    is not this user's alone): nothing was done. A log the runner cannot write, for every runner alike: exit 1, not
    bad usage; its one message names the lock file and why (``cannot create the lock file LOG.import.lock:
    Permission denied; nothing was done``). ``lanes`` and ``catchup`` say it among their report's problems."""

    def __init__(self, message: str) -> None:
        super().__init__([f"{message}; nothing was done"])
        #: The message without what the runners add (``; nothing was done``).
        self.why = message


#: How long a runner waits for its lock in silence: past it, it says once on stderr what it waits for.
LOCK_QUIET_S = 1.0
#: How often the lock is tried again within :data:`LOCK_QUIET_S`.
_LOCK_RETRY_S = 0.05


def say(message: str) -> None:
    """One line for a person on stderr, as the CLI says its own (``eventlog: ...``), at once (not buffered)."""
    print(f"eventlog: {message}", file=sys.stderr, flush=True)


@contextmanager
def runner_lock(log: str, name: str, *, wait: bool, tell: Callable[[str], None] = say) -> Iterator[bool]:
    """Hold ``LOG.<name>.lock`` exclusively; yields False when ``wait`` is off and another holds it.

    The one rule of every runner at a held lock (docs/DECISIONS.md, "A runner at a held lock"): a runner that
    waits (``wait``) tells a person once, through ``tell``, after :data:`LOCK_QUIET_S` of waiting, what it waits
    for (the lock file, who holds it: :func:`holder_of`) and that it goes on when that pass ends; one that does not
    (catch-up) says who holds it (:func:`holder_of`) and does nothing. The holder writes its pid, host and command
    in the lock file (:func:`stamp_lock`). A stop signal cuts the wait short
    (:class:`~eventlog.runners.process.Interrupted`).

    For a ``nats://`` LOG the lock file is on this host only (:func:`eventlog.logs.lock_path`).
    A symbolic link at the lock's name is never followed (it could make this create a file anywhere);
    :class:`LockUnavailable` naming the lock file and why when it cannot be created or opened.
    """
    try:
        path = lock_path(log, name)
    except OSError as err:  # a stream's lock directory
        where = "" if err.filename is None else f" (its directory {err.filename})"
        raise LockUnavailable(f"cannot create the {name} lock file of {log}{where}: {err.strerror}") from err
    fd = open_lock(path)
    try:
        if wait:
            _wait_for_lock(fd, path, tell)
        elif not _try_lock(fd):
            yield False
            return
        stamp_lock(fd, _command(name))
        yield True
    finally:
        os.close(fd)


def open_lock(path: str) -> int:
    """The lock file ``path`` opened for ``flock`` (created, mode 0640, when it is not there); never through a
    symbolic link at its name (it could make this create a file anywhere). :class:`LockUnavailable` naming it and
    why when it cannot be created or opened (its ``__cause__`` the OSError)."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)
    except OSError as err:
        why = "it is a symbolic link (never followed): remove it" if err.errno == errno.ELOOP else err.strerror
        verb = "open" if os.path.lexists(path) else "create"
        raise LockUnavailable(f"cannot {verb} the lock file {path}: {why}") from err


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _wait_for_lock(fd: int, path: str, tell: Callable[[str], None]) -> None:
    """Wait for the lock another pass holds: in silence for :data:`LOCK_QUIET_S`, then saying so once."""
    try:
        with waiting():
            if _try_lock(fd):
                return
            quiet_until = time.monotonic() + LOCK_QUIET_S
            while time.monotonic() < quiet_until:
                time.sleep(_LOCK_RETRY_S)
                if _try_lock(fd):
                    return
            tell(f"waiting for the lock {path}, held by {_holder(fd)}: this pass goes on when that one ends "
                 "(nothing is done until then; SIGTERM or Ctrl-C stops waiting)")
            fcntl.flock(fd, fcntl.LOCK_EX)
    except Interrupted as stop:
        stop.what = f"while waiting for {path} (another run holds it): nothing done"
        raise


def _command(name: str) -> str:
    """The command of this process, as its lock file names it: ``eventlog`` and its subcommand when this is the
    ``eventlog`` command, else the runner's (``eventlog NAME``). Only these words: the rest of the command line may
    hold a secret (a stream's password)."""
    argv = sys.argv
    program = os.path.basename(argv[0]) if argv else ""
    if (program == "eventlog" or argv[0].endswith(os.path.join("eventlog", "__main__.py"))) and len(argv) > 1 \
            and re.fullmatch(r"[a-z][a-z-]*", argv[1]):
        return f"eventlog {argv[1]}"
    return f"eventlog {name}"


def stamp_lock(fd: int, command: str) -> None:
    """Write this process's pid, host and ``command`` in the lock file it holds, over what an earlier holder wrote
    (every lock of the project: runners', follow's outputs'); only words for a person (a full disk: none)."""
    stamp = f"{os.getpid()} {socket.gethostname()} {command}\n".encode()
    try:
        os.pwrite(fd, stamp, 0)
        os.ftruncate(fd, len(stamp))
    except OSError:
        pass


def read_stamp(fd: int) -> tuple[str, str] | None:
    """What the holder of a lock wrote in it (:func:`stamp_lock`): its command ('' when it wrote none) and ``pid N``,
    or ``pid N on HOST`` when HOST is another host; None when it wrote nothing yet."""
    try:
        words = os.pread(fd, 512, 0).split(b"\n", 1)[0].decode(errors="replace").split()
    except OSError:
        return None
    if not words or not words[0].isdigit():
        return None
    host = words[1] if len(words) > 1 else socket.gethostname()
    return " ".join(words[2:]), f"pid {words[0]}" if host == socket.gethostname() else f"pid {words[0]} on {host}"


def _holder(fd: int) -> str:
    """Who holds the runner lock of ``fd`` (:func:`read_stamp`): ``eventlog lanes, pid 42``, ``..., pid 42 on HOST``;
    ``another pass, its pid not known yet`` when it wrote nothing (it has just taken it, or an older version holds
    it)."""
    stamp = read_stamp(fd)
    if stamp is None or not stamp[0]:
        return "another pass, its pid not known yet"
    return f"{stamp[0]}, {stamp[1]}"


def holder_of(log: str, name: str) -> str:
    """Who holds ``LOG.<name>.lock`` (:func:`_holder`), for a runner that found it held."""
    try:
        fd = os.open(lock_path(log, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return "another pass, its pid not known"
    try:
        return _holder(fd)
    finally:
        os.close(fd)


def lock_held(log: str, name: str) -> str | None:
    """Who holds ``LOG.<name>.lock`` now (:func:`_holder`), None when nobody does: for a dry run, which neither
    creates the lock file nor takes the lock (it would keep out a real pass that starts at that instant). Where the
    kernel lists its locks (``/proc/locks``) it is read there; elsewhere the lock is tried and let go at once."""
    try:
        fd = os.open(lock_path(log, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None  # no lock file: nobody ever held it here
    try:
        st = os.fstat(fd)
        try:
            with open("/proc/locks", encoding="ascii", errors="replace") as listed:
                held = _listed(listed.read(), st.st_dev, st.st_ino)
        except OSError:
            held = not _try_shared(fd)
        return _holder(fd) if held else None
    finally:
        os.close(fd)


def _listed(locks: str, dev: int, ino: int) -> bool:
    """Whether ``/proc/locks`` (its text) lists a ``flock`` on the file ``dev``, ``ino``."""
    where = f"{os.major(dev):02x}:{os.minor(dev):02x}:{ino}"
    return any(len(f) > 5 and f[1] == "FLOCK" and f[5] == where for f in (line.split() for line in locks.splitlines()))


def _try_shared(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return True


__all__ = [
    "BAD_LINES_SHOWN", "BadLines", "LockUnavailable", "LogNotReached", "Named", "NamedBadLine", "PassBadLines",
    "RunnerError", "Unwritten", "bad_lines", "bad_lines_said", "check_bounds", "folder", "holder_of", "id_pattern",
    "lock_held", "log_events", "name_bad_lines", "named_problem", "naming", "not_a_directory", "open_lock",
    "refuses_appends", "require_log", "runner_lock", "say",
]
