"""Helpers for the ops kit's tests (ops/): a real ``eventlog follow --prom`` file, and what a PromQL text names."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT
from tests.test_follow import _wait_for

OPS = ROOT / "ops"
RULES = OPS / "prometheus" / "recovery-ledger.rules.yml"
RULE_TESTS = OPS / "prometheus" / "tests"
DASHBOARD = OPS / "grafana" / "recovery-ledger.json"

#: A label matcher inside a selector: name, operator, value.
_MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
#: A selector of a recovery metric, with its braces when it has them.
_SELECTOR = re.compile(r"\b(recovery_\w+)(\{[^}]*\})?")


def follow_prom(tmp_path: Path, tick: str = "1s", extra: Sequence[str] = ()) -> str:
    """The Prometheus file a real ``eventlog follow`` writes for every shipped fixture's lines in one log
    (``extra``: more options, as :func:`follow_file`).

    Every family has samples then, and every closed label set is listed in full.
    """
    log = tmp_path / "all.jsonl"
    log.write_bytes(b"".join(p.read_bytes() for p in sorted((ROOT / "fixtures").glob("*.jsonl"))))
    return follow_file(log, tmp_path, tick, extra=extra)


def follow_file(log: Path, tmp_path: Path, tick: str = "1s", env: dict[str, str] | None = None,
                extra: Sequence[str] = ()) -> str:
    """The Prometheus file a real ``eventlog follow LOG --dump D --prom P --snapshot S`` writes first (judged now),
    as the shipped units run it (``env``: variables set on top of ours, as ledger.env's ``TZ``; ``extra``: more
    options, after ours)."""
    dump, prom, snap = tmp_path / "dump.json", tmp_path / "m.prom", tmp_path / "follow.snap"
    for old in (dump, prom, snap):
        old.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "eventlog", "follow", str(log), "--dump", str(dump), "--prom", str(prom),
         "--snapshot", str(snap), "--tick", tick, *extra], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=None if env is None else {**os.environ, **env},
    )
    try:
        assert _wait_for(lambda: prom.exists() and json.loads(dump.read_text())["events"] > 0, timeout=60)
        text = prom.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return text


def held_series(text: str, t0: float, names: set[str], span: int, step: int) -> list[dict[str, str]]:
    """The samples of an exposition named in ``names`` as promtool ``input_series``, held as they are for ``span``
    steps of ``step`` seconds from 0, which stands for ``t0`` (the time judged at).

    Gauges stay; counters (and histograms) rise from 0 to their value at the second sample, as lines written
    after follow started; every ``*_timestamp_seconds`` moves with the clock (relative to ``t0``), so each age
    stays what it was when judged.
    """
    fed = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name not in names:
                continue
            if s.name.endswith("_timestamp_seconds"):
                values = f"{s.value - t0:g}+{step}x{span}"
            elif family.type in ("counter", "histogram"):
                values = f"0 {s.value:g}x{span}"
            else:
                values = f"{s.value:g}x{span}"
            fed.append({"series": s.name + "{" + ",".join(f'{k}="{v}"' for k, v in s.labels.items()) + "}",
                        "values": values})
    return fed


def exposed(text: str) -> dict[str, dict[str, set[str]]]:
    """Every sample name of an exposition, with the values each of its labels takes."""
    out: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = out[sample.name]
            for name, value in sample.labels.items():
                labels[name].add(value)
    return out


def selectors(expr: str) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """The recovery metrics a PromQL expression selects, each with its label matchers."""
    return [(name, _MATCHER.findall(braces or "")) for name, braces in _SELECTOR.findall(expr)]


def unknown_in(expr: str, metrics: dict[str, dict[str, set[str]]]) -> list[str]:
    """What ``expr`` names that the exposition does not have: a metric, a label, or a label value.

    ``=`` and ``!=`` need their value among the metric's; ``=~`` and ``!~`` need a value they match.
    """
    problems = []
    for name, matchers in selectors(expr):
        if name not in metrics:
            problems.append(f"no metric {name}")
            continue
        for label, op, value in matchers:
            values = metrics[name].get(label)
            if values is None:
                problems.append(f"{name} has no label {label}")
            elif op in ("=", "!=") and value not in values:
                problems.append(f'{name}{{{label}{op}"{value}"}}: no such value (has {sorted(values)})')
            elif op in ("=~", "!~") and not any(re.fullmatch(value, v) for v in values):
                problems.append(f'{name}{{{label}{op}"{value}"}}: matches no value (has {sorted(values)})')
    return problems


def series_along(texts: Sequence[str], names: set[str]) -> list[dict[str, str]]:
    """The samples named in ``names`` of expositions follow wrote one after another (one a promtool ``interval``),
    as promtool ``input_series``: each series' value in each file, ``_`` where a file has none of it."""
    seen: dict[str, list[str]] = {}
    for i, text in enumerate(texts):
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name in names:
                    key = s.name + "{" + ",".join(f'{k}="{v}"' for k, v in s.labels.items()) + "}"
                    value = float(s.value)
                    seen.setdefault(key, ["_"] * len(texts))[i] = str(int(value)) if value.is_integer() else repr(value)
    return [{"series": key, "values": " ".join(values)} for key, values in seen.items()]
