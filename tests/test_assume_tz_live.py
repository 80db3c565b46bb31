"""``--assume-tz ZONE`` on a live command: now is judged in ZONE, and every command a view prints carries it.

A host in UTC reads a log written in Japan (README, "catchup"; docs/DECISIONS.md). Two reviews: the live
commands judged catch-up's today in the host's zone though given ``--assume-tz Asia/Tokyo`` ("no candidates",
"Nothing needs a person.", "today's slot(s) (09:32) have not come yet"), and the commands the views printed
for a log written without offsets left the option out, so pasted they read every line as bad (exit 2).
Real processes throughout, with ``TZ=UTC``; the printed commands are pasted into bash.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from tests.conftest import ROOT, run_cli, write_log
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


# --- the commands the views print ------------------------------------------------------------------------------


NAIVE = [  # a log written without offsets: only --assume-tz reads it
    {"type": "handoff_created", "ts": "2026-12-01T09:00:00", "handoff_id": "h1", "account": "cloud-account-a"},
    {"type": "probe_result", "ts": "2026-12-01T09:00:01", "account": "cloud-account-a", "outcome": "ok"},
    {"type": "claimed", "ts": "2026-12-01T09:00:02", "handoff_id": "h1", "watcher": "w1", "attempt": 1},
    {"type": "watcher_run", "ts": "2026-12-01T09:00:03", "watcher": "w1", "exit": "ok", "period_s": 900},
    {"type": "worker_claimed", "ts": "2026-12-01T09:10:00", "session_id": "s1", "generation": 1, "worker": "k1",
     "restore": True},
    {"type": "checkpoint_restore_failed", "ts": "2026-12-01T09:10:10", "session_id": "s1", "generation": 1,
     "reason": "incompatible_checkpoint"},
]
AT = ["--at", "2026-12-02T10:00:00+09:00"]


def pasted(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """COMMAND as a person pastes it into bash on a UTC host, ``eventlog`` on PATH."""
    env = {**os.environ, **UTC_HOST, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
                          check=False)


def eventlog_commands(texts: list[str]) -> list[str]:
    """The ``eventlog`` commands among ``texts`` (the last of a pipe), but ``eventlog export`` (it reads no time)."""
    found = [re.sub(r"^.*\| ", "", t) for t in texts if "eventlog " in t]
    return [c for c in found if not c.startswith("eventlog export")]


def test_every_command_a_view_prints_carries_assume_tz_and_works_pasted(tmp_path: Path) -> None:
    log = write_log(tmp_path / "n.jsonl", NAIVE)
    zoned = ["--assume-tz", TOKYO]
    status = json.loads(live("status", str(log), "--json", *zoned, *AT).stdout)
    nexts = {(i["reason_code"], i["id"]): i["next"] for g in status["groups"] for i in g["items"]}
    assert set(nexts) == {("stale_retryable", "h1"), ("watcher_late", "w1"), ("restore_failed", "s1")}, nexts
    verdicts = json.loads(live("explain", str(log), "w1", "--json", *zoned, *AT).stdout)["verdicts"]
    sessions = json.loads(live("sessions", str(log), "--json", *zoned, *AT).stdout)
    every = [*nexts.values(), *(c for v in verdicts for c in v["next"]),
             *(i["next"] for i in sessions["items"]["s1"]["needs"])]
    commands = eventlog_commands(every)
    assert len(commands) == len(every), every
    for command in commands:
        assert command.endswith(" --assume-tz Asia/Tokyo") or " --assume-tz Asia/Tokyo " in command, command
    decides = [line.strip() for line in live("sessions", str(log), "s1", *zoned, *AT).stdout.splitlines()
               if line.strip().startswith("eventlog decide")]  # what it would accept now, whole
    assert decides and all(d.endswith(f" --assume-tz {TOKYO}") for d in decides), decides
    text = live("status", str(log), *zoned, *AT).stdout
    assert "eventlog handoff release n.jsonl" not in text
    assert f"eventlog handoff release {log} h1 --reason 'stale claim released by hand' --assume-tz {TOKYO}" in text

    # pasted, each reads the log as the view did: the claim is released, the decision taken
    release = pasted(nexts[("stale_retryable", "h1")], tmp_path)
    assert release.returncode == 0, release.stderr
    assert json.loads(log.read_text().splitlines()[-1])["type"] == "released"
    look = pasted(nexts[("watcher_late", "w1")] + " " + shlex.join(AT), tmp_path)
    assert look.returncode == 0 and "watcher w1: last run 2026-12-01T09:00:03+09:00" in look.stdout, look.stderr
    decide = pasted(nexts[("restore_failed", "s1")].replace("<why>", "checked by hand"), tmp_path)
    assert decide.returncode == 0 and decide.stdout.startswith("accepted: retry_restore of s1"), decide.stderr

    # without --assume-tz nothing is read, and the commands carry nothing
    bare = live("status", str(log), "--json", *AT)
    assert f"--assume-tz {TOKYO}" not in bare.stdout and "no_offset" in bare.stdout, bare.stdout


def test_serve_prints_its_commands_with_its_assume_tz(tmp_path: Path, monkeypatch: Any) -> None:
    log = write_log(tmp_path / "n.jsonl", NAIVE)
    monkeypatch.setenv("TZ", "UTC")
    server = start_server(log, tmp_path, None, "--assume-tz", TOKYO)
    try:
        c = server.client("viewer")
        status = c.get("/v1/status", params={"at": AT[1]}).json()
        with c.stream("GET", "/v1/status", headers={"Accept": "text/event-stream"}, timeout=20) as r:
            data = next(line for line in r.iter_lines() if line.startswith("data:") and '"commands"' in line)
        console = json.loads(data.removeprefix("data:"))["commands"]
    finally:
        assert server.stop() == 0
    nexts = [i["next"] for g in status["groups"] for i in g["items"]]
    commands = eventlog_commands([*nexts, *console.values()])
    assert len(commands) == len(nexts) + 2, (nexts, console)
    assert all(f" --assume-tz {TOKYO}" in command for command in commands), commands
    shown = pasted(console["all"] + " " + shlex.join(AT), ROOT)
    assert shown.returncode == 1 and "0 bad lines" in shown.stdout, shown.stdout + shown.stderr


def test_the_commands_a_runner_prints_carry_its_assume_tz(tmp_path: Path) -> None:
    """A catch-up pass names a guarded job nothing feeds, with the ``explain`` that says what to do: pasted, it
    reads the log as the pass did."""
    log = write_log(tmp_path / "n.jsonl", [
        {"type": "job_registered", "ts": "2026-12-01T07:00:00", "label": JOB, "guarded": True,
         "calendar": [{"Hour": 9, "Minute": 0}], "interval_s": None}])
    out = live("catchup", str(log), "--dry-run", "--assume-tz", TOKYO, "--at", "2026-12-01T11:30:00")
    assert out.returncode == 1 and f"its slot 09:00 of today (2026-12-01 in {TOKYO}) passed" in out.stderr, out.stderr
    [command] = re.findall(r"\((eventlog explain .*) says how", out.stderr)
    assert command == f"eventlog explain {log} {JOB} --assume-tz {TOKYO}", command
    shown = pasted(command + " --at 2026-12-01T11:30:00", tmp_path)
    assert shown.returncode == 0 and "nothing feeds its markers" in shown.stdout, shown.stdout + shown.stderr
