"""A zone that is no zone is said: ``--assume-tz ""`` and a ``TZ`` nothing can read (review Z1).

``--assume-tz ""`` read as "no zone": ``replay`` and ``status`` exited 0 with every line without an offset
``no_offset``, while ``" "`` was refused; ``--assume-tz "$VAR"`` with VAR unset said nothing. ``TZ=Asia/Tokio``
is UTC to the C library, silently: ``catchup --dry-run`` said "no candidates today" and ``status`` "Nothing needs
a person." where ``TZ=Asia/Tokyo`` found the candidate. Real processes with ``TZ`` set, as a user runs them.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, run_cli, write_log
from tests.opskit import follow_file
from tests.serving import start_server
from tests.test_assume_tz_live import JOB
from tests.test_assume_tz_live import skipped_in_tokyo as skipped_today_in_tokyo
from tests.test_prom import value as sample_value

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


# --- the live views name it as an item, and follow's metrics (review X3) ----------------------------------------

#: What every view says of a ``TZ=Asia/Tokio`` judging now without --assume-tz, on a log with a guarded job.
NAMED = "TZ=Asia/Tokio is no time zone this machine knows: today and slots are judged in UTC"


def zone_items(triage: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for g in triage["groups"] for i in g["items"] if i["reason_code"] == "zone_unknown"]


def test_status_names_a_misspelt_tz_as_an_item_whose_command_judges_in_the_zone_meant(tmp_path: Path) -> None:
    log = skipped_today_in_tokyo(tmp_path)
    text = run_cli("status", str(log), env={"TZ": "Asia/Tokio"})
    assert text.returncode == 1, text.stdout  # it was "Nothing needs a person." exit 0
    assert "Nothing needs a person." not in text.stdout and NAMED in text.stdout, text.stdout
    out = run_cli("status", str(log), "--json", "--domain", "catchup", env={"TZ": "Asia/Tokio"})
    assert out.returncode == 1
    [item] = zone_items(json.loads(out.stdout))
    assert (item["domain"], item["id"], item["needs_decision"]) == ("catchup", "TZ", False)
    assert item["reason"].startswith(NAMED) and "--assume-tz ZONE" in item["reason"] and "ledger.env" in item["reason"]
    assert item["next"] == f"TZ=Asia/Tokyo eventlog status {log} --domain catchup"
    pasted = subprocess.run(["bash", "-c", item["next"] + " --json"], capture_output=True, text=True, cwd=ROOT,
                            env={**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"})
    found = json.loads(pasted.stdout)
    assert [i["id"] for g in found["groups"] for i in g["items"]] == [JOB], pasted.stderr  # the candidate, no item
    # a TZ like no zone: the command lists the zones
    nowhere = json.loads(run_cli("status", str(log), "--json", env={"TZ": "Nowhere"}).stdout)
    assert [i["next"] for i in zone_items(nowhere)] == ["timedatectl list-timezones"]
    # asked for a zone, or a TZ that names one: no item
    for args, tz in ((["--assume-tz", "UTC"], "Asia/Tokio"), ([], "Asia/Tokyo"), ([], "UTC"), ([], "JST-9")):
        fine = run_cli("status", str(log), "--json", *args, env={"TZ": tz})
        assert not zone_items(json.loads(fine.stdout)), (args, tz)


def test_a_log_without_a_guarded_job_judges_the_same_in_any_zone(tmp_path: Path) -> None:
    log = write_log(tmp_path / "h.jsonl", [{"type": "handoff_created", "ts": "2026-12-01T09:00:00+00:00",
                                            "handoff_id": "h1", "account": "a"}])
    out = run_cli("status", str(log), "--json", env={"TZ": "Asia/Tokio"})
    assert not zone_items(json.loads(out.stdout)) and SAID in out.stderr.splitlines()


def test_explain_of_a_catch_up_job_names_a_misspelt_tz(tmp_path: Path) -> None:
    log = skipped_today_in_tokyo(tmp_path)
    out = run_cli("explain", str(log), JOB, "--json", env={"TZ": "Asia/Tokio"})
    assert out.returncode == 0, out.stderr  # explain's exits: done
    [verdict] = [v for v in json.loads(out.stdout)["verdicts"] if v["kind"] == "catchup"]
    assert NAMED in verdict["says"], verdict["says"]
    assert [i["reason_code"] for i in verdict["needs_person"]] == ["zone_unknown"]
    assert f"TZ=Asia/Tokyo eventlog status {log} --domain catchup" in verdict["next"]
    right = run_cli("explain", str(log), JOB, "--json", env={"TZ": "Asia/Tokyo"})
    [verdict] = [v for v in json.loads(right.stdout)["verdicts"] if v["kind"] == "catchup"]
    assert verdict["code"] == "candidate" and "no time zone" not in verdict["says"]


def test_follow_and_serve_name_a_misspelt_tz_in_a_gauge_and_no_zone_label(tmp_path: Path, monkeypatch: Any) -> None:
    log = skipped_today_in_tokyo(tmp_path)
    wrong = follow_file(log, tmp_path, env={"TZ": "Asia/Tokio"})
    assert sample_value(wrong, "recovery_catchup_zone_unknown") == 1
    assert sample_value(wrong, "recovery_catchup_candidates", zone="") == 0  # no zone="Asia/Tokio" to paste
    assert "Asia/Tokio" not in wrong
    right = follow_file(log, tmp_path, env={"TZ": "Asia/Tokyo"})
    assert sample_value(right, "recovery_catchup_zone_unknown") == 0
    assert sample_value(right, "recovery_catchup_candidates", zone="Asia/Tokyo") == 1

    monkeypatch.setenv("TZ", "Asia/Tokio")
    server = start_server(log, tmp_path)
    try:
        c = server.client("viewer")
        status = c.get("/v1/status").json()
        [item] = zone_items(status)
        assert item["reason"].startswith(NAMED) and status["needs_person"] == 1, status
        assert sample_value(c.get("/metrics").text, "recovery_catchup_zone_unknown") == 1
    finally:
        assert server.stop() == 0
