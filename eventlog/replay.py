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
from itertools import accumulate, compress, count, islice, repeat
from operator import attrgetter, call, itemgetter, lt, ne, not_
from typing import IO, Annotated, Any, Generic, TypedDict, TypeVar

import msgspec
from msgspec import UnsetType

from eventlog.events import (
    CURRENT_VERSION,
    EVENT_TYPES,
    FIRST_YEAR,
    LAST_YEAR,
    TIME_FIELDS,
    Event,
    good_times,
    read_time,
    read_times,
)
from eventlog.fold import Folder, FoldResult, Stateful, gc_paused
from eventlog.reader import (
    FAST_QUOTES,
    FAST_TYPES,
    FIXED_QUOTES,
    QUOTE_COUNTERS,
    Reader,
    _decoder,
    deeper_at,
    fast_decoder,
    iter_blocks,
    looked_at_again,
    no_key_twice,
    written_defaults,
)
from eventlog.tail import Stuck, Uncommitted, read_tail

#: How much of the file a replay reads, decodes and folds at a time: small enough that a block's decoded
#: events are still in the processor's cache when they are folded (128 KiB folds a 1M-event log in 30% less
#: time than 1 MiB here; 64 to 256 KiB are alike).
BLOCK_BYTES = 1 << 17

#: After a line that is not ordinary, the block path is tried again on at least this many lines. Where a
#: try stopped before half of them, as many lines go line by line first, then twice as many after the next
#: such try, and so on, across blocks, until a try goes well (a try that stops early is lost work).
TRY_AGAIN = 64

#: Called with (lines read, bytes read) every so often during a long read.
Progress = Callable[[int, int], None]


class BadLine(Exception):
    """A bad line met in strict mode."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


class PendingBatch:
    """The lines of a batch read so far, held until its last line (``seq`` = ``end``) comes.

    ``offset``, ``line`` and ``last_seq`` are where the replay stood before it,
    where it goes back to when the input ends first.
    """

    __slots__ = ("end", "first_seq", "held", "last_seq", "line", "offset")

    def __init__(self, end: int, first_seq: int, offset: int, line: int, last_seq: int) -> None:
        self.end = end
        self.first_seq = first_seq
        self.offset = offset
        self.line = line
        self.last_seq = last_seq
        self.held: list[tuple[Event, int, datetime]] = []


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


#: How many runs of vanished line numbers a replay names (the rest are counted).
RANGES = 20


class Vanished(msgspec.Struct, kw_only=True):
    """Line numbers a log skipped: a stream's sequences below its last that hold no message (deleted, purged, or
    dropped by the stream's limits). A file's lines are numbered as they are read, so it never has any.

    ``lines``: how many; ``runs``: in how many runs; ``ranges``: the first :data:`RANGES` runs, (first, last).
    """

    lines: Count = 0
    runs: Count = 0
    ranges: list[tuple[int, int]] = msgspec.field(default_factory=list)

    def add(self, first: int, last: int) -> None:
        """Count the line numbers ``first..last``."""
        self.lines += last - first + 1
        self.runs += 1
        if len(self.ranges) < RANGES:
            self.ranges.append((first, last))

    def words(self) -> str:
        """Which: ``seq 1..2, 4`` (and how many runs more)."""
        shown = ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in self.ranges)
        more = self.runs - len(self.ranges)
        return f"seq {shown}" + (f" and {more} run(s) more" if more > 0 else "")


class ReplayState(msgspec.Struct, Generic[S]):
    """A replay's folded state: position, tallies, bad lines, and its folder's state (``S``); the line numbers
    skipped (a stream's, :class:`Vanished`)."""

    line: Count
    offset: Count
    events: Count
    last_seq: Count
    torn_tail: bool
    last_ts: str | None
    last_at: LocalTime | None
    bad_lines: list[BadLineRecord]
    folder: S
    vanished: Vanished | None = None


_fast_decode = fast_decoder.decode
#: Fast type -> its ``"`` when constant (0 when counted); the counted types; the types with more times.
_FIXED = {fast: q if isinstance(q, int) else 0 for fast, q in FAST_QUOTES.items()}
_COUNTED = {fast: q for fast, q in FAST_QUOTES.items() if not isinstance(q, int)}
_TIMED = {fast: TIME_FIELDS[cls] for fast, cls in FAST_TYPES.items() if cls in TIME_FIELDS}
_seq_of = attrgetter("seq")
_ts_of = attrgetter("ts")
_index_of = itemgetter(0)
_QUOTE = b'"'
#: ``v`` written with its default value: only ever a key (inside a string a quote is escaped).
_V1 = b'"v":'


def _first_not_ordinary(more: list[tuple[int, Event, bytes]]) -> int | None:
    """Of lines that hold more ``"`` than their events account for (index, event, line), the index of the
    first that is not ordinary, as the reader finds; None when every one is.

    More ``"`` come from a key twice (bad), a batch marker (held until the batch ends), or
    something else the reader accepts (an unknown field, a calendar entry written with nulls,
    a ``"`` inside a string); an unknown field may nest too deep (bad). The lines are proved to
    nest within :data:`eventlog.reader.MAX_DEPTH` (for most, two counts) and to hold no key twice
    all at once (:func:`eventlog.reader.no_key_twice`, in C); failing that, each is looked at
    again as the reader does (:func:`eventlog.reader.looked_at_again`): slow, and only for such lines.
    """
    if all(ev.batch_end is None and deeper_at(raw) is None for _i, ev, raw in more) \
            and no_key_twice([raw for _i, _ev, raw in more]):
        return None
    for i, ev, raw in sorted(more, key=_index_of):
        if ev.batch_end is not None or looked_at_again(raw) is not None:
            return i
    return None


def _decoded(lines: list[bytes]) -> list[Event]:
    """The fast events of ``lines`` up to the first line that does not decode as one."""
    evs: list[Event] = []
    for raw in lines:
        try:
            evs.append(_fast_decode(raw))
        except Exception:  # noqa: BLE001 - not only DecodeError: RecursionError (nested too deep); the reader names it
            break
    return evs


def _seqs_increase(seqs: list[int | UnsetType]) -> int:
    """How many of ``seqs`` (the first given) increase one after another."""
    for i in range(1, len(seqs)):
        later = seqs[i]
        if not later or later <= seqs[i - 1]:  # type: ignore[operator]  # seqs[i - 1] is given by then
            return i
    return len(seqs)


def _times(evs: list[Event], classes: list[type[Event]]) -> list[datetime] | None:
    """Every time of ``evs`` read at once (:func:`eventlog.events.read_times`): their ``ts``; None if any is bad."""
    texts: list[str] = list(map(_ts_of, evs))
    for ev in compress(evs, map(_TIMED.__contains__, classes)):
        for name in _TIMED[ev.__class__]:
            text = getattr(ev, name)
            if text is not None:
                texts.append(text)
    ats = read_times(texts)
    if ats is not None:
        del ats[len(evs):]
    return ats


def _good_times(evs: list[Event], classes: list[type[Event]], step: int = 64) -> list[datetime]:
    """The times of ``evs`` up to the first event with a bad time: ``step`` events at a time, then one by one."""
    ats: list[datetime] = []
    for lo in range(0, len(evs), step):
        some = _times(evs[lo:lo + step], classes[lo:lo + step])
        if some is not None:
            ats += some
            continue
        for ev in evs[lo:lo + step]:
            texts = [ev.ts, *(text for name in _TIMED.get(ev.__class__, ()) if (text := getattr(ev, name)) is not None)]
            read = good_times(texts)
            if len(read) < len(texts):
                return ats
            ats.append(read[0])
        return ats[:lo]  # (never so: read_times refuses a time only where good_times does)
    return ats


def ordinary_prefix(lines: list[bytes], last_seq: int, first_line: int | None = None,
                    quotes: int | None = None) -> tuple[list[Event], list[datetime]]:
    """The events and times of a block's lines up to the first that is not ordinary (all of them when none).

    Ordinary, as :meth:`Replay.feed` means it, decided for the block at once: each line decodes
    as a fast type (a known type at version 1), holds no batch marker and no key twice (the block
    holds exactly the ``"`` its events account for, :func:`eventlog.reader.quotes_expected`, with
    ``"v":1`` written counted once a line; lines that hold more are looked at again, as the reader
    does, by :func:`_first_not_ordinary`), ``seq`` increases from ``last_seq`` on, and every
    time reads with an offset in the years 1900 to 9000 (:func:`eventlog.events.read_times`).
    A block whose first line leaves ``seq`` out takes the numbers of its lines from ``first_line``
    on, as the reader does (spec section 2: hand-written logs), up to a line that gives one; with
    ``first_line`` None it has no ordinary line. ``quotes``: the ``"`` the lines hold, when the
    caller counted them (:attr:`eventlog.reader.Block.quotes`); None counts them here. A line may
    end in its newline (as :func:`eventlog.reader.iter_blocks` reads with ``ends``): a JSON value
    followed by whitespace decodes the same, and the newline holds no ``"``. The line after the
    prefix goes line by line, where every rule is named; it may be ordinary after all.
    """
    try:
        evs: list[Event] = list(map(_fast_decode, lines))
    except Exception:  # noqa: BLE001 - not only DecodeError: RecursionError (nested too deep); the reader names it
        evs = _decoded(lines)
        lines, quotes = lines[:len(evs)], None
    if not evs:
        return [], []
    seqs: list[int | UnsetType] = list(map(_seq_of, evs))  # UNSET (false) where a line leaves seq out; given, >= 1
    numbered_from = 0
    if not seqs[0]:  # hand-written: every line's number stands in for its seq
        if first_line is None or first_line <= last_seq:
            return [], []
        numbered_from = first_line
        stop = next(compress(count(), seqs), len(seqs))
    elif seqs[0] <= last_seq:
        return [], []
    elif not all(seqs) or not all(map(lt, seqs, islice(seqs, 1, None))):  # type: ignore[arg-type]
        stop = _seqs_increase(seqs)
    else:
        stop = len(seqs)
    if stop < len(evs):
        del evs[stop:]
        lines, quotes = lines[:stop], None
    classes = list(map(type, evs))
    counted = list(map(_COUNTED.__contains__, classes))
    # The types with optional fields, line by line, in C (these counts read the events as decoded:
    # before any seq is set below). A line that holds more '"' than its event accounts for (a field
    # written with its default, an unknown field, a '"' inside a string, a key twice) is looked at below.
    owed = list(map(call, map(_COUNTED.__getitem__, compress(classes, counted)), compress(evs, counted)))
    if not seqs[0]:
        for ev, seq in zip(evs, count(numbered_from)):
            ev.seq = seq
        seq_quotes = 0
    else:
        seq_quotes = 2
    # The others, for the whole block at once: their constant, 2 for seq, 2 for each line of them with "v":1
    # (a line that has it twice is counted once, so it is off by 2: a key twice).
    if quotes is None:
        quotes = b"\n".join(lines).count(_QUOTE)
    expected = sum(map(_FIXED.__getitem__, classes)) + seq_quotes * (len(evs) - len(owed))
    more: list[tuple[int, Event, bytes]] = []  # the lines that hold more '"' than their events account for
    # No line holds fewer '"' than its event accounts for (each key and string value is quoted), so when the
    # block holds exactly what all its events account for, so does every line: nothing to tell apart.
    if quotes == expected + sum(owed):
        held = owed
    else:
        counted_lines, counted_evs = list(compress(lines, counted)), list(compress(evs, counted))
        held = list(map(bytes.count, counted_lines, repeat(_QUOTE)))
        quotes -= sum(held)
        if quotes != expected and quotes != expected + 2 * sum(
                map(bytes.__contains__, compress(lines, map(not_, counted)), repeat(_V1))):
            # some line holds more: all of them are looked at (telling which costs more than the proof)
            more += compress(zip(range(len(evs)), evs, lines, strict=True), map(not_, counted))
    if held != owed:
        off = list(compress(count(), map(ne, held, owed)))  # which of the counted lines hold more
        if not more:  # else a proof is made anyway. A field written with its default (the commonest) is told
            # from the line itself, cheaper
            off = [k for k in off if held[k] != owed[k] + written_defaults(counted_evs[k], counted_lines[k])]
        if off:
            where = list(compress(range(len(evs)), counted))  # where each counted line is in the block
            more += [(where[k], counted_evs[k], counted_lines[k]) for k in off]
    if more:
        bad_at = _first_not_ordinary(more)
        if bad_at is not None:
            del evs[bad_at:], classes[bad_at:]
    ats = _times(evs, classes)
    if ats is None:  # some time is bad
        ats = _good_times(evs, classes)
        del evs[len(ats):]
    return evs, ats


def fast_block(lines: list[bytes], last_seq: int, first_line: int | None = None,
               quotes: int | None = None) -> tuple[list[Event], list[datetime]] | None:
    """The events of a block of lines and their times when every line is ordinary (:func:`ordinary_prefix`), or None."""
    if not lines:
        return None
    evs, ats = ordinary_prefix(lines, last_seq, first_line, quotes)
    return (evs, ats) if len(evs) == len(lines) else None


#: Reasons of a line that is not even a JSON object (:meth:`Replay.not_a_log`).
NOT_OBJECTS = ("not_utf8", "not_json", "not_object", "too_long")


def uncommitted_reason(end: int) -> str:
    """Why each line of a batch that another line interrupted is a bad line."""
    return (f"uncommitted: part of a batch that was to end at seq {end}, whose last line never came "
            "(a writer stopped mid-batch); not applied")


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
        #: The unfinished batch the last read stopped before (part of ``torn_tail``; its complete lines are
        #: neither events nor bad lines: the views name them), if any.
        self.uncommitted: Uncommitted | None = None
        #: A torn tail no append cuts (every append is refused until a person cuts it): :mod:`eventlog.tail`.
        self.stuck_tail: Stuck | None = None
        #: Line numbers skipped (a stream's sequences without a message: :meth:`skip`), if any.
        self.vanished: Vanished | None = None
        self._batch: PendingBatch | None = None

    def feed(self, f: IO[bytes], progress: Progress | None = None, strict: bool = False) -> None:
        """Fold every complete line of ``f`` from ``offset`` on; note a torn tail.

        A batch whose last line is not there yet is not applied: the replay
        stops before it (``offset``, ``line`` and ``seq`` stay where they were),
        says ``torn_tail``, and reads it again next time (see :class:`PendingBatch`).
        A torn tail the next append would refuse to cut is ``stuck_tail`` (read
        from a seekable ``f`` only). With ``strict``, the first bad line raises :class:`BadLine` instead.
        The cyclic collector is paused meanwhile (:func:`eventlog.fold.gc_paused`).
        """
        with gc_paused():
            self._feed(f, progress, strict)

    def _feed(self, f: IO[bytes], progress: Progress | None, strict: bool) -> None:
        # The hot path of every replay. An ordinary line (a known type at the
        # current version, times with an offset in the years 1900 to 9000, seq
        # increasing, no key twice, no batch marker) is decoded and checked
        # inline; anything else goes to Reader.decode, which holds every rule
        # and names the reason. Keep the two in step.
        reader = self.reader
        decode_fast = _decoder.decode
        fromiso = read_time
        # Types at their first version (later ones are upcast on the slow path). ``fixed`` maps the types
        # with no time but ``ts`` and no optional field but the envelope's to the '"' such a line holds when
        # it holds no key twice (add 2 for "seq"; eventlog.reader.quotes_expected); ``plain`` are the other
        # types with no time but ``ts``; ``timed`` have more (checked by the reader).
        first = {cls for name, cls in EVENT_TYPES.items() if name not in CURRENT_VERSION}
        fixed = {cls: FIXED_QUOTES[cls] for cls in first if cls not in TIME_FIELDS and cls in FIXED_QUOTES}
        plain = {cls for cls in first if cls not in TIME_FIELDS and cls not in fixed}
        timed = {cls for cls in first if cls in TIME_FIELDS}
        counters = QUOTE_COUNTERS
        low, high = FIRST_YEAR, LAST_YEAR
        fold = self.folder.fold
        fold_block: Callable[[list[Event], int, list[datetime]], object] | None = getattr(
            self.folder, "fold_block", None)  # optional (Folder): one call for a block of ordinary events
        prefix = ordinary_prefix
        line = self.line
        last_seq = reader.last_seq
        events = 0
        last_ev: Event | None = None
        last_at: datetime | None = None
        self.torn_tail = False
        self.uncommitted = None
        self._batch = None
        pending = False  # a batch is open: every line goes through fold_line
        by_line = 0  # lines to go line by line before the next try of the block path
        backoff = max(TRY_AGAIN, 1)  # by_line after a try that stopped early (doubled each time)
        for lines, end, torn, quotes in iter_blocks(f, self.offset, BLOCK_BYTES, ends=True):  # lines end in "\n"
            if torn:
                self.torn_tail = True
                break
            start = line
            starts: list[int] | None = None  # where each line of the block starts (only when a batch needs it)
            size = len(lines)
            done = 0  # lines of the block folded so far
            tried = size  # how many lines the next try of the block path takes
            while done < size:
                if not pending and not by_line:
                    part = lines if tried == size and not done else lines[done:done + tried]
                    evs, ats = prefix(part, last_seq, line + 1, quotes if part is lines else None)
                    if evs:  # ordinary lines: fold them all, no line-by-line checks
                        if fold_block is not None:
                            fold_block(evs, line + 1, ats)
                        else:
                            for n, fast_ev, fast_at in zip(count(line + 1), evs, ats):
                                fold(fast_ev, n, fast_at)
                        line += len(evs)
                        done += len(evs)
                        events += len(evs)
                        last_ev, last_at = evs[-1], ats[-1]
                        last_seq = last_ev.seq  # type: ignore[assignment]  # required on the fast types
                    went_well = 2 * len(evs) >= TRY_AGAIN
                    if went_well:
                        backoff = max(TRY_AGAIN, 1)
                    if len(evs) == len(part):
                        tried *= 2
                        continue
                    # The next line goes line by line; where lines that are not ordinary come close together,
                    # the lines after them too (TRY_AGAIN).
                    tried = max(len(evs) + len(evs) // 2, TRY_AGAIN, 1)
                    if went_well:
                        by_line = 1
                    else:
                        by_line, backoff = backoff, 2 * backoff
                raw = lines[done].removesuffix(b"\n")  # the reader reads a line as it is, without it
                done += 1
                line += 1
                if by_line:
                    by_line -= 1
                at: datetime | str | None
                try:
                    ev: Event = decode_fast(raw)
                    cls = ev.__class__
                    given = ev.seq
                    # more '"' than the event accounts for: at None, the reader looks (a key twice?)
                    q = fixed.get(cls)
                    if q is not None:  # the most common: a type with no optional field
                        if given:
                            q += 2
                        quotes = raw.count(b'"')
                        if quotes == q or quotes == q + written_defaults(ev, raw):
                            at = fromiso(ev.ts)
                            if not low <= at.year <= high:
                                at = None
                        else:
                            at = None
                    elif cls in plain or cls in timed:
                        q = counters[cls](ev)
                        quotes = raw.count(b'"')
                        if quotes != q and quotes != q + written_defaults(ev, raw):
                            at = None
                        elif cls in timed:
                            at = reader.times(ev)
                        else:
                            at = fromiso(ev.ts)
                            if not low <= at.year <= high:
                                at = None
                    else:
                        at = None
                    seq = given or line  # seq is >= 1 when given
                except Exception:  # noqa: BLE001 - named by the slow path below
                    at = None
                # (a batch marker adds '"' to the line: it never gets past the count above)
                if (isinstance(at, datetime) and seq > last_seq and ev.v == 1 and not pending
                        and at.tzinfo is not None):
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
                before = self._batch
                try:
                    self.fold_line(raw, line, strict)
                except BadLine:
                    self.offset = end - sum(map(len, lines[line - start:]))
                    raise
                pending = self._batch is not None
                if pending and self._batch is not before:  # a batch starts at this line
                    if starts is None:
                        starts = list(accumulate(map(len, lines), initial=end - sum(map(len, lines))))
                    self._batch.offset = starts[line - start - 1]
                last_seq = reader.last_seq
            if self._batch is None:
                self.offset = end
            if progress is not None:
                progress(line, end)
        reader.last_seq = last_seq
        self.line = line
        self.events += events
        if last_ev is not None:
            self.last_ts, self.last_at = last_ev.ts, last_at
        self._stop_before_batch()
        self.stuck_tail = read_tail(f, self.offset).stuck() if self.torn_tail and f.seekable() else None

    def _stop_before_batch(self) -> None:
        """The input ended with a batch still open: it is not committed yet (a torn tail); nothing of it is applied."""
        batch = self._batch
        if batch is None:
            return
        self._batch = None
        self.uncommitted = Uncommitted(len(batch.held), batch.first_seq, batch.end, batch.line + 1, self.torn_tail)
        self.torn_tail = True
        self.offset = batch.offset
        self.line = batch.line
        self.reader.last_seq = batch.last_seq

    def not_a_log(self) -> str | None:
        """Why no append is taken on this file, it being no event log (words that follow its name); None: it may be one.

        No event log: it has complete lines and not one of them is even a JSON object
        (:data:`NOT_OBJECTS`: a binary, a text, a file of JSON arrays). A file whose lines are
        JSON objects that are all bad (say, naive times) is still a log. The rule, written once:
        the file appender refuses by it (``eventlog.appender.NotALog``), and the views say it
        (``eventlog.logs.no_event_log``: ``status``'s ``not_a_log``, ``recovery_not_a_log``).
        """
        bad = self.bad_lines
        if self.events or not bad or not all(b["reason"].startswith(NOT_OBJECTS) for b in bad):
            return None
        first = bad[0]
        return (f"does not look like an event log: none of its {len(bad)} line(s) is a JSON object "
                f"(line {first['line']}: {first['reason']})")

    def fold_line(self, raw: bytes, line: int, strict: bool = False) -> tuple[Event, datetime] | None:
        """Decode and fold one line as line number ``line``; a bad line is recorded (or raised when ``strict``).

        A line of an unfinished batch is held, not folded (None), until the
        batch's last line comes; a batch that another line interrupts never
        came whole: its lines are bad lines (``uncommitted``).
        """
        self.line = line
        seq_before = self.reader.last_seq
        decoded = self.reader.decode(raw, line)
        batch = self._batch
        if isinstance(decoded, str):
            if batch is not None:
                self._drop_batch(strict)
            if strict:
                raise BadLine(line, decoded)
            self.bad_lines.append({"line": line, "reason": decoded})
            return None
        ev, at = decoded
        seq = self.reader.last_seq  # the line's seq (its number when it has none)
        if batch is not None:
            if ev.batch_end == batch.end and seq == batch.first_seq + len(batch.held):
                batch.held.append((ev, line, at))
                if seq == batch.end:
                    self._batch = None
                    for held in batch.held:
                        self._apply(*held)
                return None
            self._drop_batch(strict)
            self.reader.last_seq = seq
        if ev.batch_end is not None and ev.batch_end > seq:
            self._batch = PendingBatch(ev.batch_end, seq, self.offset, line - 1,
                                       batch.last_seq if batch is not None else seq_before)
            self._batch.held.append((ev, line, at))
            return None
        self._apply(ev, line, at)
        return decoded

    def _apply(self, ev: Event, line: int, at: datetime) -> None:
        self.folder.fold(ev, line, at)
        self.events += 1
        self.last_ts, self.last_at = ev.ts, at

    def _drop_batch(self, strict: bool) -> None:
        """An open batch that another line interrupted: each of its lines is a bad line (``uncommitted``)."""
        batch = self._batch
        assert batch is not None
        self._batch = None
        self.reader.last_seq = batch.last_seq
        reason = uncommitted_reason(batch.end)
        for _ev, line, _at in batch.held:
            if strict:
                raise BadLine(line, reason)
            self.bad_lines.append({"line": line, "reason": reason})

    def skip(self, first: int, last: int) -> None:
        """Line numbers ``first..last`` hold nothing any more (a stream's deleted or dropped messages): counted in
        :attr:`vanished` (the dump's ``lines_vanished``); the next line read is ``last + 1`` or later."""
        if first > last:
            return
        if self.vanished is None:
            self.vanished = Vanished()
        self.vanished.add(first, last)
        self.line = max(self.line, last)

    def apply(self, ev: Event, at: datetime) -> FoldResult:
        """Fold one event that is about to be written as the next line."""
        self.line += 1
        self.reader.last_seq = ev.seq or self.line
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
                           last_at, self.bad_lines, self.folder.save_state(), self.vanished)

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
        self.vanished = state.vanished

    def dump(self, log: str, at: datetime | None = None, at_text: str | None = None) -> dict[str, Any]:
        """The dump of spec/OUTPUTS.md as of ``at`` (default: the last event's time)."""
        with gc_paused():
            return self._dump(log, at, at_text)

    def _dump(self, log: str, at: datetime | None, at_text: str | None) -> dict[str, Any]:
        if at is None:
            at, at_text = self.last_at, self.last_ts
        head: dict[str, Any] = {
            "log": log,
            "as_of": at_text,
            "events": self.events,
            "bad_lines": list(self.bad_lines),
            "torn_tail": self.torn_tail,
        }
        if self.vanished is not None:
            head["lines_vanished"] = {"lines": self.vanished.lines, "runs": self.vanished.runs,
                                      "ranges": [list(r) for r in self.vanished.ranges]}
        head.update(self.folder.view(at if at is not None else _EPOCH, at_text))
        return head


_EPOCH = datetime.fromisoformat("1970-01-01T00:00:00+00:00")
