"""``eventlog status`` (the triage screen) and ``eventlog explain`` (a verdict for every id), run as a user runs them.

What needs a person is derived here from the replay's dump on its own terms (the
spec's keys and the project's documented extra keys), never from the triage code.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from bench.generate import ensure_log
from tests.conftest import ROOT, run_cli, write_log

FIX = ROOT / "fixtures"
LOGS = sorted(FIX.glob("*.jsonl"))
ITEM_KEYS = {"domain", "id", "reason_code", "reason", "since", "for_s", "until", "next", "needs_decision",
             "silences"}
GROUP_KEYS = {"domain", "reason_code", "title", "needs_decision", "count", "items", "urgency"}


def people_sort(ids: list[str]) -> list[str]:
    """How a person counts: digit runs as numbers (written apart from the code under test)."""
    return sorted(ids, key=lambda s: [(1, int(t), "") if t.isdigit() else (0, 0, t) for t in re.split(r"(\d+)", s)])


def needs_a_person(dump: dict[str, Any]) -> set[tuple[str, str]]:
    """(domain, id) of everything the dump says needs a person, read from its keys alone."""
    out: set[tuple[str, str]] = set()
    h = dump["handoffs"]
    out |= {("handoffs", hid) for hid, item in h["items"].items() if item["state"] == "needs_human"}
    out |= {("handoffs", hid) for kind in ("retryable", "unknown_effect") for hid in h["stale_claims"][kind]}
    out |= {("handoffs", a) for a, plan in h["probe_plan"].items()
            if plan["reason"].startswith("backoff_") or plan["reason"] == "needs_person"}
    out |= {("watchers", w) for w, beat in h["watchers"].items() if beat["late"] or beat["exit"] == "error"}
    if h["watcher"]["late"] and not h["watchers"]:  # pending work and no heartbeat at all
        out.add(("watchers", "failback"))
    out |= {("lanes", r["product"]) for r in dump["lanes"]["now"]["results"] if r["stalled"]}
    out |= {("catchup", label) for label in dump["catchup"]["candidates"]}
    if dump["catchup"]["circuit"] == "open":
        out.add(("catchup", "circuit"))
    s = dump["sessions"]
    out |= {("sessions", sid) for sid, item in s["items"].items() if item["admission_state"] == "recovery_required"
            or (item["attention"] == "CONTEXT_GAP" and item["admission_state"] != "closed")
            or (item["unknown_turns"] and item["admission_state"] != "closed")}  # spec 6: never re-run on its own
    out |= {("sessions", sid) for sid in s["retry_due"]}
    out |= {("log", f"line {b['line']}") for b in dump["bad_lines"]}
    out |= {("log", f"line {r['line']}") for r in dump["rejected"]}
    if dump["torn_tail"]:
        out.add(("log", "last line"))
    return out


def reruns_not_ended_well(log: Path, as_of: str) -> dict[str, str]:
    """Label -> ``failed`` or ``no_end``: every catch-up re-run that ended badly, or has no end past its timeout,
    twice its kill grace and 5 min, until the job ran again; read from the log's lines alone (the dump holds no
    re-run; the rule is docs/DECISIONS.md's "A re-run that did not end well")."""
    reruns: dict[str, dict[str, Any]] = {}
    for line in log.read_bytes().splitlines():
        try:
            ev = json.loads(line)
            kind, label, ts = ev["type"], ev.get("label"), datetime.fromisoformat(ev["ts"])
        except (ValueError, KeyError, TypeError, AttributeError):  # UnicodeDecodeError is a ValueError
            continue  # a bad line
        r = reruns.get(label)
        if kind == "catchup_kicked":
            wait = ev.get("timeout_s", 2700) + 2 * ev.get("kill_grace_s", 30) + 300
            reruns[label] = {"kicked": ts, "deadline": ts.timestamp() + wait, "ended": None}
        elif kind == "catchup_finished":
            if ev["outcome"] == "exited" and ev.get("exit") == 0:
                reruns.pop(label, None)
            else:
                reruns[label] = {**(r if r and not r["ended"] else {"kicked": None}), "ended": ts}
        elif kind == "job_skipped":
            reruns.pop(label, None)
        elif kind == "job_ran" and r is not None:
            own = ev["exit"] != 0 and r["kicked"] is not None and r["kicked"] <= ts and (
                ts <= r["ended"] if r["ended"] else ts.timestamp() <= r["deadline"])
            if not own:
                reruns.pop(label)
    now = datetime.fromisoformat(as_of).timestamp()
    return {label: "failed" if r["ended"] else "no_end" for label, r in reruns.items()
            if r["ended"] or now >= r["deadline"]}


def unfed_from_lines(log: Path, as_of: str) -> set[str]:
    """Every guarded calendar job whose first slot of T's day (in T's offset) passed 2 h or more before T while its
    latest marker (``job_skipped``/``job_ran``, by log order) is of another day, or there is none; read from the
    log's lines alone (the dump holds no such fact; the rule is docs/DECISIONS.md's "A job nothing feeds")."""
    at = datetime.fromisoformat(as_of)
    jobs: dict[str, dict[str, Any]] = {}
    markers: dict[str, datetime] = {}
    for line in log.read_bytes().splitlines():
        try:
            ev = json.loads(line)
            kind, label, ts = ev["type"], ev.get("label"), datetime.fromisoformat(ev["ts"])
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # a bad line
        if kind == "job_registered":
            jobs[label] = ev
        elif kind in ("job_skipped", "job_ran"):
            markers[label] = ts

    def today(entry: dict[str, Any]) -> bool:  # launchd.plist(5): Weekday or Day when both are given
        weekday = None if "Weekday" not in entry else entry["Weekday"] % 7 == at.isoweekday() % 7
        day = None if "Day" not in entry else entry["Day"] == at.day
        return entry.get("Month", at.month) == at.month and (
            (weekday is None and day is None) or bool(weekday) or bool(day))

    out = set()
    for label, job in jobs.items():
        calendar = job["calendar"]
        if not job["guarded"] or job["interval_s"] is not None or not calendar:
            continue
        if any("Hour" not in e for e in calendar):
            continue
        entries = [e for e in calendar if today(e)]
        if not entries or any(not (0 <= e["Hour"] <= 23 and 0 <= e.get("Minute", 0) <= 59) for e in entries):
            continue
        first = min(at.replace(hour=e["Hour"], minute=e.get("Minute", 0), second=0, microsecond=0) for e in entries)
        seen = markers.get(label)
        if (at - first).total_seconds() >= 7200 and (seen is None or seen.astimezone(at.tzinfo).date() != at.date()):
            out.add(label)
    return out


def interrupts_of_no_recorded_end(log: Path) -> set[str]:
    """Sessions with an interrupt whose result says the turn's outcome is unknown, of a turn the log holds no
    ``turn_finished`` of (never started, or still running): read from the log's lines alone (the dump does not list
    which turns started or ended; the rule is docs/DECISIONS.md's "An interrupt whose outcome is unknown")."""
    unknown, ended = set(), set()
    for line in log.read_bytes().splitlines():
        try:
            ev = json.loads(line)
            kind, key = ev["type"], (ev["session_id"], ev.get("turn_id"))
        except (ValueError, KeyError, TypeError):
            continue
        if kind == "control_result" and str(ev.get("outcome")).lower() in ("unknown", "outcome_unknown"):
            unknown.add(key)
        elif kind == "turn_finished":
            ended.add(key)
    return {sid for sid, turn in unknown - ended if turn is not None}


def sessions_without_worker(log: Path, dump: dict[str, Any]) -> set[str]:
    """Sessions that should have a worker and have none at work as of the dump's ``as_of``: admitted with a
    ``retry_restore``/``start_fresh`` accepted 10 min ago or more and no claim since; admitted (or stopped without a
    context gap) with its latest claim 1 h old or more and no worker of its generation ready, stopped, failed or gone
    since; admitted with that worker failed, drained or gone 10 min ago or more and no claim since. Read from the
    applied lines (the dump's ``rejected`` and receipts say which); the rule is docs/DECISIONS.md's "A session with
    no worker at work"."""
    at = datetime.fromisoformat(dump["as_of"])
    rejected = {r["line"] for r in dump["rejected"]}
    accepted = {r["line"] for r in dump["sessions"]["receipts"] if r["result"] == "accepted" and not r["replayed"]}
    seen: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(log.read_bytes().splitlines(), 1):
        try:
            ev = json.loads(line)
            kind, sid, ts = ev["type"], ev["session_id"], datetime.fromisoformat(ev["ts"])
        except (ValueError, KeyError, TypeError):
            continue
        if number in rejected:
            continue
        s = seen.setdefault(sid, {"claim": None, "generation": 0, "end": None, "decided": None})
        generation = ev.get("generation")
        older = isinstance(generation, int) and generation < s["generation"]
        if kind == "worker_claimed":
            s.update(claim=ts, generation=generation, end=None, decided=None)
        elif kind == "worker_ready" and not older and s["end"] is None:
            s["end"] = ("ready", ts)
        elif kind in ("worker_stopped", "startup_failed", "checkpoint_restore_failed", "execution_gone") \
                and not older and (s["end"] is None or s["end"][0] == "ready"):
            s["end"] = (ev.get("stop_kind", kind), ts)
        elif kind == "recovery_decision" and number in accepted and ev["decision"] in ("retry_restore", "start_fresh"):
            s["decided"] = ts
    out = set()
    for sid, s in seen.items():
        item = dump["sessions"]["items"][sid]
        state = item["admission_state"]
        if state == "admitted" and s["decided"] is not None:
            late = (at - s["decided"]).total_seconds() >= 600
        elif state in ("admitted", "stopped") and item["attention"] != "CONTEXT_GAP" and s["claim"] is not None \
                and s["end"] is None:
            late = (at - s["claim"]).total_seconds() >= 3600
        else:
            end = s["end"]
            late = state == "admitted" and end is not None and end[0] in ("failed", "drain", "execution_gone") \
                and (at - end[1]).total_seconds() >= 600
        if late:
            out.add(sid)
    return out


@pytest.fixture(scope="module")
def dumps() -> dict[str, dict[str, Any]]:
    out = run_cli("replay", *[str(p) for p in LOGS])
    assert out.returncode == 0, out.stderr
    return {Path(d["log"]).name: d for d in map(json.loads, out.stdout.splitlines())}


def items_of(triage: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for g in triage["groups"] for item in g["items"]]


# --- status names everything the dump says needs a person ---------------------------------------------


@pytest.mark.parametrize("log", LOGS, ids=[p.stem for p in LOGS])
def test_status_at_log_names_everything_the_dump_says_needs_a_person(log: Path,
                                                                     dumps: dict[str, dict[str, Any]]) -> None:
    dump = dumps[log.name]
    out = run_cli("status", str(log), "--at", "log", "--json", "--all")
    assert out.stderr == ""
    got = json.loads(out.stdout)
    reruns = reruns_not_ended_well(log, dump["as_of"]) if dump["as_of"] else {}
    unfed = unfed_from_lines(log, dump["as_of"]) if dump["as_of"] else set()
    expected = needs_a_person(dump) | {("catchup", label) for label in {*reruns, *unfed}}
    expected |= {("sessions", sid) for sid in interrupts_of_no_recorded_end(log)
                 if dump["sessions"]["items"][sid]["admission_state"] != "closed"}
    if dump["as_of"]:
        expected |= {("sessions", sid) for sid in sessions_without_worker(log, dump)}
    named = {(item["domain"], item["id"]) for item in items_of(got)}
    assert named == expected
    assert out.returncode == (1 if expected else 0)
    assert got["as_of"] == dump["as_of"] and got["needs_person"] == len(items_of(got))
    text = " ".join(item["reason"] for item in items_of(got) if item["reason_code"] == "needs_human")
    for reason in dump["handoffs"]["needs_human_reasons"]:  # handed to a person: with the reason
        assert {"conflict": "conflict", "resume_failed_unknown_effect": "effect unknown"}.get(reason, reason) in text
    for name, beat in dump["handoffs"]["watchers"].items():  # an erroring watcher: with its detail
        if beat["exit"] == "error" and beat["detail"]:
            assert any(i["id"] == name and beat["detail"] in i["reason"] for i in items_of(got))
    present = {d for d, key in (("handoffs", dump["handoffs"]["total"] or dump["handoffs"]["probe_plan"]),
                                ("lanes", dump["lanes"]["now"]["results"]), ("sessions", dump["sessions"]["items"]))
               if key}
    assert present <= set(got["totals"]) and "log" in got["totals"]


def test_the_seed_stories_by_name(dumps: dict[str, dict[str, Any]]) -> None:
    """The issue's reproductions: a re-run candidate and an open circuit are no longer "Nothing needs a person"."""
    out = run_cli("status", str(FIX / "catchup_circuit_open.jsonl"), "--at", "log")
    assert out.returncode == 1 and "Nothing needs a person" not in out.stdout
    assert "  circuit (for 40 min): the quota circuit is open until 2026-08-21T10:30:00+09:00" in out.stdout
    assert "com.lily.test (for 59 min 55 s): the quota guard skipped it today" in out.stdout
    seed = run_cli("status", str(FIX / "handoffs_seed_98.jsonl"), "--at", "log")
    assert seed.returncode == 0 and "Handoffs: failover 86/98, failback 0/98;" in seed.stdout
    assert "Sessions:" not in seed.stdout and "Lanes:" not in seed.stdout  # only the domains the log holds
    sessions = run_cli("status", str(FIX / "sessions_close.jsonl"), "--at", "log")
    assert "Handoffs:" not in sessions.stdout and "Sessions: 2;" in sessions.stdout


def test_an_empty_log_says_so_and_never_as_of_none() -> None:
    at_log = run_cli("status", str(FIX / "log_empty.jsonl"), "--at", "log")
    assert at_log.returncode == 0 and "None" not in at_log.stdout
    assert at_log.stdout.splitlines()[:2] == [f"{FIX / 'log_empty.jsonl'}: empty, no line yet (as of its last "
                                              "line, and it has none)", "Nothing needs a person."]
    now = json.loads(run_cli("status", str(FIX / "log_empty.jsonl"), "--json").stdout)
    assert now["empty"] is True and datetime.fromisoformat(now["as_of"]).tzinfo is not None
    assert set(now["totals"]) == {"log"} and now["groups"] == []


def test_a_missing_log_is_named_not_an_all_clear(tmp_path: Path) -> None:
    out = run_cli("status", str(tmp_path / "gone.jsonl"), "--json")
    got = json.loads(out.stdout)
    assert out.returncode == 1 and got["log_missing"] is True
    assert [(i["domain"], i["reason_code"]) for i in items_of(got)] == [("log", "missing")]
    assert run_cli("status", str(tmp_path / "no-dir" / "gone.jsonl")).returncode == 2


def test_the_directory_command_of_a_missing_log_directly_under_the_root_lists_the_root(tmp_path: Path) -> None:
    """`status /x.jsonl` printed `ls -la ''`, which fails ("cannot access ''"): the directory of /x.jsonl is /."""
    name = f"/{tmp_path.name}-never-there.jsonl"
    assert not Path(name).exists()
    [item] = items_of(json.loads(run_cli("status", name, "--json").stdout))
    assert item["next"] == "ls -la /"
    listed = subprocess.run(["sh", "-c", item["next"]], capture_output=True, text=True, timeout=30, check=False)
    assert listed.returncode == 0, listed.stderr


# --- the screen: grouped, natural order, at most a screen --------------------------------------------


def test_groups_count_and_natural_order(tmp_path: Path) -> None:
    ids = ["h-10004", "h-1010", "h-2", "h-9", "h-10"]
    events: list[dict[str, Any]] = [{"type": "watcher_run", "ts": "2026-08-03T08:00:00+09:00", "watcher": "w",
                                     "exit": "ok", "period_s": 900}]
    for n, hid in enumerate(ids):
        events += [{"type": "handoff_created", "ts": f"2026-08-03T08:0{n}:00+09:00", "handoff_id": hid, "account": "a"},
                   {"type": "needs_human", "ts": f"2026-08-03T08:0{n}:30+09:00", "handoff_id": hid,
                    "reason": "ask the owner"}]
    log = write_log(tmp_path / "many.jsonl", events)
    out = run_cli("status", str(log), "--at", "2026-08-03T08:10:00+09:00")
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert "Handoffs handed to a person: 5 (first 3; --all for every one)" in lines
    shown = [line.split()[0] for line in lines if line.startswith("  h-")]
    assert shown == ["h-2", "h-9", "h-10"]
    every = run_cli("status", str(log), "--at", "2026-08-03T08:10:00+09:00", "--all")
    assert [line.split()[0] for line in every.stdout.splitlines() if line.startswith("  h-")] == people_sort(ids)
    assert "  h-2 (for 7 min 30 s): handed to a person: ask the owner (account a)" in every.stdout
    assert f"      eventlog explain {log} h-2" in every.stdout


def test_json_shape_values_not_sentences() -> None:
    got = json.loads(run_cli("status", str(FIX / "handoffs_weekly_limit.jsonl"), "--at", "log", "--json").stdout)
    assert set(got) == {"log", "as_of", "empty", "log_missing", "needs_person", "groups", "totals"}
    for group in got["groups"]:
        assert isinstance(group["count"], int) and group["count"] >= len(group["items"])
        assert set(group) == GROUP_KEYS and group["urgency"] in (0, 1, 2)
        for item in group["items"]:
            assert set(item) == ITEM_KEYS
            assert isinstance(item["for_s"], int | float) and datetime.fromisoformat(item["since"])
            assert item["next"].startswith("eventlog ")
    [backoff] = [i for i in items_of(got) if i["reason_code"] == "backoff_estimate"]
    assert backoff["until"] == "2026-08-04T10:30:00+09:00" and backoff["id"] == "cloud-account-a"

    def leaves(value: Any) -> list[Any]:
        return [x for v in value.values() for x in leaves(v)] if isinstance(value, dict) else [value]

    words = {"circuit"}
    for domain, numbers in got["totals"].items():
        for key, value in numbers.items():
            assert not isinstance(value, str) or key in words or datetime.fromisoformat(value), (domain, key)
            assert not (isinstance(value, str) and "/" in value), (domain, key)
    assert all(not isinstance(v, str) for v in leaves(got["totals"]["handoffs"]))


def test_filters_by_domain_and_by_decision() -> None:
    log = str(FIX / "sessions_fence_recovery_required.jsonl")
    whole = json.loads(run_cli("status", log, "--at", "log", "--json").stdout)
    assert {g["domain"] for g in whole["groups"]} == {"sessions", "log"}
    only = run_cli("status", log, "--at", "log", "--json", "--domain", "sessions")
    got = json.loads(only.stdout)
    assert only.returncode == 1 and {g["domain"] for g in got["groups"]} == {"sessions"}
    assert set(got["totals"]) == {"log", "sessions"}
    decide = json.loads(run_cli("status", log, "--at", "log", "--json", "--needs-decision").stdout)
    assert all(i["needs_decision"] for i in items_of(decide)) and items_of(decide)
    calm = run_cli("status", log, "--at", "log", "--domain", "lanes")
    assert calm.returncode == 0 and "Nothing needs a person." in calm.stdout


def test_the_commands_to_copy_work(tmp_path: Path) -> None:
    """The next step is a command that runs as printed (a person fills in the reason)."""
    log = tmp_path / "s.jsonl"
    shutil.copy(FIX / "sessions_confirm_completed.jsonl", log)
    got = json.loads(run_cli("status", str(log), "--at", "log", "--json").stdout)
    [gap] = [i for i in items_of(got) if i["id"] == "s-gap"]
    assert gap["next"].startswith(f"eventlog decide {log} s-gap --decision start_fresh --expected-revision 7 ")
    done = subprocess.run(["bash", "-c", gap["next"].replace("'<why>'", "'the context is not needed'")],
                          capture_output=True, text=True, cwd=ROOT, env=_path_env(), check=False)
    assert done.returncode == 0 and done.stdout.startswith("accepted: start_fresh of s-gap"), done.stderr
    after = json.loads(run_cli("status", str(log), "--at", "log", "--json").stdout)
    assert "s-gap" not in {i["id"] for i in items_of(after)}

    claims = tmp_path / "h.jsonl"
    shutil.copy(FIX / "handoffs_killed_after_claim.jsonl", claims)
    [stale] = items_of(json.loads(run_cli("status", str(claims), "--at", "log", "--json").stdout))
    assert stale["reason_code"] == "stale_retryable"
    released = subprocess.run(["bash", "-c", stale["next"]], capture_output=True, text=True, cwd=ROOT,
                              env=_path_env(), check=False)
    assert released.returncode == 0, released.stderr
    dump = json.loads(run_cli("replay", str(claims)).stdout)
    assert dump["handoffs"]["items"][stale["id"]]["state"] == "pending"


def _run_printed(command: str, **fill: str) -> subprocess.CompletedProcess[str]:
    """Run a printed next step as a person would, with the placeholders filled in."""
    for placeholder, value in fill.items():
        command = command.replace(placeholder, value)
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=ROOT, env=_path_env(),
                          check=False)


def test_a_refused_login_and_a_silent_request_name_the_person_s_command(tmp_path: Path) -> None:
    """auth_error: the account waits for a probe by hand; resume_unconfirmed: requeue or skip (issue 17.3, 17.4)."""
    log = write_log(tmp_path / "h.jsonl", [
        {"type": "handoff_created", "ts": "2026-08-03T09:00:00+09:00", "handoff_id": "h1", "account": "acct-a"},
        {"type": "handoff_created", "ts": "2026-08-03T09:00:01+09:00", "handoff_id": "h2", "account": "acct-b"},
        {"type": "probe_result", "ts": "2026-08-03T09:10:00+09:00", "account": "acct-a", "outcome": "auth_error"},
        {"type": "claimed", "ts": "2026-08-03T09:10:01+09:00", "handoff_id": "h2", "watcher": "w1", "attempt": 1},
        {"type": "resume_requested", "ts": "2026-08-03T09:10:02+09:00", "handoff_id": "h2", "attempt": 1},
        {"type": "needs_human", "ts": "2026-08-03T09:50:00+09:00", "handoff_id": "h2",
         "reason": "resume_unconfirmed"},
    ])
    items = {i["id"]: i for i in items_of(json.loads(run_cli("status", str(log), "--at", "log", "--json").stdout))}
    assert items["acct-a"]["reason_code"] == "auth_error" and items["acct-a"]["needs_decision"]
    assert "auth_error" in items["acct-a"]["reason"]
    assert items["h2"]["reason_code"] == "needs_human" and "resume_unconfirmed" in items["h2"]["reason"]

    probed = _run_printed(items["acct-a"]["next"], **{"<your probe command>": "echo PING_OK"})
    assert probed.returncode == 0, probed.stderr
    explained = json.loads(run_cli("explain", str(log), "h2", "--at", "log", "--json").stdout)
    requeue = next(c for c in explained["verdicts"][0]["next"] if " requeue " in c)
    requeued = _run_printed(requeue, **{"<why it may go back>": "checked: nothing ran in the cloud"})
    assert requeued.returncode == 0, requeued.stderr

    dump = json.loads(run_cli("replay", str(log)).stdout)
    assert dump["handoffs"]["probe_plan"]["acct-a"]["reason"] != "needs_person"
    assert dump["handoffs"]["items"]["h2"]["state"] == "pending"
    after = {i["id"] for i in items_of(json.loads(run_cli("status", str(log), "--at", "log", "--json").stdout))}
    assert not {"acct-a", "h2"} & after


def _path_env() -> dict[str, str]:
    import os
    import sys

    return {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}


# --- at scale ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_log() -> Path:
    """A generated 1,000,000-event log of 20,000 entities (kept in bench-out/, as the bench keeps it)."""
    out = ROOT / "bench-out"
    out.mkdir(exist_ok=True)
    path, _ = ensure_log(out, 1_000_000, 20_000)
    return path


def test_a_million_events_fit_a_screen_unless_all(big_log: Path) -> None:
    for at in ("log", "2026-08-12T08:00:00+09:00"):  # at its last line, and two days later (more goes wrong)
        screen = run_cli("status", str(big_log), "--at", at, timeout=300)
        assert screen.returncode == 1
        got = json.loads(run_cli("status", str(big_log), "--at", at, "--json", timeout=300).stdout)
        for g in got["groups"]:
            assert f"{g['title']}: {g['count']:,}" in screen.stdout
        # within 50 lines whatever the groups (two days on, the watcher and the lanes pass are late too: more
        # reasons than fit at one item each, so the least urgent take one line each)
        assert len(screen.stdout.splitlines()) <= 50, screen.stdout
    every = run_cli("status", str(big_log), "--at", "log", "--all", "--json", timeout=300)
    groups = json.loads(every.stdout)["groups"]
    assert sum(g["count"] for g in groups) > 1000
    for g in groups:
        ids = [i["id"] for i in g["items"]]
        assert len(ids) == g["count"] and ids == people_sort(ids)
    lines = run_cli("status", str(big_log), "--at", "log", "--all", timeout=300).stdout.splitlines()
    assert len(lines) > 2 * sum(g["count"] for g in groups)


# --- explain: a verdict for every id ---------------------------------------------------------------------


def ids_of(log: Path, bad: frozenset[int] = frozenset()) -> set[str]:
    """Every id a line of the log names (its ``bad`` lines left out): handoffs, accounts, products, labels,
    sessions, watchers."""
    out = set()
    for n, raw in enumerate(log.read_bytes().splitlines(), 1):
        if n in bad:
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out |= {v for k in ("handoff_id", "account", "product", "label", "session_id", "watcher")
                    if isinstance(v := obj.get(k), str)}
    return out


@pytest.mark.parametrize("log", LOGS, ids=[p.stem for p in LOGS])
def test_explain_gives_every_id_of_every_fixture_a_verdict(log: Path, capsys: pytest.CaptureFixture[str],
                                                          dumps: dict[str, dict[str, Any]]) -> None:
    """Every id a good line names, through the CLI's own entry point in this process (a subprocess for each of
    several hundred ids would take minutes); an id only bad lines name is unknown (exit 2), and stderr says which
    lines name it and how to print them."""
    from eventlog.cli import main

    bad = frozenset(b["line"] for b in dumps[log.name]["bad_lines"])
    for ident in sorted(ids_of(log, bad)):
        status = main(["explain", str(log), ident, "--at", "log", "--json"])
        got = json.loads(capsys.readouterr().out)
        assert status == 0 and got["id"] == ident
        assert got["verdicts"], ident
        for v in got["verdicts"]:
            assert v["says"] and v["code"] and v["id"] == ident, (ident, v)
    for ident in sorted(ids_of(log) - ids_of(log, bad)):
        assert main(["explain", str(log), ident, "--at", "log"]) == 2
        [err] = capsys.readouterr().err.splitlines()
        assert err.startswith(f"eventlog: {log}: no applied line names {ident!r}, only "), err
        assert re.search(r": line (\d+): .* \(see it: sed -n '\1p' ", err), err


def test_explain_json_holds_events_as_objects_with_line_and_rejection() -> None:
    out = run_cli("explain", str(FIX / "handoffs_two_watchers.jsonl"), "h1", "--json", "--at", "log")
    assert out.returncode == 0
    got = json.loads(out.stdout)
    claims = [x for x in got["lines"] if x["type"] == "claimed"]
    assert [c["line"] for c in claims] == [5, 6]
    assert claims[0]["event"] == {**claims[0]["event"], "type": "claimed", "handoff_id": "h1"}
    assert "rejected" not in claims[0] and "live claim" in claims[1]["rejected"]
    [verdict] = got["verdicts"]
    assert (verdict["kind"], verdict["code"]) == ("handoff", "returned") and verdict["facts"]["state"] == "returned"
    text = run_cli("explain", str(FIX / "handoffs_two_watchers.jsonl"), "h1", "--at", "log").stdout
    assert "<- rejected: h1 already has a live claim" in text and "handoff h1: returned" in text


def test_explain_watcher_and_account() -> None:
    w = json.loads(run_cli("explain", str(FIX / "handoffs_watcher_error.jsonl"), "watcher-a", "--at", "log",
                           "--json").stdout)
    [v] = w["verdicts"]
    assert v["kind"] == "watcher" and v["code"] == "error" and "No such file or directory" in v["says"]
    assert [i["reason_code"] for i in v["needs_person"]] == ["watcher_error"]
    a = json.loads(run_cli("explain", str(FIX / "handoffs_weekly_limit.jsonl"), "cloud-account-a", "--at", "log",
                           "--json").stdout)
    [v] = a["verdicts"]
    assert v["kind"] == "account" and v["code"] == "backoff_estimate"
    assert v["facts"]["plan"] == {"probe": False, "reason": "backoff_estimate",
                                  "next_probe_at": "2026-08-04T10:30:00+09:00"}
    assert "estimated reset proved wrong" in v["says"]


def test_explain_catch_up_labels_say_why() -> None:
    """Seed 002's three conditions, each named when it fails; the circuit; a kick."""
    def says(log: str, label: str) -> tuple[str, str]:
        got = json.loads(run_cli("explain", str(FIX / log), label, "--at", "log", "--json").stdout)
        [v] = [v for v in got["verdicts"] if v["kind"] == "catchup"]
        return v["code"], v["says"]

    assert says("catchup_markers.jsonl", "com.lily.guarded-now")[0] == "candidate"
    code, text = says("catchup_markers.jsonl", "com.lily.unguarded-now")
    assert code == "not_candidate" and text.startswith("not a candidate, because it is not guarded")
    code, text = says("catchup_markers.jsonl", "com.lily.yesterday-late")  # its 9:00 slot passed 3 h ago: unfed
    assert code == "unfed" and text.startswith("nothing feeds its markers: its slot 09:00 of today "
                                               "(2026-08-21 in UTC+09:00) passed 3 h ago and the log holds no marker "
                                               "of today for it")
    assert "is `eventlog import quota-log` running" in text
    assert text.endswith(
        "its latest skip (2026-08-20T23:30:00+09:00) is from 2026-08-20, not from today (2026-08-21 in UTC+09:00)")
    assert "latest marker is a run" in says("catchup_markers.jsonl", "com.lily.mixed")[1]
    assert says("catchup_markers.jsonl", "com.lily.kicked-then-skipped")[0] == "candidate"  # its re-run exited 0
    code, text = says("catchup_markers.jsonl", "com.lily.kicked")  # a re-run killed at its timeout: no silence
    assert code == "rerun_failed" and text.startswith(
        "catch-up re-ran it at 2026-08-21T10:00:00+09:00 (line 28): it ran over its timeout and was killed at "
        "2026-08-21T10:05:00+09:00 (line 29); re-run it by hand once you know why, the way the catch-up does: its "
        "catchup_kicked does not say how it kicked (an older line)")
    code, text = says("catchup_circuit_open.jsonl", "com.lily.test")
    assert code == "candidate" and "circuit is open until 2026-08-21T10:30:00+09:00" in text
    slots = {label: says("catchup_slots.jsonl", label) for label in ids_of(FIX / "catchup_slots.jsonl")}
    assert any("have not come yet" in text for _, text in slots.values()), slots
    assert any("StartInterval" in text for _, text in slots.values()), slots


def test_explain_a_session_and_a_lane() -> None:
    s = json.loads(run_cli("explain", str(FIX / "sessions_fence_recovery_required.jsonl"), "s-fence", "--at", "log",
                           "--json").stdout)
    [v] = s["verdicts"]
    assert v["kind"] == "session" and v["code"] == "recovery_required"
    assert any(cmd.startswith("eventlog decide ") and "--decision retry_restore --expected-revision 2" in cmd
               for cmd in v["next"])
    assert {e["decision"] for e in v["facts"]["would_accept"]} >= {"retry_restore", "start_fresh", "close"}
    lane = json.loads(run_cli("explain", str(FIX / "lanes_stopped_idle.jsonl"), "stopped-lane", "--at", "log",
                              "--json").stdout)
    [v] = lane["verdicts"]
    assert v["code"] == "stopped-on-purpose" and v["says"].startswith("not stalled: stopped on purpose")
    assert v["facts"]["record"] == {"product": "stopped-lane", "stalled": False, "reason": "stopped-on-purpose"}


def test_status_says_how_long_an_accounts_probes_have_failed_as_explain_does(tmp_path: Path) -> None:
    """A limit whose reset passed at 01:00, then 14 transient probes 02:00-09:31: as of 10:05 the account backs off
    until 10:31. Its probes have failed for 8 h 5 min, as explain and RecoveryAccountBackingOff say; status's item
    counted from the latest probe (34 min)."""
    probes = ["02:00", "02:01", "02:03", "02:07", "02:15", "02:31", "03:03", "04:03", "05:03", "06:03", "07:03",
              "08:03", "08:31", "09:31"]
    log = write_log(tmp_path / "acc.jsonl", [
        {"type": "handoff_created", "ts": "2026-08-09T20:00:00Z", "handoff_id": "h1", "account": "acc"},
        {"type": "limit_recorded", "ts": "2026-08-09T20:00:00Z", "account": "acc", "limited_at": "2026-08-09T20:00:00Z",
         "reset_at": "2026-08-10T01:00:00Z", "source": "parsed-limit-message", "confidence": "explicit"},
        *({"type": "probe_result", "ts": f"2026-08-10T{hm}:00Z", "account": "acc", "outcome": "transient"}
          for hm in probes)])
    at = "2026-08-10T10:05:00Z"
    explained = json.loads(run_cli("explain", str(log), "acc", "--at", at, "--json").stdout)
    (verdict,) = explained["verdicts"]
    assert verdict["code"] == "backoff_transient"
    assert "its probes have failed since 2026-08-10T02:00:00Z (8 h 5 min)" in verdict["says"]
    assert (verdict["since"], verdict["for_s"]) == ("2026-08-10T02:00:00Z", 8 * 3600 + 5 * 60)
    out = run_cli("status", str(log), "--at", at, "--json")
    (item,) = [i for g in json.loads(out.stdout)["groups"] for i in g["items"] if i["id"] == "acc"]
    assert (item["reason_code"], item["since"], item["for_s"]) == (
        "backoff_transient", "2026-08-10T02:00:00Z", 8 * 3600 + 5 * 60)
    assert item["until"].startswith("2026-08-10T10:31:00")  # the backoff still runs from the latest probe
    text = run_cli("status", str(log), "--at", at).stdout
    assert "  acc (for 8 h 5 min): " in text, text
