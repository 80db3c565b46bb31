"""A retry under way is not "retry due, nothing moved" (seed 004, reviewer finding F11).

After a counted failure the session waits in backoff; at its ``retry_at`` the scheduler starts the next
generation, whose worker may retry storage (``storage_unavailable``, never counted) for up to
WORKER_STARTUP_TIMEOUT_SEC (3600 s) before it is ready. The session stays in ``backoff`` (spec section 6, and the
dump's ``sessions.retry_due`` keeps listing it), but no view may push a person towards ``close`` while that retry
works: only a claim older than that hour is overdue. Run as a user runs them: the CLI in a subprocess, the
Prometheus file through promtool with the shipped rules.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, run_cli, write_log
from tests.opskit import RULES, held_series, selectors
from tests.test_follow import _metric, _wait_for, following
from tests.test_prom import promtool


def story(failed: datetime) -> list[dict[str, Any]]:
    """The reviewer's log: a restore fails at ``failed`` (retry_at 30 s later), the next generation claims the
    session at that retry_at, and its worker retries storage."""
    def ts(s: int) -> str:
        return (failed + timedelta(seconds=s)).isoformat()

    return [
        {"type": "worker_claimed", "ts": ts(-34), "session_id": "s-1", "generation": 1, "worker": "w-1",
         "restore": True},
        {"type": "checkpoint_restore_failed", "ts": ts(0), "session_id": "s-1", "generation": 1,
         "reason": "checkpoint_unavailable"},
        {"type": "worker_claimed", "ts": ts(30), "session_id": "s-1", "generation": 2, "worker": "w-2",
         "restore": True},
        {"type": "storage_unavailable", "ts": ts(31), "session_id": "s-1", "generation": 2, "cause": "timeout"},
        {"type": "storage_unavailable", "ts": ts(46), "session_id": "s-1", "generation": 2, "cause": "timeout"},
    ]


FAILED = datetime.fromisoformat("2026-12-02T03:21:34+09:00")  # retry_at and the claim: 03:22:04


def status(log: Path, at: str) -> tuple[int, dict[str, Any]]:
    out = run_cli("status", str(log), "--json", "--at", at)
    return out.returncode, json.loads(out.stdout)


def test_status_lists_no_retry_under_way_and_names_the_claim_once_it_is_an_hour_old(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", story(FAILED))
    code, got = status(log, "2026-12-02T03:22:30+09:00")
    assert (code, got["needs_person"], got["groups"]) == (0, 0, [])
    assert got["totals"]["sessions"]["retry_due"] == 0
    code, got = status(log, "2026-12-02T04:22:03.999+09:00")  # 1 h less a millisecond after the claim
    assert (code, got["needs_person"]) == (0, 0)
    code, got = status(log, "2026-12-02T04:22:04+09:00")
    assert code == 1
    [group] = got["groups"]
    [item] = group["items"]
    assert (item["reason_code"], item["id"], item["since"]) == ("retry_due", "s-1", "2026-12-02T03:22:04+09:00")
    assert "a worker (generation 2, line 3) claimed it at 2026-12-02T03:22:04+09:00 and is not ready after 1 h" \
        in item["reason"] and "worker's log" in item["reason"]
    # the dump is the spec's: the session is in backoff with its retry due all along
    dump = json.loads(run_cli("replay", str(log), "--at", "2026-12-02T03:22:30+09:00").stdout)
    assert dump["sessions"]["retry_due"] == ["s-1"]


def test_a_retry_nobody_claimed_is_still_due(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", story(FAILED)[:2])
    code, got = status(log, "2026-12-02T03:22:30+09:00")
    assert code == 1 and got["groups"][0]["items"][0]["reason_code"] == "retry_due"
    assert "no worker became ready since" in got["groups"][0]["items"][0]["reason"]


def test_sessions_and_explain_say_the_retry_is_under_way(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", story(FAILED))
    out = run_cli("sessions", str(log), "--json", "--at", "2026-12-02T03:22:30+09:00")
    d = json.loads(out.stdout)["items"]["s-1"]
    assert (d["admission_state"], d["retry_due"]) == ("backoff", True)
    assert d["retry_claimed"] == {"at": "2026-12-02T03:22:04+09:00", "line": 3, "generation": 2, "under_way": True}
    text = run_cli("sessions", str(log), "--at", "2026-12-02T03:22:30+09:00").stdout
    assert "retry under way since 2026-12-02T03:22:04+09:00" in text
    said = run_cli("explain", str(log), "s-1", "--at", "2026-12-02T03:22:30+09:00").stdout
    assert "retry under way since 2026-12-02T03:22:04+09:00" in said and "needs a person" not in said


def _overdue_fires(prom: Path, tmp_path: Path) -> bool:
    """Whether RecoverySessionRetryOverdue (the shipped rule) fires on the file's series held for 10 min."""
    rules = yaml.safe_load(RULES.read_text())
    [rule] = [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "RecoverySessionRetryOverdue"]
    text = prom.read_text()
    fed = held_series(text, 0.0, {name for name, _m in selectors(rule["expr"])}, 12, 60)
    rule.pop("annotations")
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [{"name": "one", "rules": [rule]}]}))
    results = []
    for expect in ([], [{"exp_labels": {"log": str(tmp_path / "log.jsonl"), **rule["labels"]}}]):
        (tmp_path / "t.yml").write_text(json.dumps({"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [
            {"interval": "1m", "input_series": fed,
             "alert_rule_test": [{"eval_time": "7m", "alertname": rule["alert"], "exp_alerts": expect}]}]}))
        checked = subprocess.run([promtool(), "test", "rules", "t.yml"], cwd=tmp_path, capture_output=True,
                                 text=True, timeout=120)
        results.append(checked.returncode == 0)
    assert results.count(True) == 1, results
    return results[1]


@pytest.mark.parametrize(("claimed_ago", "under_way", "fires"), [(timedelta(minutes=10), 1, False),
                                                                 (timedelta(hours=2), 0, True)])
def test_follow_prom_counts_retries_under_way_and_the_alert_leaves_them_out(
        tmp_path: Path, claimed_ago: timedelta, under_way: int, fires: bool) -> None:
    failed = datetime.now(UTC).replace(microsecond=0) - claimed_ago - timedelta(seconds=30)
    log = write_log(tmp_path / "log.jsonl", story(failed))
    with following(log, tmp_path) as (_dump, prom):
        _wait_for(lambda: prom.exists() and "recovery_sessions_retry_due" in prom.read_text())
        assert _metric(prom, "recovery_sessions_retry_due") == 1
        assert _metric(prom, "recovery_sessions_retry_under_way") == under_way
        assert _overdue_fires(prom, tmp_path) is fires


def test_sessions_exits_1_for_the_sessions_status_calls_a_person_for() -> None:
    """`status` exits 1 for an overdue retry and prints `eventlog sessions LOG ID` as the next command; that
    command says why too and exits 1 ("1 something needs a person"), by the same rule; its --json carries the
    status items as `needs`, as the API's session view does."""
    log = ROOT / "fixtures" / "sessions_retry_due.jsonl"
    code, got = status(log, "2026-12-01T00:00:00+00:00")  # 120 days after both retries were due
    [group] = got["groups"]
    assert (code, group["reason_code"], group["count"]) == (1, "retry_due", 2)
    for item in group["items"]:
        argv = shlex.split(item["next"])
        assert argv[:2] == ["eventlog", "sessions"]
        out = run_cli(*argv[1:], "--at", "2026-12-01T00:00:00+00:00")
        assert out.returncode == 1, out.stdout
        assert f"needs a person: {item['reason']}" in out.stdout
        shown = run_cli(*argv[1:], "--json", "--at", "2026-12-01T00:00:00+00:00")
        assert shown.returncode == 1
        assert json.loads(shown.stdout)["items"][item["id"]]["needs"] == [item]
    # before its retry_at nothing is due: no item, exit 0
    early = run_cli("sessions", str(log), "s-due", "--json", "--at", "2026-08-03T09:00:39+09:00")
    assert early.returncode == 0 and json.loads(early.stdout)["items"]["s-due"]["needs"] == []


def test_sessions_exits_0_while_the_retry_is_under_way_and_1_once_it_is_overdue(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", story(FAILED))
    under_way = run_cli("sessions", str(log), "--at", "2026-12-02T03:22:30+09:00")
    assert under_way.returncode == 0 and "needs a person" not in under_way.stdout
    overdue = run_cli("sessions", str(log), "s-1", "--at", "2026-12-02T04:22:04+09:00")
    assert overdue.returncode == 1
    assert "needs a person: " in overdue.stdout and "is not ready after 1 h" in overdue.stdout
