"""The reader: every bad line named with its reason, never a crash (spec section 1)."""

from __future__ import annotations

import io
from zoneinfo import ZoneInfo

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog import events as ev
from eventlog import reader
from eventlog.reader import MAX_LINE_BYTES, TOO_LONG, Reader, iter_blocks, iter_lines
from eventlog.replay import Replay
from projections.runner import Runner

TS = "2026-08-08T10:00:00+09:00"


def decode(raw: bytes, line: int = 1, tz: ZoneInfo | None = None) -> object:
    return Reader(tz).decode(raw, line)


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"not json", "not_json"),
        (b"", "not_json"),
        (b"[1]", "not_object"),
        (b"null", "not_object"),
        (b'{"type":"nope","ts":"' + TS.encode() + b'"}', "unknown_type"),
        (b'{"ts":"' + TS.encode() + b'"}', "missing_field"),
        (b'{"type":"local_started","ts":"' + TS.encode() + b'"}', "missing_field"),
        (b'{"type":"claimed","ts":"' + TS.encode() + b'","handoff_id":"h","watcher":"w","attempt":"1"}', "wrong_type"),
        (b'{"type":"claimed","ts":"' + TS.encode() + b'","handoff_id":"h","watcher":"w","attempt":true}', "wrong_type"),
        (b'{"type":"worker_stopped","ts":"' + TS.encode() + b'","session_id":"s","generation":1,"stop_kind":"x"}',
         "bad_value"),
        (b'{"type":"lane_check","ts":"2026-08-08T10:00:00"}', "no_offset"),
        (b'{"type":"lane_check","ts":"soon"}', "bad_time"),
        (b'{"type":"lane_check","ts":"' + TS.encode() + b'","v":2}', "bad_version"),
        (b'{"type":"status_updated","ts":"' + TS.encode() + b'","product":"\xff","state":"idle"}', "not_utf8"),
        (b'{"type":"lane_check"\x00}', "not_json"),
    ],
)
def test_bad_lines_are_named(raw: bytes, code: str) -> None:
    result = decode(raw)
    assert isinstance(result, str)
    assert result.split(":")[0] == code


def test_seq_must_increase_and_line_number_stands_in() -> None:
    r = Reader()
    assert not isinstance(r.decode(b'{"type":"lane_check","ts":"' + TS.encode() + b'","seq":5}', 1), str)
    repeated = r.decode(b'{"type":"lane_check","ts":"' + TS.encode() + b'","seq":5}', 2)
    assert isinstance(repeated, str) and repeated.startswith("bad_seq: repeated")
    # No seq: line 3 stands in, which is below 5.
    decreasing = r.decode(b'{"type":"lane_check","ts":"' + TS.encode() + b'"}', 3)
    assert isinstance(decreasing, str) and decreasing.startswith("bad_seq: decreasing")
    assert not isinstance(r.decode(b'{"type":"lane_check","ts":"' + TS.encode() + b'"}', 6), str)


def test_assume_tz_gives_naive_times_a_zone() -> None:
    result = decode(b'{"type":"lane_check","ts":"2026-08-08T10:00:00"}', tz=ZoneInfo("Asia/Tokyo"))
    assert not isinstance(result, str)
    event, at = result  # type: ignore[misc]
    assert event.ts == "2026-08-08T10:00:00+09:00"
    assert at.utcoffset().total_seconds() == 9 * 3600


def test_unknown_fields_are_accepted() -> None:
    result = decode(b'{"type":"lane_check","ts":"' + TS.encode() + b'","later":{"x":1}}')
    assert not isinstance(result, str)


def test_torn_tail_is_left_out_and_reported() -> None:
    data = b'{"type":"lane_check","ts":"' + TS.encode() + b'"}\n{"type":"lane_check","ts":"' + TS.encode() + b'"}'
    replay = Replay(Runner())
    replay.feed(io.BytesIO(data))
    assert replay.events == 1
    assert replay.torn_tail is True
    assert replay.offset == data.index(b"\n") + 1


def test_over_long_line_is_bad_without_being_kept(tmp_path: object) -> None:
    big = b'{"type":"lane_check","ts":"' + TS.encode() + b'","pad":"' + b"x" * (MAX_LINE_BYTES + 10) + b'"}\n'
    data = big + b'{"type":"lane_check","ts":"' + TS.encode() + b'"}\n'
    items = list(iter_lines(io.BytesIO(data)))
    assert len(items) == 2
    assert items[0][1] == len(big)
    replay = Replay(Runner())
    replay.feed(io.BytesIO(data))
    assert [b["line"] for b in replay.bad_lines] == [1]
    assert replay.bad_lines[0]["reason"].startswith("too_long")
    assert replay.events == 1


def test_upcasting_a_made_up_v2(monkeypatch: pytest.MonkeyPatch) -> None:
    """A v1 `released` is read through an upcaster when the current version is 2."""
    monkeypatch.setitem(ev.CURRENT_VERSION, "released", 2)

    def v1_to_v2(obj: dict[str, object]) -> dict[str, object]:
        obj["reason"] = f"v1:{obj['reason']}"
        return obj

    monkeypatch.setitem(ev.UPCASTERS, ("released", 1), v1_to_v2)
    result = decode(b'{"type":"released","ts":"' + TS.encode() + b'","handoff_id":"h","reason":"back"}')
    assert not isinstance(result, str)
    event = result[0]  # type: ignore[index]
    assert isinstance(event, ev.Released) and event.reason == "v1:back" and event.v == 2
    # A v2 line is read as is; a v3 line is newer than the reader.
    v2 = decode(b'{"type":"released","ts":"' + TS.encode() + b'","handoff_id":"h","reason":"r","v":2}')
    assert not isinstance(v2, str) and v2[0].reason == "r"  # type: ignore[index]
    v3 = decode(b'{"type":"released","ts":"' + TS.encode() + b'","handoff_id":"h","reason":"r","v":3}')
    assert isinstance(v3, str) and v3.startswith("bad_version")


def test_schema_names_every_type() -> None:
    schema = ev.schema()
    text = msgspec.json.encode(schema).decode()
    for name in ev.EVENT_TYPES:
        assert f'"{name}"' in text


_PIECES = st.lists(st.lists(st.sampled_from([b'"', b"a", b"\xff", b"\r"]), max_size=12).map(b"".join), max_size=20)


@given(_PIECES, st.booleans(), st.integers(1, 16), st.integers(0, 8), st.booleans())
@settings(max_examples=300)
def test_blocks_hold_every_line_and_count_its_quotes(pieces: list[bytes], torn: bool, size: int, more: int,
                                                     ends: bool) -> None:
    """Each block's lines are the file's complete lines in order (an over-long one as TOO_LONG), with their
    newline when read with ``ends``, its ``end`` the offset past the last, its ``quotes`` their ``"`` (the
    replay's check for a key twice).

    A line no longer than a block is never over-long (as 128 KiB blocks and 1 MiB lines).
    """
    longest = size + more
    data = b"".join(p + b"\n" for p in pieces) + (b'x"' if torn else b"")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reader, "MAX_LINE_BYTES", longest)
        blocks = list(iter_blocks(io.BytesIO(data), 0, size, ends=ends))
    got = [line for b in blocks for line in b.lines]
    newline = b"\n" if ends else b""
    assert got == [TOO_LONG if len(p) > longest else p + newline for p in pieces]
    for b in blocks:
        assert b.quotes == sum(line.count(b'"') for line in b.lines)
        assert b.torn or data[b.end - 1:b.end] == b"\n"
    assert (blocks[-1].torn if blocks else False) == torn
    assert not blocks or blocks[-1].end == (len(data) - 2 if torn else len(data))


def test_blocks_longer_than_a_line_may_be_are_refused() -> None:
    """A block past MAX_LINE_BYTES + 1 could hold an over-long line after its first, which goes unchecked."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reader, "MAX_LINE_BYTES", 4)
        data = b"a\n" + b"x" * 6 + b"\n"
        assert [b.lines for b in iter_blocks(io.BytesIO(data), 0, 5)] == [[b"a"], [TOO_LONG]]
        with pytest.raises(ValueError, match="MAX_LINE_BYTES"):
            list(iter_blocks(io.BytesIO(data), 0, 6))


@pytest.mark.parametrize("data", [b"\x00" * 100, b"\xff\xfe\n\n", b"\n" * 5, b"{" * 1000 + b"\n", b""])
def test_any_bytes_never_crash(data: bytes) -> None:
    replay = Replay(Runner())
    replay.feed(io.BytesIO(data))
    assert replay.events == 0
    assert len(replay.bad_lines) == data.count(b"\n")
