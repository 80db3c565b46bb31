"""Reading a log: lines with numbers and offsets, each decoded or named bad.

Nothing here raises on bad bytes: every line comes out as an event or as a
reason (spec section 1). The reasons start with a stable code:
``not_utf8``, ``not_json``, ``not_object``, ``unknown_type``, ``missing_field``,
``wrong_type``, ``bad_value``, ``bad_time``, ``no_offset``, ``bad_seq``,
``bad_version``, ``too_long``.

**One validation path.** :meth:`Reader.decode` holds every rule; the
appender runs it on the very bytes it is about to write, and the replay's
fast path (:meth:`eventlog.replay.Replay.feed`) only takes a shortcut for
lines that rule would accept the same way. The ranges of spec section 1 are
part of it: times in the years 1900 to 9000, integers in a signed 64 bit,
no repeated key, arrays and objects nested at most :data:`MAX_DEPTH` deep.

**Nesting.** Every JSON decoder stops somewhere of its own (msgspec's and
:mod:`json`'s limit is Python's recursion limit less the caller's own stack,
so it was a little different in each command). The rule is one constant, far
below all of them, checked by :func:`too_deep` on the bytes and by
:func:`value_too_deep` on an object to append: past it a line is bad for every
reader and the appender alike, and every line within it decodes everywhere.
It costs the ordinary line nothing: the event types nest 3 deep at most (a
calendar), so only an unknown field can nest deeper, and a line with one holds
more ``"`` than its event accounts for and is looked at again anyway (below).

**Repeated keys** (``{"ts": ..., "ts": ...}``) are checked in two steps,
since msgspec keeps the last value without a word: :func:`quotes_expected`
says how many ``"`` the decoded event accounts for (its keys and string
values, a number computed from the event alone), and a line that holds
exactly that many cannot hold a key twice; only a line with more ``"``
(unknown fields, escaped quotes, nested objects, a key given twice) is
parsed again by :func:`duplicate_key`, exactly.
"""

from __future__ import annotations

import functools
import json
import math
import re
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, tzinfo
from io import BytesIO
from typing import IO, Any, Literal, NamedTuple, Union

import msgspec

from eventlog.clock import wall_time_note
from eventlog.events import (
    CURRENT_VERSION,
    EVENT_TYPES,
    FIRST_YEAR,
    LAST_YEAR,
    PROJECT_FIELDS,
    TIME_FIELDS,
    AnyEvent,
    CalendarEntry,
    Event,
    read_time,
    type_name,
    upcast,
)

#: What the ``no_offset`` reason advises a person at the command line (part of the reason, in dumps too);
#: :class:`eventlog.appender.Input` says another thing to an HTTP client.
NO_OFFSET_ADVICE = " (give --assume-tz)"

#: Longest line read as an event; longer lines are bad input (``too_long``).
MAX_LINE_BYTES = 1 << 20

#: How deep the arrays and objects of a line may nest, the line's own object being level 1; deeper is bad
#: input (``bad_value: nested deeper than 64 levels``) for every reader and the appender alike. Far below
#: where any decoder stops (Python's recursion limit, 1000, less the caller's stack), far above any event:
#: the event types nest 3 deep (a calendar), and so does every fixture (docs/DECISIONS.md, "Nesting").
MAX_DEPTH = 64

NESTED_TOO_DEEP = f"bad_value: nested deeper than {MAX_DEPTH} levels"

_decoder = msgspec.json.Decoder(AnyEvent)
_untyped = msgspec.json.Decoder()
_encode = msgspec.json.encode
_MISSING = re.compile(r"Object missing required field `([^`]+)`(?: - at `\$\.?(.*)`)?")
_EXPECTED = re.compile(r"Expected `([^`]+)`, got `([^`]+)` - at `\$\.?(.*)`")
_AT = re.compile(r"^(.*) - at `\$\.?(.*)`$")
#: A JSON string (one never closed runs to the end: a decoder stops there too), a run of ``[``/``{`` or a
#: run of ``]``/``}`` (what :func:`deeper_at` steps through). Possessive: never tried again from inside a
#: string, so any bytes take one pass (``"\\"\\"...`` never closed made it quadratic).
_NESTING = re.compile(rb'"(?:[^"\\]++|\\.?)*+"?|[\[{]++|[\]}]++', re.DOTALL)


def iter_lines(f: IO[bytes], offset: int = 0) -> Iterator[tuple[bytes, int, bool]]:
    """Yield ``(line without newline, end offset, complete)`` from ``offset`` on.

    A line longer than :data:`MAX_LINE_BYTES` is yielded empty with its true
    end offset and read in pieces, so a huge line is never held whole.
    """
    if f.seekable():
        f.seek(offset)
    readline = f.readline
    limit = MAX_LINE_BYTES + 1
    while True:
        raw = readline(limit)
        if not raw:
            return
        if len(raw) == limit and not raw.endswith(b"\n"):
            # Too long: skip to the end of this line without keeping it.
            offset += len(raw)
            while True:
                more = readline(limit)
                offset += len(more)
                if not more or more.endswith(b"\n"):
                    break
            yield TOO_LONG, offset, bool(more)
            continue
        offset += len(raw)
        if raw[-1:] == b"\n":
            yield raw[:-1], offset, True
        else:
            yield raw, offset, False


class Block(NamedTuple):
    """Complete lines of a log, read at once by :func:`iter_blocks`."""

    lines: list[bytes]
    """The lines, without their newlines (with them, read with ``ends``)."""
    end: int
    """The offset just past the last complete line's newline (of an earlier block, when torn)."""
    torn: bool
    """The file ends inside a line (``lines`` is then empty)."""
    quotes: int
    """How many ``"`` the lines hold, counted in one pass (the replay's check for a key twice)."""


def iter_blocks(f: IO[bytes], offset: int = 0, size: int = 1 << 20, ends: bool = False) -> Iterator[Block]:
    """Yield the :class:`Block` of complete lines from ``offset`` on, a block at a time.

    The fast way through a big file: one ``read``, one split into lines and one count of ``"`` per block.
    With ``ends`` each line keeps its newline: the split is then ``BytesIO.readlines`` (it finds each
    newline with ``memchr``, in about half the time of ``bytes.split``), for a caller to whom the newline
    is no matter (a JSON decoder skips it). An over-long line comes alone as ``[TOO_LONG]`` (no newline)
    and is never held whole. The last item has ``torn`` true when the file ends inside a line.
    ``size`` is at most ``MAX_LINE_BYTES + 1`` (ValueError): only a block's first line can be longer.
    """
    if size > MAX_LINE_BYTES + 1:  # else a line inside a block could be over-long unseen (only the first is checked)
        raise ValueError(f"iter_blocks: blocks of {size} bytes, past MAX_LINE_BYTES + 1 ({MAX_LINE_BYTES + 1})")
    if f.seekable():
        f.seek(offset)
    kept = 1 if ends else 0  # the newline a line keeps
    pending = b""
    skipped = -1  # >= 0: bytes of an over-long line skipped so far
    while True:
        chunk = f.read(size)
        if not chunk:
            break
        if skipped >= 0:
            nl = chunk.find(b"\n")
            if nl < 0:
                skipped += len(chunk)
                continue
            offset += skipped + nl + 1
            skipped = -1
            yield Block([TOO_LONG], offset, False, 0)
            chunk = chunk[nl + 1:]
        data = pending + chunk if pending else chunk
        if ends:
            lines = BytesIO(data).readlines()
            pending = lines.pop() if lines and lines[-1][-1:] != b"\n" else b""
        else:
            lines = data.split(b"\n")
            pending = lines.pop()
        if lines:
            complete = len(data) - len(pending)
            quotes = data.count(b'"') - pending.count(b'"')
            if len(lines[0]) - kept > MAX_LINE_BYTES:  # only the first can hold an earlier pending piece
                first = lines.pop(0)
                offset += len(first) + 1 - kept
                complete -= len(first) + 1 - kept
                quotes -= first.count(b'"')
                yield Block([TOO_LONG], offset, False, 0)
            if lines:
                offset += complete
                yield Block(lines, offset, False, quotes)
        if len(pending) > MAX_LINE_BYTES:
            skipped = len(pending)
            pending = b""
    if pending or skipped >= 0:
        yield Block([], offset, True, 0)


#: Marker yielded by :func:`iter_lines` in place of an over-long line.
TOO_LONG = b"\0too_long"


class Reader:
    """Decodes the lines of one log in order and checks ``seq``.

    ``last_seq`` is the effective ``seq`` of the last good line (a line without
    ``seq`` stands in with its line number).
    """

    def __init__(self, assume_tz: tzinfo | None = None) -> None:
        self.assume_tz = assume_tz
        self.last_seq = 0

    def decode(self, raw: bytes, line: int) -> tuple[Event, datetime] | str:
        """The event and its time, or the reason the line is bad."""
        if raw == TOO_LONG or len(raw) > MAX_LINE_BYTES:
            return f"too_long: line is longer than {MAX_LINE_BYTES} bytes"
        try:
            ev: Event = _decoder.decode(raw)
        except Exception:  # noqa: BLE001 - every failure is classified by the slow decode
            slow = _decode_slowly(raw)
            if isinstance(slow, str):
                return slow
            ev = slow  # a project field with another value (PROJECT_FIELDS), ignored: checked in full, upcast
        else:
            if not quotes_match(ev, raw, raw.count(b'"')):
                irregular = looked_at_again(raw)
                if irregular is not None:
                    return irregular
            if ev.v != 1 or type_name(ev) in CURRENT_VERSION:
                slow = _decode_versioned(raw)
                if isinstance(slow, str):
                    return slow
                ev = slow
        at = self.times(ev)
        if isinstance(at, str):
            return at
        seq = ev.seq or line  # given, it is >= 1
        if seq <= self.last_seq:
            word = "repeated" if seq == self.last_seq else "decreasing"
            return f"bad_seq: {word} seq {seq} (last was {self.last_seq})"
        if ev.batch_end is not None and ev.batch_end < seq:
            return f"bad_seq: batch_end {ev.batch_end} is before the line's seq {seq}"
        self.last_seq = ev.seq = seq  # a line without seq: its line number stands in
        return ev, at


    def times(self, ev: Event) -> datetime | str:
        """Check every time of ``ev`` (giving naive ones the assumed zone); ``ts`` as a datetime."""
        try:
            at, ev.ts = self._time("ts", ev.ts)
            for name in TIME_FIELDS.get(type(ev), ()):
                text = getattr(ev, name)
                if text is not None:
                    setattr(ev, name, self._time(name, text)[1])
        except _BadTime as bad:
            return str(bad)
        return at

    def _time(self, field: str, text: str) -> tuple[datetime, str]:
        """A time and its text, the text given the assumed zone when it had none."""
        try:
            value = read_time(text)
        except ValueError:
            raise _BadTime(f"bad_time: {field} {text!r} is not an ISO 8601 time") from None
        if not FIRST_YEAR <= value.year <= LAST_YEAR:
            raise _BadTime(f"bad_time: {field} {text!r} is outside the years {FIRST_YEAR} to {LAST_YEAR}")
        if value.tzinfo is not None:
            return value, text
        if self.assume_tz is None:
            raise _BadTime(f"no_offset: {field} {text!r} has no UTC offset{NO_OFFSET_ADVICE}")
        value = value.replace(tzinfo=self.assume_tz)
        return value, value.isoformat()


class _BadTime(Exception):
    pass


def _decode_versioned(raw: bytes) -> Event | str:
    try:
        obj = _untyped.decode(raw)
    except Exception:  # noqa: BLE001 - a number past a double in a field the typed decode skipped (1e400)
        return describe_bad_json(raw)
    try:
        obj = upcast(obj)
    except ValueError as err:
        return f"bad_version: {err}"
    return _convert(obj)


def _convert(obj: dict[str, Any]) -> Event | str:
    """``obj`` as its event type, or why it is not one; a project field holding another value is ignored."""
    cls = EVENT_TYPES[obj["type"]]
    try:
        return msgspec.convert(obj, cls)
    except msgspec.ValidationError as err:
        why = str(err)
    kept = without_foreign_values(cls, obj)
    if kept is obj:
        return _validation_reason(why)
    try:
        return msgspec.convert(kept, cls)
    except msgspec.ValidationError as err:
        return _validation_reason(str(err))


def _fits(value: Any, hint: Any) -> bool:
    try:
        msgspec.convert(value, hint)
    except msgspec.ValidationError:
        return False
    return True


@functools.cache
def _project_fields(cls: type[Event]) -> tuple[tuple[str, Any], ...]:
    """The (key, type) of each of ``cls``'s :data:`~eventlog.events.PROJECT_FIELDS`."""
    names = PROJECT_FIELDS.get(cls, ())
    return tuple((f.encode_name, f.type) for f in _fields(cls) if f.name in names)


def without_foreign_values(cls: type[Event], obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without the project's fields (:data:`~eventlog.events.PROJECT_FIELDS`) that hold a value of another
    type or range than the project writes (``obj`` itself when none does).

    The one place of the rule: such a field is what another writer meant by that name, so it is kept in the line
    and ignored, as an unknown field is (spec section 1), rather than making a contract-valid line bad. Only lines
    that did not decode as their type come here: the ordinary line never pays for it.
    """
    foreign = [key for key, hint in _project_fields(cls) if key in obj and not _fits(obj[key], hint)]
    if not foreign:
        return obj
    return {key: value for key, value in obj.items() if key not in foreign}


def describe_bad_json(raw: bytes) -> str:
    """Why bytes are not JSON (``not_utf8`` or ``not_json``; nested too deep, :func:`too_deep`)."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"not_utf8: invalid UTF-8 at byte {err.start}"
    if not raw.strip():
        return "not_json: empty line"
    deep = too_deep(raw)
    if deep is not None:
        return deep
    try:
        _untyped.decode(raw)
    except Exception as err:  # noqa: BLE001
        if str(err).startswith(_OUT_OF_RANGE):
            return NUMBER_OUT_OF_RANGE
        return f"not_json: {err}"
    return "not_json: line could not be decoded"


#: msgspec's words for a number past a double (``1e400``) and for an integer past Python's 4300 digits.
_OUT_OF_RANGE = ("Number out of range", "Integer value out of range")
NUMBER_OUT_OF_RANGE = "bad_value: a number out of range (past what a double or the contract can hold)"


def _decode_slowly(raw: bytes) -> Event | str:
    """A line that did not decode as an event at once, read in full: why it is bad, precisely, or its event when
    only a project field holds another value than the project writes (:func:`without_foreign_values`).

    Every check of the reader but times and ``seq``: nesting, JSON, a key twice, the type and its version.
    """
    deep = too_deep(raw)  # first: whether a decoder gets through such a line depends on the caller's stack
    if deep is not None:
        return deep
    try:
        obj = _untyped.decode(raw)
    except Exception:  # noqa: BLE001
        return describe_bad_json(raw)
    if not isinstance(obj, dict):
        return f"not_object: line is a JSON {_json_kind(obj)}, not an object"
    repeated = duplicate_key(raw)
    if repeated is not None:
        return repeated
    return check_object(obj)


# --- nesting ---------------------------------------------------------------------------------


def deeper_at(raw: bytes, limit: int = MAX_DEPTH) -> int | None:
    """The offset of the first ``[`` or ``{`` of ``raw`` nested deeper than ``limit``, strings skipped; None: none is.

    Exact for JSON; other bytes are read as a decoder reads them until it
    stops (a string never closed runs to the end). Bytes holding at most
    ``limit`` brackets cannot nest deeper: for them (almost every line) it
    costs two counts; the others take one pass.
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return None
    depth = 0
    for m in _NESTING.finditer(raw):
        run = m[0]
        if run[0] == 0x22:  # a string: its brackets are text
            continue
        if run[0] in b"[{":
            depth += len(run)
            if depth > limit:
                return m.end() - (depth - limit)
        else:
            depth -= len(run)
    return None


def too_deep(raw: bytes) -> str | None:
    """Why a line nested deeper than :data:`MAX_DEPTH` is bad input, or None when it is not.

    ``bad_value: nested deeper than 64 levels (at byte N)`` for an object. A line
    that is not UTF-8 is still ``not_utf8``, and an array ``not_object``, as any
    such line; one that starts with neither bracket is left to the decoder,
    which stops at its first character.
    """
    at = deeper_at(raw)
    if at is None:
        return None
    start = raw.lstrip(b" \t\r\n")[:1]
    if start not in (b"{", b"["):
        return None
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"not_utf8: invalid UTF-8 at byte {err.start}"
    if start == b"[":
        return f"not_object: line is an array (nested deeper than {MAX_DEPTH} levels), not an object"
    return f"{NESTED_TOO_DEEP} (at byte {at})"


def value_too_deep(value: Any) -> str | None:
    """:data:`NESTED_TOO_DEEP` when the dicts and lists of ``value`` (an object to append) nest deeper than
    :data:`MAX_DEPTH`, else None; one level at a time, never recursing."""
    level = [value] if isinstance(value, (dict, list, tuple)) else []
    for _ in range(MAX_DEPTH):
        level = [item for v in level for item in (v.values() if isinstance(v, dict) else v)
                 if isinstance(item, (dict, list, tuple))]
        if not level:
            return None
    return NESTED_TOO_DEEP


def looked_at_again(raw: bytes) -> str | None:
    """Why a line that decoded as an event but holds more ``"`` than it accounts for is bad (None: it is not).

    It holds an unknown field (the only part of a line that can nest deeper
    than the event types do, or hold bytes the typed decode skips unread), an
    escaped quote, a field written with its default, or a key twice: it is bad
    when nested too deep (:func:`too_deep`), when it is no JSON every reader
    reads (an unknown field holding a number past a double, ``1e400``, or an
    integer of 5000 digits: ``bad_value``, as the appender's input reader says;
    bytes that are no UTF-8: ``not_utf8``; :func:`describe_bad_json`), or when it
    holds a key twice (:func:`duplicate_key`).
    """
    deep = too_deep(raw)
    if deep is not None:
        return deep
    if no_key_twice((raw,)):  # it decoded untyped, so it is JSON through and through
        return None
    try:
        _untyped.decode(raw)
    except Exception:  # noqa: BLE001 - named below
        return describe_bad_json(raw)
    return duplicate_key(raw)


def as_written(raw: bytes) -> bytes:
    """A line a reader accepted, as the JSON text to show or send: byte for byte, every value as written (never
    parsed and written again), but a CR (JSON allows one between tokens; a reader of lines takes it for a line
    end) as a space."""
    return raw.replace(b"\r", b" ") if b"\r" in raw else raw


# --- repeated keys -------------------------------------------------------------------------


class _Repeated(Exception):
    pass


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Repeated(key)
        out[key] = value
    return out


def no_key_twice(lines: Sequence[bytes]) -> bool:
    """True when no object of ``lines`` holds a key twice, proved in C; False proves nothing.

    The quick way past :func:`duplicate_key` for lines that hold more ``"`` than their
    events account for, most often because of unknown fields (spec section 1: kept on
    read). Decoded, a key given twice keeps one value, so encoded again the lines lose
    at least that key's two ``"``: lines that hold exactly the ``"`` of their decoded
    values encoded again hold no key twice. The encoding writes a ``"`` inside a string
    as ``\\"``, as a line may; a line that writes it ``\\u0022`` holds one ``"`` fewer,
    which could hide a key twice, so such lines are not proved. Each line must be
    a JSON value on its own (an event that decoded).
    """
    data = lines[0] if len(lines) == 1 else b"[" + b",".join(lines) + b"]"
    if b"\\u0022" in data:
        return False
    try:
        again = _encode(_untyped.decode(data))
    except Exception:  # noqa: BLE001 - not JSON, not UTF-8, nested too deep, a number out of range: not proved
        return False
    return data.count(b'"') == again.count(b'"')


def duplicate_key(raw: bytes | str) -> str | None:
    """``bad_value: duplicate key`` naming the key when any object of the line holds a key twice, else None.

    Exact (keys are compared as decoded, at every depth) and slow, unless
    :func:`no_key_twice` proves the line holds none: the ordinary line never
    gets here (see :func:`quotes_expected`). Bytes that are no JSON at all are
    left to the other checks (None). Bytes that are not UTF-8 are ``not_utf8``:
    msgspec does not check the bytes of a value it skips (an unknown field), so
    such a line may have decoded as an event.
    """
    if isinstance(raw, bytes) and no_key_twice((raw,)):
        return None
    if not isinstance(raw, str):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            return f"not_utf8: invalid UTF-8 at byte {err.start}"
    try:
        # numbers are not read (an integer past 4300 digits, which msgspec skips, would stop the parse)
        json.loads(raw, object_pairs_hook=_no_repeats, parse_int=len, parse_float=len)
    except _Repeated as err:
        return f"bad_value: duplicate key {str(err.args[0])!r}"
    except (ValueError, RecursionError):
        return None
    return None


def _json_kinds(hint: Any) -> set[str]:
    """The JSON kinds a field's type allows: ``str``, ``null``, ``list`` or ``other`` (numbers, booleans)."""
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return _json_kinds(typing.get_args(hint)[0])
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_json_kinds(arg) for arg in typing.get_args(hint)))
    if origin is typing.Literal:
        return {"str" if isinstance(arg, str) else "other" for arg in typing.get_args(hint)}
    if hint is str:
        return {"str"}
    if hint is type(None):
        return {"null"}
    if origin is list:
        return {"list"}
    return {"other"}


def _list_quotes(entries: list[CalendarEntry] | list[str]) -> int:
    """The ``"`` of a list's entries: two per string (``lane_check.general``), two per key that holds a value of
    a calendar's entry."""
    n = 0
    for entry in entries:
        if isinstance(entry, str):
            n += 2
            continue
        for name in entry.__struct_fields__:
            if getattr(entry, name) is not None:
                n += 2
    return n


def _value_quotes(value: Any) -> int:
    if value.__class__ is str:
        return 2
    if value.__class__ is list:
        return _list_quotes(value)
    return 0


@functools.cache
def _fields(cls: type[Event]) -> tuple[msgspec.structs.FieldInfo, ...]:
    """``msgspec.structs.fields(cls)``, once per type: it evaluates every annotation again on each call."""
    return msgspec.structs.fields(cls)


def _quote_counter(cls: type[Event]) -> Callable[[Event], int]:
    """A function of one event of ``cls``: the ``"`` its keys and string values take in a line.

    Built once per type as straight-line code (like :mod:`dataclasses` does):
    this runs for every line of a replay that takes the slow path.
    """
    const = 4  # "type":"<tag>"
    body: list[str] = []
    for field in _fields(cls):
        if field.name == "batch_end":
            continue  # left out on purpose: a marked line never matches, so the replay's fast path never takes it
        if not field.required and field.default is msgspec.NODEFAULT:  # a default_factory: absent, it would count
            raise TypeError(f"{cls.__name__}.{field.name}: a default_factory field; the replay's proof that no key is "
                            "written twice needs a counter that never counts more than a line holds")
        kinds = _json_kinds(field.type)
        name = field.name
        if field.required:
            if kinds == {"str"}:
                const += 4
            elif kinds <= {"other"}:
                const += 2
            else:
                body.append(f"    n += 2 + value_quotes(ev.{name})")
        elif field.default is None or field.default is msgspec.UNSET:  # left out (seq: UNSET, never null)
            absent = "None" if field.default is None else "unset"
            extra = 4 if kinds - {"null"} == {"str"} else 2 if kinds - {"null"} <= {"other"} else None
            if extra is None:
                body.append(f"    v = ev.{name}\n    if v is not {absent}: n += 2 + value_quotes(v)")
            else:
                body.append(f"    if ev.{name} is not {absent}: n += {extra}")
        else:
            extra = 4 if kinds == {"str"} else 2
            body.append(f"    if ev.{name} != {field.default!r}: n += {extra}")
    source = f"def quotes(ev, unset=UNSET):\n    n = {const}\n" + "\n".join(body) + "\n    return n\n"
    scope: dict[str, Any] = {"value_quotes": _value_quotes, "UNSET": msgspec.UNSET}
    exec(compile(source, f"<quotes of {cls.__name__}>", "exec"), scope)  # noqa: S102 - code built above from field names
    fn: Callable[[Event], int] = scope["quotes"]
    return fn


#: Event type -> its ``"`` counter (:func:`quotes_expected` less the batch marker's).
QUOTE_COUNTERS: dict[type[Event], Callable[[Event], int]] = {cls: _quote_counter(cls) for cls in EVENT_TYPES.values()}


def _fixed_quotes(cls: type[Event]) -> int | None:
    """The ``"`` of an event of ``cls`` without ``seq``, ``v`` or a batch marker, when nothing else of it varies."""
    for f in _fields(cls):
        kinds = _json_kinds(f.type)
        if f.required and not (kinds == {"str"} or kinds <= {"other"}):
            return None
        if not f.required and f.name not in ("seq", "v", "batch_end"):
            return None
    return QUOTE_COUNTERS[cls](cls(ts="", **{f.name: _placeholder(f) for f in _fields(cls)
                                             if f.required and f.name != "ts"}))


def _placeholder(field: msgspec.structs.FieldInfo) -> Any:
    return "" if _json_kinds(field.type) == {"str"} else 0


#: The fast path's shortcut (:meth:`eventlog.replay.Replay.feed`): event type -> its ``"`` count as a
#: constant (add 2 for ``seq``) for the types whose only optional fields are the envelope's.
FIXED_QUOTES: dict[type[Event], int] = {
    cls: n for cls in EVENT_TYPES.values() if (n := _fixed_quotes(cls)) is not None
}


def _fast_struct(cls: type[Event]) -> type[Event]:
    """``cls`` as the replay's block path reads it: ``v`` exactly 1 (anything else: not fast)."""
    namespace = {"__annotations__": {"v": Literal[1]}, "v": 1, "__module__": __name__,
                 "__doc__": f"{cls.__name__} at version 1 (the replay's fast path)."}
    fast: type[Event] = type(cls.__name__, (cls,), namespace, tag=cls.__struct_config__.tag, kw_only=True, gc=False)
    return fast


#: The replay's block path (:meth:`eventlog.replay.Replay.feed`): each event type at its first version,
#: as a subclass whose line has ``v`` 1 (written or not) -> the type it stands for.
FAST_TYPES: dict[type[Event], type[Event]] = {
    _fast_struct(cls): cls for name, cls in EVENT_TYPES.items() if name not in CURRENT_VERSION
}
fast_decoder = msgspec.json.Decoder(Union[tuple(FAST_TYPES)])  # noqa: UP007 - a Union object of the types
#: Fast type -> the ``"`` its line holds when it holds no key twice: a constant (add 2 for ``seq``, 2 for
#: ``"v":1``), or its counter (``seq`` counted, ``v`` among the fields written with their default).
FAST_QUOTES: dict[type[Event], int | Callable[[Event], int]] = {
    fast: (FIXED_QUOTES[cls] if cls in FIXED_QUOTES else QUOTE_COUNTERS[cls]) for fast, cls in FAST_TYPES.items()
}


def _defaults_of(cls: type[Event]) -> tuple[tuple[str, bytes, Any, int], ...]:
    """The optional fields of ``cls``: (name, ``"key":`` as bytes, default, the ``"`` of its value when given)."""
    return tuple((f.name, f'"{f.encode_name}":'.encode(), f.default, 2 if isinstance(f.default, str) else 0)
                 for f in _fields(cls)
                 if not f.required and f.name != "batch_end" and f.default is not msgspec.UNSET)  # no "seq":null


_DEFAULTS: dict[type[Event], tuple[tuple[str, bytes, Any, int], ...]] = {
    cls: _defaults_of(cls) for cls in EVENT_TYPES.values()
}
_DEFAULTS.update({fast: _DEFAULTS[cls] for fast, cls in FAST_TYPES.items()})


def written_defaults(ev: Event, raw: bytes) -> int:
    """The ``"`` of optional fields written with their default value (``"v":1``, ``"deadline":null``).

    :func:`quotes_expected` cannot tell such a field from an absent one; the
    line can. ``"key":`` with that very quote before the colon is only ever a
    key (inside a string a quote is escaped), so this counts only keys the
    line holds. Called only for a line whose count is off, so the ordinary
    line never pays for it.
    """
    n = 0
    for name, key, default, value_quotes in _DEFAULTS[type(ev)]:
        if getattr(ev, name) == default and key in raw:
            n += 2 + value_quotes
    return n


def quotes_match(ev: Event, raw: bytes, count: int) -> bool:
    """Whether ``raw``, holding ``count`` ``"``, can hold no key twice (see :func:`quotes_expected`)."""
    expected = quotes_expected(ev)
    return count == expected or count == expected + written_defaults(ev, raw)


def quotes_expected(ev: Event) -> int:
    """How many ``"`` the keys and string values of the decoded ``ev`` take in its line.

    A line decodes to ``ev`` only if it holds each of those keys and string
    values, so it holds at least this many ``"``; a key given twice, an
    unknown field, an escaped quote or an optional field written with its
    default value (``"v":1``) make more. So a line with exactly this many holds
    no key twice; one with more is parsed again by :func:`duplicate_key`.
    Call it before anything changes the decoded event (the reader sets ``seq``).
    """
    return QUOTE_COUNTERS[type(ev)](ev) + (0 if ev.batch_end is None else 2)


def check_object(obj: dict[str, Any]) -> Event | str:
    """Convert a decoded object to its event type, or name why it is not one."""
    if "type" not in obj:
        return "missing_field: type"
    type_ = obj["type"]
    if not isinstance(type_, str):
        return f"wrong_type: type: expected str, got {_json_kind(type_)}"
    if type_ not in EVENT_TYPES:
        return f"unknown_type: {type_!r}"
    try:
        obj = upcast(obj)
    except ValueError as err:
        return f"bad_version: {err}"
    return _convert(obj)


def non_finite(value: Any, where: str = "") -> str | None:
    """``bad_value`` naming the first NaN or infinity anywhere in ``value`` (they are not JSON), else None."""
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return f"bad_value: {where or 'value'}: {value!r} is no number JSON can hold (NaN and infinities are not JSON)"
    items: Any = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) \
        else ()
    for key, item in items:
        found = non_finite(item, f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}" if where else key)
        if found is not None:
            return found
    return None


def validate_object(obj: dict[str, Any], assume_tz: tzinfo | None = None) -> tuple[Event, datetime] | str:
    """Check one object as an event to append (all but ``seq``): the event and its time, or why not."""
    bad = value_too_deep(obj) or non_finite(obj)
    if bad is not None:
        return bad
    ev = check_object(obj)
    if isinstance(ev, str):
        return ev
    at = Reader(assume_tz).times(ev)
    if isinstance(at, str):
        return at
    return ev, at


def zoned(obj: dict[str, Any], assume_tz: tzinfo) -> tuple[dict[str, Any], list[str]]:
    """``obj`` with each time written without an offset given ``assume_tz``'s (as ``--assume-tz`` reads it), and
    a note for each such time the zone skipped or repeated (:func:`eventlog.clock.wall_time_note`).

    An object that is no valid event, or a time that is no time, is left as it
    is: validating it names the problem.
    """
    ev = check_object(obj)
    if isinstance(ev, str):
        return obj, []
    out = dict(obj)
    notes: list[str] = []
    for name in ("ts", *TIME_FIELDS.get(type(ev), ())):
        text = out.get(name)
        if isinstance(text, str):
            try:
                value = read_time(text)
            except ValueError:
                continue
            if value.tzinfo is None:
                value = value.replace(tzinfo=assume_tz)
                out[name] = value.isoformat()
                note = wall_time_note(name, text, value)
                if note is not None:
                    notes.append(note)
    return out, notes


def _validation_reason(message: str) -> str:
    m = _MISSING.fullmatch(message)
    if m:
        where = f"{m.group(2)}." if m.group(2) else ""
        return f"missing_field: {where}{m.group(1)}"
    m = _EXPECTED.fullmatch(message)
    if m:
        return f"wrong_type: {m.group(3)}: expected {m.group(1)}, got {m.group(2)}"
    m = _AT.fullmatch(message)
    if m:
        return f"bad_value: {m.group(2)}: {_plain(m.group(1))}"
    return f"bad_value: {_plain(message)}"


def _plain(message: str) -> str:
    """msgspec's message without backticks, starting in lower case."""
    message = message.replace("`", "")
    return message[:1].lower() + message[1:]


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def read_objects(stream: IO[bytes]) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str]]]:
    """The JSON objects of ``stream``'s lines with their line numbers (blank lines skipped), and each bad line's.

    A bad line comes as (its number, ``code: detail``).
    """
    objs: list[tuple[int, dict[str, Any]]] = []
    problems: list[tuple[int, str]] = []
    for n, (raw, _end, _complete) in enumerate(iter_lines(stream), 1):
        line = raw[:-1] if raw.endswith(b"\r") else raw
        if line == TOO_LONG:
            problems.append((n, f"too_long: longer than {MAX_LINE_BYTES} bytes"))
            continue
        if not line.strip():
            continue
        deep = too_deep(line)  # before the decoder, which may or may not get through it
        if deep is not None:
            problems.append((n, deep))
            continue
        try:
            obj = msgspec.json.decode(line)
        except Exception:  # noqa: BLE001 - named precisely below
            problems.append((n, describe_bad_json(line)))
            continue
        if not isinstance(obj, dict):
            problems.append((n, "not_object: expected a JSON object"))
            continue
        repeated = duplicate_key(line)  # msgspec would keep the last value without a word
        if repeated is not None:
            problems.append((n, repeated))
            continue
        objs.append((n, obj))
    return objs, problems
