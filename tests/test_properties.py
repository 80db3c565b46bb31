"""Property tests: any bytes, any split point, any broken sidecar."""

from __future__ import annotations

import io
import json
import os
import tempfile
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog import snapshot
from eventlog.appender import Conflict, EventLog
from eventlog.cli.common import dumps
from eventlog.clock import parse_at
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


# --- every domain, for snapshots --------------------------------------------------------------
#
# Logs of every event type with few ids (so events meet). The writer's clock moves on by
# seconds to hours (now and then backwards) from the evening before New York springs forward
# (2026-03-08 02:00 there); each time is printed in one of several offsets, with or without
# a fraction, or without an offset (read in an assumed zone: New York's wall clock, or EST's,
# which can name an hour that does not exist there). Some lines carry ``seq``; a few are bad.

NEW_YORK = ZoneInfo("America/New_York")
_START = datetime(2026, 3, 7, 20, 0, tzinfo=UTC)
_ZONES = [timezone(timedelta(hours=9)), UTC, timezone(timedelta(hours=-5)), timezone(timedelta(hours=5, minutes=45)),
          timezone(timedelta(hours=-4)), NEW_YORK, "est-wall"]
_STEPS = [0, 1, 5, 40, 40, 300, 300, 1800, 5400, 9 * 3600, -600]


class Later(int):
    """A time field: this many seconds after the writer's clock (rendered by :func:`every_domain_log`)."""


def _written(at: datetime, zone: object, fraction: int) -> str:
    at = at + timedelta(microseconds=fraction)
    if zone is NEW_YORK:
        return at.astimezone(NEW_YORK).replace(tzinfo=None).isoformat()
    if zone == "est-wall":
        return at.astimezone(timezone(timedelta(hours=-5))).replace(tzinfo=None).isoformat()
    assert isinstance(zone, timezone)
    text = at.astimezone(zone).isoformat()
    return text[:-6] + "Z" if zone is UTC and fraction % 2 else text


_H = st.sampled_from(["h1", "h2", "h3"])
_ACCOUNT = st.sampled_from(["a", "b"])
_PRODUCT = st.sampled_from(["p", "q"])
_LABEL = st.sampled_from(["j1", "j2"])
_SESSION = st.sampled_from(["s1", "s2"])
_TURN = st.sampled_from(["t1", "t2", "t3"])
_N = st.integers(1, 3)
#: Sends a lane_check names (product -> kind).
_SENDS = st.dictionaries(_PRODUCT, st.sampled_from(["job-unpicked", "status-quiet"]), max_size=2)
_LATER = st.sampled_from([-3600, 0, 60, 1800, 7200, 86400]).map(Later)
_ENTRY = st.fixed_dictionaries({"Hour": st.integers(0, 12) | st.integers(13, 25)}, optional={
    "Minute": st.integers(0, 59), "Weekday": st.integers(0, 8), "Day": st.sampled_from([7, 8, 9, 31]),
    "Month": st.sampled_from([3, 4])})


def _ev(type_: str, **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"type": st.just(type_), **fields})


def _weighted(*pairs: tuple[int, st.SearchStrategy[dict[str, Any]]]) -> st.SearchStrategy[dict[str, Any]]:
    """One of the strategies, each ``weight`` times as likely (``one_of`` would count a repeated one once)."""
    return st.sampled_from([s for weight, s in pairs for _ in range(weight)]).flatmap(lambda s: s)


_CREATED = _ev("handoff_created", handoff_id=_H, account=_ACCOUNT, deadline=st.none() | _LATER,
              importance=st.integers(0, 3), repo=st.none() | st.just("r"), branch=st.none() | st.just("b"),
              head=st.none() | st.just("c"))
_LIMIT = _ev("limit_recorded", account=_ACCOUNT, limited_at=_LATER, reset_at=st.none() | _LATER,
             source=st.just("probe"), confidence=st.sampled_from(["explicit", "estimated", "unknown"]))
_PROBE = _ev("probe_result", account=_ACCOUNT, outcome=st.sampled_from(
    ["ok", "quota_limited", "quota_limited", "transient", "auth_error", "network_timeout", "unexpected"]))
_HANDOFFS = _weighted(
    (3, _CREATED), (2, _LIMIT), (3, _PROBE),
    (1, _ev("local_started", handoff_id=_H)),
    (1, _ev("local_start_failed", handoff_id=_H, error=st.just("boom"))),
    (2, _ev("claimed", handoff_id=_H, watcher=st.sampled_from(["w1", "w2"]), attempt=_N)),
    (1, _ev("released", handoff_id=_H, reason=st.just("later"))),
    (2, _ev("resume_requested", handoff_id=_H, attempt=_N)),
    (1, _ev("resume_failed", handoff_id=_H, attempt=_N, error=st.just("x"),
            effect=st.sampled_from(["none", "unknown"]))),
    (1, _ev("verified", handoff_id=_H, attempt=_N, branch=st.just("main"), head=st.just("abc"), dirty=st.booleans(),
            todos=st.sampled_from(["taken_over", "already_done"]))),
    (1, _ev("conflict", handoff_id=_H, detail=st.just("tree changed"))),
    (1, _ev("needs_human", handoff_id=_H, reason=st.sampled_from(["why", "other"]))),
    (1, _ev("skip", handoff_id=_H, reason=st.sampled_from(["expired", "dup"]))),
    (1, _ev("watcher_run", watcher=st.just("w1"), exit=st.sampled_from(["ok", "error"]),
            period_s=st.sampled_from([60, 600]))),
)
_LANES = _weighted(
    (3, _ev("status_updated", product=_PRODUCT, state=st.sampled_from(["running", "running", "idle"]))),
    (3, _ev("job_finished", product=_PRODUCT)),
    (1, _ev("repo_commit", product=_PRODUCT, head=st.just("abc"))),
    (1, _ev("lane_stopped", product=_PRODUCT)),
    (2, _ev("lane_started", product=_PRODUCT)),
    (3, _ev("lane_check")),
    (2, st.fixed_dictionaries({"type": st.just("lane_check")}, optional={  # the lanes runner's fields
        "exit": st.sampled_from(["ok", "error", "sending"]), "detail": st.just("d"),
        "general": st.lists(st.sampled_from(["no lane", "bad lines"]), max_size=2),
        "sending": _SENDS, "unsent": _SENDS, "unsure": _SENDS, "timeout_s": st.sampled_from([1, 300]),
        "unobserved": st.dictionaries(_PRODUCT, st.just("gone"), max_size=1)})),
    (1, _ev("resume_enqueued", product=_PRODUCT, kind=st.sampled_from(["job-unpicked", "status-quiet"]))),
)
_CATCHUP = _weighted(
    (3, _ev("job_registered", label=_LABEL, guarded=st.sampled_from([True, True, False]),
            calendar=st.sampled_from([True, True, False]).flatmap(
                lambda some: st.lists(_ENTRY, min_size=1, max_size=3) if some else st.none()),
            interval_s=st.sampled_from([None, None, 3600]))),
    (3, _ev("job_skipped", label=_LABEL, reason=st.just("quota"), remaining_s=st.sampled_from([0, 1.5]))),
    (1, _ev("job_ran", label=_LABEL, exit=st.sampled_from([0, 1]))),
    (1, _ev("catchup_kicked", label=_LABEL)),
    (1, _ev("catchup_finished", label=_LABEL, outcome=st.sampled_from(["exited", "timeout_killed"]))),
    (1, _ev("circuit_opened", reason=st.just("quota"), open_until=_LATER)),
    (1, _ev("circuit_closed")),
)
_SESSIONS = st.one_of(
    _ev("worker_claimed", session_id=_SESSION, generation=_N, worker=st.just("w"), restore=st.booleans()),
    _ev("worker_ready", session_id=_SESSION, generation=_N),
    _ev("checkpoint_restore_failed", session_id=_SESSION, generation=_N,
        reason=st.sampled_from(["io", "incompatible_checkpoint"])),
    _ev("startup_failed", session_id=_SESSION, generation=_N, reason=st.just("crash")),
    _ev("storage_unavailable", session_id=_SESSION, generation=_N, cause=st.just("dns")),
    _ev("worker_stopped", session_id=_SESSION, generation=_N, stop_kind=st.just("drain")),
    _ev("turn_started", session_id=_SESSION, turn_id=_TURN),
    _ev("turn_finished", session_id=_SESSION, turn_id=_TURN,
        outcome=st.sampled_from(["completed", "interrupted", "outcome_unknown"]),
        terminal_reason=st.none() | st.just("lost")),
    _ev("checkpoint_committed", session_id=_SESSION, covers_turn=_TURN),
    _ev("execution_gone", session_id=_SESSION),
    _ev("recovery_decision", session_id=_SESSION,
        decision=st.sampled_from(["retry_restore", "start_fresh", "close", "abandon", "confirm_completed"]),
        expected_revision=st.integers(0, 6), idempotency_key=st.sampled_from(["k1", "k2", "k3"]), reason=st.just("op"),
        target_turn_id=st.none() | _TURN, evidence_ref=st.none() | st.sampled_from(["", "pr/1"])),
)
_DOMAINS = [_HANDOFFS, _LANES, _CATCHUP, _SESSIONS]
every_event = st.one_of(_DOMAINS)


@st.composite
def _stamp(draw: st.DrawFn, at: datetime) -> str:
    zone = draw(st.sampled_from(_ZONES))
    return _written(at, zone, draw(st.sampled_from([0, 0, 500_000, 288_710, 1])))


@st.composite
def every_domain_log(draw: st.DrawFn) -> tuple[bytes, datetime]:
    """A log of every domain (mostly events, some with ``seq``, a few bad lines, maybe a torn tail), and its clock."""
    clock = _START
    lines: list[bytes] = []
    focus = draw(st.sampled_from(_DOMAINS))  # most events of one domain, so its rules meet
    mixed = st.integers(0, 3).flatmap(lambda i: focus if i else every_event)
    for ev in draw(st.lists(mixed, min_size=10, max_size=80)):
        clock += timedelta(seconds=draw(st.sampled_from(_STEPS)))
        obj = {"type": ev["type"], "ts": draw(_stamp(clock))}
        for key, value in ev.items():
            obj[key] = draw(_stamp(clock + timedelta(seconds=value))) if isinstance(value, Later) else value
        if draw(st.integers(0, 4)) == 0:
            obj["seq"] = len(lines) + 1  # as an appender writes it
        lines.append(json.dumps(obj).encode())
        if draw(st.integers(0, 29)) == 0:
            lines.append(draw(st.sampled_from([b"{}", b'{"type":"claimed"}', b"\xff", b"[1]"])))
    tail = draw(st.sampled_from([b"", b'{"type":"lane_ch']))
    return b"".join(x + b"\n" for x in lines) + tail, clock


def _replayed(data: bytes, tz: ZoneInfo | None) -> Replay:
    replay = Replay(Runner(), tz)
    replay.feed(io.BytesIO(data))
    return replay


@given(every_domain_log(), st.data(), st.sampled_from([None, NEW_YORK]))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_snapshot_plus_tail_equals_full_replay(log_and_clock: tuple[bytes, datetime], draw: st.DataObject,
                                               tz: ZoneInfo | None) -> None:
    """A snapshot saved at any line and loaded from its file, then the rest: the same dump, byte for byte.

    Judged as of the log's own T and as of another time; the loaded state also
    encodes to the very bytes it was saved from (nothing lost, nothing moved).
    """
    data, clock = log_and_clock
    cuts = [i + 1 for i, b in enumerate(data) if b == 10]
    cut = draw.draw(st.sampled_from([0, *cuts]))
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.jsonl"
        snap = str(Path(tmp) / "snap")
        log.write_bytes(data[:cut])
        first = Replay(Runner(), tz)
        with log.open("rb") as f:
            first.feed(f)
            snapshot.save(snap, f, first, snapshot.folder_version(first))
        saved = snapshot.encode_state(first)
        log.write_bytes(data)
        with log.open("rb") as f:
            loaded, why = snapshot.load(snap, f, Replay(Runner(), tz))
            assert loaded is not None, why
            assert snapshot.encode_state(loaded) == saved
            loaded.feed(f)
    whole = _replayed(data, tz)
    assert dumps(loaded.dump("x")) == dumps(whole.dump("x"))
    later = clock + timedelta(seconds=draw.draw(st.sampled_from([0, 30, 3000, 6 * 3600, 30 * 3600])))
    at = parse_at(draw.draw(_stamp(later)), NEW_YORK)
    assert at.time is not None
    assert dumps(loaded.dump("x", at.time, at.text)) == dumps(whole.dump("x", at.time, at.text))


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
