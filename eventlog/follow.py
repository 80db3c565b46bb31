"""Following a log: fold new complete lines as they come, keep dumps fresh.

:class:`Follower` holds the replayed state of one log and catches up with the
file on demand (:meth:`Follower.catch_up`): only new complete lines are read;
a partial last line is waited for; a truncated or replaced file is replayed
from the start, and the reason is returned for the caller to report (committed
lines it no longer holds are kept count of: :attr:`Follower.vanished`). A path
that holds nothing, or no file (a directory, a FIFO, a device: never opened as
a log, so never blocked on), or a file this process may not read (its permissions), is waited for;
a log that comes back is read from its start, the committed lines it no longer holds counted as a
replaced file's are (a rotation: the log is never rotated, every verdict comes from all of it).
:func:`follow` drives it with watchfiles: on every change, and at least every
``tick_s`` when nothing changes (silence writes no line, yet a watcher gets
late and a claim stale), it calls back; ``eventlog follow``'s callback judges
the dump as of now (:func:`judged`) and rewrites its outputs atomically.
"""

from __future__ import annotations

import fcntl
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any, Protocol, TypeVar

import msgspec
import watchfiles
import xxhash

from eventlog import clock, snapshot
from eventlog.clock import At
from eventlog.fold import Folder
from eventlog.logs import NotALogFile, open_regular, output_lock_path
from eventlog.replay import Replay
from eventlog.runners.common import LockUnavailable, open_lock, read_stamp, stamp_lock
from projections.triage import LinesVanished

#: watchfiles' defaults wait ~95 ms; these see an appended line in a few ms.
DEBOUNCE_MS = 10
STEP_MS = 1
#: How often the outputs are rewritten, judged again, when no line arrives (``--tick``).
TICK_S = 5.0
#: The longest the loop sleeps between looks at the file and the clock (a quarter of a shorter tick).
WAKE_S = 0.2
#: How late a look may come after its wake (the loop's own work, the machine): a judge due before the next look
#: plus this is made at this look (:class:`Schedule`).
LOOK_LATE_S = 0.05
#: How often every byte already folded is read again (:meth:`Follower.verify`).
VERIFY_EVERY_S = 5.0
#: What follows why no log file is at the path (a directory, a FIFO, a device), on stderr and in a 503.
WAITING_FOR_A_FILE = "waiting for a log file there"
#: What follows why the log file cannot be read (``LOG cannot be read (Permission denied)``).
WAITING_UNTIL_READABLE = "waiting until it can"
#: What :class:`Follower` waits out at the path, besides nothing: no file a log can be, a file it may not read.
WAITED_FOR = (FileNotFoundError, NotALogFile, PermissionError)

_F = TypeVar("_F")


class Follower:
    """One log's folded state, kept level with the file."""

    def __init__(
        self,
        path: str,
        new_folder: Callable[[], Folder],
        snapshot_path: str | None = None,
        *,
        assume_tz: tzinfo | None = None,
    ) -> None:
        self.path = path
        self.new_folder = new_folder
        self.snapshot_path = snapshot_path
        self.replay = Replay(new_folder(), assume_tz)
        self.identity: tuple[int, int] | None = None
        #: The file is not there (not yet, or not any more), or what is there is no file or cannot be read
        #: (``not_file``): it is waited for.
        self.missing = False
        #: Why what is at the path is no log file that can be read (a directory, a FIFO, a device, a file this
        #: process may not read), while it is there.
        self.not_file: str | None = None
        #: What is waited for meanwhile (:data:`WAITING_FOR_A_FILE` or :data:`WAITING_UNTIL_READABLE`).
        self._until = WAITING_FOR_A_FILE
        #: Committed lines that vanished while the log was followed (a truncation, a shorter file put in its
        #: place, a log gone that came back shorter: rotated); kept until the process ends.
        self.vanished: LinesVanished | None = None
        #: The lines folded before a replay from the start, until that replay has caught up.
        self._lines_before: int | None = None
        self._edge: tuple[str, str] | None = None
        #: xxh3-128 of every byte folded so far (``replay.offset``), kept up as lines come (:meth:`verify`).
        self._digest = xxhash.xxh3_128()
        #: The file's (size, mtime, ctime) when it was last read: a change without growth is an edit.
        self._stamp: tuple[int, int, int] | None = None
        #: Why the snapshot was not saved the last time it was to be (None: it was, or not yet): :func:`keep_snapshot`.
        self.unsaved: str | None = None
        #: What the snapshot holds (:meth:`snapshot_mark` when it was loaded or last saved; None: not known).
        self.saved: object = None

    def start(self) -> str | None:
        """Load the snapshot when it matches, then catch up; returns a note for a person, if any.

        A snapshot of this log that does not match it is the state of a follow that ran before: the committed
        lines it held that the log no longer holds vanished while no follow ran, and go into ``vanished`` as
        those that vanish under a running follow do (one rule: :meth:`_count_vanished`); with no log at the path
        yet, once one is there.
        """
        note = None
        if self.snapshot_path:
            try:
                with open_regular(self.path) as f:
                    loaded, why = snapshot.load(self.snapshot_path, f, self.replay)
                    if loaded is not None:  # checked against the snapshot already: the running hash starts here
                        st = os.fstat(f.fileno())
                        self.replay, self.identity = loaded, (st.st_dev, st.st_ino)
                        self._digest = snapshot.prefix_hash(f.fileno(), loaded.offset)
                        self.saved = self.snapshot_mark()
                    elif why != "no snapshot":
                        self._lines_before = snapshot.committed(self.snapshot_path, self.path, f)
            except WAITED_FOR:  # catch_up says which; the lines the snapshot held count once the log is back
                loaded, why = None, "no log yet"
                self._lines_before = snapshot.committed(self.snapshot_path, self.path)
            if loaded is None and why not in ("no snapshot", "no log yet"):
                note = f"{why}; replaying from the start"
        more = self.catch_up()
        return note or more

    def catch_up(self) -> str | None:
        """Fold the file's new complete lines; replay from the start if it was truncated or replaced.

        Nothing at the path, no file that can hold a log (a directory, a FIFO, a
        device: never read, so never blocked on), or a file it may not read, is waited
        for (``missing``).
        Committed lines that vanished are kept in ``vanished``.
        """
        try:
            f = open_regular(self.path)
        except FileNotFoundError:
            return self._absent(None)
        except NotALogFile as err:
            return self._absent(str(err))
        except PermissionError as err:
            return self._absent(f"{self.path} cannot be read ({err.strerror or err})", WAITING_UNTIL_READABLE)
        came = self.missing
        self.missing, self.not_file = False, None
        with f:
            st = os.fstat(f.fileno())
            note = None
            ident = (st.st_dev, st.st_ino)
            if self.identity is not None and ident != self.identity:
                note = f"{self.path} was replaced; replaying it from the start"
            elif st.st_size < self.replay.offset:
                note = f"{self.path} was truncated; replaying it from the start"
            elif self.replay.offset and self._edge is not None and self._edges(f) != self._edge:
                note = f"{self.path} was rewritten; replaying it from the start"
            elif self._stamp is not None and _stamp(st) != self._stamp and st.st_size == self._stamp[0] \
                    and not _intact(f, *self.folded()):
                note = f"{self.path} was edited before the lines already read; replaying it from the start"
            if note:
                self._replay_again()
            self.identity = ident
            start = self.replay.offset
            self.replay.feed(f)
            if self.replay.offset > start:
                self._digest.update(os.pread(f.fileno(), self.replay.offset - start, start))
            lost = self._count_vanished()
            self._edge = self._edges(f)
            self._stamp = _stamp(st)
            if note or not came:
                return note
            fewer = f", holding {lost} committed lines fewer than it did (counted as vanished)" if lost else ""
            return f"{self.path} is there now{fewer}; following it"

    def _absent(self, instead: str | None, until: str = WAITING_FOR_A_FILE) -> str | None:
        """No log at the path: nothing (``instead`` None) or what is there instead, waited for ``until`` it is
        one; the note when that is news.

        What was folded is dropped, its committed lines kept count of: a log that comes back is read from its
        start, and the committed lines it no longer holds vanished (a log moved away and made again, as
        logrotate does: every verdict comes from the whole log), as when a shorter file takes its place.
        """
        had = bool(self.replay.offset) or self.identity is not None
        news = had or not self.missing or instead != self.not_file
        something = had or self.not_file is not None
        if had:
            self._replay_again()
        self.missing, self.not_file, self._until = True, instead, until
        if not news:
            return None
        if instead is not None:
            return self.why_missing()
        if something:
            return f"{self.path} is gone; waiting for it to come back"
        return f"{self.path} does not exist yet; waiting for it"

    def why_missing(self) -> str:
        """Why the log is not followed now, for a person (while ``missing``)."""
        if self.not_file is not None:
            return f"{self.not_file}; {self._until}"
        return f"{self.path} does not exist (yet, or any more); waiting for it"

    def _replay_again(self) -> None:
        """The file changed under the lines folded: replay it from the start, remembering how many there were."""
        if self._lines_before is None:
            self._lines_before = self.replay.events  # committed lines only: a stray file's bad lines never were
        self._reset()

    def _count_vanished(self) -> int:
        """After a replay from the start: committed lines (events) the file no longer holds go into ``vanished``;
        how many did now."""
        before, self._lines_before = self._lines_before, None
        counted = self.vanished.lines if self.vanished else 0
        self.vanished = vanished_since(self.vanished, before, self.replay.events)
        return (self.vanished.lines if self.vanished else 0) - counted

    def verify(self) -> str | None:
        """Re-read every byte folded so far; replay from the start when any changed (a same-length edit).

        Returns the note for a person, if any. :func:`follow` calls it every
        :data:`VERIFY_EVERY_S` (an edit that grew the file too is noticed then);
        an edit that leaves the size as it was is noticed on the change itself.
        """
        if self.missing:
            return None
        offset, digest = self.folded()
        try:
            f = open_regular(self.path)
        except WAITED_FOR:
            return None  # catch_up's business, as a shorter file is
        with f:
            if os.fstat(f.fileno()).st_size < offset or _intact(f, offset, digest):
                return None
        return self.edited()

    def folded(self) -> tuple[int, bytes]:
        """How many bytes are folded and their hash, read together (:meth:`verify` reads the file meanwhile, while
        another thread may fold more: ``eventlog serve``'s decisions)."""
        return self.replay.offset, self._digest.digest()

    def edited(self) -> str:
        """The file was edited before the lines already read: replay it from the start; the note for a person."""
        self._replay_again()
        return f"{self.path} was edited before the lines already read; replaying it from the start"

    def snapshot_mark(self) -> object:
        """What a snapshot taken now would hold: the file, the offset and the hash of every byte folded before it
        (the state is theirs: :meth:`catch_up` replays a file that changed under it)."""
        return self.identity, self.replay.offset, self._digest.digest()

    def save_snapshot(self) -> str | None:
        """Write the snapshot (if one was asked for) at the current position; why it was not saved, if so.

        It is a cache: a state msgpack cannot hold, or a file that cannot be written (a directory gone, a full
        disk), is a note naming the snapshot, never an error. A save skipped (no log to take it from: catch_up
        says so) answers as the last one did.
        """
        if not self.snapshot_path or self.missing:
            return self.unsaved
        try:
            f = open_regular(self.path)
        except WAITED_FOR:
            return self.unsaved  # gone since it was read: catch_up says so
        with f:
            try:
                snapshot.save(self.snapshot_path, f, self.replay, snapshot.folder_version(self.replay), self.path)
            except snapshot.NotSaved as err:
                return f"snapshot {self.snapshot_path} not saved: {err}"
        return None

    def dump(self, at: datetime | None = None, at_text: str | None = None) -> dict[str, Any]:
        """The dump ``tools/replay --at AT LOG`` would print now (no ``at``: as of the last line)."""
        return self.replay.dump(self.path, at, at_text)

    def _reset(self) -> None:
        self.replay = Replay(self.new_folder(), self.replay.reader.assume_tz)
        self.identity = None
        self._edge = None
        self._digest = xxhash.xxh3_128()
        self._stamp = None

    def _edges(self, f: Any) -> tuple[str, str]:
        # only the edges: snapshot.position would also hash the whole prefix (O(file) per change)
        return snapshot.edges(f, self.replay.offset)


def _intact(f: Any, offset: int, digest: bytes) -> bool:
    """Whether the bytes of ``f`` before ``offset`` still hash to ``digest`` (:meth:`Follower.folded`'s)."""
    return snapshot.prefix_hash(f.fileno(), offset).digest() == digest


def vanished_since(vanished: LinesVanished | None, before: int | None, after: int) -> LinesVanished | None:
    """``vanished`` with the committed lines (events) a log held ``before`` (None: not known) that it no longer holds
    (``after``: those it holds now, read from its start) added, noticed now; ``vanished`` as it was when none did.

    One rule for a file and a stream (:class:`Follower`, ``eventlog.jetstream.StreamFollower``): lines that vanish
    under a running follow, and those a ``--snapshot`` held that vanished while no follow ran.
    """
    if before is None or after >= before:
        return vanished
    at = clock.now().isoformat(timespec="seconds")
    lines, times, first = before - after, 1, at
    if vanished is not None:
        lines, times, first = lines + vanished.lines, times + vanished.times, vanished.first_at
    return LinesVanished(lines=lines, times=times, first_at=first, last_at=at, before=before, after=after)


def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns


class Followed(Protocol):
    """What :func:`judged` needs of a follower (a file's or a stream's)."""

    @property
    def replay(self) -> Replay:
        """The folded state."""
        ...

    def dump(self, at: datetime | None = None, at_text: str | None = None) -> dict[str, Any]:
        """The dump as of ``at``."""
        ...


class LogUnreachable(msgspec.Struct, frozen=True):
    """A followed stream whose server cannot be reached (the dump's ``log_unreachable``): since when (this host's
    clock), why, and the last sequence folded (the dump's counts are as of it, judged as of its ``as_of``)."""

    since: str
    reason: str
    seq: int


def judged(follower: Followed, at: At) -> dict[str, Any]:
    """The follower's dump judged as of ``at`` (now by default); ``log_missing`` when the log is not there,
    ``log_unreachable`` while a stream's server cannot be reached (:class:`LogUnreachable`), ``lines_vanished``
    when committed lines vanished while it was followed (:class:`LinesVanished`)."""
    replay = follower.replay
    when, text = at.resolve(replay.last_at, replay.last_ts)
    dump = follower.dump(when, text)
    if getattr(follower, "missing", False):  # no file at the path, no stream on the server
        dump["log_missing"] = True
    unreachable = getattr(follower, "unreachable", None)
    if unreachable is not None:
        dump["log_unreachable"] = msgspec.to_builtins(unreachable)
    vanished = getattr(follower, "vanished", None)
    if vanished is not None:
        gaps = dump.get("lines_vanished") or {}  # a stream's sequences without a message: counted as well
        dump["lines_vanished"] = {**gaps, **msgspec.to_builtins(vanished),
                                  "lines": vanished.lines + gaps.get("lines", 0)}
    return dump


def write_text(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` atomically, readable by the dashboards (mode 0644)."""
    snapshot.write_atomic(path, text.encode("utf-8"), mode=0o644)


class OutputRefused(Exception):
    """An output ``follow`` may not write (:func:`hold_outputs`); the message names it and why, for a person."""


class OutputHeld(OutputRefused):
    """An output whose lock another process holds (:func:`hold_outputs`): ``held`` names the output, that process
    (a follow, or a ``replay --snapshot`` at work) and the lock; the message is ``follow``'s refusal."""

    def __init__(self, option: str, path: str, lock: str, holder: tuple[str, str]) -> None:
        command, who = holder
        self.held = f"{option} {path} is written by another {command} ({who}, holding {lock})"
        super().__init__(f"{self.held}: stop it first, or give this one other outputs; not following it")


@dataclass
class Holding:
    """What :func:`hold_outputs` made of the outputs: notes for a person, and the outputs whose lock is held."""

    notes: list[str] = field(default_factory=list)
    #: The paths of the outputs this process holds the lock of (not a snapshot kept without its lock).
    locked: list[str] = field(default_factory=list)


def hold_outputs(outputs: Iterable[tuple[str, str | None]], held: ExitStack, cache: str = "--snapshot",
                 command: str = "follow") -> Holding:
    """Lock each output (option, path; None: not given) until ``held`` closes, so that no other process writes it.

    Each lock is an exclusive ``flock`` on :func:`~eventlog.logs.output_lock_path`, never waited for, with this
    process's pid, host and ``command`` (``follow``, ``replay``) written in it; the kernel releases it when the
    process ends, however it ends. :class:`OutputHeld` when another process holds one (its pid and host as it wrote
    them), :class:`OutputRefused` when the lock file of an output cannot be created or opened (:func:`_unlockable`).
    The ``cache`` output (the snapshot) is kept without its lock when that cannot be made; the note for a person
    is in the answer, except when its directory is not there (saving it says so, as a cache that cannot be saved is).
    """
    holding = Holding()
    for option, path in outputs:
        if not path:
            continue
        lock = output_lock_path(path)
        try:
            fd = open_lock(lock)
        except LockUnavailable as err:
            if option != cache:
                raise OutputRefused(_unlockable(path, lock, err)) from err
            if os.path.isdir(os.path.dirname(lock)):
                holding.notes.append(f"snapshot {path} kept without its lock: {err.why}")
            continue
        held.callback(os.close, fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputHeld(option, path, lock, _holder(fd)) from None
        stamp_lock(fd, command)
        holding.locked.append(path)
    return holding


def _unlockable(path: str, lock: str, err: LockUnavailable) -> str:
    """Why output ``path`` is refused, its lock file ``lock`` not made: in the output's own words when no new file
    can be made beside it (the output, written as a new file and renamed, could not be either), else the lock's."""
    cause = err.__cause__
    if isinstance(cause, OSError) and not os.path.lexists(lock):
        return f"cannot write {path}: {snapshot.why_not_written(path, cause)}"
    return f"{err.why}; not following it"


def _holder(fd: int) -> tuple[str, str]:
    """Who holds an output's lock, as it wrote itself in: its command (``follow``, ``replay``) and ``pid N``, ``pid N
    on HOST`` when HOST is another host. A stamp that names no command is a follow's (versions before ``replay
    --snapshot`` took the lock wrote none); none yet is a ``process``'s."""
    stamp = read_stamp(fd)
    if stamp is None:
        return "process", "pid not known yet"  # it has not written it yet
    command, where = stamp
    return command or "follow", where


def sweep(paths: Iterable[str], report: Callable[[str], None]) -> float | None:
    """Remove what a writer killed mid-write left beside each output in ``paths`` (:func:`eventlog.snapshot.
    remove_leftovers`: its own temporary files, untouched for a minute), saying each one removed; when
    (``time.time()``) the youngest one it left comes of age (None: it left none). Call it only for outputs whose
    lock this process holds (:attr:`Holding.locked`): then none is a write at work."""
    due = []
    for path in paths:
        removed, when = snapshot.remove_leftovers(path)
        for left in removed:
            report(f"removed {left}, left by a writer stopped while writing {path}")
        if when is not None:
            due.append(when)
    return min(due, default=None)


class Leftovers:
    """:func:`sweep` of the outputs a follow holds the lock of: at once, and again (:meth:`again`) once the
    youngest file it left then comes of age. A writer killed a moment before this one took the lock (the unit's
    restart 5 s after a kill) left one too young to remove at once: it is removed a minute after it was written,
    not left until the next restart."""

    def __init__(self, paths: Iterable[str], report: Callable[[str], None]) -> None:
        self.paths = list(paths)
        self.report = report
        self.due = sweep(self.paths, report)

    def again(self) -> None:
        """Sweep again when a file left by the last sweep has come of age since."""
        if self.due is not None and time.time() >= self.due:
            self.due = sweep(self.paths, self.report)


class Schedule:
    """When a follow loop judges again with no new line: ``tick_s`` after the previous judge began, never later.

    The loop looks at the file (or the stream) and the clock every ``wake_s`` (:func:`wake_ms`); a judge that would
    fall due before the next look, give or take :data:`LOOK_LATE_S`, is made at this one. So judges begin at most
    ``tick_s`` apart and at least ``tick_s - wake_s - LOOK_LATE_S``; later only when a look comes more than
    :data:`LOOK_LATE_S` after its wake (a machine too busy to wake the process, a judge or a snapshot that takes
    longer than the tick). Clocks are ``time.monotonic`` seconds.
    """

    def __init__(self, tick_s: float, now: float) -> None:
        self.tick_s = tick_s
        self.wake_s = wake_ms(tick_s) / 1000
        #: Looks that may come late by this much still judge in time (never more than a wake: a tiny tick).
        self.late_s = min(LOOK_LATE_S, self.wake_s)
        #: When the latest judge began.
        self.began = now

    def due(self, now: float) -> bool:
        """Whether to judge at this look (at ``now``): the next one would come after the tick."""
        return now + self.wake_s + self.late_s >= self.began + self.tick_s

    def judge(self, on_change: Callable[[_F], None], follower: _F) -> None:
        """Judge now (``on_change``), and count the next tick from now."""
        self.began = time.monotonic()
        on_change(follower)


def follow(
    follower: Follower,
    on_change: Callable[[Follower], None],
    report: Callable[[str], None],
    stop: threading.Event | None = None,
    snapshot_every_s: float = 10.0,
    tick_s: float = TICK_S,
) -> None:
    """Catch up, call ``on_change``, then again on every change of the file until ``stop`` is set.

    With no change, ``on_change`` is called again at most ``tick_s`` after the
    previous call began (:class:`Schedule`), so what it judges as of now is judged
    again. SIGINT and SIGTERM set ``stop`` (when called from the main thread).
    """
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    note = follower.start()
    if note:
        report(note)
    schedule = Schedule(tick_s, time.monotonic())
    schedule.judge(on_change, follower)
    saved = verified = time.monotonic()
    target = Path(follower.path).resolve()
    directory = str(target.parent)

    # Every change in the directory comes back here (no watch_filter): a filtered one would have watchfiles wait
    # a whole wake again, and the outputs written beside the log would hold each tick back that long.
    for changes in watchfiles.watch(
        directory, watch_filter=None, debounce=DEBOUNCE_MS, step=STEP_MS, stop_event=stop,
        rust_timeout=wake_ms(tick_s), yield_on_timeout=True, raise_interrupt=False, recursive=False,
    ):
        if stop.is_set():
            break
        tick = schedule.due(time.monotonic())
        if tick or not changes or any(Path(changed) == target for _change, changed in changes):
            before = seen(follower)
            note = follower.catch_up()
            if note:
                report(note)
            if note or seen(follower) != before or tick:
                schedule.judge(on_change, follower)
        busy = False
        if time.monotonic() - verified > VERIFY_EVERY_S:
            note = follower.verify()
            verified = time.monotonic()
            busy = True
            if note:
                report(note)
                follower.catch_up()
                schedule.judge(on_change, follower)
        if follower.snapshot_path and time.monotonic() - saved > snapshot_every_s:
            keep_snapshot(follower, report)
            saved = time.monotonic()
            busy = True
        if busy and schedule.due(time.monotonic()):  # that took a while: the next look may come after the tick
            schedule.judge(on_change, follower)
    keep_snapshot(follower, report)


def seen(follower: Follower) -> tuple[Any, ...]:
    """What a reader of the follower's outputs can see change: the state, how far it read, the torn tail
    (the unfinished batch in it, and whether it is stuck), whether the log is there."""
    r = follower.replay
    return r, r.offset, r.line, r.torn_tail, r.uncommitted, r.stuck_tail, follower.missing


def wake_ms(tick_s: float) -> int:
    """How long a follow loop may sleep, in ms: :data:`WAKE_S`, a quarter of a shorter tick (1 ms at least)."""
    return max(1, int(min(WAKE_S, tick_s / 4) * 1000))


class Snapshotting(Protocol):
    """What :func:`keep_snapshot` needs of a follower (a file's or a stream's)."""

    snapshot_path: str | None
    unsaved: str | None
    saved: object

    def snapshot_mark(self) -> object:
        """What a snapshot saved now would hold (equal marks: the same state)."""
        ...

    def save_snapshot(self) -> str | None:
        """Save the snapshot; why it was not saved (None: it was, or none was asked for)."""
        ...


def keep_snapshot(follower: Snapshotting, report: Callable[[str], None]) -> None:
    """Save the follower's snapshot, a cache, when the log moved past what it holds (``follower.saved``): an idle
    log's is not written again (as ``replay --snapshot`` does not). Why it is not saved is reported once, not every
    10 s (it is ``follower.unsaved`` until it is saved: ``recovery_snapshot_unsaved``), and that it is saved again
    when it is."""
    mark = follower.snapshot_mark()
    if mark == follower.saved:
        return
    note = follower.save_snapshot()
    if note is not None and note != follower.unsaved:
        report(note)
    elif note is None and follower.unsaved is not None:
        report(f"snapshot {follower.snapshot_path} saved again")
    follower.unsaved = note
    if note is None:
        follower.saved = mark
