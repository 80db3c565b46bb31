"""Differential fuzzing of the replay's block path (:func:`eventlog.replay.fast_block`) against the reader.

The contract: for any block of lines, when ``fast_block`` returns (events, times), every line is one the
reader (:meth:`eventlog.reader.Reader.decode`) finds good and unmarked (no ``batch_end``), and the events and
times are exactly the reader's, line by line (fields, ``seq`` included, times and their UTC offsets); else
it returns None. Blocks are valid events mutated at the byte level the ways a hand-written or hostile log
may differ (spec sections 1 and 2): ``"v"`` written in every form, keys twice or escaped, unknown fields,
escaped quotes, batch markers, odd ``seq`` values, CRLF, odd times, deep nesting, invalid UTF-8.
Whole logs are replayed both ways too: the dump must not depend on the block path.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import eventlog.replay as replay_module
from eventlog.reader import MAX_DEPTH, Reader, duplicate_key, no_key_twice
from eventlog.reader import _decoder as _typed
from eventlog.replay import Replay, fast_block, ordinary_prefix
from projections.runner import Runner
from tests.test_ranges import EVENTS

ROOT = Path(__file__).resolve().parent.parent

#: More examples for a long hunt: ``BLOCK_FUZZ_EXAMPLES=20000 pytest tests/test_block_path_fuzz.py``.
EXAMPLES = int(os.environ.get("BLOCK_FUZZ_EXAMPLES", "150"))

TS = b'"2026-08-01T09:00:00+09:00"'

#: Byte-level edits of one encoded line (``{...}``, keys as msgspec writes them).
ODD_TIMES = [b"2026-08-01T09:00:00+09:00", b"2026-08-01t09:00:00z", b"20260801T090000+0900", b"2026-08-01T09:00Z",
             b"2026-08-01T09Z", b"2026-08-01T09:00:00.123456789+09:00", b"2026-08-01T09:00:00.9999995Z",
             b"2026-08-01T24:00:00Z", b"2026-06-30T23:59:60Z", b"2026-08-01T09:00:00", b"2026-08-01 09:00:00Z",
             b"2026-08-01T09:00:00-00:00", b"2026-08-01T09:00:00+09:00:30", b"2026-08-01T09:00:00,5+09:00",
             b"9000-12-31T23:59:59.9999999+00:00", b"9000-W52-7T00:00:00Z", b"1900-001T00:00:00+14:00",
             b"1899-12-31T23:59:59+00:00", b"9001-01-01T00:00:00Z", b"2026-08-01T09:00:00.Z", b"2026-02-30T00:00:00Z",
             b"2026-08-01T09:00:00+24:00", b"2026-08-01T09:00:00\\u002B09:00", b"\\u0032026-08-01T09:00:00Z"]


def _insert(line: bytes, text: bytes) -> bytes:
    """``text`` as the first member of the object."""
    return line.replace(b"{", b"{" + text + b",", 1)


def _append(line: bytes, text: bytes) -> bytes:
    return line[:-1] + b"," + text + b"}" if line.endswith(b"}") else line


def _first_key(line: bytes) -> bytes:
    """The first ``"key":value`` member after ``type`` (a crude cut, good enough to repeat it)."""
    start = line.find(b',"')
    if start < 0:
        return b""
    end = line.find(b',"', start + 1)
    return line[start + 1:end if end > 0 else -1]


def mutate(line: bytes, how: int, arg: int) -> bytes:
    """One edit of a line; ``arg`` picks among the variants of an edit."""
    if how == 0:
        return line
    if how == 1:  # "v" written: its forms
        forms = [b'"v":1', b'"v" : 1', b'"v":1.0', b'"v":true', b'"v":2', b'"v":null', b'"v":1,"v":1',
                 b'"\\u0076":1', b'"v":1,"\\u0076":1', b'"v":-0', b'"v":1e0', b'"v":01']
        return _insert(line, forms[arg % len(forms)])
    if how == 2:  # a key twice: the first member again, at the end or the start
        member = _first_key(line)
        if not member:
            return line
        return _append(line, member) if arg % 2 else _insert(line, member)
    if how == 3:  # a key written with escapes
        for key, escaped in ((b'"seq"', b'"s\\u0065q"'), (b'"ts"', b'"t\\u0073"'), (b'"type"', b'"typ\\u0065"'),
                             (b'"handoff_id"', b'"handoff_i\\u0064"'), (b'"label"', b'"l\\u0061bel"')):
            if key in line and arg % 2:
                return line.replace(key, escaped, 1)
        return line.replace(b'"ts"', b'"t\\u0073"', 1)
    if how == 4:  # unknown fields of every shape, some holding "v" or quotes
        extras = [b'"x":"a\\"b"', b'"x":{"v":1}', b'"x":[{"v":1,"v":2}]', b'"x":"\\u0022"', b'"x\\"v":0',
                  b'"x":"\\"v\\":"', b'"x":1', b'"note":"by hand"', b'"x":{"a":1,"a":2}', b'"":0',
                  b'"x\\"v":0,"x":"\\""', b'"x":"\\\\"', b'"x":[' * 40 + b']' * 40, b'"x":' + b"9" * 5000,
                  b'"x":"\xff"', b'"x":"\\ud800"', b'"x":1e400', b'"x":{"seq":1,"ts":2}', b'"batch_end":null',
                  # as deep as MAX_DEPTH allows and one past it (bad_value), brackets inside a string (no nesting)
                  b'"x":' + b"[" * (MAX_DEPTH - 1) + b"]" * (MAX_DEPTH - 1),
                  b'"x":' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH,
                  b'"x":' + b'[{"a":' * 31 + b"[]" + b"}]" * 31, b'"x":' + b'[{"a":' * 32 + b"0" + b"}]" * 32,
                  b'"x":"' + b"[{" * 100 + b'\\""']
        return _append(line, extras[arg % len(extras)])
    if how == 5:  # batch markers
        marks = [b'"batch_end":%d' % (arg % 40 + 1), b'"batch_end":null', b'"batch_end":0',
                 b'"batch_end":%d,"v":1' % (arg % 40 + 1), b'"batch_en\\u0064":%d' % (arg % 40 + 1)]
        return _append(line, marks[arg % len(marks)])
    if how == 6:  # odd seq values
        values = [b"null", b"0", b"-1", b"1.0", b"true", b"9223372036854775807", b"9223372036854775808",
                  b"1" + b"0" * 30, b'"1"', b"1e3"]
        value = values[arg % len(values)]
        if b'"seq":' in line:
            head, _, tail = line.partition(b'"seq":')
            rest = tail.lstrip(b"0123456789")
            return head + b'"seq":' + value + rest
        return _append(line, b'"seq":' + value)
    if how == 7:  # CRLF, spaces
        return line + b"\r" if arg % 3 == 0 else b" " + line + b" " if arg % 3 == 1 else line.replace(b":", b": ")
    if how == 8:  # an odd time for ts
        start = line.find(b'"ts":"')
        if start < 0:
            return line
        end = line.find(b'"', start + 6)
        return line[:start + 6] + ODD_TIMES[arg % len(ODD_TIMES)] + line[end:]
    if how == 9:  # calendar entries with nulls, or a key twice inside one
        forms = [b'{"Hour":null}', b'{"Hour":1,"Hour":2}', b'{"v":1}', b'{"Hour":1,"Minute":null,"v":1}', b'{}']
        return line.replace(b'"calendar":[', b'"calendar":[' + forms[arg % len(forms)] + b",", 1) \
            .replace(b",]", b"]")
    if how == 10:  # a byte changed
        if not line:
            return line
        i = arg % len(line)
        return line[:i] + bytes([b'"\\{}:,1'[arg % 7]]) + line[i + 1:]
    if how == 11:  # a quote taken out in one place, put back in another
        i = line.find(b'"', arg % max(len(line), 1))
        if i < 0:
            return line
        return _append(line[:i] + line[i + 1:], b'"x":"\\""')
    return line


def encoded(event: dict[str, Any], seq: int | None) -> bytes:
    return msgspec.json.encode(event if seq is None else {**event, "seq": seq})


@st.composite
def blocks(draw: st.DrawFn) -> tuple[list[bytes], int, int | None]:
    """A block of 1 to 30 lines, the ``last_seq`` before it and its first line number (or None)."""
    kinds = draw(st.lists(st.sampled_from(list(EVENTS)), min_size=1, max_size=4, unique=True))
    events = draw(st.lists(st.one_of(*(EVENTS[k] for k in kinds)), min_size=1, max_size=30))
    last_seq = draw(st.sampled_from([0, 0, 3, 40]))
    first_line = draw(st.sampled_from([None, 1, 1, 4, 41, 60]))
    mode = draw(st.sampled_from(["seq", "seq", "none", "mixed"]))
    start = last_seq + draw(st.integers(0, 2))
    lines = []
    for i, event in enumerate(events, 1):
        seq = start + i if mode == "seq" or (mode == "mixed" and draw(st.booleans())) else None
        lines.append(encoded(event, seq))
    if draw(st.booleans()):  # "v":1 on every line, as some writers do
        lines = [_insert(x, b'"v":1') for x in lines]
    edits = draw(st.lists(st.tuples(st.integers(0, len(lines) - 1), st.integers(0, 11), st.integers(0, 10_000)),
                          max_size=4))
    for i, how, arg in edits:
        lines[i] = mutate(lines[i], how, arg)
    return lines, last_seq, first_line


def reader_reads(lines: list[bytes], last_seq: int, first_line: int | None) -> list[Any]:
    reader = Reader()
    reader.last_seq = last_seq
    return [reader.decode(raw, n) for n, raw in enumerate(lines, first_line or 1)]


def typed(raw: bytes) -> bool:
    """Whether the reader's typed decoder takes the line as it is."""
    try:
        _typed.decode(raw)
    except msgspec.ValidationError:
        return False
    return True


def check_block(lines: list[bytes], last_seq: int, first_line: int | None) -> None:
    try:
        block = fast_block(lines, last_seq, first_line)
        # as the replay calls it: the block's '"' counted by the read (eventlog.reader.Block.quotes)
        counted = fast_block(lines, last_seq, first_line, sum(raw.count(b'"') for raw in lines))
        evs, ats = ordinary_prefix(lines, last_seq, first_line, sum(raw.count(b'"') for raw in lines))
        # as the replay reads them: each line with its newline (eventlog.reader.iter_blocks with ends)
        ended = ordinary_prefix([raw + b"\n" for raw in lines], last_seq, first_line,
                                sum(raw.count(b'"') for raw in lines))
    except Exception as err:  # noqa: BLE001 - the reader names every line; the block path may not raise
        pytest.fail(f"fast_block raised {err!r}")
    assert (counted is None) == (block is None) == (len(evs) < len(lines))
    assert msgspec.json.encode(ended[0]) == msgspec.json.encode(evs) and ended[1] == ats
    assert [at.utcoffset() for at in ended[1]] == [at.utcoffset() for at in ats]
    if block is not None and counted is not None:
        assert msgspec.json.encode(counted[0]) == msgspec.json.encode(block[0]) and counted[1] == block[1]
        assert msgspec.json.encode(evs) == msgspec.json.encode(block[0]) and ats == block[1]
    # every line of the prefix is the reader's (the reader reads the lines after it on its own)
    assert len(evs) == len(ats) <= len(lines)
    everything = reader_reads(lines, last_seq, first_line)
    if len(evs) < len(lines):  # and it stops only where it must: a line the reader finds bad or marked, or
        # where the line gives seq and the block's first does not, or the other way round (line by line then)
        one = everything[len(evs)]
        # or a line whose project field holds a value of another type or range (kept and ignored by the reader,
        # eventlog.reader.without_foreign_values): the typed decoder refuses it, so it goes line by line
        if not isinstance(one, str) and one[0].batch_end is None and typed(lines[len(evs)]):
            given = [bool(msgspec.json.decode(raw).get("seq")) for raw in (lines[0], lines[len(evs)])]
            assert given[0] != given[1] or (first_line is None and not given[0]), (len(evs), lines)
    reads = everything[:len(evs)]
    for n, (raw, ev, at, one) in enumerate(zip(lines[:len(evs)], evs, ats, reads, strict=True)):
        assert not isinstance(one, str), (n, raw, one)
        want, want_at = one
        assert want.batch_end is None, (n, raw)
        assert want.__struct_config__.tag == ev.__struct_config__.tag, (n, raw)
        assert msgspec.structs.asdict(ev) == msgspec.structs.asdict(want), (n, raw)
        assert at == want_at and at.utcoffset() == want_at.utcoffset(), (n, raw, at, want_at)


def line_by_line(data: bytes, monkeypatch: pytest.MonkeyPatch) -> Replay:
    with monkeypatch.context() as m:
        m.setattr(replay_module, "ordinary_prefix", lambda *_args: ([], []))
        replay = Replay(Runner())
        replay.feed(io.BytesIO(data))
    return replay


DEEP = b'{"type":"lane_check","ts":%s,"x":%s%s}' % (TS, b"[" * 50_000, b"]" * 50_000)


@given(blocks())
@example(([DEEP], 0, 1))  # nested past msgspec's depth: the reader names it not_json, the block path must not raise
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fast_block_returns_what_the_reader_reads_or_none(case: tuple[list[bytes], int, int | None]) -> None:
    check_block(*case)


@given(cases=st.lists(blocks(), min_size=1, max_size=3))
@example(cases=[([DEEP], 0, 1)])
@settings(max_examples=max(EXAMPLES // 3, 10), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
def test_a_log_replays_alike_with_and_without_the_block_path(cases: list[tuple[list[bytes], int, int | None]],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"".join(x + b"\n" for lines, _, _ in cases for x in lines)
    fast = Replay(Runner())
    fast.feed(io.BytesIO(data))
    with monkeypatch.context() as m:  # the block path tried again after every line that is not ordinary
        m.setattr(replay_module, "TRY_AGAIN", 1)
        eager = Replay(Runner())
        eager.feed(io.BytesIO(data))
    assert eager.bad_lines == fast.bad_lines and eager.dump("log") == fast.dump("log")
    slow = line_by_line(data, monkeypatch)
    assert fast.bad_lines == slow.bad_lines
    assert fast.dump("log") == slow.dump("log")
    exact = Replay(Runner())  # every line through the reader
    for n, raw in enumerate(data.split(b"\n")[:-1], 1):
        exact.fold_line(raw, n)
    exact._stop_before_batch()  # what feed does at the end of its input: an open batch is torn
    assert exact.bad_lines == fast.bad_lines
    assert exact.dump("log") == fast.dump("log")
    # where each stopped: the end of the last line it took (before an unfinished batch), as the file has it
    ends = [0, *(i + 1 for i, byte in enumerate(data) if byte == ord("\n"))]
    assert fast.line == eager.line == slow.line == exact.line
    assert fast.offset == eager.offset == slow.offset == ends[fast.line]
    strict = Replay(Runner())  # strict: the first bad line stops the replay past the line it read last
    try:
        strict.feed(io.BytesIO(data), strict=True)
    except replay_module.BadLine as bad:
        assert fast.bad_lines and bad.line == fast.bad_lines[0]["line"] <= strict.line
        assert strict.offset == ends[strict.line]
    else:
        assert not fast.bad_lines and strict.offset == fast.offset


def test_strict_stops_past_the_line_that_showed_a_line_bad() -> None:
    """A batch another line interrupts is bad from its first line on, found at the interrupting line."""
    lines = [b'{"type":"lane_check","ts":%s,"seq":%d%s}' % (TS, seq, mark) for seq, mark in
             ((1, b""), (2, b',"batch_end":3'), (9, b""), (10, b""))]
    data = b"".join(raw + b"\n" for raw in lines)
    replay = Replay(Runner())
    with pytest.raises(replay_module.BadLine) as bad:
        replay.feed(io.BytesIO(data), strict=True)
    assert bad.value.line == 2 and bad.value.reason.startswith("uncommitted")
    assert replay.line == 3 and replay.offset == len(lines[0]) + len(lines[1]) + len(lines[2]) + 3


@pytest.mark.parametrize(("skipped", "reason"), [
    (b'"\xff"', "not_utf8"),  # a byte that is no UTF-8, in a value msgspec skips without looking
    (b'"\xc0\xaf"', "not_utf8"),  # an over-long encoding of '/'
    (b'"\xed\xa0\x80"', "not_utf8"),  # a surrogate written as UTF-8
    (b"9" * 4000, "bad_value: duplicate key 'ts'"),  # an integer past what json.loads reads by default
    # past Python's 4300 digits, past a double: no reader holds them, which is named first, as the appender
    # names such an input line (still bad, never read as good)
    (b"9" * 5000, "bad_value: a number out of range"),
    (b"1" * 5000 + b".5", "bad_value: a number out of range"),
])
def test_a_key_twice_is_named_whatever_an_unknown_field_holds(skipped: bytes, reason: str) -> None:
    """Spec section 1: a line with a key twice is bad (and a line is UTF-8), whatever else it holds.

    msgspec skips an unknown field's value without checking its bytes, so the line decodes; the reader's
    exact check must not give up on it (it did: the line was read as good, ``ts`` given twice).
    """
    raw = b'{"type":"lane_check","ts":%s,"ts":%s,"x":%s}' % (TS, TS, skipped)
    got = Reader().decode(raw, 1)
    assert isinstance(got, str) and got.startswith(reason), got
    assert fast_block([raw], 0, 1) is None
    alone = b'{"type":"lane_check","ts":%s,"x":%s}' % (TS, skipped)  # no key twice: only the bytes matter
    good = Reader().decode(alone, 1)
    bad_alone = not reason.startswith("bad_value: duplicate key")
    assert isinstance(good, str) == bad_alone, good
    replay = Replay(Runner())
    replay.feed(io.BytesIO(raw + b"\n" + alone + b"\n"))
    assert [b["line"] for b in replay.bad_lines] == ([1, 2] if bad_alone else [1])
    assert replay.bad_lines[0]["reason"].startswith(reason)


@pytest.mark.parametrize("number", [b"1e400", b"-1e400", b"2e308", b"1" + b"0" * 400 + b".5"])
def test_a_later_version_with_a_number_past_a_double_is_a_bad_line_not_a_crash(number: bytes) -> None:
    """A line at ``v`` 2 is read again untyped to upcast it; a number no double holds, in a field the typed
    decode skipped, made that raise out of the reader and the replay (spec section 1: named, and gone past)."""
    raw = b'{"v":2,"type":"lane_check","ts":%s,"x":%s}' % (TS, number)
    got = Reader().decode(raw, 1)
    assert isinstance(got, str) and got.startswith("bad_value: a number out of range"), got
    good = b'{"type":"lane_check","ts":%s}' % TS
    replay = Replay(Runner())
    replay.feed(io.BytesIO(raw + b"\n" + good + b"\n"))
    assert [b["line"] for b in replay.bad_lines] == [1] and replay.events == 1


# -- the quick proof that lines hold no key twice (eventlog.reader.no_key_twice) -----------------------------


class _KeyTwice(Exception):
    pass


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _KeyTwice
    return dict(pairs)


def key_twice(raw: bytes) -> bool:
    """The test's own check, by the standard library: does any object of ``raw`` hold a key twice?"""
    try:
        json.loads(raw, object_pairs_hook=_no_repeats)
    except _KeyTwice:
        return True
    return False


def _string(text: str, escapes: list[int]) -> str:
    """``text`` as a JSON string, each '"' written ``\\"`` or ``\\u0022``, some letters as ``\\u00XX``."""
    out = []
    for i, ch in enumerate(text):
        how = escapes[i % len(escapes)] if escapes else 0
        if ch == '"':
            out.append("\\u0022" if how % 2 else '\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch.isalpha() and how % 3 == 2:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_KEYS = st.sampled_from(["a", "b", "v", "ts", 'x"y', '"', ""])
_TEXTS = st.sampled_from(["", "a", '"', 'a"b', "seq", '":"', "\u3042", "x\\y"])


@st.composite
def json_text(draw: st.DrawFn, depth: int = 0) -> str:
    """A JSON value as a writer may write it: keys often given twice, quotes escaped either way, odd spacing."""
    escapes = draw(st.lists(st.integers(0, 5), max_size=3))
    kind = draw(st.sampled_from(["object", "object", "list", "string", "number", "literal"]) if depth < 3
                else st.sampled_from(["string", "number", "literal"]))
    space = draw(st.sampled_from(["", " ", "\t"]))
    if kind == "object":
        members = draw(st.lists(st.tuples(_KEYS, json_text(depth + 1)), max_size=5))
        return "{" + ",".join(f"{space}{_string(k, escapes)}{space}:{space}{v}" for k, v in members) + "}"
    if kind == "list":
        return "[" + f",{space}".join(draw(st.lists(json_text(depth + 1), max_size=4))) + "]"
    if kind == "string":
        return _string(draw(_TEXTS), escapes)
    if kind == "number":
        return draw(st.sampled_from(["0", "-1", "1.5", "1e3", "12345678901234567890123"]))
    return draw(st.sampled_from(["true", "false", "null"]))


@given(st.lists(json_text(), min_size=1, max_size=4))
@example(['{"a":1,"a":"\\u0022\\u0022"}'])  # the two '"' the key twice adds, hidden by two written \u0022
@example(['{"a":1,"\\u0061":2}'])  # one key, written two ways
@example(['{"a":{"b":1,"b":1}}', '{"c":2}'])
@settings(max_examples=EXAMPLES * 4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_no_key_twice_proves_only_what_is_so(texts: list[str]) -> None:
    """True only for lines where no object holds a key twice; and true for each such line that writes no
    ``\\u0022`` (so the quick proof is what the block path really takes)."""
    lines = [text.encode() for text in texts]
    twice = [key_twice(raw) for raw in lines]
    if no_key_twice(lines):
        assert not any(twice), texts
    for raw, repeated in zip(lines, twice, strict=True):
        assert no_key_twice([raw]) == (not repeated and b"\\u0022" not in raw), raw
        assert (duplicate_key(raw) is None) == (not repeated), raw


def test_unknown_fields_on_every_line_keep_a_block_on_the_block_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spec section 1: unknown fields are kept on read. A block whose every line carries some is proved in
    one C pass to hold no key twice: no line is parsed again in Python, and the events are the reader's.
    The same block with one unknown key given twice goes line by line, where that line is named."""
    plain = [encoded(event, seq) for seq, event in enumerate(
        [{"type": "lane_check", "ts": TS.decode().strip('"')},
         {"type": "handoff_created", "ts": "2026-08-01T09:00:00+09:00", "handoff_id": "h-1", "account": "a",
          "importance": 0},
         {"type": "claimed", "ts": "2026-08-01T09:00:01+09:00", "handoff_id": "h-1", "watcher": "w", "attempt": 1}],
        1)]
    extra = [_append(raw, b'"host":"runner-1","pid":4242,"meta":{"note":"a \\"quoted\\" word"}') for raw in plain]
    with monkeypatch.context() as m:
        m.setattr(replay_module, "looked_at_again", lambda raw: pytest.fail(f"parsed again in Python: {raw!r}"))
        block = fast_block(extra, 0, 1)
    assert block is not None
    check_block(extra, 0, 1)
    twice = [*extra[:2], _append(extra[2], b'"host":"runner-2"')]
    assert fast_block(twice, 0, 1) is None
    replay = Replay(Runner())
    replay.feed(io.BytesIO(b"".join(raw + b"\n" for raw in twice)))
    assert replay.bad_lines == [{"line": 3, "reason": "bad_value: duplicate key 'host'"}]
    assert replay.events == 2


class _PerEvent(Runner):
    """A runner without ``fold_block``: the replay's block path calls ``fold`` for each event."""

    fold_block = None  # type: ignore[assignment]


@pytest.mark.parametrize("path", sorted((ROOT / "fixtures").glob("*.jsonl")), ids=lambda p: p.name)
def test_a_block_folded_at_once_folds_as_its_events_one_by_one(path: Path) -> None:
    """``Runner.fold_block`` (the block path's one call per block) leaves the state ``fold`` for each would."""
    data = path.read_bytes()
    at_once, one_by_one = Replay(Runner()), Replay(_PerEvent())
    at_once.feed(io.BytesIO(data))
    one_by_one.feed(io.BytesIO(data))
    assert at_once.events == one_by_one.events
    assert at_once.dump(path.name) == one_by_one.dump(path.name)
    revisions = [{name: dict(ids) for name, ids in r.folder.revisions.items()}  # type: ignore[attr-defined]
                 for r in (at_once, one_by_one)]
    assert revisions[0] == revisions[1]


def test_a_field_with_a_default_factory_is_refused_by_the_quote_counter() -> None:
    """The block path proves a block at once when its quotes equal what its events account for; that needs
    every counter to count no more than a line holds, which an absent default_factory field would break."""
    from eventlog.events import Event
    from eventlog.reader import _quote_counter

    class Listed(Event, tag="listed_for_test"):
        names: list[str] = msgspec.field(default_factory=list)

    with pytest.raises(TypeError, match="default_factory"):
        _quote_counter(Listed)
