"""``status`` counts the skipped handoffs by their reason (seed 000: skipした件数と理由), in text and ``--json``.

The dump has always had ``skip_reasons``; the screen said only "skipped 3". Reasons are a person's free text, so
no metric label holds them (docs/METRICS.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import ROOT, run_cli, write_log
from tests.test_prom import families, replayed

LONG = "the customer moved the work to another team and asked us to drop it " * 2


def skipped(log: Path, reasons: list[str]) -> Path:
    events = []
    for i, reason in enumerate(reasons, 1):
        events += [{"type": "handoff_created", "ts": f"2026-08-03T09:00:{i:02d}+09:00", "handoff_id": f"h{i}",
                    "account": "cloud-account-a"},
                   {"type": "skip", "ts": f"2026-08-03T10:00:{i:02d}+09:00", "handoff_id": f"h{i}", "reason": reason}]
    return write_log(log, events)


def test_the_seeds_98_by_reason() -> None:
    log = ROOT / "fixtures" / "handoffs_seed_98.jsonl"
    out = run_cli("status", str(log), "--at", "log", "--json")
    totals = json.loads(out.stdout)["totals"]["handoffs"]
    assert totals["skipped"] == 98
    assert totals["skip_reasons"] == {"expired": 69, "pre_mechanism_backlog": 29}
    assert list(totals["skip_reasons"]) == ["expired", "pre_mechanism_backlog"]  # most first
    text = run_cli("status", str(log), "--at", "log").stdout
    assert "skipped 98 (expired 69, pre_mechanism_backlog 29), stale 0" in text


def test_many_reasons_the_screen_shows_the_first_few_and_json_every_one(tmp_path: Path) -> None:
    reasons = ["obsolete"] * 3 + ["duplicate"] * 2 + [LONG] + [f"reason {i}" for i in range(1, 6)]
    log = skipped(tmp_path / "work.jsonl", reasons)
    out = run_cli("status", str(log), "--at", "log", "--json")
    counts = json.loads(out.stdout)["totals"]["handoffs"]["skip_reasons"]
    assert counts == {"obsolete": 3, "duplicate": 2, LONG: 1, **{f"reason {i}": 1 for i in range(1, 6)}}
    assert list(counts)[:2] == ["obsolete", "duplicate"]
    [line] = [x for x in run_cli("status", str(log), "--at", "log").stdout.splitlines() if x.startswith("Handoffs:")]
    assert "skipped 11 (obsolete 3, duplicate 2, reason 1 1, reason 2 1, reason 3 1, 3 more reasons: --json)" in line
    # never a metric label: a free-text reason would make a series per reason
    _dump, prom = replayed(log)
    assert not [s for f in families(prom).values() for s in f.samples if "obsolete" in s.labels.values()]


def test_a_long_reason_is_cut_on_the_screen_only(tmp_path: Path) -> None:
    log = skipped(tmp_path / "work.jsonl", [LONG])
    [line] = [x for x in run_cli("status", str(log), "--at", "log").stdout.splitlines() if x.startswith("Handoffs:")]
    assert f"skipped 1 ({LONG[:57]}... 1)" in line
    assert json.loads(run_cli("status", str(log), "--at", "log", "--json").stdout)[
        "totals"]["handoffs"]["skip_reasons"] == {LONG: 1}
