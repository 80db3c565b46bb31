"""``--assume-tz ZONE`` on a live command: now is judged in ZONE.

A host in UTC reads a log written in Japan (README, "catchup"; docs/DECISIONS.md). A review: the live
commands judged catch-up's today in the host's zone though given ``--assume-tz Asia/Tokyo`` ("no candidates",
"Nothing needs a person.", "today's slot(s) (09:32) have not come yet"). Real processes throughout, with
``TZ=UTC``.
"""

from __future__ import annotations

import json
import subprocess
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from tests.conftest import run_cli, write_log
from tests.opskit import follow_file
from tests.serving import start_server
from tests.test_prom import value as sample_value

TOKYO = "Asia/Tokyo"
UTC_HOST = {"TZ": "UTC"}
JOB = "com.lily.brief"


def tokyo_now() -> datetime:
    """Now in Tokyo, at least 5 s past its midnight and 2 min before the next (waited for): the day the test runs."""
    while True:
        now = datetime.now(ZoneInfo(TOKYO))
        into_day = now.hour * 3600 + now.minute * 60 + now.second
        if 5 <= into_day < 86400 - 120:
            return now
        time.sleep(1)


def skipped_in_tokyo(tmp_path: Path) -> Path:
    """A guarded job whose slot is this minute of this weekday in Tokyo, skipped for quota 3 s ago.

    In Tokyo it is a candidate now. In UTC it is not, at any hour: the same weekday (UTC before 15:00) puts its
    slot 9 h ahead of UTC's clock, and another weekday holds no slot of it.
    """
    now = tokyo_now()
    return write_log(tmp_path / "jobs.jsonl", [
        {"type": "job_registered", "ts": (now - timedelta(days=2)).isoformat(timespec="seconds"), "label": JOB,
         "guarded": True, "calendar": [{"Weekday": now.isoweekday(), "Hour": now.hour, "Minute": now.minute}],
         "interval_s": None},
        {"type": "job_skipped", "ts": (now - timedelta(seconds=3)).isoformat(timespec="seconds"), "label": JOB,
         "reason": "quota", "remaining_s": 60},
    ])


def live(*args: str) -> subprocess.CompletedProcess[str]:
    """``eventlog ARGS`` on a UTC host."""
    return run_cli(*args, env=UTC_HOST)


def catchup_verdict(log: Path, *args: str) -> dict[str, Any]:
    out = live("explain", str(log), JOB, "--json", *args)
    assert out.returncode == 0, out.stderr
    [found] = [v for v in json.loads(out.stdout)["verdicts"] if v["kind"] == "catchup"]
    return found  # type: ignore[no-any-return]


def test_a_live_command_judges_today_in_the_zone_of_assume_tz(tmp_path: Path) -> None:
    log = skipped_in_tokyo(tmp_path)
    day = tokyo_now().date().isoformat()

    dry = live("catchup", str(log), "--dry-run", "--json", "--assume-tz", TOKYO)
    assert (dry.returncode, json.loads(dry.stdout)["candidates"]) == (0, [JOB]), dry.stderr
    said = live("catchup", str(log), "--dry-run", "--assume-tz", TOKYO)
    assert said.stdout == f"dry run, no probe: candidates of today ({day} in {TOKYO}): {JOB}\n", said.stderr

    status = live("status", str(log), "--json", "--assume-tz", TOKYO)
    items = [(i["reason_code"], i["id"]) for g in json.loads(status.stdout)["groups"] for i in g["items"]]
    assert items == [("candidate", JOB)], status.stdout
    text = live("status", str(log), "--assume-tz", TOKYO).stdout
    assert f"the quota guard skipped it today ({day} in {TOKYO}) at " in text, text

    found = catchup_verdict(log, "--assume-tz", TOKYO)
    assert (found["code"], found["facts"]["why_not"]) == ("candidate", []), found
    assert f"skipped today ({day} in {TOKYO})" in found["says"], found

    # no --assume-tz: the host's zone, named where it says why not
    [why] = catchup_verdict(log)["facts"]["why_not"]
    assert " in UTC)" in why, why


def test_follow_judges_now_in_the_zone_of_assume_tz_and_its_metrics_name_it(tmp_path: Path) -> None:
    prom = follow_file(skipped_in_tokyo(tmp_path), tmp_path, env=UTC_HOST, extra=["--assume-tz", TOKYO])
    assert sample_value(prom, "recovery_catchup_candidates", zone=TOKYO) == 1  # the zone the alerts' commands carry


def test_serve_judges_now_in_the_zone_of_assume_tz_again_and_again(tmp_path: Path, monkeypatch: Any) -> None:
    """Its judgement as of now is made anew as time passes (it was kept until the log changed)."""
    log = skipped_in_tokyo(tmp_path)
    monkeypatch.setenv("TZ", "UTC")
    server = start_server(log, tmp_path, None, "--assume-tz", TOKYO)
    try:
        c = server.client("viewer")
        first = c.get("/v1/status").json()
        items = [(i["reason_code"], i["id"]) for g in first["groups"] for i in g["items"]]
        assert items == [("candidate", JOB)], first
        assert first["as_of"].endswith("+09:00"), first["as_of"]
        deadline = time.monotonic() + 30
        while (again := c.get("/v1/status").json())["as_of"] == first["as_of"] and time.monotonic() < deadline:
            time.sleep(0.2)  # judged again as time passes, with no new line
        assert again["as_of"] > first["as_of"] and again["as_of"].endswith("+09:00"), again["as_of"]
    finally:
        assert server.stop() == 0
