"""Property tests of spec section 1, "Ranges" and "What ``eventlog append`` writes is what a replay applies".

Logs of valid shape with extreme values (times from 1900 to 9000 in odd
offsets with fractions, integers at the ends of 64 bits) go through every
projection's fold and view, the dump, the Prometheus exposition, what
``status`` and ``explain`` print, the split sidecar, and the runners'
planning queries as of extreme times: nothing may raise. Whatever
``EventLog.append`` accepts, a replay applies as the same event; the
replay's fast path and its reader agree on every line.
"""

from __future__ import annotations

import io
import json
import math
import tempfile
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import msgspec
import msgspec.inspect as mi
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from eventlog import lazystate, snapshot
from eventlog.appender import AppendError, EventLog
from eventlog.events import (
    EVENT_TYPES,
    FIRST_YEAR,
    INT64_MAX,
    INT64_MIN,
    LAST_YEAR,
    TIME_FIELDS,
    Event,
    read_time,
    read_times,
    type_name,
)
from eventlog.prom import exposition
from eventlog.reader import Reader, validate_object, without_foreign_values
from eventlog.replay import Replay, fast_block
from eventlog.runners.sessions import describe
from projections.base import elapsed_s, micros
from projections.runner import Runner
from projections.triage import LogFacts, explain, triage

OFFSETS = [timezone(timedelta(hours=h, minutes=m)) for h, m in
           ((0, 0), (14, 0), (-12, 0), (5, 45), (-9, -30), (23, 59), (-23, -59))]
IDS = st.one_of(st.sampled_from(["h1", "a"]), st.sampled_from(["h2", "x\ny", "\x1b[2J", ""]))


def iso(at: datetime, zulu: bool) -> str:
    text = at.isoformat()
    return text[:-6] + "Z" if zulu and text.endswith("+00:00") else text


FIRST, LAST = datetime(1900, 1, 1), datetime(9000, 12, 31, 23, 59, 59, 999999)
#: Anchors the times cluster around, so that events of one log meet (same day, stale, backoff): the contract's
#: two ends and an ordinary day.
ANCHORS = [FIRST, datetime(2026, 8, 3, 9, 0), LAST]


def near(anchor: datetime, seconds: int, micro: int, zone: timezone) -> datetime:
    local = min(LAST, max(FIRST, anchor + timedelta(seconds=seconds, microseconds=micro)))
    return local.replace(tzinfo=zone)


wall_times = st.one_of(
    st.builds(near, st.sampled_from(ANCHORS), st.integers(-3 * 86400, 3 * 86400), st.integers(0, 999_999),
              st.sampled_from(OFFSETS)),
    st.datetimes(min_value=FIRST, max_value=LAST, timezones=st.sampled_from(OFFSETS)),
)
times = st.builds(iso, wall_times, st.booleans())
#: Integers near both ends of 64 bits, near 0, and anywhere.
edge_ints = st.one_of(st.sampled_from([INT64_MIN, INT64_MIN + 1, -1, 0, 1, 24, 60, 3_000_000_000, INT64_MAX - 1,
                                       INT64_MAX]),
                      st.integers(INT64_MIN, INT64_MAX))


def value_of(kind: mi.Type, name: str) -> st.SearchStrategy[Any]:
    """Values of one field type, extreme ones included."""
    if isinstance(kind, mi.UnionType):
        return st.one_of(*(value_of(t, name) for t in kind.types))
    if isinstance(kind, mi.NoneType):
        return st.none()
    if isinstance(kind, mi.LiteralType):
        return st.sampled_from(list(kind.values))
    if isinstance(kind, mi.BoolType):
        return st.booleans()
    if isinstance(kind, mi.IntType):
        low = kind.ge if kind.ge is not None else INT64_MIN
        return st.one_of(edge_ints.filter(lambda n: n >= low), st.integers(low, min(low + 5, INT64_MAX)))
    if isinstance(kind, mi.FloatType):  # within the field's bounds, the extremes included
        low = kind.ge if kind.ge is not None else kind.gt
        high = kind.le if kind.le is not None else kind.lt
        return st.floats(low, high, allow_nan=False, allow_infinity=False, exclude_min=kind.gt is not None,
                         exclude_max=kind.lt is not None)
    if isinstance(kind, mi.ListType):
        return st.lists(value_of(kind.item_type, name), max_size=3)
    if isinstance(kind, mi.DictType):
        return st.dictionaries(value_of(kind.key_type, name), value_of(kind.value_type, name), max_size=3)
    if isinstance(kind, mi.StructType):
        return st.fixed_dictionaries({}, optional={f.encode_name: value_of(f.type, f.name) for f in kind.fields})
    if isinstance(kind, mi.StrType):
        if kind.min_length:
            return st.text(min_size=kind.min_length, max_size=5)
        return IDS
    raise AssertionError(f"no strategy for {kind}")


def event_of(cls: type[Event]) -> st.SearchStrategy[dict[str, Any]]:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    timed = {"ts", *TIME_FIELDS.get(cls, ())}
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for f in info.fields:
        if f.name in ("seq", "v", "batch_end"):
            continue  # the envelope: set by the appender
        strategy = (st.one_of(st.none(), times) if isinstance(f.type, mi.UnionType) else times) \
            if f.name in timed else value_of(f.type, f.name)
        (required if f.required else optional)[f.encode_name] = strategy
    tag = cls.__struct_config__.tag
    return st.fixed_dictionaries({"type": st.just(tag), **required}, optional=optional)


EVENTS = {cls: event_of(cls) for cls in EVENT_TYPES.values()}
any_event = st.one_of(*EVENTS.values())


@st.composite
def logs(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Events of a few types only, so that they meet: a registration and a skip of one job, a claim of a handoff."""
    kinds = draw(st.lists(st.sampled_from(list(EVENTS)), min_size=1, max_size=4, unique=True))
    return draw(st.lists(st.one_of(*(EVENTS[k] for k in kinds)), min_size=1, max_size=25))

#: "As of" times a projection may be asked about: the contract's ends, and what Python holds at most.
as_ofs = st.one_of(
    wall_times,
    st.sampled_from([datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC),
                     datetime.min.replace(tzinfo=OFFSETS[1]), datetime.max.replace(tzinfo=OFFSETS[2])]),
)


def as_log(events: list[dict[str, Any]]) -> bytes:
    return b"".join(msgspec.json.encode({**e, "seq": i}) + b"\n" for i, e in enumerate(events, 1))


def replayed(data: bytes) -> Replay:
    replay = Replay(Runner())
    replay.feed(io.BytesIO(data))
    return replay


def everything_reads(replay: Replay, at: datetime) -> None:
    """Every view of the state, as of ``at`` and as of the last line: none may raise."""
    folder = replay.folder
    assert isinstance(folder, Runner)
    for when, text in ((at, at.isoformat()), (None, None)):
        dump = replay.dump("log", when, text)
        json.dumps(dump)  # the dump is JSON as it is
        exposition(dump)
        facts = LogFacts(name="log", events=replay.events, torn_tail=replay.torn_tail)
        judged = triage(folder, when, text, facts)
        msgspec.json.encode(judged)
        for ident in ("h1", "a", "h2", "x\ny", "w", "j", "s", "p"):
            msgspec.json.encode(explain(folder, ident, when, text, facts))
    handoffs, catchup, lanes, sessions = folder.handoffs, folder.catchup, folder.lanes, folder.sessions
    handoffs.probe_plan(at)
    handoffs.due_accounts(at)
    handoffs.next_claims()
    handoffs.claim_order()
    handoffs.stale_claims(at)
    handoffs.watcher_late(at)
    catchup.candidates(at)
    catchup.circuit_open(at)
    lanes.judge(at, at.isoformat())
    for sid in list(sessions.sessions):
        describe(sessions, sid, at)
        sessions.options(sid)


END = "9000-12-31T23:59:59.999999-23:59"
#: The crash sites issue 15 found, each as a valid log: a calendar hour that is no time of day, a backoff and a
#: retry computed at the end of the range, a skip at its start read in a zone west of it.
CRASHES = [
    [{"type": "job_registered", "ts": "2026-08-03T09:00:00+09:00", "label": "j", "guarded": True,
      "calendar": [{"Hour": 3_000_000_000}], "interval_s": None},
     {"type": "job_skipped", "ts": "2026-08-03T09:00:00+09:00", "label": "j", "reason": "q", "remaining_s": 1}],
    [{"type": "handoff_created", "ts": END, "handoff_id": "h1", "account": "a"},
     {"type": "limit_recorded", "ts": END, "account": "a", "limited_at": END, "reset_at": None, "source": "s",
      "confidence": "estimated"},
     {"type": "probe_result", "ts": END, "account": "a", "outcome": "quota_limited"},
     {"type": "probe_result", "ts": END, "account": "a", "outcome": "transient"}],
    [{"type": "startup_failed", "ts": END, "session_id": "s", "generation": INT64_MAX, "reason": "boom"}],
    [{"type": "job_skipped", "ts": "1900-01-01T00:00:00+14:00", "label": "j", "reason": "q", "remaining_s": 1},
     {"type": "job_registered", "ts": "1900-01-01T00:00:00+14:00", "label": "j", "guarded": True,
      "calendar": [{"Hour": 0, "Minute": INT64_MIN}], "interval_s": None},
     {"type": "lane_check", "ts": "1900-01-01T00:00:00-05:00"}],
]


@given(logs(), as_ofs)
@example(CRASHES[0], datetime(2026, 8, 3, 12, 0, tzinfo=OFFSETS[0]).astimezone(timezone(timedelta(hours=9))))
@example(CRASHES[1], datetime.max.replace(tzinfo=UTC))
@example(CRASHES[2], datetime.max.replace(tzinfo=OFFSETS[2]))
@example(CRASHES[3], datetime.min.replace(tzinfo=OFFSETS[1]))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_extreme_valid_logs_never_break_a_fold_a_view_or_a_runner_query(events: list[dict[str, Any]],
                                                                     at: datetime) -> None:
    data = as_log(events)
    replay = replayed(data)
    assert replay.bad_lines == []  # every line is valid: these are the values a reader accepts
    assert replay.events == len(events)
    everything_reads(replay, at)
    # the sidecar's split state, loaded lazily and whole, is the same state
    encoded = snapshot.encode_state(replay)
    for lazy in (True, False):
        fresh = Replay(Runner())
        assert snapshot.decode_state(encoded, fresh, lazy=lazy) is None
        assert fresh.dump("log") == replay.dump("log")
        everything_reads(fresh, at)
        assert lazystate.encode(fresh.save_state()) == encoded


def mutated(line: bytes, how: int) -> bytes:
    """A line changed the ways a hand-written line may differ: spaces, a repeated key, an escape, an extra field."""
    if how == 0:
        return line.replace(b'":', b'" :', 1)
    if how == 1:
        return line[:-1] + b',"type":"lane_check"}'
    if how == 2:
        return line.replace(b'"ts"', b'"t\\u0073"', 1)
    if how == 3:
        return line[:-1] + b',"extra":"\\"q\\""}'
    if how == 4:
        return line.replace(b'"seq":', b'"v":1,"seq":', 1)
    return line


@given(logs(), st.lists(st.integers(0, 6), min_size=25, max_size=25))
@settings(max_examples=150, deadline=None)
def test_the_fast_path_and_the_reader_agree_on_every_line(events: list[dict[str, Any]], hows: list[int]) -> None:
    lines = [mutated(msgspec.json.encode({**e, "seq": i}), hows[i - 1]) for i, e in enumerate(events, 1)]
    fast = replayed(b"".join(x + b"\n" for x in lines))
    slow = Replay(Runner())
    for n, raw in enumerate(lines, 1):
        slow.fold_line(raw, n)
    assert fast.bad_lines == slow.bad_lines
    assert fast.dump("log") == slow.dump("log")
    for i, how in enumerate(hows[: len(lines)]):
        repeated = how == 1 or (how == 2 and b'"ts"' in lines[i])
        assert any(b["line"] == i + 1 and "duplicate key" in b["reason"] for b in fast.bad_lines) == repeated


out_of_range = st.one_of(
    st.sampled_from([INT64_MIN - 1, INT64_MAX + 1, 2**64, -(2**70), math.nan, math.inf, -math.inf, 1e308]),
    st.sampled_from(["1899-12-31T23:59:59+00:00", "9001-01-01T00:00:00+00:00", "0001-01-01T00:00:00Z",
                     "9999-12-31T23:59:59-12:00"]),
)


@st.composite
def maybe_broken(draw: st.DrawFn) -> dict[str, Any]:
    """A valid event, or one with a field set to a value out of range."""
    event = dict(draw(any_event))
    if draw(st.booleans()):
        key = draw(st.sampled_from(sorted(event)))
        if key != "type":
            event[key] = draw(out_of_range)
    return event


@given(st.lists(maybe_broken(), min_size=1, max_size=6), st.booleans())
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_what_append_accepts_a_replay_applies_as_the_same_event(batch: list[dict[str, Any]], split: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.jsonl"
        EventLog(log).append([{"type": "lane_check", "ts": "2026-08-03T01:00:00+09:00"}])
        before = log.read_bytes()
        accepted: list[Event] = []
        try:
            for part in ([[e] for e in batch] if split else [batch]):
                EventLog(log).append(part, check=False)
                accepted.extend(_expected(part))
        except AppendError as err:
            assert err.exit_code == 2, err.messages
            assert not accepted or split
            if not split:
                assert log.read_bytes() == before
        lines = log.read_bytes().splitlines()[1:]
        assert len(lines) == len(accepted)
        reader = Reader()
        reader.last_seq = 1
        marks = [json.loads(x).get("batch_end") for x in lines]
        for n, (raw, want) in enumerate(zip(lines, accepted, strict=True), 2):
            got = reader.decode(raw, n)
            assert not isinstance(got, str), got
            want.seq, want.batch_end = n, marks[n - 2]
            assert got[0] == want
        replay = replayed(log.read_bytes())
        assert replay.bad_lines == [] and replay.events == 1 + len(accepted)
        everything_reads(replay, datetime(9000, 12, 31, 23, 59, 59, tzinfo=OFFSETS[2]))


def _expected(part: list[dict[str, Any]]) -> list[Event]:
    """The events of an accepted batch as validate_object reads them."""
    out = []
    for obj in part:
        checked = validate_object(dict(obj))
        assert not isinstance(checked, str), checked
        out.append(checked[0])
    return out


def read_as_good(lines: list[bytes]) -> bool:
    """Whether the reader, line by line, finds every line good and none marks a batch, nor holds another writer's
    value in a field the project adds (the reader keeps and ignores it; the block path decodes the project's types,
    so such a rare line goes line by line: docs/DECISIONS.md, "Fields the project adds")."""
    reader = Reader()
    for n, raw in enumerate(lines, 1):
        one = reader.decode(raw, n)
        if isinstance(one, str) or one[0].batch_end is not None:
            return False
        obj = json.loads(raw)
        if without_foreign_values(type(one[0]), obj) is not obj:
            return False
    return True


def read_as_the_reader_reads(lines: list[bytes], block: tuple[list[Event], list[datetime]] | None) -> bool:
    """Assert the block path took ``lines`` exactly when the reader finds each good, and read each as it does
    (``seq``: given, else the line's number); whether it took them."""
    assert (block is not None) == read_as_good(lines)
    if block is None:
        return False
    reader = Reader()
    for n, (raw, ev, at) in enumerate(zip(lines, *block, strict=True), 1):
        one = reader.decode(raw, n)
        assert not isinstance(one, str)
        assert msgspec.structs.asdict(ev) == msgspec.structs.asdict(one[0])
        assert type_name(ev) == type_name(one[0])
        assert at == one[1] and at.utcoffset() == one[1].utcoffset()
    return True


@given(logs())
@settings(max_examples=150, deadline=None)
def test_a_block_of_ordinary_lines_is_read_at_once_as_the_reader_reads_each_line(events: list[dict[str, Any]]) -> None:
    lines = [msgspec.json.encode({**e, "seq": i}) for i, e in enumerate(events, 1)]
    block = fast_block(lines, 0)
    # valid lines with a seq and plain times: the block path takes them when the reader reads each one as good;
    # a line that holds more '"' than its event accounts for (a calendar entry written with nulls) is parsed
    # again as the reader parses it
    if not read_as_the_reader_reads(lines, block):
        return
    assert fast_block(lines, len(lines)) is None  # seq must increase past the last line read
    assert fast_block([*lines[:-1], lines[-1][:-1] + b',"seq":1}'], 0) is None  # a key twice: the reader names it


@given(logs(), st.booleans(), st.booleans())
@example([{"type": "catchup_kicked", "label": "h1", "ts": "1900-01-01T00:00:00+00:00", "timeout_s": None,
           "launchd_domain": "h1"}], False, False)  # another writer's value in a field the project adds (CI)
@settings(max_examples=150, deadline=None)
def test_a_block_that_writes_v_or_leaves_seq_out_is_read_at_once_as_the_reader_reads_it(
        events: list[dict[str, Any]], with_v: bool, with_seq: bool) -> None:
    """``"v":1`` on every line, or no ``seq`` (spec section 2: the line number stands in): still one block."""
    lines = [msgspec.json.encode({**({"v": 1} if with_v else {}), **e, **({"seq": i} if with_seq else {})})
             for i, e in enumerate(events, 1)]
    if not read_as_the_reader_reads(lines, fast_block(lines, 0, 1)):
        return
    later = fast_block(lines, len(lines), len(lines) + 1)  # read again after as many lines as it holds
    if with_seq:
        assert later is None  # seq must increase past the last line read
    else:  # the line numbers stand in, from where the block starts
        assert later is not None and [ev.seq for ev in later[0]] == list(range(len(lines) + 1, 2 * len(lines) + 1))
    twice = lines[-1].replace(b'{', b'{"v":1,', 1) if with_v else lines[-1].replace(b'{', b'{"v":1,"v":1,', 1)
    assert fast_block([*lines[:-1], twice], 0, 1) is None  # "v" twice is a key twice: the reader names it


def test_a_line_with_more_quotes_than_its_event_keeps_the_block_only_when_the_reader_takes_it() -> None:
    """More '"' than the event accounts for: parsed again, as the reader does; only a key twice or a batch
    marker sends the block line by line."""
    ts = "2026-08-01T09:00:00+09:00"
    lines = [b'{"type":"lane_check","ts":"%s","seq":%d}' % (ts.encode(), n) for n in range(1, 5)]
    calendar = (b'{"type":"job_registered","ts":"%s","seq":5,"label":"j","guarded":true,'
                b'"calendar":[{"Hour":9,"Minute":null}],"interval_s":null}' % ts.encode())
    unknown = b'{"type":"lane_check","ts":"%s","seq":6,"note":"by hand"}' % ts.encode()
    block = fast_block([*lines, calendar, unknown], 0, 1)
    assert block is not None and read_as_good([*lines, calendar, unknown])
    assert [ev.seq for ev in block[0]] == [1, 2, 3, 4, 5, 6]
    for bad in (b'{"type":"lane_check","ts":"%s","seq":5,"seq":5}' % ts.encode(),  # a key twice (a fixed type)
                calendar.replace(b'"label":"j"', b'"label":"j","label":"j"'),  # a key twice (a counted type)
                b'{"type":"lane_check","ts":"%s","seq":5,"batch_end":6}' % ts.encode()):  # a batch: held
        assert fast_block([*lines, bad], 0, 1) is None, bad


def test_a_block_of_hand_written_lines_needs_them_all_without_seq() -> None:
    ts = "2026-08-01T09:00:00+09:00"
    lines = [msgspec.json.encode({"type": "lane_check", "ts": ts}) for _ in range(3)]
    block = fast_block(lines, 0, 1)
    assert block is not None and [ev.seq for ev in block[0]] == [1, 2, 3]
    assert fast_block(lines, 0) is None  # no line numbers given: line by line
    assert fast_block(lines, 5, 4) is None  # line 4 after seq 5: bad_seq, named line by line
    mixed = [*lines[:2], msgspec.json.encode({"type": "lane_check", "ts": ts, "seq": 3})]
    assert fast_block(mixed, 0, 1) is None
    assert fast_block([msgspec.json.encode({"type": "lane_check", "ts": ts, "seq": None}), *lines[1:]], 0, 1) \
        is None  # "seq":null is a wrong type, not a seq left out: the reader names it


time_texts = st.builds(
    lambda at, digits, sep, zone, lower: (
        at.strftime(f"%Y-%m-%d{sep}%H:%M:%S") + (f".{at.microsecond:06d}{'123'}"[: digits + 1] if digits else "")
        + zone).translate(str.maketrans("TZ", "tz") if lower else {}),
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)),
    st.integers(0, 9), st.sampled_from(["T", " ", "t"]),
    st.sampled_from(["Z", "+09:00", "-00:00", "+23:59", "-12:30", "", "+0900", "+09"]), st.booleans(),
)


@given(st.lists(time_texts, min_size=1, max_size=4))
@example(["2026-08-01T09:00:00.1234567+09:00"])
@example(["2026-08-01T09:00:00.123456789+09:00", "2026-08-01T09:00:00Z"])
@example(["2026-08-01t09:00:00z"])
@example(["20260801T090000+0900"])
@example(["1899-12-31T23:59:59+00:00", "2026-08-01T09:00:00Z"])
def test_times_read_at_once_are_read_as_each_alone(texts: list[str]) -> None:
    values = read_times(texts)
    singles: list[datetime | None] = []
    for text in texts:
        try:
            value = read_time(text)
        except ValueError:
            value = None
        ok = value is not None and value.tzinfo is not None and FIRST_YEAR <= value.year <= LAST_YEAR
        singles.append(value if ok else None)
    if values is None:  # only when one is bad: the reader then names it, line by line
        assert None in singles
        return
    assert None not in singles
    for value, single in zip(values, singles, strict=True):
        assert single is not None
        assert value == single and value.utcoffset() == single.utcoffset()
        assert value.replace(tzinfo=None) == single.replace(tzinfo=None)


def test_plain_times_are_read_at_once() -> None:
    texts = ["2026-08-01T09:00:00.672+09:00", "1900-01-01T00:00:00Z", "9000-12-31T23:59:59.999999-12:00",
             "2026-08-01 09:00:00+00:00"]
    assert read_times(texts) == [read_time(t) for t in texts]


zones = st.one_of(st.sampled_from(OFFSETS), st.sampled_from([ZoneInfo("Asia/Tokyo"), ZoneInfo("America/New_York")]))


@given(st.datetimes(min_value=FIRST, max_value=LAST), st.datetimes(min_value=FIRST, max_value=LAST), zones, zones,
       st.booleans())
def test_micros_and_elapsed_s_are_real_time_whatever_the_zone_objects(a: datetime, b: datetime, za: Any, zb: Any,
                                                                      read: bool) -> None:
    at, before = a.replace(tzinfo=za), b.replace(tzinfo=zb)
    if read:  # as the replay's block path reads them: one tzinfo object per offset
        values = read_times([at.isoformat(), before.isoformat()])
        assume(values is not None)
        assert values is not None
        at, before = values
    naive_epoch = datetime(1970, 1, 1)
    through_utc = (at.astimezone(UTC).replace(tzinfo=None) - naive_epoch) // timedelta(microseconds=1)
    assert micros(at) == through_utc
    earlier = (before.astimezone(UTC).replace(tzinfo=None) - naive_epoch) // timedelta(microseconds=1)
    assert elapsed_s(at, before) == (through_utc - earlier) / 1_000_000
