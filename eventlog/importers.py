"""Importers for the catch-up domain: launchd plists, the quota guard's markers and circuit (seed 002).

- :func:`read_launchd` turns ``*.plist`` files into ``job_registered`` events:
  ``guarded`` when an item of ``ProgramArguments`` holds the guard's name (the
  seed's ``is_guarded``, a plain substring test), ``calendar`` from
  ``StartCalendarInterval`` (a dict or a list of dicts), ``interval_s`` from
  ``StartInterval``. The ledger's own plists (:func:`is_ours`) are skipped.
  What it cannot settle is named and not registered: a schedule value ``int()``
  cannot read, and (:func:`registrations`) a ``Label`` that several plists
  hold; :func:`gone` names the labels a log registers that no plist holds any
  more.
- :func:`read_markers` turns ``CLAUDE_QUOTA_JOB_SKIPPED job=L reason=R
  remaining=Ns ts=EPOCH`` and ``CLAUDE_QUOTA_JOB_RAN job=L exit=N ts=EPOCH``
  lines into ``job_skipped`` and ``job_ran`` events, ``ts`` being the epoch
  in the local zone (or the zone given).
- :func:`read_time` reads the times users' files hold (an epoch or ISO 8601)
  for every importer and observer; :func:`read_circuit` the guard's circuit
  state file (``import circuit``).
- :class:`EndedLines` is how every line reader (``import quota-log``,
  ``worker-log``, ``ledger``, the worker log of ``observe lane``) reads a
  file another program may be writing: a last line without its newline that
  may still become a record is not read yet (:func:`unfinished_problem` when
  it stays so), and is read once it ends; one that can never become one
  (a job's ``Downloading... 100%``) is read as it is.
- :func:`appendable`, :func:`open_text`, :func:`not_utf8` and
  :func:`json_value` are what every importer shares to name an input that
  cannot become an event (``FILE:LINE: reason``, in the log reader's words)
  and import the rest: a byte that is not UTF-8 is named, never replaced by
  U+FFFD (a replaced byte in a label makes another job), JSON nested too deep
  to read is named, and so is an event the appender would refuse (a reason of
  2 MiB).
- :func:`known` folds what a log already holds, and :func:`new_registrations`
  and :func:`new_markers` keep only what it does not, so importing the same
  input twice adds nothing:

  * a ``job_registered`` equal to the label's current registration (same
    ``guarded``, ``calendar`` and ``interval_s``) is not appended again;
  * a marker whose (type, label, instant) is already in the log is not
    appended again (the instant, not the text: a re-import with another
    ``--tz`` adds nothing either);
  * a marker earlier than the latest marker of its job already in the log is
    not appended: appended after it, it would become the job's latest marker
    by log order although it is older (the spec judges by log order). It is
    counted and named (``FILE:LINE``, and the latest it is older than).

  New markers are appended in time order (a stable sort: markers of one
  instant keep the order of the files and lines they came from).

- Records dated ahead of now (:func:`ahead_edge`: more than the views'
  tolerance, ``projections.ahead.TOLERANCE_S``), a typo of the year or a
  writer's clock ahead, are shared by every importer and observer:

  * one the log holds is never the mark a new record is compared with: the
    latest *not dated ahead* is (so ``ts=1896166005``, 2030, imported once does
    not make every later true marker "older");
  * one in the input is not appended, and is named (:func:`not_ahead`): a
    check that waits on it could not fire before the clock passes it.
"""

from __future__ import annotations

import io
import json
import math
import os
import plistlib
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, AnyStr, BinaryIO, Generic, NamedTuple, TextIO

from eventlog.appender import refusal
from eventlog.events import (
    FIRST_YEAR,
    INT64_MAX,
    INT64_MIN,
    LAST_YEAR,
    CalendarEntry,
    Event,
    JobRan,
    JobRegistered,
    JobSkipped,
    written_form,
)
from eventlog.reader import MAX_LINE_BYTES, NESTED_TOO_DEEP, TOO_LONG, deeper_at, iter_lines
from projections.ahead import TOLERANCE_S
from projections.triage import duration_words

#: The name of the guard program the seed's jobs are started through (``is_guarded``: ``claude-quota-guard.py``).
GUARD_PATTERN = "claude-quota-guard"

#: The ``Label`` prefix of the ledger's own plists (ops/launchd): never a job of catch-up's, whatever they run.
OURS = "org.recovery-ledger."

#: ``StartCalendarInterval`` keys, in the order launchd documents them.
CALENDAR_KEYS = ("Month", "Day", "Weekday", "Hour", "Minute")

_NUMBER = r"-?\d+(?:\.\d+)?"
#: A marker's ``ts`` is the whole number: ``ts=2026-12-02T09:00:05+09:00`` is no epoch (it read as 2026 seconds,
#: a time in 1970), so such a marker is one not in the guard's format, named.
_EPOCH_TS = rf"(?P<ts>{_NUMBER})(?![\w:.+-])"
SKIPPED = re.compile(
    rf"CLAUDE_QUOTA_JOB_SKIPPED job=(?P<label>\S+) reason=(?P<reason>.*?) "
    rf"remaining=(?P<remaining>{_NUMBER})s ts={_EPOCH_TS}"
)
RAN = re.compile(rf"CLAUDE_QUOTA_JOB_RAN job=(?P<label>\S+) exit=(?P<exit>-?\d+) ts={_EPOCH_TS}")

#: How each marker reads (seed 002's guard), for a problem naming a marker that does not.
_FORMATS = {"CLAUDE_QUOTA_JOB_SKIPPED": "job=L reason=R remaining=Ns ts=EPOCH",
            "CLAUDE_QUOTA_JOB_RAN": "job=L exit=N ts=EPOCH"}

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)


def instant(at: datetime) -> int:
    """A time as whole microseconds since the epoch (exact, unlike float timestamps)."""
    return (at - _EPOCH) // _MICRO


_EPOCH_TEXT = re.compile(r"\d{9,}(?:\.\d+)?")


def read_time(value: str | float, tz: tzinfo | None) -> datetime:
    """An epoch in seconds (a number, or a string of 9 digits or more) or an ISO 8601 time, as an aware time.

    An epoch is written in ``tz`` (None: the local zone); an ISO time without an offset is read in
    ``tz``. ValueError (saying why) when it is neither, has no offset and no ``tz`` is given, or lies
    outside the years the log holds (spec section 1, Ranges).
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"time {value!r} is neither ISO 8601 nor an epoch")
    if isinstance(value, str) and not _EPOCH_TEXT.fullmatch(value):
        try:
            at = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"time {value!r} is neither ISO 8601 nor an epoch") from None
        if at.tzinfo is None:
            if tz is None:
                raise ValueError(f"time {value!r} has no UTC offset (give --assume-tz)")
            at = at.replace(tzinfo=tz)
    else:
        try:
            at = datetime.fromtimestamp(float(value), tz)
        except (OverflowError, OSError, ValueError):
            raise ValueError(f"time {value!r} is out of range") from None
        at = at if tz is not None else at.astimezone()
    if not FIRST_YEAR <= at.year <= LAST_YEAR:
        raise ValueError(f"time {value!r} is outside the years {FIRST_YEAR} to {LAST_YEAR}")
    return at


def ahead_edge(now: datetime) -> int:
    """The instant past which a record's time is dated ahead of ``now``: now plus the tolerance the views judge by
    (``projections.ahead.TOLERANCE_S``, 5 min: hosts' clocks drift by seconds)."""
    return instant(now) + round(TOLERANCE_S * 1_000_000)


def not_ahead(where: str, problems: list[str], ts: str, at: datetime, now: datetime) -> bool:
    """Whether the record ``where``, dated ``ts`` (``at``), is not dated ahead of ``now`` (:func:`ahead_edge`).

    One that is, is named in ``problems`` as ``WHERE: reason``; the caller leaves it out and goes on: appended,
    a check that waits on it could not fire before the clock passes it (``projections.ahead``).
    """
    at_i = instant(at)
    if at_i <= ahead_edge(now):
        return True
    problems.append(f"{where}: dated {ts}, {duration_words((at_i - instant(now)) / 1e6)} ahead of now, which "
                    "nothing that happened can be (a typo of the year, or its writer's clock ahead?): not appended; "
                    "fix the time")
    return False


def time_text(value: str | float, tz: tzinfo | None) -> str:
    """:func:`read_time` as the log writes it: as written when it had an offset (in the written form:
    :func:`eventlog.events.written_form`), else ISO 8601 with one."""
    at = read_time(value, tz)
    if isinstance(value, str) and not _EPOCH_TEXT.fullmatch(value) and datetime.fromisoformat(value).tzinfo is not None:
        return written_form(value, at)
    return at.isoformat()


# --- what every line reader shares: only the lines a writer has ended ---------------------


#: How long the last line of a file may lack its newline while its writer is at it: a file unchanged for
#: longer was left so (its writer stopped mid-line, or it lacks its last newline), and a person is told.
UNFINISHED_S = 60.0


def _always(line: Any) -> bool:
    return True


class EndedLines(Generic[AnyStr]):
    """The lines of a file (as :func:`open_text` or ``open(path, "rb")`` gives them) that their writer has ended.

    A last line without its newline may be half written, and a half-written
    line can still match its format: ``ts=17961`` of ``ts=1796100000`` is a
    time in 1970, ``ts=2026-08-05T13`` of ``13:54`` is 13:00. Such a line is held
    back, not read (:attr:`unfinished`: its number), when ``pending`` says it
    may still become a record (:func:`unended_json`, :func:`marker_tail`; by
    default every one); it is read once it ends. A last line that can never
    become one (``Downloading... 100%`` left by a job's stderr, a blank one) is
    simply read: nothing in it is a record, now or later. The others keep their
    numbers.
    """

    def __init__(self, lines: Iterable[AnyStr], pending: Callable[[AnyStr], bool] = _always) -> None:
        self._lines: Iterable[AnyStr] = lines
        self._pending: Callable[[AnyStr], bool] = pending
        #: The number of the last line, held back (None: every line ended).
        self.unfinished: int | None = None
        #: How many lines were given to read so far (blank ones included; not the one held back).
        self.read = 0

    def __iter__(self) -> Iterator[AnyStr]:
        for number, line in enumerate(self._lines, 1):
            if line[-1:] in ("\n", "\r", b"\n", b"\r") or not line.strip() or not self._pending(line):
                self.read += 1
                yield line  # a blank last line holds nothing yet: nothing to hold back
            else:  # only the last line of a file can lack its newline
                self.unfinished = number


def bounded_lines(f: BinaryIO) -> Iterator[bytes]:
    """The lines of a file opened ``rb``, each with its newline as iterating it gives them, but never one held whole
    when longer than :data:`~eventlog.reader.MAX_LINE_BYTES`: it is skipped, read in pieces, and comes as
    :data:`~eventlog.reader.TOO_LONG` (with a newline when it had one), for the reader to name as the log reader
    does (:func:`too_long`)."""
    for raw, _end, complete in iter_lines(f):
        yield raw + b"\n" if complete else raw


def bounded_text(f: BinaryIO, size: int = 1 << 16) -> Iterator[str]:
    """The lines of a file opened ``rb`` as :func:`open_text` reads them (universal newlines: ``\\r``, ``\\r\\n``
    and ``\\n`` each end a line, given as ``\\n``; bytes that are not UTF-8 as lone surrogates), but a line longer
    than :data:`~eventlog.reader.MAX_LINE_BYTES` is never held whole: it comes as
    :data:`~eventlog.reader.TOO_LONG` (:func:`too_long` names it), as :func:`bounded_lines` gives it."""
    pending, skipping = b"", False
    while chunk := f.read(size):
        if skipping and not pending and b"\n" not in chunk and b"\r" not in chunk:
            continue  # more of a line too long: never kept
        parts = (pending + chunk).splitlines(keepends=True)
        # the last, not ended yet, or ended by a \r the next chunk's \n may belong to, waits for more
        pending = parts.pop() if parts and not parts[-1].endswith(b"\n") else b""
        for part in parts:
            line = part.rstrip(b"\r\n") + b"\n"
            yield TOO_LONG_TEXT + "\n" if skipping or len(line) - 1 > MAX_LINE_BYTES else _text(line)
            skipping = False
        if len(pending.rstrip(b"\r")) > MAX_LINE_BYTES:
            pending, skipping = pending[-1:] if pending.endswith(b"\r") else b"", True
    if pending:
        ended = pending.endswith(b"\r")
        body = pending.rstrip(b"\r")
        yield (TOO_LONG_TEXT if skipping else _text(body)) + ("\n" if ended else "")
    elif skipping:
        yield TOO_LONG_TEXT


#: :data:`~eventlog.reader.TOO_LONG` as :func:`bounded_text` gives it.
TOO_LONG_TEXT = TOO_LONG.decode()


def _text(line: bytes) -> str:
    return line.decode("utf-8", "surrogateescape")


def too_long(line: AnyStr) -> str | None:
    """``too_long: line is longer than 1048576 bytes`` (the log reader's words) for a line :func:`bounded_lines`
    skipped as over-long (:data:`~eventlog.reader.TOO_LONG`, as bytes or text, with or without its newline);
    else None."""
    raw = line.encode("utf-8", "surrogateescape") if isinstance(line, str) else line
    return f"too_long: line is longer than {MAX_LINE_BYTES} bytes" if raw.rstrip(b"\n") == TOO_LONG else None


def whole_json(line: bytes) -> bool:
    """Whether ``line`` is one whole JSON value (bytes that are not UTF-8 and nesting aside: its reader names
    them). An object, a list, a string or a literal ends with its last character, so a line that decodes to
    one is no half-written line; a number may go on (``12`` of ``123``)."""
    if deeper_at(line) is not None:
        return True
    try:
        value = json.loads(line.decode("utf-8", "replace"))
    except ValueError:
        return False
    return isinstance(value, bool) or not isinstance(value, int | float)


def unended_json(line: bytes) -> bool:
    """Whether the last line ``line`` of a JSON Lines file, without its newline, may still become a record: it opens
    an object or a list (``{``, ``[``, after blanks and a UTF-8 BOM) that is not whole yet (:func:`whole_json`).
    Any other text can never be one (a record is an object): it is read as it is."""
    opens = line.lstrip().removeprefix(b"\xef\xbb\xbf").lstrip()[:1] in (b"{", b"[")
    return opens and not whole_json(line)


def marker_tail(names: Iterable[str]) -> Callable[[str], bool]:
    """Whether a last line without its newline may still become a marker of one of ``names`` (the quota guard's
    ``CLAUDE_QUOTA_JOB_RAN``, the worker log's ``JOB_FINISHED``), as their patterns read one anywhere in a line: it
    holds a name (what follows it may still be written), or its last word is the start of one (``CLAUDE_QUOTA_JOB_R``).
    A line without either can never be one."""
    starts = tuple(names)

    def pending(line: str) -> bool:
        if any(name in line for name in starts):
            return True
        word = line.rsplit(None, 1)[-1] if line.strip() and not line[-1:].isspace() else ""
        return bool(word) and any(name.startswith(word) for name in starts)
    return pending


#: What makes the last line of a quota guard's log a marker being written (:func:`marker_tail`).
MARKER_TAIL = marker_tail(_FORMATS)


def unfinished_problem(where: str, mtime: float, now: float) -> str | None:
    """The problem a last line held back by :class:`EndedLines` (``where``: ``FILE:LINE``) is when its file
    (last changed at ``mtime``, seconds since the epoch) has not changed for :data:`UNFINISHED_S` by ``now``;
    None while it may be a write at work."""
    if now - mtime < UNFINISHED_S:
        return None
    return (f"{where}: the last line has no newline and the file has not changed for a minute: not read "
            "(a writer stopped mid-line?); it is read once it ends with a newline")


# --- what every importer shares: naming an input that cannot become an event -------------


_UNDECODED = re.compile("[\udc80-\udcff]")


def appendable(where: str, problems: list[str], *events: dict[str, Any]) -> bool:
    """Whether the appender would take each of ``events`` whatever the log holds (:func:`eventlog.appender.refusal`).

    Each refusal is named in ``problems`` as ``WHERE: reason``; the caller leaves
    out the events (and what came with them) and goes on, so one bad input never
    stops an import.
    """
    said = [f"{where}: {why}" for why in map(refusal, events) if why is not None]
    problems.extend(said)
    return not said


class NotAFile(OSError):
    """A user's file that is a FIFO or a device: not read (its message is its ``strerror``, without the path)."""

    def __str__(self) -> str:
        return self.strerror or ""


def open_file(path: str) -> BinaryIO:
    """A user's file (a marker file, a plist, a lane's progress file...) opened for reading, never blocking.

    A FIFO waits in ``open()`` for a writer, SIGTERM included, and a device may never end: either raises
    :class:`NotAFile` ("is a FIFO, not a regular file ..."), judged on the file opened without blocking. A
    directory is refused as ``open()`` refuses it.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a socket" if stat.S_ISSOCK(mode) else None)
        if kind is not None:
            raise NotAFile(0, f"is {kind}, not a regular file: not read (reading it could wait for ever)")
        os.set_blocking(fd, True)
        return open(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_text(path: str) -> TextIO:
    """A user's text file (:func:`open_file`), its bytes that are not UTF-8 read as lone surrogates, for
    :func:`not_utf8` to name.

    Never replaced by U+FFFD: a replaced byte in a label or an id makes another one.
    """
    return open_file_text(path, "surrogateescape")


def open_file_text(path: str, errors: str) -> TextIO:
    """:func:`open_file` as UTF-8 text, ``errors`` as :func:`open` takes it."""
    binary = open_file(path)
    try:
        return io.TextIOWrapper(binary, encoding="utf-8", errors=errors)
    except BaseException:
        binary.close()
        raise


def not_utf8(line: str, start: int = 0, end: int | None = None) -> str | None:
    """``not_utf8: invalid UTF-8 at byte K`` as the log reader says it, when ``line[start:end]`` (read by
    :func:`open_text`) holds a byte that is not UTF-8 (K counts from the start of ``line``); else None."""
    m = _UNDECODED.search(line, start, len(line) if end is None else end)
    if m is None:
        return None
    return f"not_utf8: invalid UTF-8 at byte {len(line[:m.start()].encode('utf-8', 'surrogateescape'))}"


def utf8(data: bytes) -> str:
    """``data`` as text; ValueError ``not_utf8: invalid UTF-8 at byte K`` (the log reader's words) when not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"not_utf8: invalid UTF-8 at byte {err.start}") from None


def json_value(data: bytes) -> Any:
    """The JSON value of a user's file or line; ValueError saying why there is none, as the log reader does.

    ``not_utf8: ...``, ``not_json: ...``, or the log's nesting rule
    (:data:`~eventlog.reader.NESTED_TOO_DEEP`, never a RecursionError, whatever the caller's stack).
    """
    text = utf8(data)
    at = deeper_at(data)
    if at is not None:
        raise ValueError(f"{NESTED_TOO_DEEP} (at byte {at})")
    try:
        return json.loads(text)
    except ValueError as err:  # json.JSONDecodeError, or an integer of more than 4300 digits
        raise ValueError(f"not_json: {err}") from None


# --- launchd ---------------------------------------------------------------------------


def is_guarded(plist: dict[str, Any], pattern: str = GUARD_PATTERN) -> bool:
    """The seed's ``is_guarded``: ``ProgramArguments`` is a list and one item holds ``pattern``.

    The seed's own test, a plain substring ("判定はProgramArgumentsの文字列一致だけ"): it also matches
    ``~/.claude-quota-guard/state.json`` in another program's arguments, which is why the ledger's own
    plists (catch-up's names that file) are skipped before it is asked (:func:`is_ours`).
    """
    arguments = plist.get("ProgramArguments")
    return isinstance(arguments, list) and any(pattern in str(value) for value in arguments)


def is_ours(label: str) -> bool:
    """Whether ``label`` is one of the ledger's own plists (:data:`OURS`): follow, serve, catch-up itself ..."""
    return label.startswith(OURS)


def _whole(value: Any, what: str) -> int:
    """``int(value)`` as the seed converts it; ValueError naming ``what`` and the value when that fails or leaves a
    signed 64-bit integer."""
    try:
        whole = int(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{what} {value!r} is not an integer") from None
    if not INT64_MIN <= whole <= INT64_MAX:
        raise ValueError(f"{what} {value!r} is no 64-bit integer")
    return whole


def calendar_entry(raw: Any, what: str = "StartCalendarInterval") -> dict[str, int]:
    """One ``StartCalendarInterval`` entry (``what`` names it) as the log writes it: launchd's five keys.

    ValueError naming the key and its value when an entry is no dictionary or a value is one ``int()``
    cannot read: the seed's ``calendar_slot_passed`` never makes such a job a candidate, but written
    without the value (``{}``, or without its ``Minute``) the entry would say another schedule.
    """
    if not isinstance(raw, dict):
        raise ValueError(f"{what} {raw!r} is not a dictionary")
    return {key: _whole(raw[key], f"{what}: {key}") for key in CALENDAR_KEYS if key in raw}


def registration(plist: dict[str, Any], label: str, pattern: str = GUARD_PATTERN) -> dict[str, Any]:
    """The ``job_registered`` event of one plist; ValueError naming a schedule value it cannot hold."""
    raw = plist.get("StartCalendarInterval")
    calendar: list[dict[str, int]] | None
    if isinstance(raw, dict):
        calendar = [calendar_entry(raw)]
    elif isinstance(raw, list):
        calendar = [calendar_entry(entry, f"StartCalendarInterval entry {n}") for n, entry in enumerate(raw, 1)]
    elif raw is None:
        calendar = None
    else:
        raise ValueError(f"StartCalendarInterval {raw!r} is neither a dictionary nor an array")
    interval_s = None if "StartInterval" not in plist else _whole(plist["StartInterval"], "StartInterval")
    return {
        "type": "job_registered",
        "label": label,
        "guarded": is_guarded(plist, pattern),
        "calendar": calendar,
        "interval_s": interval_s,
    }


class Plist(NamedTuple):
    """A plist with a ``Label``: its path, and its ``job_registered`` (None: it could not become one, named; or it is
    one of the ledger's own plists, ``ours``, never registered)."""

    label: str
    path: str
    event: dict[str, Any] | None
    ours: bool = False


def read_launchd(directory: str, pattern: str = GUARD_PATTERN) -> tuple[list[Plist], list[str]]:
    """Every ``*.plist`` of ``directory`` that has a ``Label`` (sorted by file name), and problems.

    A plist that cannot be read or has no string ``Label`` is a problem and is left out; one whose schedule
    holds a value the log cannot (:func:`registration`) or whose event the appender would refuse (a label of
    2 MiB) is a problem too, kept with no event (its label is there: its job is not gone). One of the
    ledger's own (:func:`is_ours`) is kept with no event and ``ours`` set, whatever else it holds.
    """
    found: list[Plist] = []
    problems: list[str] = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".plist"):
            continue
        path = os.path.join(directory, name)
        try:
            with open_file(path) as f:
                plist = plistlib.load(f)
        except Exception as err:  # noqa: BLE001 - plistlib raises many kinds (expat, binascii, ...): all reported
            problems.append(f"{path}: cannot read the plist: {err}")
            continue
        if not isinstance(plist, dict):
            problems.append(f"{path}: not a dictionary plist")
            continue
        label = plist.get("Label")
        if not isinstance(label, str) or not label:
            problems.append(f"{path}: no Label")
            continue
        if is_ours(label):
            found.append(Plist(label, path, None, ours=True))
            continue
        try:
            ev: dict[str, Any] | None = registration(plist, label, pattern)
        except ValueError as err:
            problems.append(f"{path}: {err}: {label} is not registered")
            ev = None
        found.append(Plist(label, path, ev if ev is not None and appendable(path, problems, ev) else None))
    return found, problems


def registrations(plists: Iterable[Plist]) -> tuple[list[dict[str, Any]], list[str]]:
    """The ``job_registered`` of each label one plist names, and a problem for each label several name.

    Such a label registers none of its plists: launchd loads one of them (which one, a directory listing
    cannot tell), and registering each in turn would flip the label's calendar on every import.
    """
    paths: dict[str, list[str]] = {}
    plists = [p for p in plists if not p.ours]
    for p in plists:
        paths.setdefault(p.label, []).append(p.path)
    events = [p.event for p in plists if p.event is not None and len(paths[p.label]) == 1]
    problems = [f"{', '.join(files)}: {len(files)} plists with the Label {label}: none is registered (launchd "
                "loads only one of them; the log keeps its earlier registration, if any): remove all but one, or "
                "give each its own Label"
                for label, files in paths.items() if len(files) > 1]
    return events, problems


def gone(plists: Iterable[Plist], log: Known) -> list[str]:
    """The labels ``log`` registers as guarded that no plist names (sorted): their plists were removed, or are
    elsewhere. One whose current registration is unguarded (retired, or never guarded) is not named: catch-up
    never judges it; nor one of the ledger's own (:func:`ours_guarded`)."""
    named = {p.label for p in plists}
    return sorted(label for label, job in log.jobs.items() if job.guarded and label not in named
                  and not is_ours(label))


def ours_guarded(log: Known) -> list[str]:
    """The ledger's own labels (:func:`is_ours`) ``log`` registers as guarded (sorted): an import before they were
    skipped took catch-up's own plist, which names the guard's state file, for a guarded job."""
    return sorted(label for label, job in log.jobs.items() if job.guarded and is_ours(label))


# --- the guard's markers ---------------------------------------------------------------


def _number(text: str) -> int | float:
    return float(text) if "." in text else int(text)


def _in_range(value: float) -> bool:
    """A number the log can hold: a finite float, or an integer in a signed 64 bit (spec section 1, Ranges)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return INT64_MIN <= value <= INT64_MAX


def _time(epoch: str, tz: tzinfo | None) -> datetime:
    value = datetime.fromtimestamp(_number(epoch), tz)
    return value if tz is not None else value.astimezone()


def read_markers(lines: Iterable[str], source: str, tz: tzinfo | None = None
                 ) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """``job_skipped``/``job_ran`` events of every marker in ``lines`` (of the file ``source``), in the order met,
    each with where it is (``SOURCE:LINE``), and problems, each naming ``SOURCE:LINE``.

    ``ts`` is the marker's epoch in ``tz`` (None: the local zone). A marker whose
    epoch is no representable time, that holds a byte that is not UTF-8 (lines
    read by :func:`open_text`), or whose event the appender would refuse (a
    reason of 2 MiB), and a marker's name followed by text not in its format, is
    a problem and is left out.
    """
    events: list[tuple[str, dict[str, Any]]] = []
    problems: list[str] = []
    for number, line in enumerate(lines, 1):
        where = f"{source}:{number}"
        found: list[tuple[int, dict[str, Any]]] = []
        for m in (*SKIPPED.finditer(line), *RAN.finditer(line)):
            bad = not_utf8(line, m.start(), m.end())
            if bad is not None:
                problems.append(f"{where}: {bad}")
                continue
            try:
                at = _time(m["ts"], tz)
            except (OverflowError, ValueError, OSError):
                at = None
            if at is None or not FIRST_YEAR <= at.year <= LAST_YEAR:
                problems.append(f"{where}: ts={m['ts']} is out of range (years {FIRST_YEAR} to {LAST_YEAR})")
                continue
            ts = at.isoformat()
            if m.re is SKIPPED:
                remaining = _number(m["remaining"])
                if not _in_range(remaining):
                    problems.append(f"{where}: remaining={m['remaining']}s is out of range")
                    continue
                ev: dict[str, Any] = {"type": "job_skipped", "ts": ts, "label": m["label"], "reason": m["reason"],
                                      "remaining_s": remaining}
            else:
                exit_code = int(m["exit"])
                if not _in_range(exit_code):
                    problems.append(f"{where}: exit={m['exit']} is out of range")
                    continue
                ev = {"type": "job_ran", "ts": ts, "label": m["label"], "exit": exit_code}
            if appendable(where, problems, ev):
                found.append((m.start(), ev))
        for name, pattern in (("CLAUDE_QUOTA_JOB_SKIPPED", SKIPPED), ("CLAUDE_QUOTA_JOB_RAN", RAN)):
            if line.count(name + " ") > sum(1 for _ in pattern.finditer(line)):
                problems.append(f"{where}: a {name} marker not in the guard's format ({_FORMATS[name]}): "
                                f"{line.strip()[:200]!r}")
        found.sort(key=lambda pair: pair[0])  # two markers on one line keep their order on the line
        events.extend((where, ev) for _, ev in found)
    return events, problems


# --- what the log already holds ----------------------------------------------------------


_CalendarKey = tuple[tuple[tuple[str, int], ...], ...]


def _calendar_key(calendar: Iterable[CalendarEntry | dict[str, Any]] | None) -> _CalendarKey | None:
    if calendar is None:
        return None
    out = []
    for entry in calendar:
        if isinstance(entry, CalendarEntry):
            values = dict(zip(CALENDAR_KEYS, (entry.month, entry.day, entry.weekday, entry.hour, entry.minute),
                              strict=True))
        else:
            values = {key: entry.get(key) for key in CALENDAR_KEYS}
        out.append(tuple((key, value) for key, value in values.items() if value is not None))
    return tuple(out)


def _registration_key(guarded: bool, calendar: Any, interval_s: int | None) -> tuple[Any, ...]:
    return (guarded, _calendar_key(calendar), interval_s)


@dataclass
class Known:
    """What a log holds that an import must not repeat."""

    #: label -> the key of its current registration.
    registrations: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    #: label -> its current registration, as the log holds it.
    jobs: dict[str, JobRegistered] = field(default_factory=dict)
    #: (type, label, instant) of every marker.
    markers: set[tuple[str, str, int]] = field(default_factory=set)
    #: label -> instant and time (as written) of its latest marker not dated ahead of now (by log order).
    latest: dict[str, tuple[int, str]] = field(default_factory=dict)


def known(events: Iterable[tuple[Event, datetime]], now: datetime | None = None) -> Known:
    """Fold the registrations and markers of a log's decoded events (``runners.common.log_events``).

    ``now``: a marker dated ahead of it (:func:`ahead_edge`) is never a job's latest (None: none is judged ahead).
    """
    out = Known()
    edge = None if now is None else ahead_edge(now)
    for ev, at in events:
        if isinstance(ev, JobRegistered):
            out.registrations[ev.label] = _registration_key(ev.guarded, ev.calendar, ev.interval_s)
            out.jobs[ev.label] = ev
        elif isinstance(ev, JobSkipped | JobRan):
            kind = "job_skipped" if isinstance(ev, JobSkipped) else "job_ran"
            at_i = instant(at)
            out.markers.add((kind, ev.label, at_i))
            if edge is None or at_i <= edge:
                out.latest[ev.label] = (at_i, ev.ts)
    return out


def new_registrations(events: Iterable[dict[str, Any]], log: Known) -> list[dict[str, Any]]:
    """The registrations that differ from the label's current one (or are its first)."""
    out = []
    for ev in events:
        key = _registration_key(ev["guarded"], ev["calendar"], ev["interval_s"])
        if log.registrations.get(ev["label"]) != key:
            out.append(ev)
            log.registrations[ev["label"]] = key
    return out


@dataclass
class MarkerPlan:
    """Markers to append, and how many were left out and why."""

    new: list[dict[str, Any]]
    already: int = 0
    older: int = 0
    #: The markers older than their job's latest in the log, each named (``FILE:LINE: why``).
    left: list[str] = field(default_factory=list)
    #: The markers dated ahead of now, each named (:func:`not_ahead`).
    ahead: list[str] = field(default_factory=list)


def new_markers(events: Iterable[tuple[str, dict[str, Any]]], log: Known, now: datetime) -> MarkerPlan:
    """The markers (each with where it is) not in the log yet, not older than their job's latest not dated ahead,
    and not dated ahead of ``now`` themselves, in time order."""
    timed = sorted(((datetime.fromisoformat(ev["ts"]), where, ev) for where, ev in events),
                   key=lambda item: instant(item[0]))
    plan = MarkerPlan(new=[])
    for when, where, ev in timed:
        if not not_ahead(where, plan.ahead, ev["ts"], when, now):
            continue
        at = instant(when)
        key = (ev["type"], ev["label"], at)
        if key in log.markers:
            plan.already += 1
            continue
        latest = log.latest.get(ev["label"])
        if latest is not None and at < latest[0]:
            plan.older += 1
            plan.left.append(f"{where}: the {ev['type']} of job {ev['label']} at {ev['ts']} is older than the "
                             f"job's latest marker in the log ({latest[1]}): appended after it, it would be taken "
                             "for the latest")
            continue
        log.markers.add(key)
        log.latest[ev["label"]] = (at, ev["ts"])
        plan.new.append(ev)
    return plan


# --- the guard's circuit state ----------------------------------------------------------


#: What the guard's state file says: ``("open", reason, open_until, opened_at)`` or ``("closed", closed_at)``.
Circuit = tuple[str, ...]


def read_circuit(obj: Any, file_mtime: str, tz: tzinfo | None = None) -> Circuit:
    """The circuit a quota guard's state file describes; ValueError saying what is wrong with it.

    The file is one JSON object: ``open_until`` (or ``openUntil``: an epoch in
    seconds or an ISO 8601 time; null or absent: closed), ``reason`` (``quota``
    when absent), and optionally ``state`` (``open``/``closed``; ``closed`` wins),
    ``opened_at`` and ``closed_at`` (the event times; the file's mtime when absent).
    """
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    state = obj.get("state", obj.get("status"))
    if state is not None and state not in ("open", "closed"):
        raise ValueError(f"state {state!r} is neither open nor closed")
    until = obj.get("open_until", obj.get("openUntil"))
    if state == "closed" or until is None:
        closed = obj.get("closed_at", obj.get("closedAt"))
        return ("closed", file_mtime if closed is None else time_text(closed, tz))
    reason = obj.get("reason", "quota")
    if not isinstance(reason, str):
        raise ValueError(f"reason {reason!r} is not a string")
    opened = obj.get("opened_at", obj.get("openedAt"))
    return ("open", reason, time_text(until, tz), file_mtime if opened is None else time_text(opened, tz))


def circuit_events(circuit: Circuit, latest: tuple[str, int | None] | None) -> list[dict[str, Any]]:
    """What the state file adds to a log whose latest circuit event is ``latest`` (``("opened", open_until
    instant)`` or ``("closed", None)``): nothing when the log says the same already."""
    if circuit[0] == "open":
        _, reason, until, opened = circuit
        if latest == ("opened", instant(datetime.fromisoformat(until))):
            return []
        return [{"type": "circuit_opened", "ts": opened, "reason": reason, "open_until": until}]
    if latest is not None and latest[0] == "opened":
        return [{"type": "circuit_closed", "ts": circuit[1]}]
    return []
