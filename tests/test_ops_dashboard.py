"""The shipped Grafana dashboard (ops/grafana/recovery-ledger.json): importable anywhere (no hard-coded UIDs, a
datasource variable), a row per domain, every query valid PromQL over metrics a real follow file has, and the
seed's headline numbers where the dashboard shows them."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT, run_cli
from tests.opskit import DASHBOARD, exposed, follow_prom, selectors, unknown_in
from tests.test_prom import promtool, replayed

#: What Grafana puts in for its variables when it sends a query, for checking the queries outside it.
GRAFANA_VARIABLES = {"$log": ".*", "$__rate_interval": "1m", "$__range": "1h", "$__interval": "15s"}


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def queries() -> list[tuple[str, str]]:
    """Every query of every panel, as (panel title, expression with Grafana's variables put in)."""
    out = []
    for panel in panels():
        for target in panel["targets"]:
            expr = target["expr"]
            for name, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(name, value)
            assert "$" not in expr, (panel["title"], expr)
            out.append((panel["title"], expr))
    return out


def _walk(node: Any, key: str) -> list[Any]:
    """Every value under ``key`` anywhere in a JSON document."""
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == key] + [x for v in node.values() for x in _walk(v, key)]
    if isinstance(node, list):
        return [x for v in node for x in _walk(v, key)]
    return []


def test_the_dashboard_imports_anywhere() -> None:
    """Valid JSON, its own id and uid left to the Grafana it is imported into, every query on the datasource the
    importer picks in the variable."""
    dash = dashboard()
    assert dash["id"] is None and dash["uid"] is None
    (variable,) = [v for v in dash["templating"]["list"] if v["type"] == "datasource"]
    assert variable["query"] == "prometheus"
    selected = "${" + variable["name"] + "}"
    assert all(ds == {"type": "prometheus", "uid": selected} for ds in _walk(dash, "datasource"))
    assert set(_walk(dash, "uid")) == {None, selected}  # no UID of one Grafana's datasource or dashboard
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    taken: set[tuple[int, int]] = set()
    for p in dash["panels"]:  # on the 24-column grid, no two panels on one cell
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        cells = {(g["x"] + dx, g["y"] + dy) for dx in range(g["w"]) for dy in range(g["h"])}
        assert not cells & taken, p["title"]
        taken |= cells


def test_a_row_per_domain_with_what_an_operator_looks_for() -> None:
    rows = [p["title"] for p in dashboard()["panels"] if p["type"] == "row"]
    assert [r.split(":")[0] for r in rows] == ["Ledger", "Handoffs", "Lanes", "Catch-up", "Sessions"]
    by_row: dict[str, list[str]] = {}
    for p in dashboard()["panels"]:
        if p["type"] == "row":
            current = by_row.setdefault(p["title"].split(":")[0], [])
        else:
            current += [t["expr"] for t in p["targets"]]
    handoffs = " ".join(by_row["Handoffs"])
    for metric in ("recovery_handoff_failover_started_total", "recovery_handoff_failback_returned_total",
                   "recovery_watcher_last_run_timestamp_seconds", "recovery_watcher_last_run_error"):
        assert metric in handoffs
    assert re.search(r"histogram_quantile\(0\.95, sum by \(le, pair, log\) \(recovery_handoff_latency_seconds_bucket",
                     handoffs)
    assert "recovery_lane_stalled" in " ".join(by_row["Lanes"])
    assert "recovery_catchup_circuit_open" in " ".join(by_row["Catch-up"])
    assert "recovery_sessions_retry_due" in " ".join(by_row["Sessions"])


def test_every_query_is_valid_promql(tmp_path: Path) -> None:
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": expr} for i, (_title, expr) in enumerate(queries())]}]}
    (tmp_path / "queries.yml").write_text(yaml.safe_dump(rules))
    checked = subprocess.run([promtool(), "check", "rules", "queries.yml"], cwd=tmp_path, capture_output=True,
                             text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_metric_and_label_value_the_dashboard_uses_is_in_a_real_follow_file(tmp_path: Path) -> None:
    """Renaming a metric, a label or a label value breaks this test: a panel would go blank without a sound."""
    metrics = exposed(follow_prom(tmp_path))
    for title, expr in queries():
        assert re.search(r"\brecovery_\w+", expr), title
        assert unknown_in(expr, metrics) == [], title
    templated = [v["definition"] for v in dashboard()["templating"]["list"] if v["type"] == "query"]
    assert templated and all(unknown_in(d, metrics) == [] for d in templated)


@pytest.mark.parametrize("fixture", ["handoffs_seed_98", "handoffs_latency"])
def test_the_failover_vs_failback_panel_shows_the_dumps_ratios(tmp_path: Path, fixture: str) -> None:
    """The panel's own queries, fed the series follow exports for the fixture, through promtool."""
    (panel,) = [p for p in panels() if p["title"] == "Failover vs failback of all handoffs"]
    log = ROOT / "fixtures" / f"{fixture}.jsonl"
    dump, text = replayed(log)
    h = dump["handoffs"]
    expected = {"failover": h["failover"]["started"] / h["total"], "failback": h["failback"]["returned"] / h["total"]}
    if fixture == "handoffs_seed_98":  # seed 000: "起動だけ見れば86/98です。" "...戻るところまで見ると0/98でした。"
        assert expected == {"failover": 86 / 98, "failback": 0 / 98}
    series = [{"series": s.name + "{" + ",".join(f'{k}="{v}"' for k, v in s.labels.items()) + "}",
               "values": f"{s.value:g}x10"}
              for family in text_string_to_metric_families(text) for s in family.samples
              if s.name.startswith("recovery_handoff")]
    checks = [{"expr": t["expr"].replace("$log", ".*"), "eval_time": "5m",
               "exp_samples": [{"labels": f'{{log="{log}"}}', "value": expected[t["legendFormat"].split()[0]]}]}
              for t in panel["targets"]]
    assert len(checks) == 2
    (tmp_path / "t.yml").write_text(json.dumps({"rule_files": [], "evaluation_interval": "1m", "tests": [
        {"interval": "1m", "input_series": series, "promql_expr_test": checks}]}))
    checked = subprocess.run([promtool(), "test", "rules", "t.yml"], cwd=tmp_path, capture_output=True, text=True,
                             timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_metric_an_alert_queries_is_on_a_panel() -> None:
    """An alert that fires sends a person to the dashboard: what it judges by must be on a panel there, else the
    page says all is well beside the alert (the review found 11 alerting states with no panel)."""
    from tests.test_ops_alerts import rules

    alerting = {name for rule in rules() for name, _m in selectors(rule["expr"])}
    shown = {name for _title, expr in queries() for name, _m in selectors(expr)}
    assert sorted(alerting - shown) == []


def _without_log_matchers(expr: str) -> str:
    return " ".join(expr.replace('{log=~".*"}', "").split())


def test_the_retry_due_panel_shows_what_the_alert_and_status_judge_by(tmp_path: Path) -> None:
    """"Retry due, no worker ready since" counted recovery_sessions_retry_due, which keeps a retry a worker claimed
    and is still under way (seed 004: it may retry storage for an hour): the panel said 1 while `status` exited 0
    and RecoverySessionRetryOverdue was silent. Its query is the alert's, and on the series of a real follow file
    it reads 0 while the retry is under way and 1 once the claim is an hour old, as `status` exits 0 then 1."""
    from tests.test_ops_alerts import rules
    from tests.test_retry_under_way import FAILED, story

    (panel,) = [p for p in panels() if p["title"] == "Retry due, no worker ready since"]
    (target,) = panel["targets"]
    (rule,) = [r for r in rules() if r["alert"] == "RecoverySessionRetryOverdue"]
    query = target["expr"].replace("$log", ".*")
    assert _without_log_matchers(query) + " > 0" == " ".join(rule["expr"].split())
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in story(FAILED)))
    for at, overdue in (("2026-12-02T03:22:30+09:00", 0), ("2026-12-02T04:22:04+09:00", 1)):
        status = run_cli("status", str(log), "--at", at)
        assert status.returncode == overdue, status.stdout
        _dump, text = replayed(log, at=at)
        series = [{"series": s.name + "{" + ",".join(f'{k}="{v}"' for k, v in s.labels.items()) + "}",
                   "values": f"{s.value:g}x10"}
                  for family in text_string_to_metric_families(text) for s in family.samples
                  if s.name.startswith("recovery_sessions_retry")]
        assert len(series) == 2  # due and under way: 1 and 1, then 1 and 0
        check = {"expr": query, "eval_time": "5m", "exp_samples": [{"labels": f'{{log="{log}"}}', "value": overdue}]}
        (tmp_path / "t.yml").write_text(json.dumps({"rule_files": [], "evaluation_interval": "1m", "tests": [
            {"interval": "1m", "input_series": series, "promql_expr_test": [check]}]}))
        checked = subprocess.run([promtool(), "test", "rules", "t.yml"], cwd=tmp_path, capture_output=True,
                                 text=True, timeout=60)
        assert checked.returncode == 0, checked.stdout + checked.stderr
