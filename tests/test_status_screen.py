"""``eventlog status``'s screen on a bad night: it fits 50 lines, most urgent first, and says how to see the rest.

The night (one log, every domain in trouble, 20 reasons) is the one a review ran: 89 lines, the session waiting
hours for a decision at line 64, a head with no count per domain. The promise (``status --help``,
docs/DECISIONS.md "A screen"): within 50 lines whatever the groups; what a person decides first, then what a
person must act on, then what the runners or the clock clear by themselves; the head counts each domain and
gives the command that lists it in full.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, run_cli, write_log

NOW = datetime(2026, 12, 2, 4, 36, 32, tzinfo=UTC)
AT = NOW.isoformat()
#: What the runners or the clock clear with no person (docs/DECISIONS.md "A screen"), written apart from the code.
BY_THEMSELVES = {"stale_retryable", "backoff_transient", "backoff_unexpected", "backoff_estimate", "job_unpicked",
                 "status_quiet", "circuit_open", "candidate", "unfinished_batch", "torn_tail"}


def ago(**kw: float) -> str:
    return (NOW - timedelta(**kw)).isoformat()


def night(path: Path) -> Path:
    """A log where every domain needs a person, as of :data:`NOW`."""
    ev: list[dict[str, Any]] = [
        {"type": "watcher_run", "ts": ago(hours=6), "watcher": "w-main", "exit": "ok", "period_s": 300},
        {"type": "watcher_run", "ts": ago(hours=3), "watcher": "w-main", "exit": "ok", "period_s": 300},
        {"type": "watcher_run", "ts": ago(minutes=3), "watcher": "w-err", "exit": "error", "period_s": 300},
    ]
    for hid in ("h-1", "h-2", "h-3"):
        ev += [{"type": "handoff_created", "ts": ago(hours=5), "handoff_id": hid, "account": "acct-a"},
               {"type": "claimed", "ts": ago(hours=4), "handoff_id": hid, "watcher": "w-main", "attempt": 1}]
    ev += [
        {"type": "resume_requested", "ts": ago(hours=4), "handoff_id": "h-2", "attempt": 1},
        {"type": "resume_requested", "ts": ago(hours=4), "handoff_id": "h-3", "attempt": 1},
        {"type": "resume_failed", "ts": ago(hours=3, minutes=50), "handoff_id": "h-3", "attempt": 1,
         "error": "timeout", "effect": "unknown"},
        {"type": "handoff_created", "ts": ago(hours=5), "handoff_id": "h-10", "account": "acct-a",
         "deadline": ago(hours=1)},
        {"type": "handoff_created", "ts": ago(hours=5), "handoff_id": "h-11", "account": "acct-b",
         "deadline": ago(hours=2)},
        {"type": "probe_result", "ts": ago(hours=3), "account": "acct-b", "outcome": "auth_error", "status": 401},
        {"type": "status_updated", "ts": ago(hours=2), "product": "lane-a", "state": "running"},
        {"type": "job_finished", "ts": ago(minutes=100), "product": "lane-a", "job_id": "job-9"},
        {"type": "status_updated", "ts": ago(hours=10), "product": "lane-b", "state": "running"},
        {"type": "status_updated", "ts": ago(hours=1), "product": "lane-c", "state": "running"},
        {"type": "lane_check", "ts": ago(minutes=50), "unpicked_s": 5400, "quiet_s": 28800, "period_s": 3600,
         "exit": "error", "error": "could not send", "unobserved": {"lane-c": "no NAME.env names it"}},
    ]
    for label, minute in (("com.x.cand", 5), ("com.x.unfed", 1), ("com.x.noend", 2), ("com.x.cand2", 4)):
        ev.append({"type": "job_registered", "ts": ago(days=3), "label": label, "guarded": True,
                   "calendar": [{"Hour": 0, "Minute": minute}], "interval_s": None})
    ev.append({"type": "job_ran", "ts": ago(days=1), "label": "com.x.unfed", "exit": 0})
    for label in ("com.x.cand", "com.x.cand2", "com.x.noend"):
        ev.append({"type": "job_skipped", "ts": "2026-12-02T00:05:00+00:00", "label": label, "reason": "quota",
                   "remaining_s": 3000})
    ev += [
        {"type": "catchup_kicked", "ts": ago(hours=2), "label": "com.x.noend"},
        {"type": "worker_claimed", "ts": ago(hours=5, minutes=1), "session_id": "s-restore", "generation": 1,
         "worker": "wk1", "restore": True},
        {"type": "checkpoint_restore_failed", "ts": ago(hours=5), "session_id": "s-restore", "generation": 1,
         "reason": "incompatible_checkpoint"},
        {"type": "worker_claimed", "ts": ago(hours=1), "session_id": "s-noworker", "generation": 1, "worker": "wk2",
         "restore": False},
        {"type": "worker_ready", "ts": ago(minutes=59), "session_id": "s-noworker", "generation": 1},
        {"type": "worker_stopped", "ts": ago(minutes=30), "session_id": "s-noworker", "generation": 1,
         "stop_kind": "failed"},
        {"type": "worker_claimed", "ts": ago(hours=3), "session_id": "s-q", "generation": 1, "worker": "wk3",
         "restore": False},
        {"type": "worker_ready", "ts": ago(hours=3), "session_id": "s-q", "generation": 1},
        {"type": "turn_started", "ts": ago(hours=2, minutes=10), "session_id": "s-q", "turn_id": "t1"},
        {"type": "turn_finished", "ts": ago(hours=2), "session_id": "s-q", "turn_id": "t1",
         "outcome": "outcome_unknown", "terminal_reason": "sdk_lost"},
        {"type": "worker_claimed", "ts": ago(hours=2), "session_id": "s-startup", "generation": 1, "worker": "wk4",
         "restore": False},
        {"type": "worker_claimed", "ts": ago(hours=2), "session_id": "s-startup2", "generation": 1,
         "worker": "wk5", "restore": False},
    ]
    write_log(path, ev)
    with path.open("a", encoding="utf-8") as f:
        f.write('{"type": "watcher_run", "ts": "not-a-time", "watcher": "w-x", "exit": "ok", "period_s": 300}\n'
                "this is not json at all\n")
    return path


def test_a_bad_night_fits_a_screen_most_urgent_first_and_says_how_to_see_every_domain(tmp_path: Path) -> None:
    log = night(tmp_path / "night.jsonl")
    got = json.loads(run_cli("status", str(log), "--at", AT, "--json", "--all").stdout)
    groups = got["groups"]
    assert len(groups) >= 18, [g["reason_code"] for g in groups]  # more than 50 lines hold at one item each
    out = run_cli("status", str(log), "--at", AT)
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) <= 50, out.stdout

    # every group is on the screen with its count, most urgent first: what a person decides, then what a person
    # must act on, then what the runners or the clock clear by themselves
    rows = []
    for g in groups:
        at = next((n for n, line in enumerate(lines) if line.lstrip().startswith(f"{g['title']}: {g['count']:,}")),
                  None)
        assert at is not None, (g["title"], out.stdout)
        rows.append((at, g))
    ranks = [0 if g["needs_decision"] else 2 if g["reason_code"] in BY_THEMSELVES else 1 for _at, g in sorted(
        rows, key=lambda r: r[0])]
    assert ranks == sorted(ranks), out.stdout
    assert ranks[0] == 0 and ranks[-1] == 2

    # the session stopped for hours is on the screen with its decide command, ready to paste
    assert any(f"eventlog decide {log} s-restore --decision retry_restore" in line for line in lines), out.stdout

    # the head: items by urgency, and each domain's count with the command that lists it in full, before any group
    first_group = min(at for at, _g in rows)
    head = lines[:first_group]
    decide = sum(g["count"] for g in groups if g["needs_decision"])
    assert any(f"{decide} to decide" in line for line in head), head
    every_decision = ["to", "decide:", f"{decide:,}", "eventlog", "status", str(log), "--needs-decision", "--all"]
    assert any(line.split() == every_decision for line in head), head
    for domain in {g["domain"] for g in groups}:
        count = sum(g["count"] for g in groups if g["domain"] == domain)
        row = next((line for line in head if line.strip().startswith(f"{domain}: ")), None)
        assert row is not None and row.split()[:2] == [f"{domain}:", f"{count:,}"], (domain, head)
        cmd = " ".join(row.split()[2:])
        assert cmd == f"eventlog status {log} --domain {domain} --all"
        pasted = cmd.replace("eventlog", f"{sys.executable} -m eventlog", 1) + f" --at {AT}"
        listed = subprocess.run(["sh", "-c", pasted], capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)
        assert listed.returncode == 1, listed.stderr
        for g in groups:
            if g["domain"] == domain:
                assert all(f"  {it['id']}" in listed.stdout for it in g["items"]), (domain, listed.stdout)

    # groups left as one line each name their first id
    brief = [(at, g) for at, g in rows if lines[at].startswith("  ")]
    assert brief, out.stdout
    for at, g in brief:
        assert f"; {g['items'][0]['id']}" in lines[at] or f"; first {g['items'][0]['id']}" in lines[at], lines[at]

    # --all still shows every item; --json keeps the groups in their documented order (by domain), counts whole
    every = run_cli("status", str(log), "--at", AT, "--all").stdout
    assert all(f"  {it['id']}" in every for g in groups for it in g["items"])
    shown = json.loads(run_cli("status", str(log), "--at", AT, "--json").stdout)
    assert [g["reason_code"] for g in shown["groups"]] == [g["reason_code"] for g in groups]
    assert [g["count"] for g in shown["groups"]] == [g["count"] for g in groups]


def test_a_screen_that_shows_every_item_has_no_guide(tmp_path: Path) -> None:
    """A small night shows every item in full: no "Not all shown" head (nothing to list elsewhere)."""
    log = write_log(tmp_path / "small.jsonl", [
        {"type": "handoff_created", "ts": ago(hours=5), "handoff_id": "h-1", "account": "acct-a"},
        {"type": "claimed", "ts": ago(hours=4), "handoff_id": "h-1", "watcher": "w", "attempt": 1},
        {"type": "watcher_run", "ts": ago(minutes=1), "watcher": "w", "exit": "ok", "period_s": 300},
    ])
    out = run_cli("status", str(log), "--at", AT)
    assert out.returncode == 1 and "Not all shown" not in out.stdout and "--domain" not in out.stdout, out.stdout
