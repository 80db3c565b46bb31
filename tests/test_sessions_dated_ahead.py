"""A session's wait for a worker is not silenced by a line dated ahead of now; ages with --assume-tz are real.

Seed 004: a claimed worker retries storage for up to WORKER_STARTUP_TIMEOUT_SEC, then ends; an accepted decision
is not a restart. The views name a session with no worker at work (``worker_not_ready``, ``decision_unclaimed``,
``worker_gone``) once its wait is past its bound; but a claim, decision or worker end dated ahead of now (a clock
ahead, a typo) kept that wait "not yet" until the clock passed it, and nothing said so. Like every other wait
(docs/DECISIONS.md, "A line dated ahead of now silences the check that waits on it"), it is a ``dated_ahead``
item that names the session, the line (FILE:LINE) and how far ahead, with the command to type next, in status,
explain, sessions, serve and follow --prom. Run as a user runs them: the CLI, a server and a follower in
subprocesses, the alert through promtool.

And ``status --json``'s ``for_s`` of a log written without offsets, read with ``--assume-tz``, is the same real
elapsed time as for the same log written with its offsets.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import yaml

from tests.conftest import run_cli, write_log
from tests.opskit import RULES, held_series, selectors
from tests.serving import start_server
from tests.test_follow import _metric, _wait_for, following
from tests.test_next_runs import typed
from tests.test_prom import promtool_passes, value


def at(hours: float) -> str:
    """A time ``hours`` from now, as a writer writes it (whole seconds, UTC)."""
    return (datetime.now(UTC).replace(microsecond=0) + timedelta(hours=hours)).isoformat()


def claim(ts: str, generation: int = 1, sid: str = "s1") -> dict[str, Any]:
    return {"type": "worker_claimed", "ts": ts, "session_id": sid, "generation": generation, "worker": "wk",
            "restore": False}


def ahead_items(view: dict[str, Any]) -> list[dict[str, Any]]:
    return [it for g in view["groups"] if g["reason_code"] == "dated_ahead" for it in g["items"]]


def status_json(log: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    out = run_cli("status", str(log), "--json", "--all", *extra)
    assert out.stdout, out.stderr
    return out.returncode, json.loads(out.stdout)


def test_a_claim_two_hours_ahead_and_nothing_after_is_named_everywhere(tmp_path: Path) -> None:
    """The brief's log: one worker_claimed dated 2 h ahead of now, nothing after it."""
    ts = at(2)
    log = write_log(tmp_path / "work log.jsonl", [claim(ts)])
    where = f"{log}:1"
    screen = run_cli("status", str(log))
    assert screen.returncode == 1 and "Nothing needs a person." not in screen.stdout
    assert "Lines dated ahead of now: the checks judged from them cannot fire: 1" in screen.stdout
    assert f"the claim (worker_claimed) of session s1 ({where}) is dated {ts}, 1 h 59 min ahead" in screen.stdout \
        or f"the claim (worker_claimed) of session s1 ({where}) is dated {ts}, 2 h ahead" in screen.stdout
    assert "cannot be judged not ready" in screen.stdout

    code, view = status_json(log)
    [item] = ahead_items(view)
    assert code == 1 and item["id"] == "line 1" and item["since"] == ts and item["for_s"] < -7000
    assert item["until"] == (datetime.fromisoformat(ts) + timedelta(hours=1)).isoformat()
    assert item["next"] == f"eventlog explain '{log}' s1"
    assert typed(item["next"], tmp_path).returncode == 0

    # sessions: the session needs a person, says where and how far ahead, and what to type next; exit 1
    text = run_cli("sessions", str(log))
    assert text.returncode == 1, text.stderr
    assert f"  needs a person: the claim (worker_claimed) of session s1 ({where}) is dated {ts}" in text.stdout
    assert f"    next: eventlog explain '{log}' s1" in text.stdout
    js = run_cli("sessions", str(log), "s1", "--json")
    [need] = json.loads(js.stdout)["items"]["s1"]["needs"]
    assert js.returncode == 1 and need["reason_code"] == "dated_ahead" and need["for_s"] < -7000

    # explain: the session's verdict says "but ..." with the line
    shown = run_cli("explain", str(log), "s1")
    assert f"but the claim (worker_claimed) of session s1 (line 1) is dated {ts}" in shown.stdout

    # judged at a time, not now: T is no clock, nothing is ahead of it (and the wait is not late yet)
    assert run_cli("sessions", str(log), "--at", at(0)).returncode == 0
    assert ahead_items(status_json(log, "--at", at(0))[1]) == []


def test_a_decision_and_a_worker_end_dated_ahead_are_named_by_the_check_they_silence(tmp_path: Path) -> None:
    decided = [claim(at(-3)), {"type": "checkpoint_restore_failed", "ts": at(-3), "session_id": "s1",
                               "generation": 1, "reason": "incompatible_checkpoint"},
               {"type": "recovery_decision", "ts": at(3), "session_id": "s1", "decision": "retry_restore",
                "expected_revision": 2, "idempotency_key": "k1", "reason": "runtime fixed"}]
    ended = [claim(at(-3), sid="s2"), {"type": "worker_ready", "ts": at(-3), "session_id": "s2", "generation": 1},
             {"type": "execution_gone", "ts": at(3), "session_id": "s2"}]
    log = write_log(tmp_path / "work.jsonl", decided + ended)
    with following(log, tmp_path) as (dump, prom):
        assert _wait_for(lambda: _metric(prom, "recovery_dated_ahead") is not None and dump.exists())
        text = prom.read_text()
    assert value(text, "recovery_dated_ahead", check="decision_unclaimed") == 1
    assert value(text, "recovery_dated_ahead", check="worker_gone") == 1
    assert value(text, "recovery_dated_ahead", check="worker_not_ready") == 0
    _code, view = status_json(log)
    got = {it["id"]: it["reason"] for it in ahead_items(view)}
    assert set(got) == {"line 3", "line 6"}
    assert f"retry_restore/start_fresh (recovery_decision) of session s1 ({log}:3)" in got["line 3"]
    assert f"the end of the worker of session s2 (worker_stopped or execution_gone) ({log}:6)" in got["line 6"]


def test_a_retrys_claim_dated_ahead_keeps_the_retry_from_being_overdue_and_is_named(tmp_path: Path) -> None:
    """In backoff, a retry claimed is "under way" for 1 h from its claim: a claim dated ahead kept retry_due quiet."""
    events = [claim(at(-3)), {"type": "startup_failed", "ts": at(-3), "session_id": "s1", "generation": 1,
                              "reason": "crashed"}, claim(at(2), generation=2)]
    log = write_log(tmp_path / "work.jsonl", events)
    code, view = status_json(log)
    [item] = ahead_items(view)
    assert code == 1 and item["id"] == "line 3" and f"({log}:3)" in item["reason"]
    assert "session s1" in item["reason"] and "nor the retry it took overdue" in item["reason"]
    # a true ready of that worker ends it
    write_log(log, [*events, {"type": "worker_ready", "ts": at(0), "session_id": "s1", "generation": 2}])
    code, view = status_json(log)
    assert (code, ahead_items(view)) == (0, [])


def test_serve_names_it_on_status_and_metrics(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", [claim(at(-3), sid="s0"), claim(at(2))])
    server = start_server(log, tmp_path)
    try:
        c = server.client("viewer")
        status = c.get("/v1/status").json()
        [item] = ahead_items(status)
        assert item["id"] == "line 2" and f"session s1 ({log}:2)" in item["reason"]
        assert item["next"] == f"eventlog explain {log} s1" and item["for_s"] < -7000
        assert status["totals"]["log"]["dated_ahead"] == 1
        assert value(c.get("/metrics").text, "recovery_dated_ahead", check="worker_not_ready") == 1
        # the session page lists it among the session's needs, as `eventlog sessions` does; the other's not
        assert [n["reason_code"] for n in c.get("/v1/sessions/s1").json()["needs"]] == ["dated_ahead"]
        assert [n["reason_code"] for n in c.get("/v1/sessions/s0").json()["needs"]] == ["worker_not_ready"]
    finally:
        assert server.stop() == 0


def test_the_alert_the_other_dated_ahead_items_use_fires(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", [claim(at(2))])
    with following(log, tmp_path) as (dump, prom):
        assert _wait_for(lambda: _metric(prom, "recovery_dated_ahead") is not None and dump.exists())
        text = prom.read_text()
        judged = json.loads(dump.read_text())
    assert value(text, "recovery_sessions_without_worker", kind="worker_not_ready") == 0  # the silence itself
    rules = yaml.safe_load(RULES.read_text())
    used = {name for g in rules["groups"] for rule in g["rules"] for name, _m in selectors(rule["expr"])}
    t0 = datetime.fromisoformat(judged["as_of"]).timestamp()
    labels = {"log": str(log), "severity": "critical", "check": "worker_not_ready", "domain": "ledger"}
    case = {"interval": "1m", "input_series": held_series(text, t0, used, 60, 60), "alert_rule_test": [
        {"eval_time": "4m", "alertname": "RecoveryDatedAhead", "exp_alerts": []},
        {"eval_time": "7m", "alertname": "RecoveryDatedAhead", "exp_alerts": [{"exp_labels": labels}]},
    ]}
    promtool_passes(tmp_path, rules, case)


# --- for_s of a log written without offsets, read with --assume-tz -------------------------------------------------

TOKYO = ZoneInfo("Asia/Tokyo")


def story(now: datetime) -> list[dict[str, Any]]:
    """Items of several domains, hours before ``now``: a stale claim, handoffs pending with no watcher, sessions
    without a worker, waiting for a decision and in backoff, a lane stalled."""
    def t(hours: float) -> str:
        return (now + timedelta(hours=hours)).astimezone(TOKYO).replace(microsecond=0).isoformat()
    return [
        {"type": "handoff_created", "ts": t(-9), "handoff_id": "h1", "account": "a"},
        {"type": "claimed", "ts": t(-8.5), "handoff_id": "h1", "watcher": "w", "attempt": 1},
        {"type": "handoff_created", "ts": t(-7), "handoff_id": "h2", "account": "a"},
        claim(t(-6), sid="s-stuck"),
        claim(t(-5), sid="s-wait"),
        {"type": "startup_failed", "ts": t(-5), "session_id": "s-wait", "generation": 1, "reason": "incompatible"},
        {"type": "turn_started", "ts": t(-4), "session_id": "s-turn", "turn_id": "u1"},
        {"type": "turn_finished", "ts": t(-3.5), "session_id": "s-turn", "turn_id": "u1",
         "outcome": "outcome_unknown"},
        {"type": "job_finished", "ts": t(-3), "product": "p1"},
        {"type": "status_updated", "ts": t(-3), "product": "p1", "state": "running"},
    ]


def without_offsets(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**e, "ts": re.sub(r"[+-]\d\d:\d\d$", "", e["ts"])} for e in events]


def ages(log: Path, *extra: str) -> dict[tuple[str, str], float | None]:
    _code, view = status_json(log, *extra)
    return {(g["reason_code"], it["id"]): it["for_s"] for g in view["groups"] for it in g["items"]}


def test_for_s_with_assume_tz_is_the_same_real_time_as_with_offsets(tmp_path: Path) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    events = story(now)
    written = write_log(tmp_path / "offsets.jsonl", events)
    bare = write_log(tmp_path / "bare.jsonl", without_offsets(events))
    assert "+09:00" not in bare.read_text()
    for when in (now.astimezone(TOKYO).isoformat(), (now + timedelta(days=1)).isoformat()):  # --at, two offsets
        want = ages(written, "--at", when)
        assert len([s for s in want.values() if s is not None]) >= 6, want
        assert ages(bare, "--assume-tz", "Asia/Tokyo", "--at", when) == want, when
    want = ages(written)  # now: a second or so apart
    got = ages(bare, "--assume-tz", "Asia/Tokyo")
    assert got.keys() == want.keys()
    for key, seconds in want.items():
        assert (seconds is None) == (got[key] is None), key
        if seconds is not None:
            assert abs(got[key] - seconds) < 60 and seconds > 3 * 3600 - 60, key  # type: ignore[operator]
