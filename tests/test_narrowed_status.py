"""A narrowed ``status`` (``--domain D``, ``--needs-decision``) never hides lines no domain could read.

Review Z1: on a log written without offsets and read without ``--assume-tz`` (every line ``no_offset``),
``status LOG --domain catchup`` (what ``RecoveryCatchupUnfed`` tells people to paste) and ``--needs-decision``
said "Nothing needs a person." exit 0, ``needs_person: 0`` with ``bad_lines: 8``; so on a missing log. A line
nobody could read belongs to no domain until it is read: every narrowed view names it and exits 1 (``status
--help``: 1 when something needs a person). Run as a user runs them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli, write_log

#: A catch-up story written without offsets: only ``--assume-tz`` reads it.
NAIVE = [
    {"type": "job_registered", "ts": "2026-12-01T08:00:00", "label": "com.x.brief", "guarded": True,
     "calendar": [{"Hour": 9, "Minute": 0}], "interval_s": None},
    {"type": "job_skipped", "ts": "2026-12-02T09:00:05", "label": "com.x.brief", "reason": "quota",
     "remaining_s": 60},
    {"type": "watcher_run", "ts": "2026-12-02T09:01:00", "watcher": "w1", "exit": "ok", "period_s": 600},
]
AT = ["--at", "2026-12-02T10:00:00+09:00"]
NARROWED = [["--domain", "catchup"], ["--domain", "sessions", "--domain", "lanes"], ["--needs-decision"],
            ["--domain", "handoffs", "--needs-decision"]]


@pytest.mark.parametrize("narrowed", NARROWED, ids=" ".join)
def test_bad_lines_are_named_by_every_narrowed_view(tmp_path: Path, narrowed: list[str]) -> None:
    log = write_log(tmp_path / "naive.jsonl", NAIVE)
    screen = run_cli("status", str(log), *AT, *narrowed)
    assert screen.returncode == 1, screen.stdout
    assert "Nothing needs a person." not in screen.stdout
    assert "Bad lines (skipped, counted): 3" in screen.stdout
    assert f"sed -n '1p' {log}" in screen.stdout  # the command that prints it
    out = run_cli("status", str(log), *AT, *narrowed, "--json")
    assert out.returncode == 1
    got = json.loads(out.stdout)
    assert got["needs_person"] == 3 and got["totals"]["log"]["bad_lines"] == 3
    [group] = got["groups"]
    assert group["reason_code"] == "bad_line" and group["domain"] == "log"
    assert [i["reason_code"] for i in group["items"]] == ["bad_line"] * 3
    assert all("no_offset" in i["reason"] and i["next"] for i in group["items"])
    # read as written, the same view has nothing to say of the log, and its domain speaks
    read = run_cli("status", str(log), *AT, *narrowed, "--json", "--assume-tz", "Asia/Tokyo")
    assert all(g["reason_code"] != "bad_line" for g in json.loads(read.stdout)["groups"]), read.stdout


@pytest.mark.parametrize("narrowed", NARROWED, ids=" ".join)
def test_a_missing_log_is_said_by_every_narrowed_view(tmp_path: Path, narrowed: list[str]) -> None:
    screen = run_cli("status", str(tmp_path / "gone.jsonl"), *narrowed)
    assert screen.returncode == 1 and "The log is missing: 1" in screen.stdout, screen.stdout
    assert "Nothing needs a person." not in screen.stdout


def test_what_was_read_stays_in_its_domain(tmp_path: Path) -> None:
    """A rejected event was read (its domain is known): a narrowed view of another domain leaves it out."""
    log = write_log(tmp_path / "r.jsonl", [
        {"type": "claimed", "ts": "2026-12-02T09:00:00+09:00", "handoff_id": "nope", "watcher": "w1", "attempt": 1},
    ])
    whole = json.loads(run_cli("status", str(log), *AT, "--json").stdout)
    assert "rejected" in {g["reason_code"] for g in whole["groups"]}, whole
    calm = run_cli("status", str(log), *AT, "--domain", "lanes")
    assert calm.returncode == 0 and "Nothing needs a person." in calm.stdout, calm.stdout
