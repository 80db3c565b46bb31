"""The state of one log read so far: reader, folder and log-level tallies.

:class:`Replay` is what ``tools/replay``, ``eventlog append`` (its sidecar)
and ``eventlog follow`` keep: it reads complete lines from where it stopped,
names bad lines, notices a torn tail, and hands events to a :class:`Folder`.
Its own folded state (the tallies and the reader's position) is the typed
:class:`ReplayState`, which snapshots save with the folder's (:mod:`eventlog.snapshot`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone, tzinfo
from typing import IO, Annotated, Any, Generic, TypedDict, TypeVar

import msgspec

from eventlog.events import CURRENT_VERSION, EVENT_TYPES, TIME_FIELDS, Event
from eventlog.fold import Folder, FoldResult, Stateful
from eventlog.reader import Reader, _decoder, iter_blocks

#: Called with (lines read, bytes read) every so often during a long read.
Progress = Callable[[int, int], None]


class BadLine(Exception):
    """A bad line met in strict mode."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


class BadLineRecord(TypedDict):
    """A bad line: its number and the reason (the dump's ``bad_lines``)."""

    line: int
    reason: str


_WALL_EPOCH = datetime(1970, 1, 1)
_MICRO = timedelta(microseconds=1)


class LocalTime(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """An aware time exactly as it was read, for a snapshot (msgpack itself keeps only the instant in UTC).

    The wall clock in microseconds since 1970-01-01, the UTC offset in
    microseconds (None: the reader's ``--assume-tz`` zone) and ``fold``; so the
    time judged "as of" after a snapshot is the one before it, zone included.
    """

    wall_us: int
    offset_us: int | None
    fold: int = 0

    @classmethod
    def of(cls, value: datetime, zone: tzinfo | None) -> LocalTime:
        """``value`` (aware) as kept; its zone is ``zone`` or a fixed offset."""
        wall = (value.replace(tzinfo=None) - _WALL_EPOCH) // _MICRO
        if zone is not None and value.tzinfo is zone:
            return cls(wall, None, value.fold)
        offset = value.utcoffset()
        return cls(wall, None if offset is None else offset // _MICRO, value.fold)

    def value(self, zone: tzinfo | None) -> datetime:
        """The time again (ValueError or OverflowError when the fields are out of range)."""
        tz = zone if self.offset_us is None else timezone(timedelta(microseconds=self.offset_us))
        if tz is None:
            raise ValueError("a time of the assumed zone, but no zone is assumed")
        return (_WALL_EPOCH + timedelta(microseconds=self.wall_us)).replace(tzinfo=tz, fold=self.fold)


Count = Annotated[int, msgspec.Meta(ge=0)]
S = TypeVar("S")


class ReplayState(msgspec.Struct, Generic[S]):
    """A replay's folded state: position, tallies, bad lines, and its folder's state (``S``)."""

    line: Count
    offset: Count
    events: Count
    last_seq: Count
    torn_tail: bool
    last_ts: str | None
    last_at: LocalTime | None
    bad_lines: list[BadLineRecord]
    folder: S


class Replay:
    """One log, folded up to ``offset`` (always the end of a complete line)."""

    def __init__(self, folder: Folder, assume_tz: tzinfo | None = None) -> None:
        self.folder = folder
        self.reader = Reader(assume_tz)
        self.line = 0
        self.offset = 0
        self.events = 0
        self.bad_lines: list[BadLineRecord] = []
        self.torn_tail = False
        self.last_ts: str | None = None
        self.last_at: datetime | None = None

    def feed(self, f: IO[bytes], progress: Progress | None = None, strict: bool = False) -> None:
        """Fold every complete line of ``f`` from ``offset`` on; note a torn tail.

        With ``strict``, the first bad line raises :class:`BadLine` instead.
        """
        # The hot path of every replay. An ordinary line (a known type at the
        # current version, times with an offset, seq increasing) is decoded and
        # checked inline; anything else goes to Reader.decode, which holds
        # every rule and names the reason. Keep the two in step.
        reader = self.reader
        decode_fast = _decoder.decode
        fromiso = datetime.fromisoformat
        # Types at their first version (later ones are upcast on the slow
        # path): ``plain`` have no time but ``ts``, ``timed`` have more.
        first = {cls for name, cls in EVENT_TYPES.items() if name not in CURRENT_VERSION}
        plain = {cls for cls in first if cls not in TIME_FIELDS}
        timed = first - plain
        fold = self.folder.fold
        line = self.line
        last_seq = reader.last_seq
        events = 0
        last_ev: Event | None = None
        last_at: datetime | None = None
        self.torn_tail = False
        for lines, end, torn in iter_blocks(f, self.offset):
            if torn:
                self.torn_tail = True
                break
            start = line
            for raw in lines:
                line += 1
                try:
                    ev: Event = decode_fast(raw)
                    cls = type(ev)
                    at = fromiso(ev.ts) if cls in plain else reader.times(ev) if cls in timed else None
                    seq = ev.seq or line  # seq is >= 1 when given
                except Exception:  # noqa: BLE001 - named by the slow path below
                    at = None
                if isinstance(at, datetime) and at.tzinfo is not None and seq > last_seq and ev.v == 1:
                    last_seq = ev.seq = seq
                    fold(ev, line, at)
                    events += 1
                    last_ev, last_at = ev, at
                    continue
                # the slow path: hand the tallies over, fold_line keeps them
                reader.last_seq = last_seq
                self.events += events
                events = 0
                if last_ev is not None:
                    self.last_ts, self.last_at, last_ev = last_ev.ts, last_at, None
                try:
                    self.fold_line(raw, line, strict)
                except BadLine:
                    self.offset = end - sum(len(x) + 1 for x in lines[line - start:])
                    raise
                last_seq = reader.last_seq
            self.offset = end
            if progress is not None:
                progress(line, end)
        reader.last_seq = last_seq
        self.line = line
        self.events += events
        if last_ev is not None:
            self.last_ts, self.last_at = last_ev.ts, last_at

    def fold_line(self, raw: bytes, line: int, strict: bool = False) -> tuple[Event, datetime] | None:
        """Decode and fold one line as line number ``line``; a bad line is recorded (or raised when ``strict``)."""
        self.line = line
        decoded = self.reader.decode(raw, line)
        if isinstance(decoded, str):
            if strict:
                raise BadLine(line, decoded)
            self.bad_lines.append({"line": line, "reason": decoded})
            return None
        ev, at = decoded
        self.folder.fold(ev, line, at)
        self.events += 1
        self.last_ts, self.last_at = ev.ts, at
        return decoded

    def apply(self, ev: Event, at: datetime) -> FoldResult:
        """Fold one event that is about to be written as the next line."""
        self.line += 1
        self.reader.last_seq = ev.seq if ev.seq is not None else self.line
        result = self.folder.fold(ev, self.line, at)
        self.events += 1
        self.last_ts = ev.ts
        self.last_at = at
        return result

    def save_state(self) -> ReplayState[msgspec.Struct]:
        """Its folded state, the folder's included (shared, not copied: encode it, do not keep it).

        TypeError when the folder keeps no typed state (:class:`~eventlog.fold.Stateful`).
        """
        if not isinstance(self.folder, Stateful):
            raise TypeError(f"{type(self.folder).__name__} keeps no typed state")
        zone = self.reader.assume_tz
        last_at = None if self.last_at is None else LocalTime.of(self.last_at, zone)
        return ReplayState(self.line, self.offset, self.events, self.reader.last_seq, self.torn_tail, self.last_ts,
                           last_at, self.bad_lines, self.folder.save_state())

    def load_state(self, state: ReplayState[Any]) -> None:
        """Take a decoded state as this (fresh) replay's; ValueError or OverflowError leave it unchanged."""
        if not isinstance(self.folder, Stateful):
            raise TypeError(f"{type(self.folder).__name__} keeps no typed state")
        last_at = None if state.last_at is None else state.last_at.value(self.reader.assume_tz)
        self.folder.load_state(state.folder)
        self.line, self.offset, self.events = state.line, state.offset, state.events
        self.reader.last_seq = state.last_seq
        self.torn_tail, self.last_ts, self.last_at = state.torn_tail, state.last_ts, last_at
        self.bad_lines = state.bad_lines

    def dump(self, log: str, at: datetime | None = None, at_text: str | None = None) -> dict[str, Any]:
        """The dump of spec/OUTPUTS.md as of ``at`` (default: the last event's time)."""
        if at is None:
            at, at_text = self.last_at, self.last_ts
        head: dict[str, Any] = {
            "log": log,
            "as_of": at_text,
            "events": self.events,
            "bad_lines": list(self.bad_lines),
            "torn_tail": self.torn_tail,
        }
        head.update(self.folder.view(at if at is not None else _EPOCH, at_text))
        return head


_EPOCH = datetime.fromisoformat("1970-01-01T00:00:00+00:00")
