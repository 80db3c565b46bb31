"""A session that should have a worker and has none at work is named, with its age (seed 004, review F3).

The review's logs, relative to now: a worker claimed five hours ago and never ready (``s-stuck``); three restore
failures, ``retry_restore`` accepted three hours ago and no claim since (``s-after``); the same with a claim three
hours ago never ready (``s-after2``); a worker that failed two hours ago, then ``execution_gone``, and nothing since
(``s-dead``). Each was all-clear everywhere (admitted, "takes work"): no failure is counted, so no state of the spec
says so. Seed 004: a claimed worker retries storage for up to WORKER_STARTUP_TIMEOUT_SEC, then it ends and counts a
failure; acceptance is not a restart (「受理は worker 不在や実際の再開成功とは異なります」). And a wait for a decision
says since when, everywhere, and keeps its start when a person records the turn's end by hand. Run as a user runs
them: the CLI and the server in a subprocess, ``follow --prom`` through promtool with the shipped rules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, run_cli, write_log
from tests.opskit import RULES, held_series, selectors
from tests.serving import start_server
from tests.test_follow import _wait_for, following
from tests.test_prom import promtool_passes
from tests.test_prom import value as sample_value

FIXTURE = ROOT / "fixtures" / "sessions_without_worker.jsonl"
#: The fixture's sessions that have no worker at work at its last line: reason code, and the time it waits since.
WITHOUT = {
    "s-after": ("decision_unclaimed", "2026-08-08T06:00:00+09:00"),
    "s-after2": ("worker_not_ready", "2026-08-08T06:00:30+09:00"),
    "s-dead": ("worker_gone", "2026-08-08T07:00:20+09:00"),
    "s-stuck": ("worker_not_ready", "2026-08-08T04:00:00+09:00"),
}
#: Its session that waits for a decision: three startup failures, the last at this time.
WAITING = ("s-wait", "2026-08-08T04:31:45+09:00")


def items(out: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [i for g in json.loads(out.stdout)["groups"] for i in g["items"]]


def shifted(to: datetime, session: str | None = None) -> list[dict[str, Any]]:
    """The fixture's lines (``session``: its only) moved in time so that the last is at ``to`` (the review's logs,
    relative to now)."""
    lines = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    lines = [e for e in lines if session in (None, e["session_id"])]
    delta = to - datetime.fromisoformat(lines[-1]["ts"])
    return [{**e, "ts": (datetime.fromisoformat(e["ts"]) + delta).isoformat()} for e in lines]


def test_status_names_each_session_without_a_worker_with_its_age() -> None:
    out = run_cli("status", str(FIXTURE), "--at", "log", "--json", "--all")
    assert out.returncode == 1, out.stdout + out.stderr
    got = {i["id"]: i for i in items(out) if i["domain"] == "sessions"}
    assert set(got) == {*WITHOUT, WAITING[0]}
    for sid, (code, since) in WITHOUT.items():
        item = got[sid]
        assert (item["reason_code"], item["since"], item["needs_decision"]) == (code, since, False), item
        assert item["for_s"] == (datetime.fromisoformat("2026-08-08T09:00:00+09:00")
                                 - datetime.fromisoformat(since)).total_seconds()
        assert item["next"] == f"eventlog sessions {FIXTURE} {sid}"
    assert "not ready after 1 h (WORKER_STARTUP_TIMEOUT_SEC)" in got["s-stuck"]["reason"]
    assert "retry_restore was accepted at 2026-08-08T06:00:00+09:00 (line 21)" in got["s-after"]["reason"]
    assert "acceptance is not a restart" in got["s-after"]["reason"]
    assert "its worker stopped (failed, line 25)" in got["s-dead"]["reason"]
    totals = json.loads(out.stdout)["totals"]["sessions"]
    assert (totals["without_worker"], totals["waiting_decision"]) == (4, 1)
    text = run_cli("status", str(FIXTURE), "--at", "log").stdout
    assert "Sessions whose claimed worker is not ready after WORKER_STARTUP_TIMEOUT_SEC (1 h): 2" in text
    assert "  s-stuck (for 5 h): admitted, but a worker (generation 1, line 1) claimed it" in text


@pytest.mark.parametrize(("sid", "quiet", "named"), [
    ("s-stuck", "2026-08-08T04:59:59.999+09:00", "2026-08-08T05:00:00+09:00"),  # WORKER_STARTUP_TIMEOUT_SEC
    ("s-after", "2026-08-08T06:09:59.999+09:00", "2026-08-08T06:10:00+09:00"),  # 10 min for a claim
    ("s-dead", "2026-08-08T07:10:19.999+09:00", "2026-08-08T07:10:20+09:00"),
])
def test_a_session_is_named_once_its_bound_passed_and_sessions_says_so_before(sid: str, quiet: str,
                                                                               named: str) -> None:
    before = run_cli("sessions", str(FIXTURE), sid, "--at", quiet, "--json")
    assert before.returncode == 0, before.stdout
    d = json.loads(before.stdout)["items"][sid]
    assert d["needs"] == [] and d["worker_wait"]["kind"] == WITHOUT[sid][0] and d["worker_wait"]["overdue"] is False
    text = run_cli("sessions", str(FIXTURE), sid, "--at", quiet).stdout
    assert "no worker claimed it yet" in text or "is not ready yet" in text
    after = run_cli("sessions", str(FIXTURE), sid, "--at", named)
    assert after.returncode == 1
    assert "needs a person: admitted, but " in after.stdout
    assert f"(since {WITHOUT[sid][1]}, for " in after.stdout


def test_a_worker_paused_on_purpose_or_at_work_needs_nobody() -> None:
    for sid in ("s-paused", "s-fine"):
        out = run_cli("sessions", str(FIXTURE), sid, "--at", "2026-08-09T09:00:00+09:00", "--json")
        assert out.returncode == 0, out.stdout
        assert json.loads(out.stdout)["items"][sid]["worker_wait"] is None


def test_the_reviewers_sessions_are_named_now_by_sessions_explain_and_the_server(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", shifted(datetime.now(UTC).replace(microsecond=0)))
    status = run_cli("status", str(log), "--json", "--domain", "sessions")
    assert status.returncode == 1
    got = {i["id"]: i for i in items(status)}
    assert {sid: got[sid]["reason_code"] for sid in WITHOUT} == {sid: code for sid, (code, _t) in WITHOUT.items()}
    listed = run_cli("sessions", str(log))
    assert listed.returncode == 1
    for sid in WITHOUT:
        item = got[sid]
        assert f"  needs a person: {item['reason']} (since {item['since']}, for " in listed.stdout
        said = run_cli("explain", str(log), sid, "--json")
        [verdict] = json.loads(said.stdout)["verdicts"]
        assert verdict["says"].startswith("admitted: admitted, no worker at work; ")
        assert [i["reason_code"] for i in verdict["needs_person"]] == [item["reason_code"]]
        assert verdict["next"][0] == item["next"]
    server = start_server(log, tmp_path, None)
    try:
        served = {i["id"]: i for g in server.client("viewer").get("/v1/status?all=1").json()["groups"]
                  for i in g["items"] if i["domain"] == "sessions"}
        assert {sid: served[sid]["reason_code"] for sid in WITHOUT} == {sid: got[sid]["reason_code"] for sid in WITHOUT}
        page = server.client("viewer").get("/v1/sessions/s-dead").json()
        assert [i["reason_code"] for i in page["needs"]] == ["worker_gone"]
        assert page["worker_wait"]["kind"] == "worker_gone" and page["worker_wait"]["overdue"] is True
    finally:
        server.stop()


def _fires(prom: Path, tmp_path: Path, alert: str, labels: list[dict[str, str]]) -> None:
    """The shipped rule ``alert`` fires with exactly ``labels`` (beside the log and its own) on the file's series held
    for 20 min."""
    [rule] = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if r.get("alert") == alert]
    fed = held_series(prom.read_text(), 0.0, {name for name, _m in selectors(rule["expr"])}, 20, 60)
    expect = [{"exp_labels": {"log": str(tmp_path / "log.jsonl"), **more, **rule["labels"]}} for more in labels]
    promtool_passes(tmp_path, {"groups": [{"name": "one", "rules": [rule]}]},
                    {"interval": "1m", "input_series": fed,
                     "alert_rule_test": [{"eval_time": "10m", "alertname": alert, "exp_alerts": expect}]})


def test_follow_prom_counts_them_by_kind_and_the_alerts_fire(tmp_path: Path) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    log = write_log(tmp_path / "log.jsonl", shifted(now))
    with following(log, tmp_path) as (_dump, prom):
        _wait_for(lambda: prom.exists() and "recovery_sessions_without_worker" in prom.read_text())
        text = prom.read_text()
        assert {kind: sample_value(text, "recovery_sessions_without_worker", kind=kind)
                for kind in ("worker_not_ready", "worker_gone", "decision_unclaimed")} == \
            {"worker_not_ready": 2, "worker_gone": 1, "decision_unclaimed": 1}
        waited = sample_value(text, "recovery_sessions_decision_wait_seconds")
        assert 4 * 3600 + 28 * 60 <= waited < 4 * 3600 + 29 * 60 + 60  # s-wait: its third failure, 4 h 28 min 15 s ago
        _fires(prom, tmp_path, "RecoverySessionWithoutWorker",
               [{"kind": "decision_unclaimed"}, {"kind": "worker_gone"}, {"kind": "worker_not_ready"}])
        _fires(prom, tmp_path, "RecoverySessionDecisionWaitLong", [{}])


def test_a_wait_for_a_decision_under_4_hours_does_not_page_critical(tmp_path: Path) -> None:
    """s-wait's third failure three hours ago: RecoverySessionDecisionWaitLong stays quiet."""
    log = write_log(tmp_path / "log.jsonl", shifted(datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3),
                                                    WAITING[0]))
    with following(log, tmp_path) as (_dump, prom):
        _wait_for(lambda: prom.exists() and "recovery_sessions_decision_wait_seconds" in prom.read_text())
        waited = sample_value(prom.read_text(), "recovery_sessions_decision_wait_seconds")
        assert 3 * 3600 <= waited < 3 * 3600 + 120
        _fires(prom, tmp_path, "RecoverySessionDecisionWaitLong", [])


# --- a wait keeps its start ---------------------------------------------------------------------------------

DEADLINE = ROOT / "fixtures" / "sessions_interrupt_deadline_exceeded.jsonl"
RESULT_AT = "2026-08-06T20:01:00.000+09:00"  # its control_result: the interrupt's outcome is unknown


def test_an_interrupt_of_a_turn_never_recorded_is_dated_and_keeps_that_date_once_its_end_is_pasted(
        tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes(DEADLINE.read_bytes())
    at = "2026-08-06T22:01:00+09:00"  # two hours after the result
    before = run_cli("status", str(log), "--at", at, "--json")
    [item] = items(before)
    assert (item["reason_code"], item["since"], item["for_s"]) == ("interrupt_unrecorded", RESULT_AT, 7200)
    shown = run_cli("sessions", str(log), "--at", at)
    assert f"(since {RESULT_AT}, for 2 h)" in shown.stdout
    pasted = subprocess.run(item["next"], shell=True, cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert pasted.returncode == 0, pasted.stderr
    # the pasted line is dated now: the wait did not start there
    now = datetime.now(UTC)
    after = run_cli("status", str(log), "--json", "--domain", "sessions")
    [item] = items(after)
    assert (item["reason_code"], item["since"], item["needs_decision"]) == ("outcome_unknown", RESULT_AT, True)
    assert item["for_s"] >= (now - datetime.fromisoformat(RESULT_AT)).total_seconds() - 60
    [verdict] = json.loads(run_cli("explain", str(log), "s-deadline", "--json").stdout)["verdicts"]
    assert verdict["since"] == RESULT_AT
    with following(log, tmp_path) as (_dump, prom):
        _wait_for(lambda: prom.exists() and "recovery_sessions_decision_wait_seconds" in prom.read_text())
        waited = sample_value(prom.read_text(), "recovery_sessions_decision_wait_seconds")
        assert abs(waited - (datetime.now(UTC) - datetime.fromisoformat(RESULT_AT)).total_seconds()) < 120
