"""Live views print times in the offset they were written with (spec section 2), whatever T's offset.

A log written at +09:00 (one line at +02:00) is judged with ``--at`` in another offset: every
time that comes from a line (a "since", an "until"), or is computed from one (a backoff's end,
a ``retry_at``), keeps the offset of its line; only T itself (``as_of``) is printed as given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, write_log
from tests.serving import start_server

#: T in UTC: 11:00 at +09:00.
AT_UTC = "2026-08-03T02:00:00+00:00"
#: The same instant, written as the log writes its times.
AT_JST = "2026-08-03T11:00:00+09:00"

CLAIMED_AT = "2026-08-03T03:00:00+02:00"  # 10:00 at +09:00: the one line written in another offset
FAILED_AT = "2026-08-03T10:00:40+09:00"
OLDEST_PENDING = "2026-08-03T09:30:00+09:00"
PROBED_AT = "2026-08-03T10:59:30+09:00"
RESTORE_FAILED_AT = "2026-08-03T10:00:00+09:00"
OPENED_AT = "2026-08-03T10:30:00+09:00"
OPEN_UNTIL = "2026-08-03T12:00:00+09:00"

EVENTS: list[dict[str, Any]] = [
    {"type": "handoff_created", "ts": "2026-08-03T09:00:00+09:00", "handoff_id": "h-human", "account": "acc"},
    {"type": "handoff_created", "ts": "2026-08-03T09:10:00+09:00", "handoff_id": "h-stale", "account": "acc"},
    {"type": "handoff_created", "ts": OLDEST_PENDING, "handoff_id": "h-pend", "account": "acc"},
    {"type": "handoff_created", "ts": "2026-08-03T09:40:00+09:00", "handoff_id": "h-pend2", "account": "acc"},
    {"type": "claimed", "ts": "2026-08-03T10:00:01+09:00", "handoff_id": "h-human", "watcher": "w", "attempt": 1},
    {"type": "resume_requested", "ts": "2026-08-03T10:00:02+09:00", "handoff_id": "h-human", "attempt": 1},
    {"type": "resume_failed", "ts": FAILED_AT, "handoff_id": "h-human", "attempt": 1, "error": "reset",
     "effect": "unknown"},
    {"type": "claimed", "ts": CLAIMED_AT, "handoff_id": "h-stale", "watcher": "w", "attempt": 1},
    {"type": "probe_result", "ts": PROBED_AT, "account": "acc", "outcome": "transient"},
    {"type": "worker_claimed", "ts": "2026-08-03T09:59:00+09:00", "session_id": "s1", "generation": 1,
     "worker": "wk", "restore": True},
    {"type": "checkpoint_restore_failed", "ts": RESTORE_FAILED_AT, "session_id": "s1", "generation": 1,
     "reason": "timeout"},
    {"type": "circuit_opened", "ts": OPENED_AT, "reason": "quota", "open_until": OPEN_UNTIL},
]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return write_log(tmp_path / "tokyo.jsonl", EVENTS)


def cli_json(*args: str) -> Any:
    done = run_cli(*args)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def items(status: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(i["reason_code"], i["id"]): i for g in status["groups"] for i in g["items"]}


def test_status_prints_each_time_in_the_offset_of_its_line(log: Path) -> None:
    status = cli_json("status", str(log), "--at", AT_UTC, "--json", "--all")
    assert status["as_of"] == AT_UTC  # T as given
    got = {key: (i["since"], i["until"], i["for_s"]) for key, i in items(status).items()}
    assert got == {
        ("needs_human", "h-human"): (FAILED_AT, None, 3560),
        ("stale_retryable", "h-stale"): (CLAIMED_AT, None, 3600),
        # the backoff's end: the probe's ts + 60 s, in the probe's offset
        ("backoff_transient", "acc"): (PROBED_AT, "2026-08-03T11:00:30+09:00", 30),
        ("no_watcher", "failback"): (OLDEST_PENDING, None, 5400),
        ("circuit_open", "circuit"): (OPENED_AT, OPEN_UNTIL, 1800),
        # retry_at: the failure's ts + 30 s, in its offset
        ("retry_due", "s1"): ("2026-08-03T10:00:30+09:00", None, 3570),
    }


def test_the_same_instant_in_another_offset_changes_only_as_of(log: Path) -> None:
    utc = cli_json("status", str(log), "--at", AT_UTC, "--json", "--all")
    jst = cli_json("status", str(log), "--at", AT_JST, "--json", "--all")
    assert jst["as_of"] == AT_JST
    assert {**utc, "as_of": None} == {**jst, "as_of": None}
    for ident in ("h-human", "h-stale", "h-pend", "acc", "s1"):
        args = ("explain", str(log), ident, "--json")
        a, b = cli_json(*args, "--at", AT_UTC), cli_json(*args, "--at", AT_JST)
        assert {**a, "as_of": None} == {**b, "as_of": None}, ident


def test_explain_says_since_in_the_offset_the_line_was_written_with(log: Path) -> None:
    verdict = cli_json("explain", str(log), "h-stale", "--at", AT_UTC, "--json")["verdicts"][0]
    assert (verdict["code"], verdict["since"], verdict["for_s"]) == ("claimed", CLAIMED_AT, 3600)
    pending = cli_json("explain", str(log), "h-pend", "--at", AT_UTC, "--json")["verdicts"][0]
    assert (pending["code"], pending["since"]) == ("pending", OLDEST_PENDING)
    text = run_cli("explain", str(log), "h-human", "--at", AT_UTC)
    assert text.returncode in (0, 1), text.stderr
    assert f"as of {AT_UTC}:" in text.stdout
    assert f"since {FAILED_AT} (for 59 min 20 s)" in text.stdout


def test_the_http_api_prints_the_offsets_the_cli_prints(log: Path, tmp_path: Path) -> None:
    server = start_server(log, tmp_path)
    try:
        c = server.client("viewer")
        got = c.get("/v1/status", params={"at": AT_UTC}).json()
        assert got == cli_json("status", str(log), "--at", AT_UTC, "--json")
        assert items(got)[("stale_retryable", "h-stale")]["since"] == CLAIMED_AT
        session = c.get("/v1/sessions/s1", params={"at": AT_UTC}).json()
        assert (session["as_of"], session["retry_at"]) == (AT_UTC, "2026-08-03T10:00:30+09:00")
    finally:
        server.stop()


def test_catchup_names_the_circuit_s_end_as_written_as_status_does(tmp_path: Path) -> None:
    until = "2026-08-03T12:00:00.5+09:00"  # a fraction as written (isoformat would say .500000)
    log = write_log(tmp_path / "jobs.jsonl", [
        {"type": "job_registered", "ts": "2026-08-03T08:00:00+09:00", "label": "j", "guarded": True,
         "calendar": [{"Hour": 1}], "interval_s": None},
        {"type": "job_skipped", "ts": "2026-08-03T09:00:00+09:00", "label": "j", "reason": "quota", "remaining_s": 9},
        {"type": "circuit_opened", "ts": OPENED_AT, "reason": "quota", "open_until": until},
    ])
    report = cli_json("catchup", str(log), "--probe-cmd", "false", "--kick-cmd", "true", "--at", AT_UTC, "--json")
    assert (report["candidates"], report["circuit"]) == (["j"], "open")
    assert report["note"] == f"circuit open until {until}: no probe, nothing kicked"
    status = cli_json("status", str(log), "--at", AT_UTC, "--json")
    assert items(status)[("circuit_open", "circuit")]["until"] == until
