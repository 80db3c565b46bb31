"""A line dated ahead of now must not silence the live views (status, explain, follow --prom, serve).

Spec section 2 lets ``ts`` run backwards between writers, so such a line is accepted; but a verdict that waits
for time to pass since it (a watcher late, a claim stale, a lane stalled) says nothing until the clock passes
it. OUTPUTS.md, "Judging now": what the seeds are about is silence. So every live view names such a time as an
item that needs a person (``dated_ahead``): which line, of which id, how far ahead, what it silences, and a
command that works when pasted. Run as a user runs them: the CLI and a server in subprocesses, the Prometheus
file through promtool.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import run_cli, write_log
from tests.opskit import RULES, held_series, selectors
from tests.serving import start_server
from tests.test_follow import _metric, _wait_for, following
from tests.test_next_runs import typed
from tests.test_prom import promtool, promtool_passes, replayed, value
from tests.test_serve import read_events

#: The reviewer's typo: 2062 for 2026.
TYPO = "2062-12-01T08:00:00+00:00"


def at(hours: float) -> str:
    """A time ``hours`` from now (ahead when positive), as a writer writes it. The stories below are written when
    the tests are collected: an hour or a day ahead stays ahead however long the suite runs."""
    return (datetime.now(UTC).replace(microsecond=0) + timedelta(hours=hours)).isoformat()


def heartbeat(ts: str, watcher: str = "w1") -> dict[str, Any]:
    return {"type": "watcher_run", "ts": ts, "watcher": watcher, "exit": "ok", "period_s": 900}


CREATED = {"type": "handoff_created", "ts": at(-2), "handoff_id": "h1", "account": "acct-a"}

#: For each check a time ahead silences: a log whose last line is dated a day (or the typo) ahead, and its id.
STORIES: dict[str, tuple[list[dict[str, Any]], str]] = {
    "watcher_late": ([CREATED, heartbeat(at(-1)), heartbeat(TYPO)], "w1"),
    "claim_stale": ([CREATED, {"type": "claimed", "ts": at(24), "handoff_id": "h1", "watcher": "w1",
                               "attempt": 1}], "h1"),
    "pending_age": ([{**CREATED, "ts": at(3)}], "h1"),
    "probe_backoff": ([CREATED, {"type": "probe_result", "ts": at(24), "account": "acct-a",
                                 "outcome": "transient"}], "acct-a"),
    "job_unpicked": ([{"type": "job_finished", "ts": at(24), "product": "p1"}], "p1"),
    "status_quiet": ([{"type": "status_updated", "ts": at(24), "product": "p1", "state": "running"}], "p1"),
    "job_picked": ([{"type": "job_finished", "ts": at(-3), "product": "p1"},
                    {"type": "repo_commit", "ts": at(24), "product": "p1", "head": "abc123"}], "p1"),
    "retry_due": ([{"type": "worker_claimed", "ts": at(-1), "session_id": "s1", "generation": 1, "worker": "wk",
                    "restore": False},
                   {"type": "startup_failed", "ts": at(24), "session_id": "s1", "generation": 1,
                    "reason": "crashed"}], "s1"),
    "catchup_skip": ([{"type": "job_registered", "ts": at(-1), "label": "j1", "guarded": True,
                       "calendar": [{"Hour": 0, "Minute": 0}], "interval_s": None},
                      {"type": "job_skipped", "ts": at(24), "label": "j1", "reason": "quota",
                       "remaining_s": 100}], "j1"),
    "rerun_no_end": ([{"type": "catchup_kicked", "ts": at(24), "label": "j1"}], "j1"),
    "limited_at": ([CREATED, {"type": "limit_recorded", "ts": TYPO, "account": "acct-a", "limited_at": TYPO,
                              "reset_at": None, "source": "parsed-limit-message", "confidence": "unknown"}],
                   "acct-a"),
    # the sessions' waits for a worker (tests/test_sessions_dated_ahead.py has the rest)
    "worker_not_ready": ([{"type": "worker_claimed", "ts": at(2), "session_id": "s1", "generation": 1,
                           "worker": "wk", "restore": False}], "s1"),
    "decision_unclaimed": ([{"type": "worker_claimed", "ts": at(-3), "session_id": "s1", "generation": 1,
                             "worker": "wk", "restore": True},
                            {"type": "checkpoint_restore_failed", "ts": at(-3), "session_id": "s1", "generation": 1,
                             "reason": "incompatible_checkpoint"},
                            {"type": "recovery_decision", "ts": at(24), "session_id": "s1", "decision": "start_fresh",
                             "expected_revision": 2, "idempotency_key": "k1", "reason": "runtime fixed"}], "s1"),
    "worker_gone": ([{"type": "worker_claimed", "ts": at(-3), "session_id": "s1", "generation": 1, "worker": "wk",
                      "restore": False},
                     {"type": "worker_ready", "ts": at(-3), "session_id": "s1", "generation": 1},
                     {"type": "worker_stopped", "ts": at(24), "session_id": "s1", "generation": 1,
                      "stop_kind": "drain"}], "s1"),
}


def status_json(log: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    out = run_cli("status", str(log), "--json", "--all", *extra)
    assert out.stdout, out.stderr
    return out, json.loads(out.stdout)


def ahead_items(view: dict[str, Any]) -> list[dict[str, Any]]:
    return [it for g in view["groups"] if g["reason_code"] == "dated_ahead" for it in g["items"]]


@pytest.mark.parametrize("check", list(STORIES))
def test_status_names_each_time_ahead_a_check_waits_on(tmp_path: Path, check: str) -> None:
    events, ident = STORIES[check]
    log = write_log(tmp_path / "work log.jsonl", events)
    out, view = status_json(log)
    assert out.returncode == 1, out.stderr  # something needs a person
    [item] = ahead_items(view)
    line = len(events)  # the last line is the one dated ahead
    ts = events[-1]["ts"]
    assert item["id"] == f"line {line}" and item["domain"] == "log" and item["needs_decision"] is False
    assert ident in item["reason"] and ts in item["reason"] and "ahead of now" in item["reason"]
    assert f"({log}:{line}) is dated {ts}" in item["reason"]  # the line, where a person finds it
    assert item["since"] == ts and item["for_s"] < -3600  # how far ahead: more than an hour
    assert item["next"] == f"eventlog explain {shlex.quote(str(log))} {ident}"
    assert view["totals"]["log"]["dated_ahead"] == 1
    # the command works when pasted: it shows the line and says why a person is needed
    shown = typed(item["next"], tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"{log}:{line}: " in shown.stdout and "dated_ahead" in shown.stdout
    assert f"(line {line}) is dated {ts}" in shown.stdout


def test_the_reviewers_heartbeat_of_2062_is_no_all_clear(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", STORIES["watcher_late"][0])
    screen = run_cli("status", str(log))
    assert screen.returncode == 1 and "Nothing needs a person." not in screen.stdout
    assert "Lines dated ahead of now: the checks judged from them cannot fire: 1" in screen.stdout
    assert "line 3 (in 13" in screen.stdout and "watcher w1" in screen.stdout
    assert "it cannot be judged late before 2062-12-01T08:30:00+00:00" in screen.stdout
    assert "1 line dated ahead of now" in screen.stdout  # the log's totals say it too


def test_a_clock_a_few_minutes_ahead_is_within_the_tolerance(tmp_path: Path) -> None:
    near = write_log(tmp_path / "near.jsonl", [heartbeat(at(2 / 60))])
    out, view = status_json(near)
    assert out.returncode == 0 and ahead_items(view) == [] and view["totals"]["log"]["dated_ahead"] == 0
    far = write_log(tmp_path / "far.jsonl", [heartbeat(at(10 / 60))])
    out, view = status_json(far)
    assert out.returncode == 1 and len(ahead_items(view)) == 1


def test_a_later_true_heartbeat_ends_it(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", [*STORIES["watcher_late"][0], heartbeat(at(0))])
    out, view = status_json(log)
    assert out.returncode == 0 and ahead_items(view) == []


def test_judged_at_a_time_or_the_last_line_nothing_is_ahead_of_a_clock(tmp_path: Path) -> None:
    """With --at, T is no clock: a line later than T is no writer's clock ahead (docs/DECISIONS.md)."""
    log = write_log(tmp_path / "work.jsonl", STORIES["watcher_late"][0])
    for when in ("log", at(0)):
        _out, view = status_json(log, "--at", when)
        assert ahead_items(view) == [] and view["totals"]["log"]["dated_ahead"] is None, when


def test_follow_prom_counts_it_and_its_alert_fires_where_the_watcher_dead_one_cannot(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", STORIES["watcher_late"][0])
    with following(log, tmp_path) as (dump, prom):
        assert _wait_for(lambda: _metric(prom, "recovery_dated_ahead") is not None and dump.exists())
        text = prom.read_text()
        judged = json.loads(dump.read_text())
    assert f'recovery_dated_ahead{{log="{log}",check="watcher_late"}} 1' in text
    assert f'recovery_dated_ahead{{log="{log}",check="claim_stale"}} 0' in text
    assert f'recovery_watcher_heartbeat_late{{log="{log}",watcher="w1"}} 0' in text  # the silence itself
    lint = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    # the file's series, held as follow keeps writing them, through the shipped rules
    rules = yaml.safe_load(RULES.read_text())
    used = {name for g in rules["groups"] for rule in g["rules"] for name, _m in selectors(rule["expr"])}
    t0 = datetime.fromisoformat(judged["as_of"]).timestamp()
    labels = {"log": str(log), "severity": "critical"}
    case = {"interval": "1m", "input_series": held_series(text, t0, used, 60, 60), "alert_rule_test": [
        {"eval_time": "4m", "alertname": "RecoveryDatedAhead", "exp_alerts": []},
        {"eval_time": "7m", "alertname": "RecoveryDatedAhead",
         "exp_alerts": [{"exp_labels": {**labels, "check": "watcher_late", "domain": "ledger"}}]},
        {"eval_time": "50m", "alertname": "RecoveryWatcherDead", "exp_alerts": []},
    ]}
    promtool_passes(tmp_path, rules, case)


def test_serve_shows_it_on_status_the_console_and_metrics(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", STORIES["watcher_late"][0])
    server = start_server(log, tmp_path)
    try:
        c = server.client("viewer")
        status = c.get("/v1/status").json()
        [item] = ahead_items(status)
        assert item["id"] == "line 3" and "watcher w1" in item["reason"]
        assert item["next"] == f"eventlog explain {log} w1"
        assert status["needs_person"] >= 1 and status["totals"]["log"]["dated_ahead"] == 1
        with c.stream("GET", "/v1/status", headers={"Accept": "text/event-stream"}, timeout=20) as r:
            tick, first = read_events(r, 2)  # a tick, then what the console shows
        assert tick["event"] == "tick" and first["event"] == "status"
        assert [it["id"] for it in ahead_items(json.loads(first["data"])["status"])] == ["line 3"]
        metrics = c.get("/metrics").text
        assert f'recovery_dated_ahead{{log="{log}",check="watcher_late"}} 1' in metrics
        # judged at a given time, not now: nothing is ahead of a clock
        assert ahead_items(c.get("/v1/status", params={"at": at(0)}).json()) == []
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("check", ["job_unpicked", "status_quiet", "job_picked"])
def test_stalls_names_a_lane_time_ahead_on_stderr_and_exits_1(tmp_path: Path, check: str) -> None:
    events, product = STORIES[check]
    log = write_log(tmp_path / "lanes.jsonl", events)
    out = run_cli("stalls", str(log))
    assert out.returncode == 1, out.stderr
    [record] = [json.loads(line) for line in out.stdout.splitlines()]  # stdout: the seed's record, as it was
    assert record["results"] == [{"product": product, "stalled": False, "reason": "moving"}]
    assert f"lane {product} (line {len(events)}) is dated {events[-1]['ts']}" in out.stderr
    assert f"eventlog explain {log} {product}" in out.stderr
    assert run_cli("stalls", str(log), "--at", "log").returncode == 0  # not judged as of now: nothing to say


def test_append_takes_a_line_dated_ahead_and_says_so_on_stderr(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", [heartbeat(at(-1))])
    lines = "\n".join(json.dumps(e) for e in (heartbeat(TYPO, "w2"), heartbeat(at(2 / 60), "w3"))) + "\n"
    out = run_cli("append", str(log), stdin=lines)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"log": str(log), "written": 2, "first_seq": 2, "last_seq": 3,
                                      "torn_tail_cut": 0}
    [said] = [line for line in out.stderr.splitlines() if "ahead of now" in line]  # the one past the tolerance
    assert f"stdin line 1 (seq 2) is dated {TYPO}" in said and f"eventlog status {log}" in said
    assert TYPO in log.read_text()  # written as given


def test_a_skip_ahead_but_of_today_is_still_todays_skip(tmp_path: Path) -> None:
    """EVENTS.md section 5: a skip dated T's day makes a candidate; 10 min ahead on today's date it silences
    nothing, so no dated_ahead (only a skip dated a later day is no skip of today). The machine's zone is set so
    that now is about noon there, and the skip is written in that offset: today's date whatever the hour."""
    hours = (12 - datetime.now(UTC).hour + 12) % 24 - 12  # an offset that makes it about noon
    zone = timezone(timedelta(hours=hours))
    skip = (datetime.now(zone).replace(microsecond=0) + timedelta(minutes=10)).isoformat()
    log = write_log(tmp_path / "cu.jsonl", [
        {"type": "job_registered", "ts": at(-1), "label": "j1", "guarded": True,
         "calendar": [{"Hour": 0, "Minute": 0}], "interval_s": None},
        {"type": "job_skipped", "ts": skip, "label": "j1", "reason": "quota", "remaining_s": 100}])
    out = run_cli("status", str(log), "--json", "--all", env={"TZ": f"LOCAL{-hours:+d}"})
    view = json.loads(out.stdout)
    assert ahead_items(view) == [] and view["totals"]["log"]["dated_ahead"] == 0
    [candidate] = [it for g in view["groups"] if g["reason_code"] == "candidate" for it in g["items"]]
    assert candidate["id"] == "j1"


def test_a_reset_at_typed_decades_ahead_is_named_with_the_account_and_a_correction_that_works(
    tmp_path: Path,
) -> None:
    """The reviewers' ledger line: reset_at 2062 for 2026 held the account's probe for decades in silence. No quota
    window is longer than a week (seed 000), so a reset_at more than 8 days ahead is named (``limit_reset``); one a
    week ahead is a weekly limit, and is not."""
    limit = {"type": "limit_recorded", "ts": at(-1), "account": "acct-a", "limited_at": at(-1),
             "reset_at": "2062-08-03T17:00:00+09:00", "source": "parsed-limit-message", "confidence": "explicit"}
    weekly = {**limit, "account": "acct-b", "reset_at": at(7 * 24)}
    log = write_log(tmp_path / "work.jsonl", [
        CREATED, limit, {**CREATED, "handoff_id": "h2", "account": "acct-b"}, weekly,
    ])
    out, view = status_json(log)
    assert out.returncode == 1
    [item] = ahead_items(view)
    assert item["id"] == "line 2" and item["since"] == limit["reset_at"] and item["until"] == limit["reset_at"]
    assert "the reset_at of the latest limit (limit_recorded) of account acct-a" in item["reason"]
    assert "is dated 2062-08-03T17:00:00+09:00" in item["reason"] and "more than 8 d ahead" in item["reason"]
    assert "The reset time is wrong" in item["reason"]
    assert item["next"] == f"eventlog explain {log} acct-a"
    _dump, prom = replayed(log, live=True)
    assert value(prom, "recovery_dated_ahead", check="limit_reset") == 1
    # explain names the line and prints a correction that probes now; pasted, it ends the item
    shown = typed(item["next"], tmp_path)
    assert shown.returncode == 0 and f"{log}:2: " in shown.stdout and "waits for its reset at 2062" in shown.stdout
    [fix] = [line.split("next: ", 1)[1] for line in shown.stdout.splitlines()
             if "next: " in line and "limit_recorded" in line]
    fixed = typed(fix, tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    out, view = status_json(log)
    assert ahead_items(view) == []
    account = json.loads(run_cli("explain", str(log), "acct-a", "--json").stdout)["verdicts"][0]
    assert account["code"] == "due" and account["facts"]["limit"] == {"reset_at": None, "confidence": "unknown"}


def test_a_limited_at_typed_decades_ahead_that_overrides_the_true_limit_is_named(tmp_path: Path) -> None:
    """The reviewers' ledger: an import sorted by time put the 2062 limit after the true one (limited until tomorrow),
    so its reset, long past, said "probe now" (seed 000: a limited account is not probed) while status said
    "Nothing needs a person". It is named (``limited_at``), with the account; the true limit appended again ends it."""
    true = {"type": "limit_recorded", "ts": at(-1), "account": "acct-a", "limited_at": at(-1), "reset_at": at(20),
            "source": "parsed-limit-message", "confidence": "explicit"}
    typo = {**true, "ts": TYPO, "limited_at": TYPO, "reset_at": at(-20)}
    log = write_log(tmp_path / "work.jsonl", [CREATED, true, typo])
    out, view = status_json(log)
    assert out.returncode == 1
    [item] = ahead_items(view)
    assert item["id"] == "line 3" and item["since"] == TYPO and item["until"] is None
    assert "the limited_at of the latest limit (limit_recorded) of account acct-a" in item["reason"]
    assert "The limit's time is wrong" in item["reason"] and "decides when the account is probed" in item["reason"]
    _dump, prom = replayed(log, live=True)
    assert value(prom, "recovery_dated_ahead", check="limited_at") == 1
    shown = typed(item["next"], tmp_path)
    assert shown.returncode == 0 and f"{log}:3: " in shown.stdout and "probe now" in shown.stdout
    # the true limit, written again after it, is the latest: the account waits for its reset, nothing is named
    again = typed(f"printf '%s\\n' {shlex.quote(json.dumps({k: v for k, v in true.items() if k != 'ts'}))} "
                  f"| eventlog append {log}", tmp_path)
    assert again.returncode == 0, again.stderr
    out, view = status_json(log)
    assert ahead_items(view) == []
    account = json.loads(run_cli("explain", str(log), "acct-a", "--json").stdout)["verdicts"][0]
    assert account["code"] == "waiting_reset"


def test_append_takes_a_reset_at_typed_years_ahead_and_says_so_on_stderr(tmp_path: Path) -> None:
    """The same typo written through ``append``: taken (it is a valid time), but said at once, where the person who
    typed it is looking, not only later on the status screen. A weekly limit's reset a week ahead says nothing."""
    log = write_log(tmp_path / "work.jsonl", [CREATED])
    typo = {"type": "limit_recorded", "ts": at(-1), "account": "acct-a", "limited_at": at(-1),
            "reset_at": "2062-08-03T17:00:00+09:00", "source": "parsed-limit-message", "confidence": "explicit"}
    weekly = {**typo, "account": "acct-b", "reset_at": at(7 * 24)}
    out = run_cli("append", str(log), stdin="".join(json.dumps(e) + "\n" for e in (weekly, typo)))
    assert out.returncode == 0, out.stderr
    [said] = [line for line in out.stderr.splitlines() if "ahead of now" in line]
    assert "stdin line 2 (seq 3) says account 'acct-a' resets at 2062-08-03T17:00:00+09:00" in said
    assert "no probe of it is made before then" in said and f"eventlog status {log}" in said
    assert "2062-08-03T17:00:00+09:00" in log.read_text()  # written as given


def test_append_takes_a_limited_at_typed_years_ahead_and_says_so_on_stderr(tmp_path: Path) -> None:
    """A limit appended now (no ts given) that says it was hit in 2062: taken, and said at once, as status names it
    (``limited_at``); once, when its ts is the same typo."""
    log = write_log(tmp_path / "work.jsonl", [CREATED])
    typo = {"type": "limit_recorded", "account": "acct-a", "limited_at": TYPO, "reset_at": None,
            "source": "parsed-limit-message", "confidence": "unknown"}
    out = run_cli("append", str(log), stdin=json.dumps(typo) + "\n" + json.dumps({**typo, "ts": TYPO}) + "\n")
    assert out.returncode == 0, out.stderr
    first, second = [line for line in out.stderr.splitlines() if "ahead of now" in line]
    assert f"stdin line 1 (seq 2) says account 'acct-a' was limited at {TYPO}" in first
    assert "no limit is hit ahead of now" in first and f"eventlog status {log}" in first
    assert f"stdin line 2 (seq 3) is dated {TYPO}" in second
