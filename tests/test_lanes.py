"""Lane stall verdicts (spec section 4, seed 001): the fold, its records and the stall anchors."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog.events import parse_time
from eventlog.reader import Reader
from projections.lanes import Lanes
from projections.runner import Runner

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

# The line seed 001 prints for its fixed sample, byte for byte (plus the newline print adds).
SEED_LINE = (
    '{"schema": "impl-lane-watch/v1", "checked_at": "2026-08-08T10:40:01.288710+09:00", '
    '"results": [{"product": "sashiko-repair", "stalled": true, "kind": "status-quiet", '
    '"detail": "進捗の更新が31時間止まっています", "updated_at": "2026-08-07T03:10:00+09:00"}]}'
)


def fold(events: list[dict[str, Any]], lanes: Lanes | None = None) -> Runner:
    """Fold hand-written events (line numbers as seq) through the replay's runner."""
    runner = Runner() if lanes is None else Runner(unpicked_minutes=lanes.unpicked_minutes,
                                                    quiet_hours=lanes.quiet_hours)
    reader = Reader()
    for line, obj in enumerate(events, 1):
        decoded = reader.decode(json.dumps(obj).encode(), line)
        assert not isinstance(decoded, str), decoded
        runner.fold(decoded[0], line, decoded[1])
    return runner


def checks(name: str) -> list[dict[str, Any]]:
    with open(FIXTURES / f"{name}.expected.json", encoding="utf-8") as f:
        return json.load(f)["lanes"]["checks"]  # type: ignore[no-any-return]


UNPICKED = "その成果がまだ取り込まれていません"


# --- the seed's sample ---------------------------------------------------------------------


def test_seed_sample_comes_out_byte_for_byte() -> None:
    out = subprocess.run(
        [str(ROOT / "tools" / "replay"), "--checks", str(FIXTURES / "lanes_seed_sample.jsonl")],
        capture_output=True, timeout=60, check=True,
    )
    assert out.stdout == (SEED_LINE + "\n").encode("utf-8")


def test_seed_sample_in_the_dump() -> None:
    [record] = checks("lanes_seed_sample")
    assert json.dumps(record, ensure_ascii=False) == SEED_LINE


# --- the fixtures' stories, values derived by hand ---------------------------------------------


def test_unpicked_job_21_hours() -> None:
    c = checks("lanes_unpicked_21h")
    # 12:54 -> 14:23:59 is 89 min 59 s: under 90 min, and the status (11:00) is 3 h old.
    assert c[0]["results"] == [{"product": "sashiko-repair", "stalled": False, "reason": "moving"}]
    # exactly 90 min: >= 90 is unpicked.
    assert c[1]["results"][0]["detail"] == f"作業は1時間30分前に終わっていますが、{UNPICKED}"
    # 12:54 -> next day 10:01:30 is 21 h 7.5 min: the seed prints 21時間7分.
    assert c[2]["results"] == [{
        "product": "sashiko-repair", "stalled": True, "kind": "job-unpicked",
        "detail": f"作業は21時間7分前に終わっていますが、{UNPICKED}",
        "finished_at": "2026-08-05T12:54:00+09:00",  # written "12:54+09:00", printed by isoformat()
    }]
    # a resume_enqueued changes no verdict.
    assert c[3]["results"][0]["kind"] == "job-unpicked"
    assert c[3]["results"][0]["detail"].startswith("作業は21時間26分前")
    assert [r["checked_at"] for r in c] == [
        "2026-08-05T14:23:59+09:00", "2026-08-05T14:24:00+09:00",
        "2026-08-06T10:01:30+09:00", "2026-08-06T10:20:00+09:00",
    ]


def test_commit_after_finish() -> None:
    first, second = checks("lanes_commit_after_finish")
    by = {r["product"]: r for r in first["results"]}
    assert [r["product"] for r in first["results"]] == ["alpha", "beta", "gamma"]
    assert by["alpha"] == {"product": "alpha", "stalled": False, "reason": "moving"}  # commit 13:10 after finish 12:54
    assert by["beta"]["kind"] == "job-unpicked"  # its commit (12:30) came before the finish
    assert by["beta"]["detail"] == f"作業は2時間6分前に終わっていますが、{UNPICKED}"
    assert by["gamma"]["kind"] == "job-unpicked"  # a commit at the finish's very time is not after it
    by = {r["product"]: r for r in second["results"]}
    # alpha's work was picked up; its status (12:00) is 9 h old at 21:00.
    assert by["alpha"] == {
        "product": "alpha", "stalled": True, "kind": "status-quiet",
        "detail": "進捗の更新が9時間止まっています", "updated_at": "2026-08-05T12:00:00+09:00",
    }
    assert by["beta"]["detail"] == f"作業は8時間6分前に終わっていますが、{UNPICKED}"


def test_stopped_and_idle_lanes() -> None:
    first, second = checks("lanes_stopped_idle")
    assert first["results"] == [
        {"product": "idle-lane", "stalled": False, "reason": "lane-idle"},
        {"product": "restarted-lane", "stalled": False, "reason": "stopped-on-purpose"},
        {"product": "stopped-lane", "stalled": False, "reason": "stopped-on-purpose"},
    ]
    by = {r["product"]: r for r in second["results"]}
    # running again: its job of 08:30 the day before was never picked up (25 h).
    assert by["idle-lane"]["detail"] == f"作業は25時間0分前に終わっていますが、{UNPICKED}"
    # lane_started lifted the stop; its status (08:00 the day before) is 25.5 h old.
    assert by["restarted-lane"]["detail"] == "進捗の更新が25時間止まっています"
    assert by["stopped-lane"] == {"product": "stopped-lane", "stalled": False, "reason": "stopped-on-purpose"}


def test_products_without_status() -> None:
    first, second = checks("lanes_no_status")
    assert first["results"] == []
    assert [r["product"] for r in second["results"]] == ["commits-only", "never-stopped", "solo"]  # not "ghost"
    by = {r["product"]: r for r in second["results"]}
    assert by["commits-only"]["reason"] == "moving"  # no status: never status-quiet
    assert by["never-stopped"]["reason"] == "moving"
    assert by["solo"]["detail"] == f"作業は24時間0分前に終わっていますが、{UNPICKED}"


# --- the fold --------------------------------------------------------------------------------


def test_thresholds_are_configurable() -> None:
    events = [
        {"type": "status_updated", "ts": "2026-08-05T10:00:00+09:00", "product": "p", "state": "running"},
        {"type": "job_finished", "ts": "2026-08-05T10:00:00+09:00", "product": "p"},
        {"type": "lane_check", "ts": "2026-08-05T10:30:00+09:00"},
        {"type": "repo_commit", "ts": "2026-08-05T10:31:00+09:00", "product": "p", "head": "h"},
        {"type": "lane_check", "ts": "2026-08-05T11:00:00+09:00"},
    ]
    lanes = fold(events, Lanes(unpicked_minutes=30, quiet_hours=1)).lanes
    assert lanes.checks[0]["results"][0]["detail"] == f"作業は0時間30分前に終わっていますが、{UNPICKED}"
    assert lanes.checks[1]["results"][0]["detail"] == "進捗の更新が1時間止まっています"
    default = fold(events).lanes
    assert [c["results"][0]["reason"] for c in default.checks] == ["moving", "moving"]


def test_judge_as_of_any_time_records_nothing() -> None:
    events = [{"type": "status_updated", "ts": "2026-08-07T03:10:00+09:00", "product": "sashiko-repair",
               "state": "running"}]
    lanes = fold(events).lanes
    at = parse_time("2026-08-08T10:40:01.288710+09:00")
    assert json.dumps(lanes.judge(at, "2026-08-08T10:40:01.288710+09:00"), ensure_ascii=False) == SEED_LINE
    early = lanes.judge(parse_time("2026-08-07T11:09:59+09:00"), "x")
    assert early["results"][0]["reason"] == "moving"  # 7 h 59 min 59 s
    assert lanes.checks == []


def test_latest_events_by_log_order_not_by_time() -> None:
    events = [
        {"type": "status_updated", "ts": "2026-08-05T20:00:00+09:00", "product": "p", "state": "running"},
        # written later, with an earlier clock: it is the latest status.
        {"type": "status_updated", "ts": "2026-08-05T10:00:00+09:00", "product": "p", "state": "running"},
        {"type": "lane_check", "ts": "2026-08-05T19:00:00+09:00"},
    ]
    [record] = fold(events).lanes.checks
    assert record["results"][0]["updated_at"] == "2026-08-05T10:00:00+09:00"
    assert record["results"][0]["detail"] == "進捗の更新が9時間止まっています"


def test_an_idle_status_then_running_lifts_idle() -> None:
    events = [
        {"type": "status_updated", "ts": "2026-08-05T10:00:00+09:00", "product": "p", "state": "idle"},
        {"type": "lane_check", "ts": "2026-08-06T10:00:00+09:00"},
        {"type": "status_updated", "ts": "2026-08-06T10:01:00+09:00", "product": "p", "state": "running"},
        {"type": "lane_check", "ts": "2026-08-06T10:02:00+09:00"},
    ]
    c = fold(events).lanes.checks
    assert [c[0]["results"][0]["reason"], c[1]["results"][0]["reason"]] == ["lane-idle", "moving"]


def test_stall_anchors_and_resume_coverage() -> None:
    base: list[dict[str, Any]] = [
        {"type": "status_updated", "ts": "2026-08-05T10:00:00+09:00", "product": "p", "state": "running"},
        {"type": "job_finished", "ts": "2026-08-05T11:00:00+09:00", "product": "p"},
    ]
    lanes = fold(base).lanes
    assert lanes.anchor("p", "status-quiet") == 1
    assert lanes.anchor("p", "job-unpicked") == 2
    assert not lanes.covered("p", "job-unpicked")

    resumed = [*base, {"type": "resume_enqueued", "ts": "2026-08-05T13:00:00+09:00", "product": "p",
                       "kind": "job-unpicked"}]
    lanes = fold(resumed).lanes
    assert lanes.covered("p", "job-unpicked")
    assert not lanes.covered("p", "status-quiet")  # another kind is another stall
    assert not lanes.covered("q", "job-unpicked")  # another product

    # a new finish is a new stall: the old resume does not cover it.
    again = [*resumed, {"type": "job_finished", "ts": "2026-08-05T14:00:00+09:00", "product": "p"}]
    assert not fold(again).lanes.covered("p", "job-unpicked")

    # a resume sent before the anchor does not cover it either.
    early = [{"type": "resume_enqueued", "ts": "2026-08-05T09:00:00+09:00", "product": "p", "kind": "status-quiet"},
             *base]
    assert not fold(early).lanes.covered("p", "status-quiet")

    # a new status_updated re-anchors status-quiet.
    quiet = [*base, {"type": "resume_enqueued", "ts": "2026-08-05T20:00:00+09:00", "product": "p",
                     "kind": "status-quiet"}]
    assert fold(quiet).lanes.covered("p", "status-quiet")
    moved = [*quiet, {"type": "status_updated", "ts": "2026-08-05T21:00:00+09:00", "product": "p",
                      "state": "running"}]
    assert not fold(moved).lanes.covered("p", "status-quiet")


def test_resume_enqueued_alone_makes_no_lane() -> None:
    events = [
        {"type": "resume_enqueued", "ts": "2026-08-05T09:00:00+09:00", "product": "ghost", "kind": "job-unpicked"},
        {"type": "lane_check", "ts": "2026-08-05T10:00:00+09:00"},
    ]
    assert fold(events).lanes.checks[0]["results"] == []


def test_state_goes_through_the_codec_and_prints_the_same() -> None:
    """Records and the times they print come back byte for byte (msgpack alone would give times in UTC)."""
    events = [
        {"type": "status_updated", "ts": "2026-08-07T03:10:00+09:00", "product": "sashiko-repair",
         "state": "running"},
        {"type": "lane_check", "ts": "2026-08-08T10:40:01.288710+09:00"},
    ]
    folded = fold(events).lanes
    lanes = Lanes()
    lanes.state = msgspec.msgpack.decode(msgspec.msgpack.encode(folded.state), type=Lanes.State)
    assert json.dumps(lanes.checks[0], ensure_ascii=False) == SEED_LINE
    assert json.dumps(lanes.judge(parse_time("2026-08-08T10:40:01.288710+09:00"), "2026-08-08T10:40:01.288710+09:00"),
                      ensure_ascii=False) == SEED_LINE


# --- the projection agrees with the seed's own function --------------------------------------------
#
# ``seed_evaluate`` is seed 001's ``evaluate``, verbatim but for its line breaks.

JST = timezone(timedelta(hours=9))


def seed_parse_time(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=JST)


def seed_evaluate(*, checked_at: str, status_updated_at: str, job_finished_at: str | None,
                  repo_commit_at: str | None, stopped_on_purpose: bool = False,
                  lane_idle: bool = False) -> dict[str, object]:
    now = seed_parse_time(checked_at)
    if stopped_on_purpose:
        return {"product": "sashiko-repair", "stalled": False, "reason": "stopped-on-purpose"}
    if lane_idle:
        return {"product": "sashiko-repair", "stalled": False, "reason": "lane-idle"}
    if job_finished_at is not None:
        finished = seed_parse_time(job_finished_at)
        idle_minutes = (now - finished).total_seconds() / 60
        moved_after = repo_commit_at is not None and seed_parse_time(repo_commit_at) > finished
        if idle_minutes >= 90 and not moved_after:
            return {
                "product": "sashiko-repair", "stalled": True, "kind": "job-unpicked",
                "detail": (f"作業は{int(idle_minutes // 60)}時間{int(idle_minutes % 60)}分前に終わっていますが、"
                           "その成果がまだ取り込まれていません"),
                "finished_at": finished.isoformat(),
            }
    updated = seed_parse_time(status_updated_at)
    quiet_hours = (now - updated).total_seconds() / 3600
    if quiet_hours >= 8:
        return {"product": "sashiko-repair", "stalled": True, "kind": "status-quiet",
                "detail": f"進捗の更新が{int(quiet_hours)}時間止まっています", "updated_at": updated.isoformat()}
    return {"product": "sashiko-repair", "stalled": False, "reason": "moving"}


START = datetime(2026, 8, 5, 0, 0, tzinfo=JST)
offsets = st.integers(min_value=0, max_value=3 * 24 * 3600 * 1000)  # milliseconds after START
zones = st.sampled_from([JST, UTC, timezone(timedelta(hours=-5, minutes=-30))])


def stamp(ms: int, tz: timezone) -> str:
    return (START + timedelta(milliseconds=ms)).astimezone(tz).isoformat()


@settings(max_examples=300, deadline=None)
@given(
    status=offsets, finished=st.none() | offsets, commit=st.none() | offsets, check=offsets,
    stopped=st.booleans(), idle=st.booleans(), tz=zones,
)
def test_agrees_with_the_seed(status: int, finished: int | None, commit: int | None, check: int,
                              stopped: bool, idle: bool, tz: timezone) -> None:
    product = "sashiko-repair"
    events: list[dict[str, Any]] = [{"type": "status_updated", "ts": stamp(status, tz), "product": product,
                                     "state": "idle" if idle else "running"}]
    if finished is not None:
        events.append({"type": "job_finished", "ts": stamp(finished, tz), "product": product})
    if commit is not None:
        events.append({"type": "repo_commit", "ts": stamp(commit, tz), "product": product, "head": "h"})
    if stopped:
        events.append({"type": "lane_stopped", "ts": stamp(check, tz), "product": product})
    events.append({"type": "lane_check", "ts": stamp(check, tz)})
    [record] = fold(events).lanes.checks
    expected = seed_evaluate(
        checked_at=stamp(check, tz), status_updated_at=stamp(status, tz),
        job_finished_at=None if finished is None else stamp(finished, tz),
        repo_commit_at=None if commit is None else stamp(commit, tz),
        stopped_on_purpose=stopped, lane_idle=idle,
    )
    assert record == {"schema": "impl-lane-watch/v1", "checked_at": stamp(check, tz), "results": [expected]}
    assert json.dumps(record, ensure_ascii=False) == json.dumps(
        {"schema": "impl-lane-watch/v1", "checked_at": stamp(check, tz), "results": [expected]}, ensure_ascii=False)
