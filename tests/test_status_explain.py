"""``eventlog status`` and ``eventlog explain`` on the shipped fixtures."""

from __future__ import annotations

import json

from tests.conftest import run_cli


def test_status_names_what_needs_a_person_and_exits_1() -> None:
    out = run_cli("status", "fixtures/handoffs_network_cut.jsonl")
    assert out.returncode == 1
    assert "h1: resume requested and silent since" in out.stdout  # stale resume_requested: unknown effect
    machine = json.loads(run_cli("status", "--json", "fixtures/sessions_unknown_turn.jsonl").stdout)
    assert any("recovery required" in line for line in machine["needs_person"])
    assert set(machine["headline"]) >= {"failover", "failback", "return_p50_s", "return_p95_s"}


def test_status_of_a_quiet_log_exits_0() -> None:
    out = run_cli("status", "--json", "fixtures/log_empty.jsonl")
    assert out.returncode == 0
    assert json.loads(out.stdout)["needs_person"] == []


def test_status_of_the_seed_story_shows_0_of_98_back() -> None:
    machine = json.loads(run_cli("status", "--json", "fixtures/handoffs_seed_98.jsonl").stdout)
    assert machine["headline"]["failover"] == "86/98"
    assert machine["headline"]["failback"] == "0/98"


def test_explain_lists_the_lines_and_the_rejection() -> None:
    out = run_cli("explain", "--json", "fixtures/handoffs_two_watchers.jsonl", "h1")
    assert out.returncode == 0
    got = json.loads(out.stdout)
    claims = [x for x in got["lines"] if x["type"] == "claimed"]
    assert len(claims) == 2 and "rejected" not in claims[0] and "live claim" in claims[1]["rejected"]
    assert got["verdict"]["handoff"]["state"] == "returned"
    unknown = run_cli("explain", "fixtures/handoffs_two_watchers.jsonl", "nobody", "--json")
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert unknown.stderr == "eventlog: fixtures/handoffs_two_watchers.jsonl: no line names 'nobody'\n"
