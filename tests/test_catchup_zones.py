"""Catch-up's "today" and "the slot has passed" on the days a clock changes (docs/OPERATIONS.md section 2).

They are days and hours of a zone, by its rules at each instant: the machine's (``TZ``) for live
commands, ``--assume-tz``'s when given, else T's own offset (a UTC ``--at`` judges the UTC day). One
instant gives one answer however T is given. A replay judges the same on every machine.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, write_log
from freezegun import freeze_time

from eventlog import clock
from eventlog.clock import NOW
from eventlog.runners.catchup import Options, run_catchup

BERLIN = {"TZ": "Europe/Berlin"}
NEW_YORK = {"TZ": "America/New_York"}


def job(label: str, hour: int, minute: int, ts: str) -> dict[str, Any]:
    return {"type": "job_registered", "ts": ts, "label": label, "guarded": True,
            "calendar": [{"Hour": hour, "Minute": minute}], "interval_s": None}


def skip(label: str, ts: str) -> dict[str, Any]:
    return {"type": "job_skipped", "ts": ts, "label": label, "reason": "quota", "remaining_s": 60}


def candidates(log: Path, *args: str, env: dict[str, str]) -> list[str]:
    out = run_cli("catchup", str(log), "--dry-run", "--json", *args, env=env)
    assert out.returncode == 0, out.stderr
    labels: list[str] = json.loads(out.stdout)["candidates"]
    return labels


def verdict(log: Path, label: str, *args: str, env: dict[str, str]) -> dict[str, Any]:
    out = run_cli("explain", str(log), label, "--json", *args, env=env)
    assert out.returncode == 0, out.stderr
    [found] = [v for v in json.loads(out.stdout)["verdicts"] if v["kind"] == "catchup"]
    return found  # type: ignore[no-any-return]


@pytest.fixture
def berlin(tmp_path: Path) -> Path:
    """A 00:30 job the guard skipped at 00:30:05 CEST on 2026-10-25, the night the clock went back at 03:00."""
    return write_log(tmp_path / "jobs.jsonl", [
        job("com.x", 0, 30, "2026-10-24T12:00:00+02:00"),
        skip("com.x", "2026-10-25T00:30:05+02:00"),
    ])


@pytest.mark.parametrize("when", [
    ["--at", "2026-10-25T10:00:00+01:00"],
    ["--assume-tz", "Europe/Berlin", "--at", "2026-10-25T10:00:00"],
    ["--assume-tz", "Europe/Berlin", "--at", "2026-10-25T10:00:00+01:00"],
], ids=["offset", "naive-assume-tz", "offset-assume-tz"])
def test_a_skip_before_the_clock_went_back_is_today_s(berlin: Path, when: list[str]) -> None:
    assert candidates(berlin, *when, env=BERLIN) == ["com.x"]
    found = verdict(berlin, "com.x", *when, env=BERLIN)
    assert (found["code"], found["facts"]["why_not"]) == ("candidate", [])
    status = json.loads(run_cli("status", str(berlin), "--json", *when, env=BERLIN).stdout)
    assert [(i["reason_code"], i["id"]) for g in status["groups"] for i in g["items"]] == [("candidate", "com.x")]


def test_assume_tz_names_the_zone_on_any_machine(berlin: Path) -> None:
    for env in ({"TZ": "UTC"}, {"TZ": "Asia/Tokyo"}):
        assert candidates(berlin, "--assume-tz", "Europe/Berlin", "--at", "2026-10-25T10:00:00+01:00",
                          env=env) == ["com.x"], env


def test_at_log_judges_in_the_machine_s_zone(tmp_path: Path) -> None:
    log = write_log(tmp_path / "jobs.jsonl", [
        job("com.x", 0, 30, "2026-10-24T12:00:00+02:00"),
        skip("com.x", "2026-10-25T00:30:05+02:00"),
        {"type": "job_ran", "ts": "2026-10-25T10:00:00+01:00", "label": "com.other", "exit": 0},
    ])
    assert candidates(log, "--at", "log", env=BERLIN) == ["com.x"]


def test_new_york_after_the_clock_went_back(tmp_path: Path) -> None:
    log = write_log(tmp_path / "jobs.jsonl", [
        job("com.y", 0, 15, "2026-10-31T12:00:00-04:00"),
        skip("com.y", "2026-11-01T00:15:03-04:00"),
    ])
    assert candidates(log, "--at", "2026-11-01T09:00:00-05:00", env=NEW_YORK) == ["com.y"]


@pytest.mark.parametrize(("at", "env", "named"), [
    ("2026-10-25T09:00:00Z", BERLIN, "UTC"),  # a UTC --at judges the UTC day
    ("2026-10-25T09:00:00+00:00", BERLIN, "UTC"),
    ("2026-10-25T10:00:00+01:00", {"TZ": "Asia/Tokyo"}, "UTC+01:00"),  # no zone of that offset: the offset's day
])
def test_a_t_no_named_zone_fits_is_judged_in_its_own_offset(berlin: Path, at: str, env: dict[str, str],
                                                            named: str) -> None:
    out = run_cli("catchup", str(berlin), "--dry-run", "--json", "--at", at, env=env)
    report = json.loads(out.stdout)
    assert report["candidates"] == []
    # in that offset's day the 00:30 slot passed hours ago and no marker is of that day: named (nothing feeds it?)
    assert (out.returncode, report["unfed"]) == (1, ["com.x"]), out.stderr
    found = verdict(berlin, "com.x", "--at", at, env=env)
    assert found["facts"]["why_not"] == [
        f"its latest skip (2026-10-25T00:30:05+02:00) is from 2026-10-24, not from today (2026-10-25 in {named})"]


def test_not_today_names_the_zone_of_the_day(tmp_path: Path) -> None:
    log = write_log(tmp_path / "jobs.jsonl", [
        job("com.x", 0, 30, "2026-10-24T12:00:00+02:00"),
        skip("com.x", "2026-10-24T23:30:05+02:00"),
    ])
    found = verdict(log, "com.x", "--at", "2026-10-25T10:00:00+01:00", env=BERLIN)
    assert found["facts"]["why_not"] == [
        "its latest skip (2026-10-24T23:30:05+02:00) is from 2026-10-24, not from today (2026-10-25 in Europe/Berlin)"]


def test_a_replay_judges_the_same_on_every_machine(berlin: Path) -> None:
    def replayed(*args: str, env: dict[str, str]) -> list[str]:
        out = run_cli("replay", str(berlin), "--at", "2026-10-25T10:00:00+01:00", *args, env=env)
        assert out.returncode == 0, out.stderr
        labels: list[str] = json.loads(out.stdout)["catchup"]["candidates"]
        return labels

    assert replayed(env=BERLIN) == replayed(env={"TZ": "UTC"}) == []  # spec section 5: the zone of T's offset
    assert replayed("--assume-tz", "Europe/Berlin", env={"TZ": "UTC"}) == ["com.x"]


# --- the slots of the days a clock changes (docs/DECISIONS.md, Catch-up) ------------------------------------


def test_a_slot_in_the_hour_that_comes_twice_has_passed_from_its_first_showing(tmp_path: Path) -> None:
    # New York, 2026-11-01: 02:00 EDT goes back to 01:00 EST; 01:30 shows at 05:30Z, then again at 06:30Z
    log = write_log(tmp_path / "jobs.jsonl", [
        job("com.y", 1, 30, "2026-10-31T12:00:00-04:00"),
        skip("com.y", "2026-11-01T00:00:05-04:00"),
    ])
    assert candidates(log, "--at", "2026-11-01T01:29:59-04:00", env=NEW_YORK) == []
    for at in ("2026-11-01T01:30:00-04:00", "2026-11-01T01:15:00-05:00", "2026-11-01T01:45:00-05:00"):
        assert candidates(log, "--at", at, env=NEW_YORK) == ["com.y"], at


def test_a_slot_in_the_skipped_hour_has_passed_once_the_clock_jumped_past_it(tmp_path: Path) -> None:
    # Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 never shows
    log = write_log(tmp_path / "jobs.jsonl", [
        job("com.z", 2, 30, "2026-03-28T12:00:00+01:00"),
        skip("com.z", "2026-03-29T00:00:05+01:00"),
    ])
    assert candidates(log, "--at", "2026-03-29T01:59:59+01:00", env=BERLIN) == []
    assert candidates(log, "--at", "2026-03-29T03:00:00+02:00", env=BERLIN) == ["com.z"]


# --- the live clock ---------------------------------------------------------------------------------------


@pytest.fixture
def in_berlin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_now_carries_the_machine_s_zone_rules(in_berlin: None) -> None:
    """Not only today's offset: the rules, so a skip before the clock changed is dated in summer time."""
    for when in (clock.now(), NOW.resolve(None, None)[0]):
        assert when is not None and when.tzinfo is not None
        assert when.tzinfo.utcoffset(datetime(2026, 1, 15, 12)) == timedelta(hours=1), when
        assert when.tzinfo.utcoffset(datetime(2026, 7, 15, 12)) == timedelta(hours=2), when


def test_the_runner_judges_now_in_that_zone(berlin: Path, in_berlin: None) -> None:
    with freeze_time("2026-10-25T10:00:00"):  # freezegun's wall clock: 10:00 CET
        report = run_catchup(Options(log=str(berlin), dry_run=True))
    assert (report.as_of, report.candidates) == ("2026-10-25T10:00:00+01:00", ["com.x"])


def test_instants_at_the_edge_of_what_python_holds_compare_without_overflow() -> None:
    """A time of year 1 at +14:00 has no UTC form in Python; catch-up's instant comparisons must not need one."""
    from datetime import datetime, timedelta, timezone

    from projections.catchup import circuit_open, slot_passed

    first = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))
    later = datetime(1900, 1, 1, tzinfo=UTC)
    assert circuit_open(later, False, first)
    assert not circuit_open(first, False, later)
    assert slot_passed(first, later) and not slot_passed(later, first)


def test_with_tz_unset_the_texts_name_the_zone_etc_localtime_gives(tmp_path: Path) -> None:
    """Review R10: with ``TZ`` unset catch-up said "no candidates today (2026-12-02)", no zone, though
    docs/OPERATIONS.md says these texts name the day and zone they judged in (follow labels the same host
    ``zone="Etc/UTC"``). The zone /etc/localtime links to is named; a fixed offset names itself."""
    import os
    import subprocess
    import sys

    target = os.path.realpath("/etc/localtime")
    if "/zoneinfo/" not in target:
        pytest.skip("/etc/localtime is no link into a zoneinfo directory")  # pragma: no cover
    name = target.split("/zoneinfo/", 1)[1]
    log = write_log(tmp_path / "jobs.jsonl", [job("com.x", 23, 59, "2026-10-24T12:00:00+00:00")])
    env = {k: v for k, v in os.environ.items() if k != "TZ"}
    out = subprocess.run([sys.executable, "-m", "eventlog", "catchup", str(log), "--dry-run"], env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    from zoneinfo import ZoneInfo

    day = datetime.now(ZoneInfo(name)).date().isoformat()
    assert out.stdout == f"no candidates today ({day} in {name}): no probe, nothing kicked\n", out.stderr
    # --at in an offset no zone of the machine has: that offset is named
    fixed = run_cli("explain", str(log), "com.x", "--at", "2026-10-25T10:00:00+05:30", "--json", env=BERLIN)
    [found] = [v for v in json.loads(fixed.stdout)["verdicts"] if v["kind"] == "catchup"]
    assert "today (2026-10-25 in UTC+05:30)" in found["says"], found
