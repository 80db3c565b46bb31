"""A zone that is no zone is said: ``--assume-tz ""`` and a ``TZ`` nothing can read (review Z1).

``--assume-tz ""`` read as "no zone": ``replay`` and ``status`` exited 0 with every line without an offset
``no_offset``, while ``" "`` was refused; ``--assume-tz "$VAR"`` with VAR unset said nothing. ``TZ=Asia/Tokio``
is UTC to the C library, silently: ``catchup --dry-run`` said "no candidates today" and ``status`` "Nothing needs
a person." where ``TZ=Asia/Tokyo`` found the candidate. Real processes with ``TZ`` set, as a user runs them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli, write_log
from tests.test_assume_tz_live import JOB
from tests.test_assume_tz_live import skipped_in_tokyo as skipped_today_in_tokyo

SAID = "eventlog: TZ=Asia/Tokio is no time zone this machine knows: local time is UTC"


@pytest.mark.parametrize("blank", ["", " "])
@pytest.mark.parametrize(("command", "more"), [("replay", []), ("status", []), ("sessions", []),
                                             ("catchup", ["--dry-run"]), ("explain", ["h1"])])
def test_an_empty_assume_tz_is_refused_naming_the_option(tmp_path: Path, command: str, more: list[str],
                                                         blank: str) -> None:
    log = write_log(tmp_path / "naive.jsonl", [
        {"type": "handoff_created", "ts": "2026-12-01T09:00:00", "handoff_id": "h1", "account": "a"}])
    out = run_cli(command, str(log), *more, "--assume-tz", blank, env={"TZ": "UTC"})
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert f"--assume-tz {blank!r} names no time zone" in out.stderr
    assert not out.stdout


def test_a_misspelt_tz_stops_catch_up_and_is_said_by_the_views(tmp_path: Path) -> None:
    log = skipped_today_in_tokyo(tmp_path)
    right = run_cli("catchup", str(log), "--dry-run", "--json", env={"TZ": "Asia/Tokyo"})
    assert json.loads(right.stdout)["candidates"] == [JOB], right.stderr
    assert "no time zone" not in right.stderr

    wrong = run_cli("catchup", str(log), "--dry-run", env={"TZ": "Asia/Tokio"})
    assert wrong.returncode == 2 and not wrong.stdout, wrong.stdout
    assert wrong.stderr.startswith(SAID + ", and catch-up's today is the machine's: nothing done"), wrong.stderr
    assert "--assume-tz UTC" in wrong.stderr
    before = log.read_bytes()
    run = run_cli("catchup", str(log), "--probe-cmd", "echo PING_OK", "--kick-cmd", "true", env={"TZ": "Asia/Tokio"})
    assert run.returncode == 2 and log.read_bytes() == before  # nothing probed, kicked or written
    # asked for UTC: judged in UTC, said so
    utc = run_cli("catchup", str(log), "--dry-run", "--assume-tz", "UTC", env={"TZ": "Asia/Tokio"})
    assert utc.returncode == 0 and " in UTC): " in utc.stdout, (utc.stdout, utc.stderr)

    status = run_cli("status", str(log), env={"TZ": "Asia/Tokio"})
    assert status.stderr.splitlines() == [SAID], status.stderr  # once
    found = run_cli("status", str(log), "--json", env={"TZ": "Asia/Tokyo"})
    assert found.returncode == 1 and "no time zone" not in found.stderr
    explain = run_cli("explain", str(log), JOB, env={"TZ": "Asia/Tokio"})
    assert explain.returncode == 0 and SAID in explain.stderr.splitlines(), explain.stderr


@pytest.mark.parametrize("tz", ["JST-9", "EST5EDT", ":Asia/Tokyo", "UTC", "", "Asia/Tokyo",
                                "CET-1CEST,M3.5.0,M10.5.0/3", "<+0330>-3:30", ":JST-9"])
def test_a_zone_or_a_posix_rule_is_not_said(tmp_path: Path, tz: str) -> None:
    log = skipped_today_in_tokyo(tmp_path)
    out = run_cli("catchup", str(log), "--dry-run", env={"TZ": tz})
    assert out.returncode == 0 and "no time zone" not in out.stderr, (out.stdout, out.stderr)


@pytest.mark.parametrize("tz", ["Asia/Tokio", "JST", "/no/such/zone", "Nowhere"])
def test_what_is_neither_is_said(tmp_path: Path, tz: str) -> None:
    out = run_cli("status", str(skipped_today_in_tokyo(tmp_path)), env={"TZ": tz})
    assert f"eventlog: TZ={tz} is no time zone this machine knows: local time is UTC" in out.stderr.splitlines()


def test_a_replay_never_looks_at_the_machines_zone(tmp_path: Path) -> None:
    log = skipped_today_in_tokyo(tmp_path)
    bad, good = (run_cli("replay", str(log), env={"TZ": tz}) for tz in ("Asia/Tokio", "UTC"))
    assert (bad.returncode, bad.stdout, bad.stderr) == (good.returncode, good.stdout, good.stderr)
