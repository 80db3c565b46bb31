"""Catch-up silences named in earlier closing notes (seed 002): every view names what a person must know.

- A job whose catch-up re-run failed and that nothing feeds (no marker of today though its slot passed): ``explain``
  said only the re-run's verdict, so the ``unfed`` words and commands (import its markers, or retire it) were hidden
  behind the command ``status`` gave for them.
- A ``catchup_kicked`` dated ahead of now with no end: the re-run's missing end (``rerun_no_end``) waited for the
  clock to pass the kick. It is a line dated ahead (``dated_ahead``, check ``rerun_no_end``), named as the others,
  ``LOG:LINE``, with the command, by the views and by every catch-up pass.

Real processes throughout: the CLI, a server, the commands pasted into bash.
"""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.conftest import run_cli, write_log
from tests.serving import start_server
from tests.test_next_runs import typed
from tests.test_prom import value

LABEL = "com.lily.brief"
AT = "2026-08-21T11:30:00+09:00"  # a Friday; the 9:00 slot passed 2 h 30 min ago


def registered(ts: str) -> dict[str, Any]:
    return {"type": "job_registered", "ts": ts, "label": LABEL, "guarded": True,
            "calendar": [{"Hour": 9, "Minute": 0}], "interval_s": None}


def items(view: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(i["reason_code"], i["id"]): i for g in view["groups"] for i in g["items"]}


def status(log: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    out = run_cli("status", str(log), "--json", "--all", *extra)
    assert out.stdout, out.stderr
    return out.returncode, json.loads(out.stdout)


def explain(log: Path, *extra: str) -> dict[str, Any]:
    out = run_cli("explain", str(log), LABEL, "--json", *extra)
    assert out.stdout, out.stderr
    [verdict] = json.loads(out.stdout)["verdicts"]
    return verdict  # type: ignore[no-any-return]


# --- a failed re-run of a job nothing feeds ------------------------------------------------------------------


def test_a_failed_rerun_does_not_hide_that_nothing_feeds_the_job(tmp_path: Path) -> None:
    """Yesterday's skip was re-run and exited 3; today the 9:00 slot passed and no marker of today came."""
    log = write_log(tmp_path / "jobs.jsonl", [
        registered("2026-08-20T07:00:00+09:00"),
        {"type": "job_skipped", "ts": "2026-08-20T09:00:05+09:00", "label": LABEL, "reason": "quota",
         "remaining_s": 60},
        {"type": "catchup_kicked", "ts": "2026-08-20T10:00:00+09:00", "label": LABEL, "kicked_by": "launchd"},
        {"type": "catchup_finished", "ts": "2026-08-20T10:05:00+09:00", "label": LABEL, "outcome": "exited",
         "exit": 3},
    ])
    retire = ('printf \'%s\\n\' \'{"type": "job_registered", "label": "com.lily.brief", "guarded": false, '
              f'"calendar": [{{"Hour": 9, "Minute": 0}}], "interval_s": null}}\' | eventlog append {log}')

    # status names both, each with its command
    code, view = status(log, "--at", AT)
    assert code == 1
    found = items(view)
    failed, unfed = found["rerun_failed", LABEL], found["unfed", LABEL]
    assert "it ended with exit 3" in failed["reason"] and "nothing feeds its markers" in unfed["reason"]
    assert failed["next"] == unfed["next"] == f"eventlog explain {log} {LABEL}"

    # the command both give says both, with the commands of both
    verdict = explain(log, "--at", AT)
    assert verdict["code"] == "rerun_failed"
    assert "it ended with exit 3" in verdict["says"]
    assert unfed["reason"] in verdict["says"]  # the unfed words, as status shows them
    assert "until its markers reach the log, a run by hand clears neither" in verdict["says"]
    assert [it["reason_code"] for it in verdict["needs_person"]] == ["rerun_failed", "unfed"]
    assert verdict["next"] == [f"launchctl kickstart gui/$(id -u)/{LABEL}", "eventlog import quota-log --help",
                               retire]
    text = run_cli("explain", str(log), LABEL, "--at", AT).stdout
    assert "nothing feeds its markers" in text and "next: eventlog import quota-log --help" in text

    # serve's status holds the same two items, with the same commands
    server = start_server(log, tmp_path)
    try:
        with server.client() as c:
            served = items(c.get("/v1/status", params={"at": AT}).json())
    finally:
        server.stop()
    assert served["rerun_failed", LABEL]["next"] == served["unfed", LABEL]["next"] == failed["next"]
    assert served["unfed", LABEL]["reason"] == unfed["reason"]


# --- a kick dated ahead of now -------------------------------------------------------------------------------


def test_a_kick_dated_ahead_of_now_is_named_with_its_line_and_the_command_that_records_its_end(
        tmp_path: Path) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    kicked = (now + timedelta(days=1)).isoformat()  # a writer's clock a day ahead
    log = write_log(tmp_path / "jobs.jsonl", [
        registered((now - timedelta(days=3)).isoformat()),
        {"type": "catchup_kicked", "ts": kicked, "label": LABEL, "timeout_s": 2700, "kill_grace_s": 30,
         "kicked_by": "kick_cmd"},
    ])
    deadline = (now + timedelta(days=1, seconds=2700 + 60 + 300)).isoformat()

    code, view = status(log)
    assert code == 1
    [item] = [it for (code_, _), it in items(view).items() if code_ == "dated_ahead"]
    assert item["id"] == "line 2" and item["since"] == kicked and item["until"] == deadline
    assert f"the open catch-up re-run (a catchup_kicked, no catchup_finished since) of job {LABEL}" in item["reason"]
    assert f"its missing end cannot be named before {deadline}" in item["reason"]
    assert item["next"] == f"eventlog explain {shlex.quote(str(log))} {LABEL}"

    # the command, pasted, shows the line as LOG:LINE and the line that records the re-run's end
    shown = typed(item["next"], tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"{log}:2: " in shown.stdout
    # (past 2 h after today's 09:00 slot the job is also unfed: no marker of today; the codes are then both)
    [needs] = [line for line in shown.stdout.splitlines() if line.startswith("    needs a person: ")]
    assert "dated_ahead" in needs.removeprefix("    needs a person: ").split(" (")[0].split(", ")
    end = [line.removeprefix("    next: ") for line in shown.stdout.splitlines() if "catchup_finished" in line
           and line.startswith("    next: ")]
    assert end == [f"printf '%s\\n' '{{\"type\": \"catchup_finished\", \"label\": \"{LABEL}\", \"outcome\": "
                   f"\"exited\"}}' | eventlog append {log}"]

    # every catch-up pass names it too, LOG:LINE and the command (exit 1: the missing end it holds back would be)
    for extra in (("--dry-run",), ("--kick-cmd", "/bin/true", "--probe-cmd", "echo PING_OK")):
        out = run_cli("catchup", str(log), *extra)
        assert out.returncode == 1, out.stderr
        assert f"{log}:2: the open catch-up re-run" in out.stderr
        assert f"(see eventlog explain {log} {LABEL})" in out.stderr

    server = start_server(log, tmp_path)
    try:
        with server.client() as c:
            served = items(c.get("/v1/status").json())
            metrics = c.get("/metrics").text
    finally:
        server.stop()
    assert served["dated_ahead", "line 2"]["until"] == deadline
    assert value(metrics, "recovery_dated_ahead", check="rerun_no_end") == 1

    # the person records its end: nothing is held back any more
    assert typed(end[0], tmp_path).returncode == 0
    code, view = status(log)
    assert not [key for key in items(view) if key[0] == "dated_ahead"], view


def test_a_kick_not_ahead_of_now_is_no_line_dated_ahead(tmp_path: Path) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    log = write_log(tmp_path / "jobs.jsonl", [
        registered((now - timedelta(days=3)).isoformat()),
        {"type": "catchup_kicked", "ts": (now - timedelta(minutes=1)).isoformat(), "label": LABEL},
    ])
    _, view = status(log)
    assert not [key for key in items(view) if key[0] == "dated_ahead"]
    out = run_cli("catchup", str(log), "--dry-run")
    assert "dated" not in out.stderr and f"{log}:2:" not in out.stderr
