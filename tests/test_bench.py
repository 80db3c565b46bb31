"""``tools/bench`` at a tiny size: the generator's logs are valid, and every measurement yields figures.

No timing is asserted anywhere: figures depend on the machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from bench.generate import write_log
from eventlog.cli.common import replay_log

ROOT = Path(__file__).resolve().parent.parent
TINY = [
    "--events", "3000", "--entities", "150", "--repeat", "1", "--follow-events", "600", "--follow-samples", "5",
    "--append-count", "5", "--checked-appends", "2", "--cli-appends", "1", "--serve-decisions", "3",
    "--serve-status", "20",
]
#: One type of each domain that the generator promises to write.
DOMAIN_TYPES = {"verified", "probe_result", "watcher_run", "lane_check", "job_skipped", "worker_ready"}


def bench(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.main", *TINY, "--out", str(out), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )


def rows_of(out: Path, only: str) -> list[dict[str, Any]]:
    done = bench(out, "--json", "--only", only)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["sizes"] == {"events": 3000, "entities": 150}
    rows: list[dict[str, Any]] = report["rows"]
    return rows


def test_generated_log_is_valid_interleaved_and_deterministic(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_log(a, 3000, 150)
    write_log(b, 3000, 150)
    assert a.read_bytes() == b.read_bytes()
    objs = [json.loads(line) for line in a.read_bytes().splitlines()]
    assert [o["seq"] for o in objs] == list(range(1, 3001))
    times = [datetime.fromisoformat(o["ts"]) for o in objs]
    assert all(x < y for x, y in pairwise(times))
    assert DOMAIN_TYPES <= {o["type"] for o in objs}
    state = replay_log(str(a), show_progress=False)
    dump = state.dump(str(a))
    assert dump["events"] == 3000
    assert dump["bad_lines"] == []
    assert dump["rejected"] == []
    assert dump["sessions"]["receipts"]
    assert {r["result"] for r in dump["sessions"]["receipts"]} == {"accepted"}
    # As many writers would write it: most handoffs have other lines between their own.
    spans: dict[str, list[int]] = {}
    for i, o in enumerate(objs):
        if "handoff_id" in o:
            spans.setdefault(o["handoff_id"], []).append(i)
    multi = [s for s in spans.values() if len(s) > 1]
    interleaved = [s for s in multi if s[-1] - s[0] >= len(s)]
    assert multi and len(interleaved) > len(multi) / 2


def test_every_measurement_yields_figures(tmp_path: Path) -> None:
    rows = rows_of(tmp_path, "replay,memory,follow,snapshot,append,serve")
    assert {r["group"] for r in rows} == {"replay", "memory", "follow", "snapshot", "append", "serve"}
    for r in rows:
        assert isinstance(r["value"], (int, float)), r
        assert r["verdict"] in ("PASS", "MISS", "info"), r
    compared = [r for r in rows if r["reference"] is not None]
    assert compared and all(isinstance(r["ratio"], float) for r in compared)


def test_rebuild_against_eventsourcing_yields_figures(tmp_path: Path) -> None:
    pytest.importorskip("eventsourcing")
    rows = rows_of(tmp_path, "rebuild")
    assert len(rows) == 4
    assert all(isinstance(r["value"], float) and r["value"] > 0 for r in rows)


def test_table_and_unknown_measurement(tmp_path: Path) -> None:
    done = bench(tmp_path, "--only", "replay")
    assert done.returncode == 0, done.stderr
    assert "replay_log + dump in-process" in done.stdout
    assert bench(tmp_path, "--only", "nope").returncode == 2


def test_a_log_of_ones_own_is_measured_whatever_its_key_order(tmp_path: Path) -> None:
    src = tmp_path / "gen.jsonl"
    write_log(src, 3000, 150)
    mine = tmp_path / "mine.jsonl"  # keys reversed: "type" last, as another writer might put it
    mine.write_text("".join(json.dumps(dict(reversed(json.loads(x).items()))) + "\n"
                            for x in src.read_text().splitlines()))
    done = bench(tmp_path / "out", "--json", "--only", "replay,snapshot", "--log", str(mine))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["log"] == str(mine)
    replay = [r for r in report["rows"] if r["group"] == "replay"]
    assert replay and all(isinstance(r["value"], float) for r in replay)
    assert not list((tmp_path / "out").glob("log-*.jsonl"))  # nothing was generated for replay
    assert bench(tmp_path / "out", "--log", str(tmp_path / "absent.jsonl")).returncode == 2
