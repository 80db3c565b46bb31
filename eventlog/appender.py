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
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import IO, Any

import msgspec

from eventlog import clock
from eventlog.events import (
    ID_FIELDS,
    INT64_MAX,
    TIME_FIELDS,
    WRITTEN_TIME,
    WRITTEN_TIME_FORM,
    Event,
    id_problem,
    type_name,
)
from eventlog.fold import Folder, Rejected
from eventlog.reader import MAX_LINE_BYTES, NO_OFFSET_ADVICE, Reader, read_objects, validate_object, zoned
from eventlog.replay import Replay
from eventlog.tail import read_tail

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
    #: Whether the messages name the log already (:class:`LogFileError`: they are about the file itself).
    names_log = False

    def __init__(self, messages: list[str]) -> None:
        super().__init__("; ".join(messages))
        self.messages = messages
        self.notes: list[str] = []

    def said(self, log: str, messages: list[str] | None = None) -> list[str]:
        """Each of ``messages`` (default: this error's) as a line about ``log``, which it names once.

        ``LOG: message``, or the message alone when it names the log already (:attr:`names_log`).
        """
        lines = self.messages if messages is None else messages
        return list(lines) if self.names_log else [f"{log}: {line}" for line in lines]


class BadInput(AppendError):
    """An event that is not valid input (exit 2)."""

    exit_code = 2


class Conflict(AppendError):
    """A refused transition or a revision mismatch (exit 3)."""

    exit_code = 3


class LogFileError(AppendError):
    """The log file itself cannot take an append (a directory, one that cannot be opened, one replaced meanwhile,
    one a write to failed: a full disk, a file size limit).

    Its messages name the file: a caller that names the log says them as they are (:meth:`AppendError.said`).
    """

    names_log = True


class NotALog(LogFileError):
    """A file that does not look like an event log, left untouched (exit 2)."""

    exit_code = 2


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
        no_log = replay.not_a_log()  # before the tail: cutting a tail does not make the file a log
        if no_log is not None:
            raise NotALog([f"{self.path} {no_log}; left as it is, nothing was written"])
        cut = size - replay.offset
        if cut:
            cut_note = self._cuttable(fd, replay, size)
        if expect_revision is not None:
            have = replay.folder.revision(checked[0][1])
            if have != expect_revision:
                raise Conflict([f"line 1: expected revision {expect_revision}, stream is at {have}"])
        first_seq = replay.reader.last_seq + 1
        last_seq = first_seq + len(checked) - 1
        if last_seq > INT64_MAX:
            raise AppendError([f"{seq_exhausted(replay.reader.last_seq, len(checked))}; nothing was written"])
        data = self._lines(replay, checked, first_seq, last_seq, check)
        if cut:
            os.ftruncate(fd, replay.offset)
            notes.append(cut_note)
        _write_all(fd, data, replay.offset, self.path)
        if fsync:
            os.fsync(fd)
        replay.offset += len(data)
        replay.torn_tail = False
        replay.uncommitted = None
        replay.stuck_tail = None
        if saved_at is None or replay.offset - saved_at > self._lag_allowed():
            if self._save(fd, replay):
                saved_at = replay.offset
        self._kept = (replay, _stamp(fd), saved_at)
        return AppendResult(first_seq, replay.reader.last_seq, len(checked), replay.offset, cut, notes)

    def _lines(
        self,
        replay: Replay,
        checked: list[tuple[dict[str, Any], Event, datetime]],
        first_seq: int,
        last_seq: int,
        check: bool,
    ) -> bytes:
        """The bytes to write, each line read back by the replay's own reader first; folds them into ``replay``.

        Raises BadInput for a line that would be too long or would not read
        back as the same event, Conflict for refused transitions.
        """
        refused: list[str] = []
        problems: list[str] = []
        chunks: list[bytes] = []
        reader = Reader(self.assume_tz)
        reader.last_seq = first_seq - 1
        marker = last_seq if last_seq > first_seq else None
        for i, (obj, ev, at) in enumerate(checked, 1):
            ev.seq = first_seq + i - 1
            ev.batch_end = marker
            line = _written(obj, ev.seq, marker)
            why = _reads_back(reader, line, replay.line + i, ev)
            if why is not None:
                problems.append(f"line {i}: {why}")
                continue
            chunks.append(line + b"\n")
            result = replay.apply(ev, at)
            if check and isinstance(result, Rejected):
                refused.append(f"line {i}: {type_name(ev)} rejected: {result.reason}")
        if problems:
            raise BadInput(problems)
        if refused:
            raise Conflict(refused)
        return b"".join(chunks)

    def _cuttable(self, fd: int, replay: Replay, size: int) -> str:
        """What cutting the file back to ``replay.offset`` removes, as a note; AppendError when it must not be cut.

        The rule is :meth:`eventlog.tail.Tail.refusal`: only an unfinished batch
        and a torn last line of at most one line's worth (1 MiB) that looks like
        the start of a log line are cut.
        """
        start = replay.offset
        with os.fdopen(fd, "rb", closefd=False) as f:
            tail = read_tail(f, start, size)
        why = tail.refusal()
        if why is not None:
            raise NotALog([f"{self.path} {why}; left as it is, nothing was written"])
        if replay.uncommitted is None and tail.has_line_end:
            raise LogFileError([f"{self.path} changed while it was read; nothing was written (try again)"])
        parts = [] if replay.uncommitted is None else [replay.uncommitted.words()]
        if tail.torn:
            parts.append(f"a torn line of {len(tail.torn)} bytes")
        return (f"cut a torn tail of {size - start} bytes at offset {start}, left by a writer that stopped "
                f"mid-write: {' and '.join(parts)}")

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
        from eventlog import snapshot  # here: a replay that appends nothing does not import it

        with os.fdopen(os.dup(fd), "rb") as f:
            fresh = Replay(self.new_folder(), self.assume_tz)
            loaded, why = snapshot.load(self.sidecar, f, fresh, lazy=True)
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
        """Save the sidecar; it is only a cache, so a failure to save (or a state msgpack cannot hold) is no error.

        Under the lock: first the temporary files of a save killed mid-write are removed
        (:func:`eventlog.snapshot.remove_leftovers`; every save of the sidecar holds this lock).
        """
        from eventlog import snapshot

        snapshot.remove_leftovers(self.sidecar)
        with os.fdopen(os.dup(fd), "rb") as f:
            try:
                snapshot.save(self.sidecar, f, replay, snapshot.folder_version(replay), self.path)
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
    """Each event checked for appending (:func:`checked_events`); BadInput naming every bad one.

    Returns (the object to write, keeping unknown fields; the typed event; its time).
    """
    checked, problems = checked_events(events, now)
    if problems:
        raise BadInput([f"line {i}: {why}" for i, why in problems])
    if not checked:
        raise BadInput(["no events on input"])
    return checked


def checked_events(
    events: Iterable[dict[str, Any] | Event], now: Callable[[], datetime] | None = None
) -> tuple[list[tuple[dict[str, Any], Event, datetime]], list[tuple[int, str]]]:
    """Each event checked for appending: a missing ``ts`` set to now; ``seq`` checked as a reader checks it (a
    wrong type or value, ``null`` included, is bad input, as in a log), then dropped: the appender sets it.

    A time not in the written form (:func:`unwritable_time`) and an id no command could name (:func:`bad_id`)
    are refused here, the one check every writer's events go through.

    Returns the good ones as :func:`validated` does, and (1-based place, reason) of each bad one.
    """
    stamp = (now or clock.now)().isoformat()
    problems: list[tuple[int, str]] = []
    checked: list[tuple[dict[str, Any], Event, datetime]] = []
    for i, ev in enumerate(events, 1):
        if isinstance(ev, Event):
            obj: dict[str, Any] = msgspec.to_builtins(ev)
        elif isinstance(ev, dict):
            obj = dict(ev)
        else:
            problems.append((i, f"not_object: expected a JSON object, got {type(ev).__name__}"))
            continue
        obj.pop("batch_end", None)
        obj.setdefault("ts", stamp)
        result = validate_object(obj)
        obj.pop("seq", None)
        if isinstance(result, str):
            problems.append((i, result))
        elif (why := unwritable_time(result[0]) or bad_id(result[0])) is not None:
            problems.append((i, why))
        else:
            checked.append((obj, *result))
    return checked, problems


#: The UTC offset at the end of a time (after validation every time has one, or ``Z``).
_OFFSET = re.compile(r"[+-][0-9:.,]+\Z")


def unwritable_time(ev: Event) -> str | None:
    """Why the appender does not write ``ev``: a time not in the form every writer writes (None: each is).

    The form is ISO 8601's extended one (:data:`eventlog.events.WRITTEN_TIME`); Python reads more (a space or a
    lower-case ``t`` for the ``T``, ``2026-W49-3``, ``20261202T000000+0530``, ``01,5``, an offset with seconds),
    which other tools' ISO 8601 and RFC 3339 parsers cannot read. A writer's rule only: readers read such lines
    of logs already written as before.
    """
    for name in ("ts", *TIME_FIELDS.get(type(ev), ())):
        text = getattr(ev, name)
        if not isinstance(text, str) or WRITTEN_TIME.fullmatch(text):
            continue
        m = _OFFSET.search(text)
        if m is not None and sum(c.isdigit() for c in m[0]) > 4:
            return (f"bad_time: {name} {text!r} has seconds in its UTC offset ({m[0]}), which ISO 8601 does not "
                    "write and other tools cannot read; write the time in an offset of hours and minutes "
                    "(+hh:mm or -hh:mm)")
        return (f"bad_time: {name} {text!r} is not written in ISO 8601's extended form, which other tools cannot "
                f"read; write it as {WRITTEN_TIME_FORM} (e.g. 2026-12-02T09:00:00+05:45 or 2026-12-02T03:15:00Z)")
    return None


def bad_id(ev: Event) -> str | None:
    """Why the appender does not write ``ev``: an id no command could name (:func:`~eventlog.events.id_problem`;
    None: none). A writer's rule only, as :func:`unwritable_time`."""
    for name in ID_FIELDS:
        value = getattr(ev, name, None)
        if isinstance(value, str) and (why := id_problem(value)) is not None:
            return f"bad_id: {name} {why}"
    return None


def refusal(obj: dict[str, Any]) -> str | None:
    """Why :meth:`EventLog.append` would refuse ``obj`` whatever the log holds (None: it would take it).

    The append's checks of one event short of the log's transitions: the
    event's own validity, its line's length with ``seq`` and ``batch_end`` at
    their widest (so an event that passes is never too long once numbered), a
    text no UTF-8 can hold (a lone surrogate), and reading it back as the same
    event. For importers, which name such an event by its source line and
    append the rest rather than refuse all of them.
    """
    checked, problems = checked_events([obj])
    if problems:
        return problems[0][1]
    written, ev, _at = checked[0]
    try:
        widest = _written(written, INT64_MAX, INT64_MAX)
    except UnicodeEncodeError as err:
        return f"not_utf8: {err.object[err.start:err.end]!a} is a lone surrogate, which no UTF-8 text can hold"
    if len(widest) > MAX_LINE_BYTES:
        return f"too_long: {len(widest)} bytes as it would be written, more than a line may hold ({MAX_LINE_BYTES})"
    ev.seq = 1
    why = _reads_back(Reader(), _written(written, 1, None), 1, ev)
    return None if why is None else why.removesuffix("; nothing was written")


def seq_exhausted(last_seq: int, n: int) -> str:
    """Why ``n`` events cannot follow a log whose ``seq`` is at ``last_seq`` (words for a person; a file's and a
    stream's appender say it alike)."""
    return (f"the log's seq is at {last_seq} (a line set its own seq that far ahead: another writer's, or an "
            f"imported file's): {n} more would pass {INT64_MAX}, the largest a line may carry")


def _written(obj: dict[str, Any], seq: int, batch_end: int | None) -> bytes:
    """The line the appender writes for ``obj`` (without its newline): ``type``, ``ts``, ``seq`` first."""
    out = {"type": obj["type"], "ts": obj["ts"], "seq": seq}
    if batch_end is not None:
        out["batch_end"] = batch_end
    out.update(obj)
    return _encoder.encode(out)


_NTH = re.compile(r"line (\d+)(?=:)")


#: What a ``no_offset`` reason advises an HTTP client (``POST /v1/events``), for whom a flag of the server is none.
HTTP_NO_OFFSET_ADVICE = " (a time needs its UTC offset: write it as 2026-08-03T01:20:00+09:00 or ...Z)"


@dataclass
class Input:
    """Events read from JSONL input to be appended: each one's line in ``source``, and every bad line named.

    ``problems`` reads ``SOURCE line N: code: detail``, in line order; when there is
    any, nothing may be written.
    """

    source: str
    events: list[dict[str, Any]]
    lines: list[int]
    problems: list[str]
    #: (the event's index, words) for each time the assumed zone skipped or repeated: written all the same.
    wall_times: list[tuple[int, str]] = field(default_factory=list)
    #: What a ``no_offset`` reason advises, in place of :data:`~eventlog.reader.NO_OFFSET_ADVICE`.
    advice: str = NO_OFFSET_ADVICE

    def named(self, messages: list[str]) -> list[str]:
        """An append's messages with ``line I`` (its I-th event) as the line of the input it came from."""
        return [self.advised(_NTH.sub(self._line, message, count=1) if message.startswith("line ") else message)
                for message in messages]

    def advised(self, message: str) -> str:
        """``message`` with the advice of a ``no_offset`` reason this input's reader needs (:attr:`advice`)."""
        return message.replace(NO_OFFSET_ADVICE, self.advice) if "no_offset: " in message else message

    def where(self, i: int, first_seq: int) -> str:
        """The ``i``-th event (from 0) as written from ``first_seq`` on: ``SOURCE line N (seq S)``."""
        return f"{self.source} line {self.lines[i]} (seq {first_seq + i})"

    def _line(self, m: re.Match[str]) -> str:
        i = int(m[1])
        return f"{self.source} line {self.lines[i - 1]}" if 0 < i <= len(self.lines) else m[0]


def read_input(stream: IO[bytes], source: str, assume_tz: tzinfo | None = None,
               advice: str = NO_OFFSET_ADVICE) -> Input:
    """The events on ``stream`` (``eventlog append``'s stdin, ``POST /v1/events``'s body), every line checked.

    A line that is no JSON object does not stop the check: the events of the
    other lines are validated too, so each bad line is named, not only those of
    the first kind found. With ``assume_tz``, times written without an offset
    are read in that zone (:func:`~eventlog.reader.zoned`), and each one the
    zone skipped or repeated is noted. ``advice``: what a ``no_offset`` reason
    advises (:attr:`Input.advice`). Conflicts are the append's to find, under the lock.
    """
    numbered, bad = read_objects(stream)
    lines = [n for n, _ in numbered]
    events: list[dict[str, Any]] = []
    wall_times: list[tuple[int, str]] = []
    for i, (_, obj) in enumerate(numbered):
        if assume_tz is not None:
            obj, notes = zoned(obj, assume_tz)
            wall_times += [(i, note) for note in notes]
        events.append(obj)
    if bad:
        invalid = checked_events(events)[1]
        bad = sorted([*bad, *((lines[i - 1], why) for i, why in invalid)])
    given = Input(source, events, lines, [], wall_times, advice)
    given.problems = [given.advised(f"{source} line {n}: {why}") for n, why in bad]
    return given


def _write_all(fd: int, data: bytes, at: int, path: str) -> None:
    """Write ``data`` at offset ``at`` of the log ``path``; on failure cut the file back and raise LogFileError."""
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
        raise LogFileError([f"could not write {path}: {reason}; nothing was written"]) from err


def _reads_back(reader: Reader, line: bytes, number: int, ev: Event) -> str | None:
    """Why the replay would not apply ``line`` as ``ev`` (None: it would): the one validation path."""
    if len(line) > MAX_LINE_BYTES:
        return (f"too_long: {len(line)} bytes once seq and ts are added, more than a line may hold "
                f"({MAX_LINE_BYTES}); nothing was written")
    decoded = reader.decode(line, number)
    if isinstance(decoded, str):
        return f"{decoded} (as it would be written); nothing was written"
    if decoded[0] != ev:
        return "would not read back as the same event; nothing was written"
    return None


#: Times a lock is taken again when the path was made to name another file meanwhile.
LOCK_TRIES = 100


@contextmanager
def _locked(path: str) -> Iterator[int]:
    """Open (creating with mode 0640) and exclusively lock a log file; yields the fd.

    After the lock is taken, the path must still name the file that was
    locked (device and inode): a log renamed over or removed while this
    waited is opened and locked again. A file this call created is removed
    again when the append fails and leaves it empty.
    """
    if os.path.isdir(path):
        raise LogFileError([f"{path} is a directory, not a log file"])
    for _ in range(LOCK_TRIES):
        fd, created = _open(path)
        try:
            _regular(path, fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
            if not _names(path, fd):
                continue  # closed below; the path names another file now
            try:
                yield fd
            except BaseException:
                if created:
                    _remove_if_empty(path, fd)
                raise
            return
        finally:
            os.close(fd)  # closing releases the lock
    raise LogFileError([f"{path} was replaced {LOCK_TRIES} times while waiting for its lock; nothing was written"])


def _open(path: str) -> tuple[int, bool]:
    """The log opened for reading and writing, and whether this call created it."""
    try:
        try:
            return os.open(path, os.O_RDWR | os.O_CLOEXEC), False
        except FileNotFoundError:
            try:
                return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o640), True
            except FileExistsError:
                return os.open(path, os.O_RDWR | os.O_CLOEXEC), False
    except OSError as err:
        raise LogFileError([f"cannot open {path} to read and write it: {err.strerror}"]) from err


def _regular(path: str, fd: int) -> None:
    """NotALog unless ``fd`` is a regular file (:func:`not_a_log_file`)."""
    why = not_a_log_file(path, os.fstat(fd).st_mode)
    if why is not None:
        raise NotALog([f"{why}; nothing was written"])


def not_a_log_file(path: str, mode: int) -> str | None:
    """Why a file of ``mode`` cannot hold a log (None: a regular file can).

    A directory is none; a FIFO, a device or /dev/null would hang a reader or writer, or swallow the events.
    """
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return f"{path} is a directory, not a log file"
    kind = " (a FIFO)" if stat.S_ISFIFO(mode) else " (a device)" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else ""
    return f"{path} is not a regular file{kind}, so it cannot hold a log"


def _names(path: str, fd: int) -> bool:
    """Whether ``path`` (followed, as it was opened) still names the open file ``fd``."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _remove_if_empty(path: str, fd: int) -> None:
    """Remove the log this append created, if it is still that file and empty (a refused append leaves nothing)."""
    try:
        if os.fstat(fd).st_size == 0 and _names(path, fd):
            os.unlink(path)
    except OSError:
        pass


__all__ = ["MAX_LINE_BYTES", "AppendError", "AppendResult", "BadInput", "Conflict", "EventLog", "LogFileError",
           "NotALog", "not_a_log_file", "refusal", "seq_exhausted"]
