"""The Prometheus exposition: by the conventions (prometheus_client's parser and promtool), stable label sets,
the dump's values, timestamps an alert can use when nothing else runs, and the documented alerts."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from eventlog.cli.common import replay_log
from eventlog.clock import LAST_LINE, NOW, parse_at
from eventlog.prom import LATENCY_BUCKETS_S, exposition, of_replay
from tests.conftest import ROOT, system_tool
from tests.test_follow import _wait_for

FIX = ROOT / "fixtures"
FIXTURES = sorted(p for p in FIX.glob("*.jsonl"))


def promtool() -> str:
    """promtool's path (Debian's prometheus ships it); a loud skip outside CI, a failure in CI."""
    return system_tool("promtool", "prometheus")


def promtool_passes(workdir: Path, rules: dict[str, Any], case: dict[str, Any]) -> None:
    """``promtool test rules`` of one test CASE against RULES (their annotations dropped) passes, in WORKDIR."""
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (workdir / "rules.yml").write_text(yaml.safe_dump(rules))
    (workdir / "t.yml").write_text(json.dumps({"rule_files": ["rules.yml"], "evaluation_interval": "1m",
                                               "tests": [case]}))
    checked = subprocess.run([promtool(), "test", "rules", "t.yml"], cwd=workdir, capture_output=True, text=True,
                             timeout=120)
    assert checked.returncode == 0, (checked.stdout + checked.stderr)[-4000:]


def replayed(log: Path, at: str | None = None, tick_s: float | None = 5, live: bool = False
             ) -> tuple[dict[str, Any], str]:
    """The dump of LOG as of AT (default its last line; ``live``: now) and its exposition, as follow writes them
    (with a --snapshot it saves, as the shipped units run it)."""
    replay = replay_log(str(log), show_progress=False)
    when = NOW if live else parse_at(at, default=LAST_LINE)
    dump = replay.dump(str(log), *when.resolve(replay.last_at, replay.last_ts))
    return dump, of_replay(replay, dump, tick_s, live=live, snapshot_unsaved=False)


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(text: str, sample: str, **labels: str) -> float:
    """The value of the one sample named ``sample`` whose labels include ``labels``."""
    found = [s.value for f in text_string_to_metric_families(text) for s in f.samples
             if s.name == sample and labels.items() <= s.labels.items()]
    assert len(found) == 1, (sample, labels, found)
    return found[0]


def series(text: str) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return {(s.name, tuple(sorted(s.labels.items()))) for f in text_string_to_metric_families(text) for s in f.samples}


# --- conventions --------------------------------------------------------------------------------------


@pytest.mark.parametrize("log", FIXTURES, ids=lambda p: p.stem)
def test_every_fixture_follows_the_conventions_and_says_what_the_dump_says(log: Path) -> None:
    dump, text = replayed(log)
    fams = families(text)
    names = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    assert len(names) == len(set(names))
    for f in fams.values():
        assert f.name.startswith("recovery_") and f.documentation
        labelsets = {frozenset(k for k in s.labels if k != "le") for s in f.samples}
        assert len(labelsets) <= 1, (f.name, labelsets)  # one label set per family
        if f.type == "counter":
            assert all(s.name == f.name + "_total" for s in f.samples), f.name
            assert f.name not in {g.name for g in fams.values() if g.type != "counter"}  # never X and X_total
        if f.type == "gauge":
            assert not f.name.endswith("_total"), f.name
    assert fams["recovery_events"].type == "counter"
    assert value(text, "recovery_events_total") == dump["events"]
    assert value(text, "recovery_bad_lines_total") == len(dump["bad_lines"])
    assert value(text, "recovery_rejected_events_total") == len(dump["rejected"])
    h = dump["handoffs"]
    by_state = {s.labels["state"]: s.value for s in fams["recovery_handoffs"].samples}
    assert by_state == {**dict.fromkeys(by_state, 0), **h["by_state"]}
    assert len(by_state) == 6
    assert value(text, "recovery_handoffs_created_total") == h["total"]
    assert value(text, "recovery_handoff_failback_returned_total") == h["failback"]["returned"]
    for kind, ids in h["stale_claims"].items():
        assert value(text, "recovery_handoff_stale_claims", kind=kind) == len(ids)
    for pair, summary in h["latency_s"].items():
        assert fams["recovery_handoff_latency_seconds"].type == "histogram"
        assert value(text, "recovery_handoff_latency_seconds_count", pair=pair) == summary["n"]
        assert value(text, "recovery_handoff_latency_seconds_bucket", pair=pair, le="+Inf") == summary["n"]
    assert value(text, "recovery_watcher_late") == int(h["watcher"]["late"])
    for name, beat in h["watchers"].items():
        assert value(text, "recovery_watcher_heartbeat_late", watcher=name) == int(beat["late"])
        assert value(text, "recovery_watcher_last_run_error", watcher=name) == int(beat["exit"] == "error")
        assert value(text, "recovery_watcher_period_seconds", watcher=name) == beat["period_s"]
        assert value(text, "recovery_watcher_last_run_timestamp_seconds", watcher=name) == \
            datetime.fromisoformat(beat["last_run"]).timestamp()
    stalled = {(r["product"], r["kind"]) for r in dump["lanes"]["now"]["results"] if r["stalled"]}
    lanes = {(s.labels["product"], s.labels["kind"]): s.value for s in fams["recovery_lane_stalled"].samples}
    assert len(lanes) == 2 * len(dump["lanes"]["now"]["results"])
    assert {k for k, v in lanes.items() if v == 1} == stalled
    assert value(text, "recovery_catchup_candidates") == len(dump["catchup"]["candidates"])
    assert value(text, "recovery_catchup_circuit_open") == int(dump["catchup"]["circuit"] == "open")
    assert value(text, "recovery_sessions_retry_due") == len(dump["sessions"]["retry_due"])
    sessions = fams["recovery_sessions"].samples
    assert len(sessions) == 25 and sum(s.value for s in sessions) == len(dump["sessions"]["items"])
    if dump["as_of"] is not None:
        assert value(text, "recovery_judged_timestamp_seconds") == datetime.fromisoformat(dump["as_of"]).timestamp()
        assert value(text, "recovery_last_event_timestamp_seconds") == \
            datetime.fromisoformat(dump["as_of"]).timestamp()  # judged at the last line here
    assert value(text, "recovery_follow_tick_seconds") == 5


def test_the_histogram_buckets_count_the_samples_by_hand() -> None:
    # handoffs_latency, created -> verified by hand: h1 3730 s, h2 6930 s, h3 13265 s, h4 18602 s, h5 19233.5 s
    dump, text = replayed(FIX / "handoffs_latency.jsonl")
    assert dump["handoffs"]["latency_s"]["created_to_returned"]["n"] == 5
    bucket = {s.labels["le"]: s.value for s in families(text)["recovery_handoff_latency_seconds"].samples
              if s.name.endswith("_bucket") and s.labels["pair"] == "created_to_returned"}
    assert list(bucket) == [*(f"{b:g}" for b in LATENCY_BUCKETS_S), "+Inf"]
    assert (bucket["3600"], bucket["7200"], bucket["14400"], bucket["28800"], bucket["+Inf"]) == (0, 2, 3, 5, 5)
    assert value(text, "recovery_handoff_latency_seconds_sum", pair="created_to_returned") == 61760.5


def test_label_sets_stay_the_same_as_verdicts_change() -> None:
    # lanes and watchers flip between these two times; no series may come or go
    for log, early, late in [
        ("lanes_stalled_unchecked", "2026-08-05T13:00:00+09:00", "2026-08-06T13:00:00+09:00"),
        ("handoffs_watcher_error", "2026-08-03T08:15:06+09:00", "2026-08-03T12:00:00+09:00"),
        ("sessions_retry_due", "2026-08-03T09:00:30+09:00", "2026-08-03T09:01:00+09:00"),
        ("handoffs_network_cut", None, "2026-08-10T00:00:00+09:00"),
    ]:
        a_dump, a = replayed(FIX / f"{log}.jsonl", early)
        b_dump, b = replayed(FIX / f"{log}.jsonl", late)
        assert a_dump != b_dump, log  # some verdict did change
        assert series(a) == series(b), log


def test_labels_are_escaped() -> None:
    dump = json.loads((FIX / "log_empty.expected.json").read_text())
    dump["log"] = 'we"ird\\path\nname'
    fams = list(text_string_to_metric_families(exposition(dump)))
    assert fams[0].samples[0].labels["log"] == 'we"ird\\path\nname'


# --- promtool --------------------------------------------------------------------------------------------


def test_promtool_checks_a_real_follow_prom_file(tmp_path: Path) -> None:
    tool = promtool()
    log = tmp_path / "all.jsonl"  # every fixture's lines in one log: every family has samples
    log.write_bytes(b"".join(p.read_bytes() for p in FIXTURES))
    dump, prom = tmp_path / "dump.json", tmp_path / "m.prom"
    proc = subprocess.Popen(
        [sys.executable, "-m", "eventlog", "follow", str(log), "--dump", str(dump), "--prom", str(prom),
         "--tick", "1s"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert _wait_for(lambda: prom.exists() and json.loads(dump.read_text())["events"] > 0)
        text = prom.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    checked = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0 and checked.stdout + checked.stderr == "", checked.stdout + checked.stderr
    assert value(text, "recovery_follow_tick_seconds") == 1
    assert value(text, "recovery_handoff_latency_seconds_count", pair="created_to_returned") > 0
    assert any(s.labels.get("watcher") for s in families(text)["recovery_watcher_period_seconds"].samples)


def test_promtool_flags_what_breaks_the_conventions() -> None:
    """The check above can fail: promtool does flag a gauge named *_total and a counter without it."""
    tool = promtool()
    bad = "# HELP a_total x\n# TYPE a_total gauge\na_total 1\n# HELP b x\n# TYPE b counter\nb 1\n"
    checked = subprocess.run([tool, "check", "metrics"], input=bad, capture_output=True, text=True, timeout=60)
    assert checked.returncode != 0 and "_total" in checked.stdout + checked.stderr


def _alerts() -> dict[str, str]:
    """The example alerts of docs/METRICS.md: ``| `Name` | `expr` |`` rows of its alerts table."""
    text = (ROOT / "docs" / "METRICS.md").read_text()
    section = text.split("## Alerts", 1)[1]
    return dict(re.findall(r"^\| `(\w+)` \| `([^`]+)` \|", section, flags=re.MULTILINE))


def test_every_documented_alert_is_valid_promql(tmp_path: Path) -> None:
    tool = promtool()
    alerts = _alerts()
    assert {"RecoveryFollowDead", "RecoveryWatcherDead", "RecoveryWatcherLate", "RecoveryLogMissing"} <= set(alerts)
    rules = tmp_path / "rules.yml"
    rules.write_text("groups:\n  - name: recovery\n    rules:\n" + "".join(
        f"      - alert: {name}\n        expr: {json.dumps(expr)}\n" for name, expr in alerts.items()))
    checked = subprocess.run([tool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_dead_follow_and_dead_watcher_alerts_fire_on_the_timestamps_alone(tmp_path: Path) -> None:
    """promtool test rules: only the exported timestamps, tick and period; nothing else runs."""
    tool = promtool()
    alerts = _alerts()
    _dump, text = replayed(FIX / "handoffs_watcher_error.jsonl", tick_s=5)
    log = 'log="' + str(FIX / "handoffs_watcher_error.jsonl") + '"'
    b = 'watcher="watcher-b"'
    period = value(text, "recovery_watcher_period_seconds", watcher="watcher-b")
    assert period == 300
    rules, tests = tmp_path / "rules.yml", tmp_path / "tests.yml"
    rules.write_text("groups:\n  - name: recovery\n    rules:\n" + "".join(
        f"      - alert: {name}\n        expr: {json.dumps(alerts[name])}\n"
        for name in ("RecoveryFollowDead", "RecoveryWatcherDead")))
    # follow judged every 5 s (the series holds the judged time, scraped every 5 s) until 60 s, then died;
    # watcher-b ran at 0 s and every 300 s until 600 s, then stopped.
    judged = " ".join(str(t) for t in range(0, 65, 5)) + " 60x36"
    ran = " ".join(["0"] * 60 + ["300"] * 60 + ["600"] * 200)
    tests.write_text(f"""rule_files: [{rules.name}]
evaluation_interval: 5s
tests:
  - interval: 5s
    input_series:
      - series: 'recovery_judged_timestamp_seconds{{{log}}}'
        values: '{judged}'
      - series: 'recovery_follow_tick_seconds{{{log}}}'
        values: '5x100'
      - series: 'recovery_watcher_last_run_timestamp_seconds{{{log},{b}}}'
        values: '{ran}'
      - series: 'recovery_watcher_period_seconds{{{log},{b}}}'
        values: '300x400'
    alert_rule_test:
      - {{eval_time: 60s, alertname: RecoveryFollowDead, exp_alerts: []}}
      - eval_time: 120s
        alertname: RecoveryFollowDead
        exp_alerts: [{{exp_labels: {{{log.replace('=', ': ')}}}}}]
      - {{eval_time: 1200s, alertname: RecoveryWatcherDead, exp_alerts: []}}
      - eval_time: 1205s
        alertname: RecoveryWatcherDead
        exp_alerts: [{{exp_labels: {{{log.replace('=', ': ')}, {b.replace('=', ': ')}}}}}]
""")
    checked = subprocess.run([tool, "test", "rules", tests.name], cwd=tmp_path, capture_output=True, text=True,
                             timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_metrics_doc_lists_every_family() -> None:
    doc = (ROOT / "docs" / "METRICS.md").read_text()
    _dump, text = replayed(FIX / "handoffs_latency.jsonl", live=True)  # as follow writes it: judged now
    written = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    documented = set(re.findall(r"^\| `(recovery_\w+)` \|", doc, flags=re.MULTILINE))
    assert written == documented

