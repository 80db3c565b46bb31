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
from tests.test_dated_ahead import STORIES, at
from tests.test_sessions_dated_ahead import ahead_items
from tests.test_sessions_dated_ahead import status_json as narrowed

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


# -- lines dated ahead go with the check they silence (review R7) ------------------------------------------------

#: The domain of the id each check of ``tests.test_dated_ahead.STORIES`` judges (``docs/OUTPUTS.md``: its ``next``
#: is the ``explain`` of that watcher, handoff, account, lane, session or job).
CHECK_DOMAIN = {
    "watcher_late": "watchers", "claim_stale": "handoffs", "pending_age": "handoffs", "probe_backoff": "handoffs",
    "limited_at": "handoffs", "job_unpicked": "lanes", "status_quiet": "lanes", "job_picked": "lanes",
    "retry_due": "sessions", "worker_not_ready": "sessions", "decision_unclaimed": "sessions",
    "worker_gone": "sessions", "catchup_skip": "catchup", "rerun_no_end": "catchup",
}


@pytest.mark.parametrize("check", sorted(CHECK_DOMAIN))
def test_a_line_dated_ahead_is_in_the_view_of_the_domain_whose_check_it_silences(tmp_path: Path,
                                                                                check: str) -> None:
    events, ident = STORIES[check]
    log = write_log(tmp_path / "work.jsonl", events)
    domain = CHECK_DOMAIN[check]
    code, view = narrowed(log, "--domain", domain)
    assert code == 1, view
    [item] = ahead_items(view)
    assert item["id"] == f"line {len(events)}" and ident in item["reason"] and item["domain"] == "log"
    assert item["silences"] == {"check": check, "domain": domain, "id": ident, "decision": check == "rerun_no_end"}
    assert [g["count"] for g in view["groups"] if g["reason_code"] == "dated_ahead"] == [1]
    # the log's view keeps every one; another domain's leaves it out
    assert len(ahead_items(narrowed(log, "--domain", "log")[1])) == 1
    other = "sessions" if domain != "sessions" else "lanes"
    assert ahead_items(narrowed(log, "--domain", other)[1]) == []


def test_the_reviewers_claim_20_min_ahead_is_named_by_the_sessions_view(tmp_path: Path) -> None:
    """R7: ``status --domain sessions`` (the alerts' command) said all clear, exit 0, while ``sessions`` exited 1."""
    log = tmp_path / "L"
    claim = {"type": "worker_claimed", "session_id": "s4", "generation": 1, "worker": "w4", "restore": False,
             "ts": at(1 / 3)}
    assert run_cli("append", str(log), stdin=json.dumps(claim) + "\n").returncode == 0
    assert run_cli("sessions", str(log)).returncode == 1
    screen = run_cli("status", str(log), "--domain", "sessions")
    assert screen.returncode == 1, screen.stdout
    assert "Nothing needs a person." not in screen.stdout
    assert "Lines dated ahead of now: the checks judged from them cannot fire: 1" in screen.stdout
    assert "the claim (worker_claimed) of session s4 (L:1)" in screen.stdout.replace(str(log), "L")
    # it is no decision: the view of what a person decides leaves it out
    calm = run_cli("status", str(log), "--needs-decision")
    assert calm.returncode == 0 and "Nothing needs a person." in calm.stdout, calm.stdout


def test_the_reviewers_lane_status_30_min_ahead_is_named_by_the_lanes_view(tmp_path: Path) -> None:
    """R7: a lane's status dated 30 min ahead, then a lanes pass: ``status --domain lanes`` said all clear."""
    log = write_log(tmp_path / "L", [
        {"type": "status_updated", "ts": at(0.5), "product": "p1", "state": "running"},
        {"type": "lane_check", "ts": at(0)},
    ])
    assert run_cli("stalls", str(log)).returncode == 1
    screen = run_cli("status", str(log), "--domain", "lanes")
    assert screen.returncode == 1, screen.stdout
    assert "Nothing needs a person." not in screen.stdout
    assert "the last status of lane p1" in screen.stdout


def test_a_line_dated_ahead_that_holds_back_a_decision_is_in_the_view_of_decisions(tmp_path: Path) -> None:
    """A re-run's missing end and a requested resume going stale are decisions: what silences them is shown."""
    kicked = write_log(tmp_path / "kicked.jsonl", STORIES["rerun_no_end"][0])
    code, view = narrowed(kicked, "--needs-decision")
    assert code == 1 and [i["silences"]["check"] for i in ahead_items(view)] == ["rerun_no_end"], view
    created, claimed = STORIES["claim_stale"][0]
    requested = {"type": "resume_requested", "ts": at(24), "handoff_id": "h1", "attempt": 1}
    resumed = write_log(tmp_path / "resumed.jsonl", [created, {**claimed, "ts": at(-1)}, requested])
    code, view = narrowed(resumed, "--needs-decision", "--domain", "handoffs")
    assert code == 1 and [i["silences"] for i in ahead_items(view)] == [
        {"check": "claim_stale", "domain": "handoffs", "id": "h1", "decision": True}], view
    # claimed, no resume requested: released by a watcher, no decision
    code, view = narrowed(write_log(tmp_path / "claimed.jsonl", STORIES["claim_stale"][0]), "--needs-decision")
    assert code == 0 and ahead_items(view) == [], view
