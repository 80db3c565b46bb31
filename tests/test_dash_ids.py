"""A command to copy works pasted when a LOG or an id starts with ``-`` (docs/DECISIONS.md, "The command to copy").

The appender takes any id, ``-dash`` and ``-h1`` included, and a log may be named ``-x.jsonl``. Printed as
``eventlog decide -x.jsonl -dash --decision ...`` the command is a usage error (argparse reads ``-dash`` as
an option); the views print ``OPTIONS -- LOG ID`` then. Each command is taken from ``status --json`` or
``explain --json`` and run with ``sh -c`` in the log's directory, as a person pastes it; each must do what it
says. A retry overdue (docs/OPERATIONS.md section 6) is looked at first: its first next step is ``eventlog
sessions LOG SESSION``, never ``close`` (seed 004: close cannot be undone).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import write_log
from tests.serving import start_server
from tests.test_serve import read_events

LOG = "-x.jsonl"
T = "2026-08-03T12:00:00+09:00"


def at(hhmmss: str) -> str:
    return f"2026-08-03T{hhmmss}+09:00"


EVENTS: list[dict[str, Any]] = [
    # -h1: claimed, then silence: safe to release (status: eventlog handoff release)
    {"type": "handoff_created", "ts": at("09:00:00"), "handoff_id": "-h1", "account": "-acct"},
    {"type": "handoff_created", "ts": at("09:00:01"), "handoff_id": "-h2", "account": "-acct"},
    {"type": "probe_result", "ts": at("10:00:00"), "account": "-acct", "outcome": "ok"},
    {"type": "claimed", "ts": at("10:00:01"), "handoff_id": "-h1", "watcher": "-w", "attempt": 1},
    # -h2: handed to a person (status: explain; explain: requeue or skip)
    {"type": "claimed", "ts": at("10:00:02"), "handoff_id": "-h2", "watcher": "-w", "attempt": 1},
    {"type": "resume_requested", "ts": at("10:00:03"), "handoff_id": "-h2", "attempt": 1},
    {"type": "needs_human", "ts": at("10:30:00"), "handoff_id": "-h2", "reason": "resume_unconfirmed"},
    # -dash: the restore failed for good (status: eventlog decide)
    {"type": "worker_claimed", "ts": at("09:00:00"), "session_id": "-dash", "generation": 1, "worker": "w-1",
     "restore": True},
    {"type": "checkpoint_restore_failed", "ts": at("09:00:10"), "session_id": "-dash", "generation": 1,
     "reason": "incompatible_checkpoint"},
    # -unk: a turn -t2 of unknown outcome, its execution gone (status: decide abandon --target-turn=-t2)
    {"type": "worker_claimed", "ts": at("09:10:00"), "session_id": "-unk", "generation": 1, "worker": "w-2",
     "restore": False},
    {"type": "worker_ready", "ts": at("09:10:05"), "session_id": "-unk", "generation": 1},
    {"type": "turn_started", "ts": at("09:11:00"), "session_id": "-unk", "turn_id": "-t2"},
    {"type": "turn_finished", "ts": at("09:12:00"), "session_id": "-unk", "turn_id": "-t2",
     "outcome": "outcome_unknown", "terminal_reason": "interrupt_unanswered"},
    {"type": "worker_stopped", "ts": at("09:12:01"), "session_id": "-unk", "generation": 1, "stop_kind": "failed"},
    {"type": "execution_gone", "ts": at("09:13:00"), "session_id": "-unk"},
    # -due: in backoff, its retry due at 09:20:40 and nothing since (status: eventlog sessions)
    {"type": "worker_claimed", "ts": at("09:20:00"), "session_id": "-due", "generation": 1, "worker": "w-3",
     "restore": True},
    {"type": "checkpoint_restore_failed", "ts": at("09:20:10"), "session_id": "-due", "generation": 1,
     "reason": "storage_checksum_mismatch"},
]
BAD = "this line is no JSON"


def pasted(command: str, cwd: Path, **fill: str) -> subprocess.CompletedProcess[str]:
    """Run COMMAND with ``sh -c`` in ``cwd`` as a person pastes it (``eventlog`` on PATH), placeholders filled."""
    for placeholder, value in fill.items():
        command = command.replace(placeholder, value)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
                          check=False)


def status_items(cwd: Path, log: str = LOG, *extra: str) -> dict[tuple[str, str], dict[str, Any]]:
    """``status --json --all --at T -- LOG`` run in ``cwd``: its items by (reason code, id)."""
    out = pasted(f"eventlog status --json --all --at {T} {' '.join(extra)} -- {log}", cwd)
    assert out.stdout, out.stderr
    return {(i["reason_code"], i["id"]): i for g in json.loads(out.stdout)["groups"] for i in g["items"]}


def explained(cwd: Path, ident: str) -> dict[str, Any]:
    """The verdict of ``ident`` from ``explain --json --at T -- LOG ID`` run in ``cwd``."""
    out = pasted(f"eventlog explain --json --at {T} -- {LOG} {ident}", cwd)
    [verdict] = json.loads(out.stdout)["verdicts"]
    return dict(verdict)


def state_of(cwd: Path) -> dict[str, Any]:
    """The dump of LOG (``eventlog replay -- LOG``)."""
    out = pasted(f"eventlog replay -- {LOG}", cwd)
    return dict(json.loads(out.stdout))


def the_log(tmp_path: Path, bad: bool = True) -> Path:
    log = write_log(tmp_path / LOG, EVENTS)
    if bad:
        with log.open("a") as f:
            f.write(BAD + "\n")
    return log


def test_every_next_command_of_dashed_ids_and_a_dashed_log_runs_pasted(tmp_path: Path) -> None:
    the_log(tmp_path)
    items = status_items(tmp_path)
    assert {("stale_retryable", "-h1"), ("needs_human", "-h2"), ("restore_failed", "-dash"),
            ("outcome_unknown", "-unk"), ("retry_due", "-due"), ("bad_line", f"line {len(EVENTS) + 1}")} <= set(items)
    bad = pasted(items["bad_line", f"line {len(EVENTS) + 1}"]["next"], tmp_path)
    assert (bad.returncode, bad.stdout) == (0, BAD + "\n"), bad.stderr

    released = pasted(items["stale_retryable", "-h1"]["next"], tmp_path)
    assert released.returncode == 0, released.stderr
    assert state_of(tmp_path)["handoffs"]["items"]["-h1"]["state"] == "pending"

    look = pasted(items["needs_human", "-h2"]["next"], tmp_path)
    assert look.returncode == 0 and "handoff -h2: handed to a person" in look.stdout, look.stdout + look.stderr
    [requeue] = [c for c in explained(tmp_path, "-h2")["next"] if " requeue " in c]
    requeued = pasted(requeue, tmp_path, **{"<why it may go back>": "checked: nothing ran in the cloud"})
    assert requeued.returncode == 0, requeued.stderr
    assert state_of(tmp_path)["handoffs"]["items"]["-h2"]["state"] == "pending"

    decided = pasted(items["restore_failed", "-dash"]["next"], tmp_path, **{"<why>": "checked the runtime"})
    assert decided.returncode == 0, decided.stderr
    assert decided.stdout.startswith("accepted: ") and " of -dash " in decided.stdout.splitlines()[0]

    abandon = items["outcome_unknown", "-unk"]["next"]
    assert "--target-turn=-t2" in abandon, abandon
    abandoned = pasted(abandon, tmp_path, **{"<why>": "no effect outside"})
    assert abandoned.returncode == 0 and abandoned.stdout.startswith("accepted: abandon of -unk"), abandoned.stderr

    after = status_items(tmp_path)
    assert not {("stale_retryable", "-h1"), ("needs_human", "-h2"), ("restore_failed", "-dash"),
                ("outcome_unknown", "-unk")} & set(after)
    for item in items.values():                       # every other one too: "--" comes before LOG and the ids
        assert f" -- {LOG}" in item["next"] or item["next"] == "eventlog failback --help", item["next"]


def test_an_overdue_retry_is_looked_at_first_and_close_is_never_the_only_next_step(tmp_path: Path) -> None:
    the_log(tmp_path, bad=False)
    item = status_items(tmp_path)["retry_due", "-due"]
    assert item["next"] == f"eventlog sessions -- {LOG} -due"          # OPERATIONS section 6: look first
    assert "worker's log" in item["reason"] and "close cannot be undone" in item["reason"]
    look = pasted(item["next"], tmp_path)
    assert look.returncode == 1, look.stderr          # exit 1: it needs a person, as status says
    assert "-due: backoff (RESTORE_FAILED)" in look.stdout and "(due now)" in look.stdout, look.stdout
    assert f"needs a person: {item['reason']}" in look.stdout, look.stdout
    verdict = explained(tmp_path, "-due")
    first, *rest = verdict["next"]
    assert first == item["next"]
    assert [c for c in rest if "--decision close" in c], verdict["next"]  # close stays, after the look
    assert not state_of(tmp_path)["sessions"]["items"]["-due"]["admission_state"] == "closed"


def test_serve_s_console_shows_the_same_look_first(tmp_path: Path) -> None:
    log = the_log(tmp_path, bad=False)
    server = start_server(log, tmp_path)
    try:
        c = server.client("viewer")
        status = c.get("/v1/status").json()
        [item] = [i for g in status["groups"] for i in g["items"] if i["reason_code"] == "retry_due"]
        assert (item["id"], item["next"]) == ("-due", f"eventlog sessions -- {log} -due")
        session = c.get("/v1/sessions/-due").json()
        assert [n["next"] for n in session["needs"]] == [item["next"]]
    finally:
        server.stop()


def test_the_console_s_status_commands_run_pasted_when_serve_is_given_a_dashed_log(tmp_path: Path) -> None:
    """``serve -- -x.jsonl`` run in the log's directory: the stream's commands (the stale banner's and the
    "... and N more" hint's) name LOG in full (serve names a relative LOG so), so pasted there or anywhere else
    they judge the log (exit 1), not exit 2 (``-x.jsonl`` read as an option)."""
    the_log(tmp_path)
    server = start_server(LOG, tmp_path, cwd=tmp_path)
    try:
        c = server.client("viewer")
        with c.stream("GET", "/v1/status", headers={"Accept": "text/event-stream"}, timeout=20) as r:
            _tick, first = read_events(r, 2)
        commands = json.loads(first["data"])["commands"]
    finally:
        server.stop()
    full = shlex.quote(str(tmp_path / LOG))
    assert commands == {"status": f"eventlog status {full}", "all": f"eventlog status {full} --all"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for command in commands.values():
        for cwd in (tmp_path, elsewhere):
            said = pasted(command, cwd)
            assert said.returncode == 1, said.stderr  # 1: something needs a person (2: a usage error)
            assert "-dash" in said.stdout, said.stdout


def test_the_log_s_own_commands_work_on_a_log_named_with_a_dash(tmp_path: Path) -> None:
    good = json.dumps(EVENTS[0]) + "\n"
    (tmp_path / "-torn.jsonl").write_text(good + '{"type":"handoff_created","ts":"2026-08-03T09:')
    [torn] = [i for (code, _), i in status_items(tmp_path, "-torn.jsonl").items() if code == "torn_tail"]
    shown = pasted(torn["next"], tmp_path)
    assert shown.returncode == 0 and shown.stdout.endswith('"ts":"2026-08-03T09:'), shown.stderr

    (tmp_path / "-stuck.jsonl").write_text(good + "GARBAGE-no-newline")
    [stuck] = [i for (code, _), i in status_items(tmp_path, "-stuck.jsonl").items() if code == "torn_tail_stuck"]
    cut = pasted(stuck["next"], tmp_path)
    assert cut.returncode == 0, cut.stderr
    assert (tmp_path / "-stuck.jsonl").read_text() == good
    assert (tmp_path / f"-stuck.jsonl.tail-{len(good)}").read_text() == "GARBAGE-no-newline"

    (tmp_path / "-text.jsonl").write_text("hello\nworld\n")
    [text] = [i for (code, _), i in status_items(tmp_path, "-text.jsonl").items() if code == "not_a_log"]
    seen = pasted(text["next"], tmp_path)
    assert seen.returncode == 0 and "h   e   l   l   o" in seen.stdout, seen.stdout + seen.stderr

    (tmp_path / "-dir").mkdir()
    [missing] = [i for (code, _), i in status_items(tmp_path, "-dir/-gone.jsonl").items() if code == "missing"]
    listed = pasted(missing["next"], tmp_path)
    assert listed.returncode == 0, listed.stderr


def test_append_s_warning_of_a_line_dated_ahead_names_a_status_command_that_runs_pasted(tmp_path: Path) -> None:
    the_log(tmp_path, bad=False)
    ahead = json.dumps({"type": "probe_result", "ts": "2099-01-01T00:00:00+00:00", "account": "-acct", "outcome": "ok"})
    said = pasted(f"printf '%s\\n' '{ahead}' | eventlog append -- {LOG}", tmp_path)
    assert said.returncode == 0, said.stderr
    assert f"(eventlog status -- {LOG} names what it silences)" in said.stderr, said.stderr
    assert pasted(f"eventlog status -- {LOG}", tmp_path).returncode == 1
