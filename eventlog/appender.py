"""Appending to a log: lock, seq, expected revision, torn-tail repair, all or nothing.

The appender does not re-read the log on every append: a sidecar file beside
the log (``LOG.sidecar``) holds the folded state, the byte offset it reached and
a fingerprint of the bytes before that offset. It is checked against the file
under the lock and rebuilt from the log when anything does not match; only
lines after its offset are read, and it is saved again once the log has
grown past it by a quarter of its size (see :data:`SIDECAR_LAG`). An
:class:`EventLog` also keeps the state of its last successful append in
memory and uses it again while the file is exactly as that append left it
(same file, size, modification and change times), so a process that is the
only writer loads the sidecar once. The transition check is the folder's: the
appender receives a function that makes an empty one.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any

import msgspec

from eventlog import clock, snapshot
from eventlog.events import Event, type_name
from eventlog.fold import Folder, Rejected
from eventlog.reader import MAX_LINE_BYTES, validate_object
from eventlog.replay import Replay

_encoder = msgspec.json.Encoder()

#: The sidecar is saved again once the log has grown past it by a quarter of the
#: sidecar's own size, at least 16 KiB and at most this much: saving costs about
#: its size, folding the lag costs about the lag, so both stay small.
SIDECAR_LAG = 256 << 10


class AppendError(Exception):
    """An append that wrote nothing; ``messages`` holds one line per problem.

    ``notes`` holds what a person should know besides (a sidecar refused and rebuilt), as on :class:`AppendResult`.
    """

    exit_code = 1

    def __init__(self, messages: list[str]) -> None:
        super().__init__("; ".join(messages))
        self.messages = messages
        self.notes: list[str] = []


class BadInput(AppendError):
    """An event that is not valid input (exit 2)."""

    exit_code = 2


class Conflict(AppendError):
    """A refused transition or a revision mismatch (exit 3)."""

    exit_code = 3


@dataclass
class AppendResult:
    """What an append wrote."""

    first_seq: int
    last_seq: int
    written: int
    offset: int
    torn_tail_cut: int = 0
    notes: list[str] = field(default_factory=list)


def _default_folder() -> Folder:
    from projections.runner import Runner  # the default check: the replay's own projections

    return Runner()


class EventLog:
    """One JSONL log file that events are appended to.

    ``new_folder`` makes the empty projection state that checks transitions;
    by default it is the same runner ``tools/replay`` uses.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        new_folder: Callable[[], Folder] | None = None,
        *,
        assume_tz: tzinfo | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.sidecar = self.path + ".sidecar"
        self.new_folder = new_folder or _default_folder
        #: The zone the log's own lines without an offset are read in (None: they are bad lines).
        self.assume_tz = assume_tz
        #: The state after this object's last successful append, the file's stat as that
        #: append left it, and the offset the sidecar was saved at (None: not yet).
        self._kept: tuple[Replay, _Stamp, int | None] | None = None

    def append(
        self,
        events: Iterable[dict[str, Any] | Event],
        *,
        expect_revision: int | None = None,
        check: bool = True,
        fsync: bool = False,
        now: Callable[[], datetime] | None = None,
    ) -> AppendResult:
        """Validate every event, then write all of them or none, under the lock.

        Raises :class:`BadInput` (nothing valid to write), :class:`Conflict`
        (refused transition or revision mismatch) or :class:`AppendError`
        (the file could not be written; nothing partial is left).
        """
        checked = validated(events, now)
        with _locked(self.path) as fd:
            return self._append_locked(fd, checked, expect_revision, check, fsync)

    def state(self) -> Replay:
        """The folded state of the whole log (through the sidecar, under the lock)."""
        with _locked(self.path) as fd:
            return self._load(fd)[0]

    # -- under the lock -------------------------------------------------------

    def _append_locked(
        self,
        fd: int,
        checked: list[tuple[dict[str, Any], Event, datetime]],
        expect_revision: int | None,
        check: bool,
        fsync: bool,
    ) -> AppendResult:
        replay, notes, saved_at = self._load(fd)  # takes the kept state: a failure below must not keep it
        try:
            return self._write_checked(fd, replay, notes, saved_at, checked, expect_revision, check, fsync)
        except AppendError as err:
            err.notes[:0] = notes
            raise

    def _write_checked(
        self,
        fd: int,
        replay: Replay,
        notes: list[str],
        saved_at: int | None,
        checked: list[tuple[dict[str, Any], Event, datetime]],
        expect_revision: int | None,
        check: bool,
        fsync: bool,
    ) -> AppendResult:
        size = os.fstat(fd).st_size
        cut = size - replay.offset
        if expect_revision is not None:
            have = replay.folder.revision(checked[0][1])
            if have != expect_revision:
                raise Conflict([f"line 1: expected revision {expect_revision}, stream is at {have}"])
        first_seq = replay.reader.last_seq + 1
        refused: list[str] = []
        chunks: list[bytes] = []
        for i, (obj, ev, at) in enumerate(checked, 1):
            ev.seq = replay.reader.last_seq + 1
            result = replay.apply(ev, at)
            if check and isinstance(result, Rejected):
                refused.append(f"line {i}: {type_name(ev)} rejected: {result.reason}")
            out = {"type": obj["type"], "ts": obj["ts"], "seq": ev.seq}
            out.update(obj)
            chunks.append(_encoder.encode(out) + b"\n")
        if refused:
            raise Conflict(refused)
        data = b"".join(chunks)
        if cut:
            os.ftruncate(fd, replay.offset)
            notes.append(f"cut a torn tail of {cut} bytes at offset {replay.offset} (left by a crashed writer)")
        _write_all(fd, data, replay.offset)
        if fsync:
            os.fsync(fd)
        replay.offset += len(data)
        replay.torn_tail = False
        if saved_at is None or replay.offset - saved_at > self._lag_allowed():
            if self._save(fd, replay):
                saved_at = replay.offset
        self._kept = (replay, _stamp(fd), saved_at)
        return AppendResult(first_seq, replay.reader.last_seq, len(checked), replay.offset, cut, notes)

    def _load(self, fd: int) -> tuple[Replay, list[str], int | None]:
        """The sidecar's state if it still matches the file, caught up to its end.

        Also returns the offset the sidecar was saved at (None: it was rebuilt).
        """
        notes: list[str] = []
        kept, self._kept = self._kept, None
        if kept is not None and kept[1] == _stamp(fd):
            # Nobody wrote since: the bytes the kept state was folded from are all still there.
            # Had anyone written, the sidecar's own check and a re-read from its offset decide.
            return kept[0], notes, kept[2]
        with os.fdopen(os.dup(fd), "rb") as f:
            fresh = Replay(self.new_folder(), self.assume_tz)
            loaded, why = snapshot.load(self.sidecar, f, fresh)
            saved_at = None if loaded is None else loaded.offset
            if loaded is None and why != "no snapshot":
                notes.append(f"{why}; rebuilt it from the log")
            replay = loaded or fresh
            replay.feed(f)
        return replay, notes, saved_at

    def _lag_allowed(self) -> int:
        """How far the log may run ahead of the sidecar before it is saved again."""
        try:
            size = os.stat(self.sidecar).st_size
        except OSError:
            return 0
        return min(SIDECAR_LAG, max(16 << 10, size // 4))

    def _save(self, fd: int, replay: Replay) -> bool:
        """Save the sidecar; it is only a cache, so a failure to save (or a state msgpack cannot hold) is no error."""
        with os.fdopen(os.dup(fd), "rb") as f:
            try:
                snapshot.save(self.sidecar, f, replay, snapshot.folder_version(replay))
            except (OSError, snapshot.NotSaved):
                return False
        return True


_Stamp = tuple[int, int, int, int, int]


def _stamp(fd: int) -> _Stamp:
    """What any write to the file changes: identity, size, modification and change times."""
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def validated(
    events: Iterable[dict[str, Any] | Event], now: Callable[[], datetime] | None = None
) -> list[tuple[dict[str, Any], Event, datetime]]:
    """Each event checked for appending: ``seq`` dropped, a missing ``ts`` set to now; BadInput otherwise.

    Returns (the object to write, keeping unknown fields; the typed event; its time).
    """
    stamp = (now or clock.now)().isoformat()
    problems: list[str] = []
    checked: list[tuple[dict[str, Any], Event, datetime]] = []
    for i, ev in enumerate(events, 1):
        if isinstance(ev, Event):
            obj: dict[str, Any] = msgspec.to_builtins(ev)
        elif isinstance(ev, dict):
            obj = dict(ev)
        else:
            problems.append(f"line {i}: not_object: expected a JSON object, got {type(ev).__name__}")
            continue
        obj.pop("seq", None)
        obj.setdefault("ts", stamp)
        result = validate_object(obj)
        if isinstance(result, str):
            problems.append(f"line {i}: {result}")
        else:
            checked.append((obj, *result))
    if problems:
        raise BadInput(problems)
    if not checked:
        raise BadInput(["no events on input"])
    return checked


def _write_all(fd: int, data: bytes, at: int) -> None:
    """Write ``data`` at offset ``at``; on failure cut the file back and raise."""
    view = memoryview(data)
    done = 0
    try:
        while done < len(view):
            done += os.pwrite(fd, view[done:], at + done)
    except OSError as err:
        try:
            os.ftruncate(fd, at)
        except OSError:
            pass
        reason = "disk full" if err.errno == errno.ENOSPC else (err.strerror or str(err))
        raise AppendError([f"could not write the log: {reason}; nothing was written"]) from err


@contextmanager
def _locked(path: str) -> Iterator[int]:
    """Open (creating with mode 0640) and exclusively lock a log file; yields the fd."""
    if os.path.isdir(path):
        raise AppendError([f"{path} is a directory, not a log file"])
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o640)
    except OSError as err:
        raise AppendError([f"cannot open {path}: {err.strerror}"]) from err
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # closing releases the lock


__all__ = ["MAX_LINE_BYTES", "AppendError", "AppendResult", "BadInput", "Conflict", "EventLog"]
