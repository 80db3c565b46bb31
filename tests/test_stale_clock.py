"""A clock running behind never makes a fresh claim stale (spec section 2: ``ts`` may run backwards between
writers; section 3: stale is a claim or request "with no further event of that handoff for longer than
``stale_after``").

A user review: ``claimed`` by w1 at 01:00Z, then the failover machine, its clock behind, wrote ``local_started``
dated 00:10Z. Judged at 01:20Z the claim is 20 minutes old, yet every view called it stale "for 4200 s", and
another watcher's failback pass released w1's live claim. The silence is measured from the latest ``ts`` among
the claim and every event of the handoff after it (docs/DECISIONS.md); run as a user runs it: the CLI.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from tests.conftest import run_cli, write_log
from tests.test_follow_tick import metric, read, run_follow, stop_follow

CLAIMED = "2026-08-08T10:00:00+09:00"          # 01:00Z, w1's clock
BEHIND = "2026-08-07T19:10:00-05:00"           # 00:10Z, the failover machine's clock, 50 min behind
REQUESTED = "2026-08-08T01:10:00Z"


def created(ts: str = "2026-08-08T00:00:00Z") -> dict[str, Any]:
    return {"type": "handoff_created", "ts": ts, "handoff_id": "h-x", "account": "cloud-account-a"}


def claimed(ts: str = CLAIMED) -> dict[str, Any]:
    return {"type": "claimed", "ts": ts, "handoff_id": "h-x", "watcher": "w1", "attempt": 1}


def requested(ts: str = REQUESTED) -> dict[str, Any]:
    return {"type": "resume_requested", "ts": ts, "handoff_id": "h-x", "attempt": 1}


def local_started(ts: str = BEHIND) -> dict[str, Any]:
    return {"type": "local_started", "ts": ts, "handoff_id": "h-x"}


def failback(log: Path, *at: str) -> Any:
    return run_cli("failback", str(log), "--watcher", "w2", "--probe-cmd", "echo PING_OK", "--resume-cmd", "true",
                   *at)


def lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def items(status: Any) -> dict[str, dict[str, Any]]:
    return {i["reason_code"]: i for g in json.loads(status.stdout)["groups"] for i in g["items"]}


def stale_of(log: Path, at: str) -> tuple[Any, dict[str, list[str]]]:
    handoffs = json.loads(run_cli("replay", str(log), "--at", at).stdout)["handoffs"]
    return handoffs["items"]["h-x"]["stale"], handoffs["stale_claims"]


def test_a_claim_followed_by_an_event_dated_before_it_is_judged_from_the_claim(tmp_path: Path) -> None:
    log = write_log(tmp_path / "claim.jsonl", [created(), claimed(), local_started()])
    at = "2026-08-08T01:20:00Z"  # 20 min after the claim
    status = run_cli("status", str(log), "--at", at, "--json")
    assert status.returncode == 0, status.stdout
    assert "stale_retryable" not in items(status)
    assert stale_of(log, at) == (None, {"retryable": [], "unknown_effect": []})
    explained = json.loads(run_cli("explain", str(log), "h-x", "--at", at, "--json").stdout)
    assert explained["verdicts"][0]["needs_person"] == []

    # the metrics say the same (follow judged at the same time)
    dump, prom = tmp_path / "d.json", tmp_path / "m.prom"
    proc = run_follow(str(log), dump, prom, "--at", at)
    try:
        deadline = time.monotonic() + 30
        while read(dump) is None or not prom.exists():
            assert time.monotonic() < deadline, "follow wrote nothing"
            time.sleep(0.05)
        assert metric(prom, "recovery_handoff_stale_claims", kind="retryable") == 0
    finally:
        stop_follow(proc)

    # another watcher's pass leaves w1's live claim alone
    before = len(lines(log))
    passed = failback(log, "--at", at)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert [e["type"] for e in lines(log)[before:]] == ["watcher_run"]
    assert "released" not in passed.stdout

    # 30 min and 1 s after the claim it is stale, since the claim, as written, and released for that long
    later = "2026-08-08T01:30:01Z"
    stale = items(run_cli("status", str(log), "--at", later, "--json"))["stale_retryable"]
    assert (stale["since"], stale["for_s"]) == (CLAIMED, 1801)
    assert stale_of(log, later)[0] == "retryable"
    passed = failback(log, "--at", later)
    [released] = [e for e in lines(log) if e["type"] == "released"]
    assert "in 1801s" in released["reason"], released


def test_a_request_followed_by_an_event_dated_before_it_is_not_handed_to_a_person(tmp_path: Path) -> None:
    log = write_log(tmp_path / "request.jsonl", [created(), claimed(), requested(), local_started()])
    at = "2026-08-08T01:15:00Z"  # 5 min after the request
    before = len(lines(log))
    passed = failback(log, "--at", at)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert [e["type"] for e in lines(log)[before:]] == ["watcher_run"]
    assert stale_of(log, at)[0] is None
    assert run_cli("status", str(log), "--at", at).returncode == 0

    later = "2026-08-08T01:40:01Z"  # 30 min 1 s after the request
    stale = items(run_cli("status", str(log), "--at", later, "--json"))["stale_unknown_effect"]
    assert (stale["since"], stale["for_s"]) == (REQUESTED, 1801)
    handed = failback(log, "--at", later)
    assert handed.returncode == 1
    [person] = [e for e in lines(log) if e["type"] == "needs_human"]
    assert "in 1801s" in person["detail"], person


def test_a_claim_starts_the_silence_afresh_even_when_dated_before_what_came_before_it(tmp_path: Path) -> None:
    # the handoff was created by a clock an hour ahead; the claim's own time is where its silence starts
    log = write_log(tmp_path / "ahead.jsonl", [created("2026-08-08T02:00:00Z"), claimed()])
    assert stale_of(log, "2026-08-08T01:30:00Z")[0] is None
    assert stale_of(log, "2026-08-08T01:30:01Z")[0] == "retryable"


def test_judged_now_a_fresh_claim_is_not_stale_and_not_released(tmp_path: Path) -> None:
    now = datetime.now(UTC)

    def ago(minutes: float, offset_h: int) -> str:
        """``minutes`` before now, written with a UTC offset of ``offset_h`` hours (each writer its own)."""
        return (now - timedelta(minutes=minutes)).astimezone(timezone(timedelta(hours=offset_h))).isoformat()

    log = write_log(tmp_path / "now.jsonl", [created(ago(60, 0)), claimed(ago(20, 9)), local_started(ago(70, -5))])
    status = run_cli("status", str(log), "--json")
    assert status.returncode == 0, status.stdout
    assert "stale_retryable" not in items(status)
    before = len(lines(log))
    passed = failback(log)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert [e["type"] for e in lines(log)[before:]] == ["watcher_run"]
