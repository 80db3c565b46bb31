"""Issue 17's gaps, each reproduced as the issue words it, run as a user runs them (the CLI in a subprocess).

Points 6 (runners name bad lines) and 7 (thresholds everywhere) were delivered before this issue's
branch and have their own tests (tests/test_failback.py, test_lane_runner.py, test_grammar.py).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, run_cli, write_log
from tests.test_catchup_scheduler import PROBE as CATCHUP_PROBE
from tests.test_catchup_scheduler import Fake

FAKES = ROOT / "tests" / "fakes"
PROBE = f"{sys.executable} {FAKES / 'failback_probe.py'}"
RESUME = f"{sys.executable} {FAKES / 'failback_resume.py'}"
T0 = datetime.fromisoformat("2026-08-03T10:00:00+09:00")


def at(minutes: float = 0) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat()


def created(hid: str) -> dict[str, Any]:
    return {"type": "handoff_created", "ts": at(-60), "handoff_id": hid, "account": "cloud-account-a"}


def lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def items(log: Path, when: str) -> dict[str, Any]:
    return json.loads(run_cli("replay", str(log), "--at", when).stdout)["handoffs"]["items"]  # type: ignore[no-any-return]


def failback(log: Path, probe: str, resume: str, when: str, *more: str) -> Any:
    return run_cli("failback", str(log), "--probe-cmd", f"{PROBE} {probe}", "--resume-cmd", f"{RESUME} {resume}",
                   "--watcher", "w1", "--at", when, *more)


def test_1_a_cloud_session_that_starts_and_reports_later_is_returned(tmp_path: Path) -> None:
    """"a cloud session that starts and reports later becomes needs_human, and its later verified is refused
    (append verified -> exit 3 "h1 is needs_human")"."""
    log = write_log(tmp_path / "work.jsonl", [created("h1")])
    out = failback(log, "ok", "started", at())
    assert out.returncode == 0, out.stderr
    assert items(log, at(1))["h1"]["state"] == "resume_requested"
    verified = {"type": "verified", "ts": at(1), "handoff_id": "h1", "attempt": 1, "branch": "main",
                "head": "abc1234", "dirty": False, "todos": "taken_over"}
    later = run_cli("append", str(log), stdin=json.dumps(verified) + "\n")
    assert later.returncode == 0, later.stderr
    assert items(log, at(1))["h1"]["state"] == "returned"


def test_2_a_resume_command_can_say_failed_nothing_happened(tmp_path: Path) -> None:
    """"A resume command cannot say 'failed, nothing happened'. Any started-then-failed attempt is effect: unknown
    and never retried"."""
    log = write_log(tmp_path / "work.jsonl", [created("h1")])
    assert failback(log, "ok", "failed_none", at()).returncode == 0
    assert lines(log)[4] == {**lines(log)[4], "type": "resume_failed", "effect": "none"}
    assert items(log, at(1))["h1"]["state"] == "pending"
    out = failback(log, "ok", "verified", at(15))
    assert out.returncode == 0 and "claimed h1" in out.stdout
    assert items(log, at(15))["h1"] == {"state": "returned", "account": "cloud-account-a", "attempt": 2, "stale": None}


def test_3_stale_requests_free_their_slots_and_a_person_has_commands(tmp_path: Path) -> None:
    """"two of them stop all failback ('1 pending, no free slot: no probe'), and a person has no command for
    handoffs but raw append"."""
    log = write_log(tmp_path / "work.jsonl", [
        created("h1"), created("h2"), created("h3"),
        {"type": "claimed", "ts": at(-50), "handoff_id": "h1", "watcher": "w0", "attempt": 1},
        {"type": "resume_requested", "ts": at(-50), "handoff_id": "h1", "attempt": 1},
        {"type": "claimed", "ts": at(-50), "handoff_id": "h2", "watcher": "w0", "attempt": 1},
        {"type": "resume_requested", "ts": at(-50), "handoff_id": "h2", "attempt": 1},
    ])
    out = failback(log, "ok", "verified", at())
    assert out.returncode == 1  # two requests went to a person
    assert "no free slot" not in out.stdout and "claimed h3" in out.stdout
    assert [line.split(":")[1].strip() for line in out.stderr.splitlines()] == ["h1", "h2"]
    status = run_cli("status", str(log), "--at", at(1), "--json")
    assert status.returncode == 1
    shown = {i["id"]: i for g in json.loads(status.stdout)["groups"] for i in g["items"]}
    assert shown["h1"]["reason_code"] == "needs_human" and "resume_unconfirmed" in shown["h1"]["reason"]
    assert shown["h1"]["next"].startswith("eventlog explain ")  # it lists requeue and skip
    # The person: h1 had no effect outside (requeue), h2 is dropped with its reason (skip).
    assert run_cli("handoff", "requeue", str(log), "h1", "--reason", "checked: no session ran").returncode == 0
    assert run_cli("handoff", "skip", str(log), "h2", "--reason", "superseded by h3").returncode == 0
    assert run_cli("handoff", "release", str(log), "h2", "--reason", "again").returncode == 3
    now = items(log, at(1))
    assert (now["h1"]["state"], now["h2"]["state"], now["h3"]["state"]) == ("pending", "skipped", "returned")


def test_4_attempt_fencing(tmp_path: Path) -> None:
    """"claimed w1/attempt 1 -> released -> claimed w2/attempt 2, then w1's resume_requested attempt:1 is accepted
    and w2's attempt:2 refused"."""
    out = run_cli("replay", str(ROOT / "fixtures" / "handoffs_attempt_fencing.jsonl"))
    dump = json.loads(out.stdout)
    assert [(r["line"], r["type"]) for r in dump["rejected"]] == [(8, "resume_requested"), (10, "verified"),
                                                                  (11, "conflict")]
    assert dump["handoffs"]["items"]["h1"]["state"] == "returned" and dump["handoffs"]["items"]["h1"]["attempt"] == 2


def test_5_auth_error_is_not_retried_every_pass_and_reaches_a_person(tmp_path: Path) -> None:
    """"auth_error probes are retried every pass with no backoff and never reach a person"."""
    log = write_log(tmp_path / "work.jsonl", [created("h1")])
    first = failback(log, "auth", "verified", at())
    assert first.returncode == 1 and "account cloud-account-a: the probe said auth_error" in first.stderr
    second = failback(log, "auth", "verified", at(15))
    assert second.returncode == 0 and "not probed cloud-account-a: needs_person" in second.stdout
    assert [e["type"] for e in lines(log)].count("probe_result") == 1
    status = run_cli("status", str(log), "--at", at(16), "--json")
    shown = {i["id"]: i for g in json.loads(status.stdout)["groups"] for i in g["items"]}
    assert status.returncode == 1 and shown["cloud-account-a"]["reason_code"] == "auth_error"
    assert shown["cloud-account-a"]["next"].startswith("eventlog handoff probe ")


def test_6_a_launchd_job_that_overruns_is_stopped_and_a_limit_text_kicks_nothing(tmp_path: Path) -> None:
    """"a timed-out job 'still ran to the end' while the next two kicks ran" and "a probe printing 'usage limit
    reached' with exit 0 kicks every job"."""
    fake = Fake(tmp_path)
    try:
        fake.plan(com_lily_a="forever", com_lily_b="exit:0")
        limited = [sys.executable, str(CATCHUP_PROBE), str(fake.probes), "0", "Claude usage limit reached"]
        out = fake.catchup("launchd", probe=limited)
        assert out.returncode == 1 and fake.calls() == []
        out = fake.catchup("launchd", "--timeout", "1s", "--kill-grace", "5s")
        assert out.returncode == 1
        kicks = [c for c in fake.calls() if c["argv"][0] in ("kickstart", "kill")]
        assert [c["argv"][:2] for c in kicks] == [["kickstart", "gui/501/com.lily.a"], ["kill", "SIGTERM"],
                                                  ["kickstart", "gui/501/com.lily.b"]]
        assert kicks[2]["running"] == []  # a was stopped before b started
    finally:
        fake.stop_leftovers()


def test_8_what_users_already_have_is_read(tmp_path: Path) -> None:
    """"Nothing reads what users already have": the ledger, the legacy files, the circuit, a lane's files."""
    log = tmp_path / "work.jsonl"
    (tmp_path / "ledger.json").write_text(json.dumps({
        "account": "cloud-account-a", "limitedAt": "2026-08-03T01:20:00+09:00",
        "resetAt": "2026-08-03T17:00:00+09:00", "source": "parsed-limit-message", "confidence": "explicit"}))
    handoffs = tmp_path / "handoffs"
    handoffs.mkdir()
    (handoffs / "h1.json").write_text(json.dumps({"account": "cloud-account-a",
                                                  "createdAt": "2026-08-03T01:00:00+09:00"}))
    (handoffs / "h1.resumed").write_text("")
    (tmp_path / "circuit.json").write_text(json.dumps({"open_until": "2026-08-03T17:00:00+09:00"}))
    (tmp_path / "worker.log").write_text("JOB_FINISHED job=fix-42 ts=2026-08-03T09:00:00+09:00\n")
    for args in (["import", "ledger", str(log), str(tmp_path / "ledger.json")],
                 ["import", "handoff-files", str(log), str(handoffs)],
                 ["import", "circuit", str(log), str(tmp_path / "circuit.json")],
                 ["observe", "lane", str(log), "app", "--worker-log", str(tmp_path / "worker.log")]):
        first = run_cli(*args)
        assert first.returncode == 0, (args, first.stderr)
        size = log.stat().st_size
        assert run_cli(*args).returncode == 0 and log.stat().st_size == size  # again: nothing added
    assert [e["type"] for e in lines(log)] == ["limit_recorded", "handoff_created", "needs_human", "circuit_opened",
                                               "job_finished"]
    assert lines(log)[2]["reason"] == "legacy_resumed_unverified"
    stalls = run_cli("stalls", str(log), "--at", "2026-08-03T11:00:00+09:00")
    assert json.loads(stalls.stdout)["results"][0]["kind"] == "job-unpicked"
