"""Property tests: any bytes, any split point, any broken sidecar."""

from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog import snapshot
from eventlog.appender import Conflict, EventLog
from eventlog.fold import Rejected
from eventlog.reader import validate_object
from eventlog.replay import Replay
from projections.runner import Runner

HOURS = [f"2026-08-03T{h:02d}:{m:02d}:00+09:00" for h in range(0, 24, 3) for m in (0, 30)]

valid_event = st.one_of(
    st.builds(lambda h, ts: {"type": "handoff_created", "ts": ts, "handoff_id": h, "account": "a"},
              st.sampled_from("hij"), st.sampled_from(HOURS)),
    st.builds(lambda h, ts, n: {"type": "claimed", "ts": ts, "handoff_id": h, "watcher": "w", "attempt": n},
              st.sampled_from("hij"), st.sampled_from(HOURS), st.integers(1, 3)),
    st.builds(lambda h, ts: {"type": "resume_requested", "ts": ts, "handoff_id": h, "attempt": 1},
              st.sampled_from("hij"), st.sampled_from(HOURS)),
    st.builds(lambda h, ts: {"type": "verified", "ts": ts, "handoff_id": h, "attempt": 1, "branch": "main",
                             "head": "abc", "dirty": False, "todos": "taken_over"},
              st.sampled_from("hij"), st.sampled_from(HOURS)),
    st.builds(lambda h, ts: {"type": "skip", "ts": ts, "handoff_id": h, "reason": "expired"},
              st.sampled_from("hij"), st.sampled_from(HOURS)),
    st.builds(lambda p, ts, s: {"type": "status_updated", "ts": ts, "product": p, "state": s},
              st.sampled_from("pq"), st.sampled_from(HOURS), st.sampled_from(["running", "idle"])),
    st.builds(lambda ts: {"type": "lane_check", "ts": ts}, st.sampled_from(HOURS)),
    st.builds(lambda s, ts, r: {"type": "startup_failed", "ts": ts, "session_id": s, "generation": 1, "reason": r},
              st.sampled_from("st"), st.sampled_from(HOURS), st.sampled_from(["boom", "incompatible_checkpoint"])),
    st.builds(lambda s, ts: {"type": "worker_ready", "ts": ts, "session_id": s, "generation": 2},
              st.sampled_from("st"), st.sampled_from(HOURS)),
)
line = st.one_of(
    valid_event.map(lambda e: json.dumps(e).encode()),
    st.binary(max_size=40).filter(lambda b: b"\n" not in b),
    st.sampled_from([b"", b"{}", b"[]", b'{"type":"claimed"}', b'{"type":1,"ts":"x"}', b"\xff\xfe"]),
)
logs = st.lists(line, max_size=40).map(lambda ls: b"".join(x + b"\n" for x in ls))


def full(data: bytes) -> Replay:
    replay = Replay(Runner())
    replay.feed(io.BytesIO(data))
    return replay


@given(st.binary(max_size=2000))
@settings(max_examples=300)
def test_any_bytes_never_crash_and_every_line_is_accounted_for(data: bytes) -> None:
    replay = full(data)
    complete = data.count(b"\n")
    assert replay.events + len(replay.bad_lines) == complete
    assert replay.torn_tail == (not data.endswith(b"\n") and data != b"")
    assert all(isinstance(b["reason"], str) and b["reason"] for b in replay.bad_lines)


@given(logs, st.data())
@settings(max_examples=200)
def test_prefix_then_rest_equals_whole(data: bytes, draw: st.DataObject) -> None:
    cuts = [i + 1 for i, b in enumerate(data) if b == 10]
    cut = draw.draw(st.sampled_from([0, *cuts]))
    split = Replay(Runner())
    f = io.BytesIO(data[:cut])
    split.feed(f)
    split.feed(io.BytesIO(data))
    assert split.dump("x") == full(data).dump("x")


@given(logs, st.data())
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
def test_snapshot_plus_tail_equals_full_replay(data: bytes, draw: st.DataObject) -> None:
    cuts = [i + 1 for i, b in enumerate(data) if b == 10]
    cut = draw.draw(st.sampled_from([0, *cuts]))
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.jsonl"
        snap = str(Path(tmp) / "snap")
        log.write_bytes(data[:cut])
        first = Replay(Runner())
        with log.open("rb") as f:
            first.feed(f)
            snapshot.save(snap, f, first, snapshot.folder_version(first))
        log.write_bytes(data)
        with log.open("rb") as f:
            loaded, why = snapshot.load(snap, f, snapshot.folder_version(first))
            assert loaded is not None, why
            loaded.feed(f)
        assert loaded.dump("x") == full(data).dump("x")


@given(st.lists(valid_event, min_size=1, max_size=12), st.data())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_broken_sidecar_is_rebuilt_never_trusted(events: list[dict[str, object]], draw: st.DataObject) -> None:
    """Whatever happens to the sidecar, append judges exactly as a fresh replay of the log would."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.jsonl"
        el = EventLog(log)
        for ev in events[:-1]:
            try:
                el.append([ev])
            except Conflict:
                pass
        sidecar = Path(el.sidecar)
        damage = draw.draw(st.sampled_from(["delete", "truncate", "flip", "stale"]))
        if sidecar.exists():
            raw = sidecar.read_bytes()
            if damage == "delete":
                sidecar.unlink()
            elif damage == "truncate":
                sidecar.write_bytes(raw[: draw.draw(st.integers(0, max(0, len(raw) - 1)))])
            elif damage == "flip":
                i = draw.draw(st.integers(0, len(raw) - 1))
                sidecar.write_bytes(raw[:i] + bytes([raw[i] ^ 0xFF]) + raw[i + 1:])
            else:  # the log changed behind the sidecar's back, with the same length
                text = log.read_bytes()
                log.write_bytes(text.replace(b'"h"', b'"j"').replace(b'"i"', b'"h"'))
        # The judgement of a fresh replay of the log as it is now:
        with log.open("rb") if log.exists() else open(os.devnull, "rb") as f:
            fresh = Replay(Runner())
            fresh.feed(f)
        last = events[-1]
        checked = validate_object(dict(last))
        assert not isinstance(checked, str)
        would_reject = isinstance(fresh.apply(*checked), Rejected)
        try:
            el.append([last])
            refused = False
        except Conflict:
            refused = True
        assert refused == would_reject
