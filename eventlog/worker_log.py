"""Worker log lines (JSON, one object a line) into session events (seed 004).

Four messages are read; every other line is counted, never guessed at:

====================================== =====================
message                                event
====================================== =====================
``worker.turn.interrupt.stage``        ``interrupt_stage``
``control.result``                     ``control_result``
``worker.checkpoint.restore_unavailable`` ``storage_unavailable``
``worker.checkpoint.store_unavailable``   ``storage_unavailable``
====================================== =====================

The shape read, liberally (docs/DECISIONS.md, "Importing worker logs"):

- **The message** is the first of ``msg``, ``message``, ``event``, ``name``,
  ``type`` whose value is one of the four.
- **Fields** are the object's keys, and those of a nested object under
  ``fields``, ``attrs``, ``data`` or ``context`` that the top level lacks;
  ``camelCase`` keys are read as ``snake_case`` (``controlId``).
- **The time** is the first of ``ts``, ``time``, ``timestamp``, ``@timestamp``:
  ISO 8601 (without an offset only with ``assume_tz``), or a number of seconds
  since the epoch (milliseconds when above 10^11), written in ``assume_tz`` or
  the local zone.
- ``reason_code`` falls back on ``code`` then ``reason``; ``effect_ms`` on
  ``duration_ms`` (the seed: the same); ``stage`` on ``step``.
- A storage message's ``cause`` is its ``cause`` when the spec knows it, else
  from an HTTP ``status`` (``status_code``, ``http_status``: 408, 429, 5xx), else
  from words in ``error``/``reason``/``kind`` (``dns``, ``timeout``/``timed out``,
  ``connect``/``connection``/``refused``/``reset``); a cut body or any other
  cause the spec does not list is skipped and named.
- A line of the four messages that holds a byte that is not UTF-8 is skipped
  and named (``not_utf8``, as the log reader says it): a byte replaced by
  U+FFFD in an id makes another session. A line nested deeper than the log allows (64 levels)
  is named too (its message cannot be told). Every event is checked as the
  appender checks it (:func:`eventlog.appender.refusal`: a line too long to
  write is named, not a reason to refuse the whole import). A line longer than
  a log line may be (1 MiB) is skipped and named (``too_long``, as the log
  reader says it), never held whole.

:func:`read` gives the candidate events and what it skipped; it neither reads
nor writes the log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any, Final

import msgspec

from eventlog.appender import refusal
from eventlog.events import written_form
from eventlog.importers import too_long
from eventlog.reader import too_deep

STAGE: Final = "worker.turn.interrupt.stage"
RESULT: Final = "control.result"
RESTORE_UNAVAILABLE: Final = "worker.checkpoint.restore_unavailable"
STORE_UNAVAILABLE: Final = "worker.checkpoint.store_unavailable"
MESSAGES: Final = (STAGE, RESULT, RESTORE_UNAVAILABLE, STORE_UNAVAILABLE)

_MESSAGE_KEYS: Final = ("msg", "message", "event", "name", "type")
_NESTED_KEYS: Final = ("fields", "attrs", "data", "context")
_TIME_KEYS: Final = ("ts", "time", "timestamp", "@timestamp")
_CAUSES: Final = ("connect", "dns", "timeout", "http_408", "http_429", "http_5xx")
_CAUSE_WORDS: Final = (("dns", "dns"), ("timed out", "timeout"), ("timeout", "timeout"), ("connect", "connect"),
                       ("refused", "connect"), ("reset", "connect"))
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")
#: An epoch number above this is in milliseconds (10^11 s is the year 5138).
_MILLIS_ABOVE: Final = 10**11

_json = msgspec.json.Decoder()


@dataclass
class Read:
    """What the lines hold: candidate events (``(where, event)``), skipped lines named, and counts."""

    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    #: JSON lines of other messages.
    other: int = 0
    #: Lines that are not a JSON object (plain text, a stack trace), by where they are.
    not_json: list[str] = field(default_factory=list)


def read(lines: Iterable[bytes], source: str, assume_tz: tzinfo | None = None, into: Read | None = None) -> Read:
    """Turn the lines of one worker log (read as bytes; ``source`` names it in messages) into events."""
    out = into if into is not None else Read()
    for number, line in enumerate(lines, 1):
        where = f"{source}:{number}"
        if not line.strip():
            continue
        long = too_long(line)  # never held whole (:func:`eventlog.importers.bounded_lines`)
        if long is not None:
            out.skipped.append(f"{where}: {long}")  # it may be one of the four messages: named, never guessed at
            continue
        deep = too_deep(line)  # as a log line: a decoder may or may not get through it
        if deep is not None:
            out.skipped.append(f"{where}: {deep}")  # it may be one of the four messages: named, never guessed at
            continue
        obj, bad = _decoded(line)
        if not isinstance(obj, dict):
            out.not_json.append(where)
            continue
        message = next((obj[k] for k in _MESSAGE_KEYS if obj.get(k) in MESSAGES), None)
        if message is None:
            out.other += 1
            continue
        made = bad if bad is not None else event_of(message, _fields(obj), assume_tz)
        if isinstance(made, str):
            out.skipped.append(f"{where}: {message}: {made}")
        else:
            out.events.append((where, made))
    return out


def _decoded(line: bytes) -> tuple[Any, str | None]:
    """The line's JSON value (None: it has none), and what is wrong with the line besides.

    A line that is not UTF-8 is read with U+FFFD for its bad bytes, only to tell
    its message: ``not_utf8`` says why it is no event. The caller has refused a
    line nested too deep (:func:`~eventlog.reader.too_deep`), so none is left.
    """
    bad = None
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as err:
        bad = f"not_utf8: invalid UTF-8 at byte {err.start}"
        line = line.decode("utf-8", "replace").encode()
    try:
        return _json.decode(line), bad
    except msgspec.DecodeError:
        return None, bad


def event_of(message: str, f: dict[str, Any], assume_tz: tzinfo | None) -> dict[str, Any] | str:
    """The event of one message's fields, checked as the appender checks it
    (:func:`eventlog.appender.refusal`); or why it cannot be one."""
    ts = _time(f, assume_tz)
    if ts.startswith("!"):
        return ts[1:]
    ev: dict[str, Any] = {"ts": ts, "session_id": f.get("session_id")}
    if message == STAGE:
        ev.update(type="interrupt_stage", turn_id=f.get("turn_id"), control_id=f.get("control_id"),
                  stage=_first(f, "stage", "step"), elapsed_ms=f.get("elapsed_ms"))
        _optional(ev, outcome=f.get("outcome"), reason_code=_first(f, "reason_code", "code", "reason"),
                  budget_ms=f.get("budget_ms"))
    elif message == RESULT:
        ev.update(type="control_result", control_id=f.get("control_id"), operation=f.get("operation"),
                  outcome=f.get("outcome"))
        _optional(ev, turn_id=f.get("turn_id"), reason_code=_first(f, "reason_code", "code", "reason"),
                  effect_ms=_first(f, "effect_ms", "duration_ms"))
    else:
        cause = cause_of(f)
        if cause is None:
            return "no cause the spec lists (connect, dns, timeout, http_408, http_429, http_5xx)"
        ev.update(type="storage_unavailable", generation=f.get("generation"), cause=cause)
    made = {k: v for k, v in ev.items() if v is not None}
    why = refusal(made)
    return made if why is None else why


def cause_of(f: dict[str, Any]) -> str | None:
    """A transient storage error's cause in the spec's words, or None."""
    cause = f.get("cause")
    if isinstance(cause, str) and cause.lower() in _CAUSES:
        return cause.lower()
    status = _first(f, "status", "status_code", "http_status")
    if isinstance(status, str) and status.isdigit():
        status = int(status)
    if isinstance(status, int) and not isinstance(status, bool):
        if status in (408, 429):
            return f"http_{status}"
        if 500 <= status <= 599:
            return "http_5xx"
        return None
    text = " ".join(str(f[k]) for k in ("cause", "error", "reason", "kind") if isinstance(f.get(k), str)).lower()
    return next((cause for word, cause in _CAUSE_WORDS if word in text), None)


def _fields(obj: dict[str, Any]) -> dict[str, Any]:
    """The top level and nested objects' keys (the top level wins), in snake_case."""
    merged: dict[str, Any] = {}
    for key in _NESTED_KEYS:
        nested = obj.get(key)
        if isinstance(nested, dict):
            for k, v in nested.items():
                merged.setdefault(_snake(k), v)
    for k, v in obj.items():
        merged[_snake(k)] = v
    return merged


def _snake(key: str) -> str:
    return _CAMEL.sub(r"_\1", key).lower() if isinstance(key, str) else key


def _first(f: dict[str, Any], *keys: str) -> Any:
    return next((f[k] for k in keys if f.get(k) is not None), None)


def _optional(ev: dict[str, Any], **values: Any) -> None:
    ev.update({k: v for k, v in values.items() if v is not None})


def _time(f: dict[str, Any], assume_tz: tzinfo | None) -> str:
    """The line's time as ISO 8601 with an offset (as written when it had one); ``!`` and why when none."""
    raw = _first(f, *_TIME_KEYS)
    if raw is None:
        return f"!no time ({', '.join(_TIME_KEYS)})"
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        seconds = raw / 1000 if raw > _MILLIS_ABOVE else raw
        try:
            at = datetime.fromtimestamp(seconds, UTC)
            at = at.astimezone(assume_tz) if assume_tz is not None else at.astimezone()
        except (OverflowError, ValueError, OSError):
            return f"!time {raw!r} is out of range"
        return at.isoformat(timespec="milliseconds" if at.microsecond else "seconds")
    if not isinstance(raw, str):
        return f"!time {raw!r} is neither ISO 8601 nor a number"
    try:
        at = datetime.fromisoformat(raw)
    except ValueError:
        return f"!time {raw!r} is not ISO 8601"
    if at.tzinfo is not None:
        return written_form(raw, at)
    if assume_tz is None:
        return f"!time {raw!r} has no UTC offset (give --assume-tz)"
    return at.replace(tzinfo=assume_tz).isoformat()


__all__ = ["MESSAGES", "Read", "cause_of", "event_of", "read"]
