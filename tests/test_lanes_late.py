"""A late lanes pass is named (seed 001: what broke was the thing that notices "finished").

Nothing looked at how old the lanes runner's last ``lane_check`` was: a stopped lanes timer was named nowhere
(stalls still alerted, but nothing got resumed, and with ``--observe`` nothing was observed either). Its
``lane_check`` states ``--period`` (``period_s``); while the log has a lane not stopped on purpose, every live view
names a last ``lane_check`` older than twice it (``lanes_late``), ``follow --prom`` exports its age, and the
shipped rules page on it. Real processes throughout.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import run_cli, write_log
from tests.opskit import RULES, held_series
from tests.serving import start_server
from tests.test_follow import _wait_for, following
from tests.test_lanes_pass import events, items, lanes, pasted
from tests.test_prom import promtool_passes

#: When the tests judge: a fixed time, so every age is exact.
T = datetime.fromisoformat("2026-08-05T15:00:00+09:00")


def at(hours: float) -> str:
    """``hours`` before T (negative: after), as a log writes it."""
    return (T - timedelta(hours=hours)).isoformat()


def ago(hours: float) -> str:
    """``hours`` before now, as a log writes it."""
    return (datetime.now().astimezone() - timedelta(hours=hours)).isoformat()


def a_checked_log(tmp_path: Path, checked_h: float, period_s: float | None = 3600, **lane: str) -> Path:
    """A lane whose progress moved an hour before T, and a lanes pass ``checked_h`` hours before T."""
    check: dict[str, Any] = {"type": "lane_check", "ts": at(checked_h), "exit": "ok"}
    if period_s is not None:
        check["period_s"] = period_s
    return write_log(tmp_path / "ledger.jsonl", [
        {"type": "status_updated", "ts": at(max(checked_h, 1)), "product": "sashiko-repair", "state": "running"},
        check, *([lane] if lane else []),
    ])


def test_status_explain_and_stalls_name_a_lanes_pass_older_than_twice_its_period(tmp_path: Path) -> None:
    log = a_checked_log(tmp_path, checked_h=3)
    out = run_cli("status", str(log), "--at", T.isoformat(), "--json", "--all")
    assert out.returncode == 1, out.stdout
    view = json.loads(out.stdout)
    [late] = items(view, "lanes_late")
    assert late["id"] == "lanes" and late["since"] == at(3) and late["for_s"] == 3 * 3600
    assert "no lanes pass since" in late["reason"] and "late after 2 h" in late["reason"]
    assert "systemctl status recovery-ledger-lanes.timer" in late["reason"]
    assert pasted(late["next"], tmp_path).returncode == 0
    assert view["totals"]["lanes"]["late"] is True
    text = run_cli("status", str(log), "--at", T.isoformat()).stdout
    assert "lanes (for 3 h): no lanes pass since" in text and "the lanes pass is late" in text

    verdict = lane_verdict_at(log, "sashiko-repair")
    assert verdict["code"] == "moving" and "; but no lanes pass since" in verdict["says"]
    assert [i["reason_code"] for i in verdict["needs_person"]] == ["lanes_late"]

    fine = run_cli("status", str(log), "--at", at(3 - 1.9))  # 1 h 54 min after the pass: not late yet
    assert fine.returncode == 0 and "Nothing needs a person." in fine.stdout


def lane_verdict_at(log: Path, product: str) -> dict[str, Any]:
    out = run_cli("explain", str(log), product, "--at", T.isoformat(), "--json")
    assert out.returncode == 0, out.stderr
    [verdict] = [v for v in json.loads(out.stdout)["verdicts"] if v["kind"] == "lane"]
    return verdict


def test_the_period_the_pass_states_sets_the_bound_and_a_stop_on_purpose_retires_it(tmp_path: Path) -> None:
    every_15 = a_checked_log(tmp_path, checked_h=0.75, period_s=900)  # 45 min: over twice 15 min
    out = run_cli("status", str(every_15), "--at", T.isoformat(), "--json")
    [late] = items(json.loads(out.stdout), "lanes_late")
    assert "it runs every 15 min and is late after 30 min" in late["reason"]

    (tmp_path / "stopped").mkdir()
    stopped = a_checked_log(tmp_path / "stopped", checked_h=30,
                            **{"type": "lane_stopped", "ts": at(29), "product": "sashiko-repair"})
    out = run_cli("status", str(stopped), "--at", T.isoformat())
    assert out.returncode == 0 and "Nothing needs a person." in out.stdout  # every lane stopped: none is due


def test_lanes_fed_with_no_lanes_pass_at_all_are_named_once_that_is_late(tmp_path: Path) -> None:
    """The observers run and the lanes timer was never enabled: no stall would ever be resumed."""
    log = write_log(tmp_path / "ledger.jsonl", [
        {"type": "status_updated", "ts": at(2.5), "product": "sashiko-repair", "state": "running"},
        {"type": "status_updated", "ts": at(0.1), "product": "sashiko-repair", "state": "running"},
    ])
    out = run_cli("status", str(log), "--at", T.isoformat(), "--json")
    [late] = items(json.loads(out.stdout), "lanes_late")
    assert late["since"] == at(2.5) and "no lanes pass in the log" in late["reason"]
    assert run_cli("status", str(log), "--at", at(0.6)).returncode == 0  # 1 h 54 min since the first: not yet
    nothing = write_log(tmp_path / "handoffs.jsonl", [
        {"type": "handoff_created", "ts": at(30), "handoff_id": "h1", "account": "a"},
        {"type": "skip", "ts": at(29), "handoff_id": "h1", "reason": "obsolete"},
    ])
    assert run_cli("status", str(nothing), "--at", T.isoformat()).returncode == 0  # no lanes: nothing is due


def prom_samples(text: str) -> dict[str, float]:
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples
            if s.name.startswith("recovery_lanes_")}


def test_follow_exports_the_age_of_the_last_lanes_pass_and_the_shipped_rules_page_on_it(tmp_path: Path) -> None:
    log = write_log(tmp_path / "ledger.jsonl", [
        {"type": "status_updated", "ts": ago(3), "product": "sashiko-repair", "state": "running"},
        {"type": "lane_check", "ts": ago(3), "exit": "ok", "period_s": 3600},
    ])
    with following(log, tmp_path) as (_dump, prom):
        assert _wait_for(lambda: prom.exists() and "recovery_lanes_late" in prom.read_text(), timeout=30)
        text = prom.read_text()
    got = prom_samples(text)
    assert got["recovery_lanes_late"] == 1 and got["recovery_lanes_last_pass_error"] == 0
    assert got["recovery_lanes_period_seconds"] == 3600
    assert 3 * 3600 - 5 < got["recovery_lanes_last_pass_age_seconds"] < 3 * 3600 + 120
    checked = datetime.fromisoformat(events(log)[-1]["ts"]).timestamp()
    assert abs(got["recovery_lanes_last_pass_timestamp_seconds"] - checked) < 1e-3

    judged = next(s.value for f in text_string_to_metric_families(text) for s in f.samples
                  if s.name == "recovery_judged_timestamp_seconds")
    rules = yaml.safe_load(RULES.read_text())
    fed = held_series(text, judged, {"recovery_lanes_last_pass_timestamp_seconds", "recovery_lanes_period_seconds",
                                     "recovery_lanes_late"}, 30, 60)
    promtool_passes(tmp_path, rules, {"interval": "1m", "input_series": fed, "alert_rule_test": [
        {"eval_time": "2m", "alertname": alert,
         "exp_alerts": [{"exp_labels": {"log": str(log), "severity": severity, "domain": "lanes"}}]}
        for alert, severity in (("RecoveryLanesDead", "critical"), ("RecoveryLanesLate", "warning"))]})

    assert lanes(log, "ok").returncode == 0  # a pass now: neither fires
    with following(log, tmp_path) as (_dump, prom):
        assert _wait_for(lambda: f'recovery_lanes_late{{log="{log}"}} 0\n' in prom.read_text(), timeout=30), \
            prom.read_text()
        assert prom_samples(prom.read_text())["recovery_lanes_last_pass_age_seconds"] < 120


def test_serve_names_the_late_lanes_pass_in_its_status_and_metrics(tmp_path: Path) -> None:
    log = write_log(tmp_path / "ledger.jsonl", [
        {"type": "status_updated", "ts": ago(3), "product": "sashiko-repair", "state": "running"},
        {"type": "lane_check", "ts": ago(3), "exit": "ok", "period_s": 3600},
    ])
    server = start_server(log, tmp_path)
    try:
        client = server.client("viewer")
        [late] = items(client.get("/v1/status").json(), "lanes_late")
        assert "recovery-ledger-lanes.timer" in late["reason"]
        assert f'recovery_lanes_late{{log="{log}"}} 1' in client.get("/metrics").text.splitlines()
    finally:
        assert server.stop() == 0
