"""Quota catch-up candidates (spec section 5, seed 002): the fold, the calendar rules, the circuit."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from eventlog.events import CalendarEntry, JobRegistered, parse_time
from eventlog.reader import Reader
from projections.catchup import Catchup, calendar_slot_passed, runs_today
from projections.runner import Runner

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

FRIDAY_13 = parse_time("2026-08-21T13:00:00+09:00")  # 2026-08-21 is a Friday
SUNDAY = parse_time("2026-08-23T10:00:00+09:00")


def catchup_of(name: str) -> dict[str, Any]:
    with open(FIXTURES / f"{name}.expected.json", encoding="utf-8") as f:
        return json.load(f)["catchup"]  # type: ignore[no-any-return]


def fold(events: list[dict[str, Any]]) -> Catchup:
    runner = Runner()
    reader = Reader()
    for line, obj in enumerate(events, 1):
        decoded = reader.decode(json.dumps(obj).encode(), line)
        assert not isinstance(decoded, str), decoded
        assert runner.fold(decoded[0], line, decoded[1]) is None
    return runner.catchup


def job(calendar: list[dict[str, int]] | None, interval_s: int | None = None, guarded: bool = True) -> JobRegistered:
    entries = None if calendar is None else [CalendarEntry(**{k.lower(): v for k, v in e.items()}) for e in calendar]
    return JobRegistered(ts="2026-08-21T00:00:00+09:00", label="com.lily.test", guarded=guarded,
                         calendar=entries, interval_s=interval_s)


def registered(label: str, calendar: list[dict[str, int]] | None = None, **extra: Any) -> dict[str, Any]:
    return {"type": "job_registered", "ts": "2026-08-21T07:00:00+09:00", "label": label, "guarded": True,
            "calendar": [{"Hour": 9, "Minute": 0}] if calendar is None else calendar, "interval_s": None, **extra}


def skipped(label: str, ts: str = "2026-08-21T09:00:05+09:00") -> dict[str, Any]:
    return {"type": "job_skipped", "ts": ts, "label": label, "reason": "quota", "remaining_s": 60}


# --- the fixtures' stories, by hand ----------------------------------------------------------


def test_today_skip_is_a_candidate_an_old_one_is_not() -> None:
    # com.lily.old was skipped three days before; com.lily.plain is not guarded; the circuit's
    # open_until (09:45) is before T (10:00).
    assert catchup_of("catchup_today_skip") == {"candidates": ["com.lily.test"], "probe": True, "circuit": "closed"}


def test_no_candidates_means_no_probe() -> None:
    # the job ran today (a CLAUDE_QUOTA_JOB_RAN marker): nothing to catch up.
    assert catchup_of("catchup_no_candidates") == {"candidates": [], "probe": False, "circuit": "closed"}


def test_circuit_open_means_no_probe() -> None:
    # opened, closed, opened again until 10:30: open at 10:00.
    assert catchup_of("catchup_circuit_open") == {"candidates": ["com.lily.test"], "probe": False, "circuit": "open"}


def test_circuit_closed_before_open_until() -> None:
    assert catchup_of("catchup_circuit_closed") == {"candidates": ["com.lily.test"], "probe": True,
                                                    "circuit": "closed"}


def test_circuit_closed_at_open_until_exactly() -> None:
    # open_until 01:00Z is 10:00+09:00, T itself: T is not before it.
    assert catchup_of("catchup_circuit_lapsed")["circuit"] == "closed"


def test_slots() -> None:
    # at 13:00: 9:00+18:00 in either order (a passed slot is enough), 13:00 exactly (passed), 12:00 (no
    # Minute: 0). Not: only 18:00, an entry without Hour, Hour 25 today, StartInterval, no calendar, [].
    assert catchup_of("catchup_slots")["candidates"] == [
        "com.lily.daily-brief", "com.lily.exact", "com.lily.hour-only", "com.lily.reversed",
    ]


def test_markers() -> None:
    # Not: SKIPPED then RAN; skipped then kicked; now unguarded; skipped yesterday 23:30 (+09:00);
    # never registered. Yes: RAN then SKIPPED; kicked before the latest skip; now guarded; a skip written
    # after a RAN with a later clock (log order wins); a skip written in UTC that is today in +09:00.
    assert catchup_of("catchup_markers")["candidates"] == [
        "com.lily.guarded-now", "com.lily.kicked-then-skipped", "com.lily.log-order",
        "com.lily.ran-then-skipped", "com.lily.utc-written",
    ]


def test_calendar_days_on_a_sunday() -> None:
    assert catchup_of("catchup_calendar_days")["candidates"] == [
        "bad-hour-other-day",  # its Hour 25 entry is for Wednesday: never converted today
        "day-23", "either-day", "either-weekday", "month-8", "sun-0", "sun-7",
    ]


# --- calendar_slot_passed, as seed 002 writes it ---------------------------------------------------


def test_past_slot_makes_candidate_even_if_later_slot_is_future() -> None:
    assert calendar_slot_passed(job([{"Hour": 9, "Minute": 0}, {"Hour": 18, "Minute": 0}]), FRIDAY_13)
    assert calendar_slot_passed(job([{"Hour": 18, "Minute": 0}, {"Hour": 9, "Minute": 0}]), FRIDAY_13)


def test_only_future_slots() -> None:
    assert not calendar_slot_passed(job([{"Hour": 18, "Minute": 0}, {"Hour": 13, "Minute": 1}]), FRIDAY_13)


def test_slot_exactly_now_has_passed() -> None:
    assert calendar_slot_passed(job([{"Hour": 13, "Minute": 0}]), FRIDAY_13)
    assert calendar_slot_passed(job([{"Hour": 13}]), FRIDAY_13)


def test_interval_jobs_never() -> None:
    assert not calendar_slot_passed(job([{"Hour": 9}], interval_s=1800), FRIDAY_13)
    assert not calendar_slot_passed(job(None, interval_s=0), FRIDAY_13)


def test_no_calendar_never() -> None:
    assert not calendar_slot_passed(job(None), FRIDAY_13)
    assert not calendar_slot_passed(job([]), FRIDAY_13)


def test_an_entry_without_hour_spoils_the_job() -> None:
    assert not calendar_slot_passed(job([{"Hour": 9}, {"Minute": 30}]), FRIDAY_13)
    assert not calendar_slot_passed(job([{"Minute": 30}, {"Hour": 9}]), FRIDAY_13)
    # even one for another day: the seed checks Hour before the day.
    assert not calendar_slot_passed(job([{"Hour": 9}, {"Weekday": 3, "Minute": 30}]), FRIDAY_13)


def test_a_time_that_is_no_time_of_day() -> None:
    assert not calendar_slot_passed(job([{"Hour": 9}, {"Hour": 24}]), FRIDAY_13)
    assert not calendar_slot_passed(job([{"Hour": 9, "Minute": 60}]), FRIDAY_13)
    # an entry that does not fire today is skipped before its hour is converted.
    assert calendar_slot_passed(job([{"Weekday": 1, "Hour": 24}, {"Hour": 9}]), FRIDAY_13)


# --- runs_today: launchd semantics ------------------------------------------------------------------


@pytest.mark.parametrize(("entry", "fires"), [
    ({}, True),
    ({"Weekday": 0}, True), ({"Weekday": 7}, True), ({"Weekday": 6}, False), ({"Weekday": 1}, False),
    ({"Weekday": 14}, False),
    ({"Day": 23}, True), ({"Day": 22}, False),
    ({"Day": 23, "Weekday": 3}, True), ({"Day": 1, "Weekday": 0}, True), ({"Day": 1, "Weekday": 3}, False),
    ({"Month": 8}, True), ({"Month": 9}, False),
    ({"Month": 9, "Day": 23}, False), ({"Month": 8, "Day": 22, "Weekday": 7}, True),
    ({"Month": 9, "Weekday": 0}, False),
])
def test_runs_today_on_sunday_23_august(entry: dict[str, int], fires: bool) -> None:
    e = CalendarEntry(**{k.lower(): v for k, v in entry.items()})
    assert runs_today(e, SUNDAY) is fires


def test_weekday_of_each_day() -> None:
    # 2026-08-17 is a Monday: launchd Weekday 1 .. 6 is Monday .. Saturday, 0 and 7 Sunday.
    for offset, weekdays in enumerate([{1}, {2}, {3}, {4}, {5}, {6}, {0, 7}]):
        day = parse_time(f"2026-08-{17 + offset}T12:00:00+09:00")
        assert {w for w in range(8) if runs_today(CalendarEntry(weekday=w), day)} == weekdays


# --- candidates as of any time --------------------------------------------------------------------


def test_candidates_as_of_any_time() -> None:
    state = fold([registered("com.lily.test"), skipped("com.lily.test")])
    labels = lambda at: [c.label for c in state.candidates(parse_time(at))]  # noqa: E731
    assert labels("2026-08-21T08:59:59+09:00") == []  # the 9:00 slot has not come
    assert labels("2026-08-21T09:00:00+09:00") == ["com.lily.test"]
    assert labels("2026-08-21T23:59:59+09:00") == ["com.lily.test"]
    assert labels("2026-08-22T00:00:00+09:00") == []  # the skip is yesterday's
    # judged in UTC: the skip is 00:00:05Z today; the 9:00 slot is 9:00 UTC
    assert labels("2026-08-21T08:59:00+00:00") == []
    assert labels("2026-08-21T09:30:00+00:00") == ["com.lily.test"]
    # in -05:00 the skip (2026-08-20T19:00:05-05:00) is yesterday's at 2026-08-21T10:00-05:00
    assert labels("2026-08-21T10:00:00-05:00") == []
    [candidate] = state.candidates(parse_time("2026-08-21T10:00:00+09:00"))
    assert candidate.job.guarded and candidate.job.interval_s is None


def test_view_is_judged_in_the_zone_of_t() -> None:
    # skipped at 00:30 +09:00 = 15:30 UTC the day before.
    state = fold([registered("j"), skipped("j", "2026-08-21T00:30:00+09:00")])
    assert state.view(parse_time("2026-08-21T10:00:00+09:00"))["candidates"] == ["j"]
    assert state.view(parse_time("2026-08-21T10:00:00+00:00"))["candidates"] == []


def test_latest_registration_replaces() -> None:
    state = fold([registered("j"), skipped("j"), registered("j", [{"Hour": 20}])])
    assert state.candidates(FRIDAY_13) == []
    state = fold([registered("j", [{"Hour": 20}]), skipped("j"), registered("j")])
    assert [c.label for c in state.candidates(FRIDAY_13)] == ["j"]


def test_kicked_since_the_marker() -> None:
    kick = {"type": "catchup_kicked", "ts": "2026-08-21T10:00:00+09:00", "label": "j"}
    assert fold([registered("j"), skipped("j"), kick]).candidates(FRIDAY_13) == []
    # a kick before any marker does not count against a later skip
    assert [c.label for c in fold([registered("j"), kick, skipped("j")]).candidates(FRIDAY_13)] == ["j"]


def test_circuit_as_of_any_time() -> None:
    opened = {"type": "circuit_opened", "ts": "2026-08-21T08:00:00+09:00", "reason": "quota",
              "open_until": "2026-08-21T12:00:00+09:00"}
    state = fold([registered("j"), skipped("j"), opened])
    assert state.circuit_open(parse_time("2026-08-21T11:59:59+09:00"))
    assert not state.circuit_open(parse_time("2026-08-21T12:00:00+09:00"))
    assert state.view(parse_time("2026-08-21T11:00:00+09:00")) == {"candidates": ["j"], "probe": False,
                                                                    "circuit": "open"}
    assert state.view(parse_time("2026-08-21T12:00:00+09:00"))["probe"] is True
    closed = fold([opened, {"type": "circuit_closed", "ts": "2026-08-21T09:00:00+09:00"}])
    assert not closed.circuit_open(parse_time("2026-08-21T10:00:00+09:00"))
    # a circuit_closed before the latest opening does not close it
    reopened = fold([{"type": "circuit_closed", "ts": "2026-08-21T07:00:00+09:00"}, opened])
    assert reopened.circuit_open(parse_time("2026-08-21T10:00:00+09:00"))


def test_state_goes_through_the_codec() -> None:
    """Jobs, markers and the circuit come back; printed times keep the offset they were written with."""
    opened = {"type": "circuit_opened", "ts": "2026-08-21T05:00:00-05:00", "reason": "quota",
              "open_until": "2026-08-21T14:30:00-05:00"}
    folded = fold([registered("j"), skipped("j"), opened])
    state = Catchup()
    state.state = msgspec.msgpack.decode(msgspec.msgpack.encode(folded.state), type=Catchup.State)
    assert [c.label for c in state.candidates(FRIDAY_13)] == ["j"]
    assert state.jobs == folded.jobs
    assert state.markers["j"].at.isoformat() == folded.markers["j"].at.isoformat()
    assert state.open_until is not None and state.open_until.isoformat() == "2026-08-21T14:30:00-05:00"
    assert state.circuit_open(FRIDAY_13) == folded.circuit_open(FRIDAY_13) is True


def test_now_in_a_named_zone() -> None:
    from zoneinfo import ZoneInfo

    state = fold([registered("j"), skipped("j")])
    at = datetime(2026, 8, 21, 10, 0, tzinfo=ZoneInfo("Asia/Tokyo"))
    assert [c.label for c in state.candidates(at)] == ["j"]
