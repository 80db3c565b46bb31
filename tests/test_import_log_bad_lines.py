"""Every ``eventlog import SOURCE`` names the bad lines of the LOG it reads, exits 1, and still imports (issue 17)."""

from __future__ import annotations

import json
import plistlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli

#: A line of LOG that cannot be read: its time has no offset (what issue 17 reproduced).
NAIVE = {"type": "job_skipped", "ts": "2026-08-21T09:00:05", "label": "com.lily.post", "reason": "quota",
         "remaining_s": 3595}
REASON = "no_offset: ts '2026-08-21T09:00:05' has no UTC offset (give --assume-tz)"


def ledger(tmp: Path) -> list[str]:
    (tmp / "ledger.json").write_text(json.dumps({
        "account": "cloud-account-a", "limitedAt": "2026-08-03T01:20:00+09:00",
        "resetAt": "2026-08-03T17:00:00+09:00", "source": "parsed-limit-message", "confidence": "explicit"}))
    return ["ledger", str(tmp / "ledger.json")]


def handoff_files(tmp: Path) -> list[str]:
    (tmp / "handoffs").mkdir()
    (tmp / "handoffs" / "h1.json").write_text(json.dumps({
        "handoffId": "h1", "account": "cloud-account-a", "createdAt": "2026-08-03T01:00:00+09:00"}))
    return ["handoff-files", str(tmp / "handoffs")]


def circuit(tmp: Path) -> list[str]:
    (tmp / "circuit.json").write_text(json.dumps({
        "open_until": "2026-08-21T10:00:00+09:00", "opened_at": "2026-08-21T08:55:00+09:00"}))
    return ["circuit", str(tmp / "circuit.json")]


def worker_log(tmp: Path) -> list[str]:
    (tmp / "worker.log").write_text(json.dumps({
        "msg": "worker.checkpoint.restore_unavailable", "ts": "2026-08-06T16:59:01+09:00", "session_id": "s-7",
        "generation": 1, "status": 503}) + "\n")
    return ["worker-log", str(tmp / "worker.log")]


def launchd(tmp: Path) -> list[str]:
    (tmp / "agents").mkdir()
    with open(tmp / "agents" / "com.lily.post.plist", "wb") as f:
        plistlib.dump({"Label": "com.lily.post", "ProgramArguments": ["claude-quota-guard", "post"],
                       "StartCalendarInterval": {"Hour": 9, "Minute": 0}}, f)
    return ["launchd", str(tmp / "agents")]


def quota_log(tmp: Path) -> list[str]:
    (tmp / "job.err").write_text("CLAUDE_QUOTA_JOB_RAN job=com.lily.post exit=0 ts=1787270400\n")
    return ["quota-log", str(tmp / "job.err")]


#: Each importer, its input, and the event it must still append.
IMPORTERS: list[tuple[Callable[[Path], list[str]], str]] = [
    (ledger, "limit_recorded"), (handoff_files, "handoff_created"), (circuit, "circuit_opened"),
    (worker_log, "storage_unavailable"), (launchd, "job_registered"), (quota_log, "job_ran"),
]


@pytest.mark.parametrize(("source", "appended"), IMPORTERS, ids=[f.__name__ for f, _ in IMPORTERS])
def test_the_logs_bad_lines_are_named_exit_1_and_the_rest_imported(
        tmp_path: Path, source: Callable[[Path], list[str]], appended: str) -> None:
    """Silence is the failure: a LOG line the import could not read (so cannot skip) is counted and named."""
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(NAIVE) + "\n")
    kind, *inputs = source(tmp_path)
    out = run_cli("import", kind, str(log), *inputs, "--json")
    assert out.returncode == 1
    assert out.stderr == f"eventlog: {log}: 1 bad line(s) skipped: line 1: {REASON}\n"
    report: dict[str, Any] = json.loads(out.stdout)
    assert report["bad_lines"] == {"count": 1, "first": [{"line": 1, "reason": REASON}]}
    written = [json.loads(line) for line in log.read_text().splitlines()]
    assert written[0] == NAIVE and [e["type"] for e in written[1:]] == [appended]  # the import still happened
