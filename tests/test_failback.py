"""The failback watcher pass (``eventlog failback``), with fake probe and resume commands."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from eventlog.appender import Conflict, EventLog
from eventlog.cli.common import replay_log
from eventlog.clock import At
from eventlog.runners.failback import Options, Report, read_handshake, run_pass
from tests.conftest import ROOT, peak_rss_kb, write_log

FAKES = ROOT / "tests" / "fakes"
PROBE = str(FAKES / "failback_probe.py")
RESUME = str(FAKES / "failback_resume.py")
T0 = datetime.fromisoformat("2026-08-03T10:00:00+09:00")


def pass_at(opts: Options, when: datetime = T0) -> Report:
    """One pass with its clock pinned at ``when`` (what ``--at`` does)."""
    opts.at = At(when)
    return run_pass(opts)


def ts(minutes: float = 0) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat()


def created(hid: str, minutes: float = -60, account: str = "cloud-account-a", **kw: Any) -> dict[str, Any]:
    return {"type": "handoff_created", "ts": ts(minutes), "handoff_id": hid, "account": account, **kw}


def options(log: Path, probe: str | list[str] = "ok", resume: str | list[str] = "verified", **kw: Any) -> Options:
    probe_cmd = [sys.executable, PROBE, probe] if isinstance(probe, str) else probe
    resume_cmd = [sys.executable, RESUME, resume] if isinstance(resume, str) else resume
    return Options(log=str(log), probe_cmd=probe_cmd, resume_cmd=resume_cmd, watcher="watcher-a",
                   timeout_s=kw.pop("timeout_s", 10), **kw)


def lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def new_lines(log: Path, before: int) -> list[dict[str, Any]]:
    return lines(log)[before:]


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def handoffs_view(log: Path, at: datetime = T0) -> dict[str, Any]:
    replay = replay_log(str(log), show_progress=False)
    return replay.folder.handoffs.view(at)  # type: ignore[attr-defined, no-any-return]


# --- the pass ----------------------------------------------------------------------------------


def test_no_pending_means_no_probe_at_all(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [
        created("h1"), {"type": "skip", "ts": ts(-30), "handoff_id": "h1", "reason": "obsolete"},
    ])
    # A probe that cannot even be started would show up as an error if it were called.
    report = pass_at(options(log, probe=["/nonexistent/probe"]))
    assert report.probes == [] and report.errors == []
    added = new_lines(log, 2)
    assert types(added) == ["watcher_run"]
    assert added[0]["exit"] == "ok" and added[0]["period_s"] == 900 and added[0]["watcher"] == "watcher-a"


def test_ok_probe_claims_requests_before_resuming_and_verifies(tmp_path: Path, monkeypatch: Any) -> None:
    record = tmp_path / "record.jsonl"
    log = write_log(tmp_path / "log.jsonl", [created("h1", repo="team/app", branch="feature/x", head="abc1234")])
    monkeypatch.setenv("FAKE_RECORD", str(record))
    report = pass_at(options(log))
    added = new_lines(log, 1)
    assert types(added) == ["probe_result", "claimed", "resume_requested", "verified", "watcher_run"]
    assert added[0]["outcome"] == "ok" and added[0]["account"] == "cloud-account-a"
    assert added[1] == {**added[1], "handoff_id": "h1", "watcher": "watcher-a", "attempt": 1}
    assert added[3] == {**added[3], "handoff_id": "h1", "attempt": 1, "branch": "main", "head": "abc1234",
                        "dirty": False, "todos": "taken_over"}
    # Intent before the act: when the resume command started, resume_requested was already in the log.
    seen = json.loads(record.read_text(encoding="utf-8"))
    assert seen["seen"][-1] == "resume_requested"
    assert seen["argv"][-1] == "h1"  # the handoff id as the last argument
    assert seen["env"]["FAILBACK_HANDOFF_ID"] == "h1"
    assert seen["env"]["FAILBACK_BRANCH"] == "feature/x" and seen["env"]["FAILBACK_HEAD"] == "abc1234"
    assert seen["env"]["FAILBACK_ATTEMPT"] == "1"
    assert report.claimed == ["h1"] and report.exit == "ok"
    assert handoffs_view(log)["failback"] == {"returned": 1, "total": 1}


def test_placeholders_are_filled_and_then_no_id_is_appended(tmp_path: Path, monkeypatch: Any) -> None:
    record = tmp_path / "record.jsonl"
    log = write_log(tmp_path / "log.jsonl", [created("h1")])
    monkeypatch.setenv("FAKE_RECORD", str(record))
    pass_at(options(log, resume=[sys.executable, RESUME, "verified", "--account={account}", "{handoff_id}"]))
    assert json.loads(record.read_text())["argv"] == ["verified", "--account=cloud-account-a", "h1"]


def test_claims_follow_claim_order(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [
        created("old", -300), created("urgent", -10, deadline=ts(120)), created("important", -20, importance=5),
    ])
    pass_at(options(log))
    claims = [e["handoff_id"] for e in lines(log) if e["type"] == "claimed"]
    assert claims == ["urgent", "important", "old"]


def test_no_free_slot_means_no_probe_and_no_claim(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [
        created("h1"), created("h2"), created("h3"),
        {"type": "claimed", "ts": ts(-5), "handoff_id": "h1", "watcher": "watcher-b", "attempt": 1},
        {"type": "claimed", "ts": ts(-5), "handoff_id": "h2", "watcher": "watcher-c", "attempt": 1},
    ])
    report = pass_at(options(log))
    assert types(new_lines(log, 5)) == ["watcher_run"]
    assert report.pending == 1 and report.free_slots == 0


def test_waiting_reset_is_not_probed(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [
        created("h1"),
        {"type": "limit_recorded", "ts": ts(-60), "account": "cloud-account-a", "limited_at": ts(-60),
         "reset_at": ts(1), "source": "parsed-limit-message", "confidence": "explicit"},
    ])
    report = pass_at(options(log, probe=["/nonexistent/probe"]))
    assert report.not_probed == {"cloud-account-a": {"probe": False, "reason": "waiting_reset", "next_probe_at": ts(1)}}
    assert types(new_lines(log, 2)) == ["watcher_run"]
    # One minute later the reset has come: probe, claim, verify.
    pass_at(options(log), T0 + timedelta(minutes=1))
    assert types(new_lines(log, 3)) == ["probe_result", "claimed", "resume_requested", "verified", "watcher_run"]


def test_quota_probe_records_an_explicit_limit_and_claims_nothing(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [created("h1")])
    report = pass_at(options(log, probe="quota_explicit"))
    added = new_lines(log, 1)
    assert types(added) == ["probe_result", "limit_recorded", "watcher_run"]
    assert added[0]["outcome"] == "quota_limited"
    assert added[1]["confidence"] == "explicit"
    assert added[1]["reset_at"] == "2026-08-03T17:00:00+09:00"  # "resets 5pm (Asia/Tokyo)" seen at 10:00 JST
    assert report.claimed == []
    plan = handoffs_view(log)["probe_plan"]["cloud-account-a"]
    assert plan == {"probe": False, "reason": "waiting_reset", "next_probe_at": "2026-08-03T17:00:00+09:00"}


def test_weekly_estimate_is_recorded_once_then_backed_off_wider(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [created("h1")])
    pass_at(options(log, probe="quota_weekly"))
    added = new_lines(log, 1)
    assert types(added) == ["probe_result", "limit_recorded", "watcher_run"]
    assert added[1]["confidence"] == "estimated" and added[1]["reset_at"] == "2026-08-04T10:00:00+09:00"
    # After the estimated reset the probe still says limited: no new estimate, the backoff starts (30 min).
    day = T0 + timedelta(days=1)
    pass_at(options(log, probe="quota_weekly"), day)
    assert types(new_lines(log, 4)) == ["probe_result", "watcher_run"]
    plan = handoffs_view(log, day)["probe_plan"]["cloud-account-a"]
    assert plan == {"probe": False, "reason": "backoff_estimate", "next_probe_at": "2026-08-04T10:30:00+09:00"}
    # Wrong again at 10:30: the next wait is 1 h.
    later = day + timedelta(minutes=30)
    pass_at(options(log, probe="quota_weekly"), later)
    plan = handoffs_view(log, later)["probe_plan"]["cloud-account-a"]
    assert plan == {"probe": False, "reason": "backoff_estimate", "next_probe_at": "2026-08-04T11:30:00+09:00"}


def test_transient_probe_backs_off_and_claims_nothing(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [created("h1")])
    pass_at(options(log, probe="congestion"))
    added = new_lines(log, 1)
    assert types(added) == ["probe_result", "watcher_run"]
    assert added[0]["outcome"] == "transient" and added[0]["status"] == 529
    assert handoffs_view(log)["probe_plan"]["cloud-account-a"]["reason"] == "backoff_transient"


def test_another_watcher_winning_the_claim_is_skipped(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [created("h1")])
    # The probe lets watcher-b claim h1 between our plan and our claim.
    report = pass_at(options(log, probe=[sys.executable, PROBE, "race", "h1"]))
    assert report.claimed == [] and report.exit == "ok"
    assert report.lost[0]["handoff_id"] == "h1" and "live claim" in report.lost[0]["reason"]
    claims = [e for e in lines(log) if e["type"] == "claimed"]
    assert [c["watcher"] for c in claims] == ["watcher-b"]
    assert types(lines(log))[-1] == "watcher_run"


def test_stale_retryable_claim_is_released_then_retried_on_a_later_pass(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [
        created("h1"),
        {"type": "claimed", "ts": ts(-31), "handoff_id": "h1", "watcher": "watcher-dead", "attempt": 1},
    ])
    report = pass_at(options(log))
    added = new_lines(log, 2)
    # Released with its reason, and not claimed again in the same pass: nothing else pending, no probe.
    assert types(added) == ["released", "watcher_run"]
    assert "stale claim" in added[0]["reason"] and "watcher-dead" in added[0]["reason"]
    assert report.released[0]["handoff_id"] == "h1"
    pass_at(options(log), T0 + timedelta(minutes=15))
    added = new_lines(log, 4)
    assert types(added) == ["probe_result", "claimed", "resume_requested", "verified", "watcher_run"]
    assert added[1]["attempt"] == 2


def test_claim_not_yet_stale_is_left_alone(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [
        created("h1"),
        {"type": "claimed", "ts": ts(-30), "handoff_id": "h1", "watcher": "watcher-b", "attempt": 1},
    ])
    report = pass_at(options(log))  # exactly 30 min: not longer than stale_after
    assert report.released == []
    report = pass_at(options(log, stale_after_s=600))
    assert [r["handoff_id"] for r in report.released] == ["h1"]


def test_stale_requests_go_to_a_person_and_free_their_slots(tmp_path: Path) -> None:
    # Issue 17: "two of them stop all failback ('1 pending, no free slot: no probe')".
    log = write_log(tmp_path / "log.jsonl", [
        created("h1"), created("h2"), created("h3"),
        {"type": "claimed", "ts": ts(-41), "handoff_id": "h1", "watcher": "watcher-b", "attempt": 1},
        {"type": "resume_requested", "ts": ts(-40), "handoff_id": "h1", "attempt": 1},
        {"type": "claimed", "ts": ts(-41), "handoff_id": "h2", "watcher": "watcher-b", "attempt": 1},
        {"type": "resume_requested", "ts": ts(-35), "handoff_id": "h2", "attempt": 1},
    ])
    report = pass_at(options(log))
    added = new_lines(log, 7)
    assert types(added) == ["needs_human", "needs_human", "probe_result", "claimed", "resume_requested", "verified",
                            "watcher_run"]
    assert [(e["handoff_id"], e["reason"], e["attempt"]) for e in added[:2]] == [
        ("h1", "resume_unconfirmed", 1), ("h2", "resume_unconfirmed", 1)]
    assert "no verified, conflict or resume_failed came back in 2400s" in added[0]["detail"]
    assert added[3]["handoff_id"] == "h3"
    assert report.status == 1 and report.problems == [
        f"{hid}: resume requested (attempt 1) and nothing came back in more than 1800 s: effect unknown, handed to "
        "a person (resume_unconfirmed); its slot is free" for hid in ("h1", "h2")]
    view = handoffs_view(log)
    assert view["needs_human_reasons"] == {"resume_unconfirmed": 2}
    assert view["stale_claims"]["unknown_effect"] == [] and view["items"]["h3"]["state"] == "returned"
    # Handed over once: the next pass has nothing new for a person.
    report = pass_at(options(log), T0 + timedelta(minutes=15))
    assert report.status == 0 and types(new_lines(log, 14)) == ["watcher_run"]


def test_a_stale_request_answered_meanwhile_is_not_handed_over(tmp_path: Path, monkeypatch: Any) -> None:
    """needs_human goes in at the revision the pass read: a verified that lands between the read and the append wins."""
    from projections.handoffs import Handoffs

    log = write_log(tmp_path / "log.jsonl", [
        created("h1"),
        {"type": "claimed", "ts": ts(-41), "handoff_id": "h1", "watcher": "watcher-b", "attempt": 1},
        {"type": "resume_requested", "ts": ts(-40), "handoff_id": "h1", "attempt": 1},
    ])
    judged = Handoffs.stale_claims

    def answered_right_after_the_read(self: Handoffs, *args: Any) -> dict[str, list[str]]:
        found = judged(self, *args)
        EventLog(log).append([{"type": "verified", "ts": ts(), "handoff_id": "h1", "attempt": 1, "branch": "main",
                               "head": "abc", "dirty": False, "todos": "taken_over"}])
        return found

    monkeypatch.setattr(Handoffs, "stale_claims", answered_right_after_the_read)
    report = pass_at(options(log))
    assert report.unconfirmed == [] and report.status == 0
    assert "expected revision 3, stream is at 4" in report.lost[0]["reason"]
    assert types(new_lines(log, 3)) == ["verified", "watcher_run"]
    assert handoffs_view(log)["items"]["h1"]["state"] == "returned"


@pytest.mark.parametrize("missing", ["not_found", "not_executable"])
def test_resume_command_that_cannot_start_is_effect_none(tmp_path: Path, missing: str) -> None:
    log = write_log(tmp_path / "log.jsonl", [created("h1")])
    if missing == "not_found":
        cmd = [str(tmp_path / "no-such-resume")]
    else:
        script = tmp_path / "resume.sh"
        script.write_text("#!/bin/sh\necho hi\n")
        script.chmod(0o644)
        cmd = [str(script)]
    report = pass_at(options(log, resume=cmd))
    added = new_lines(log, 1)
    assert types(added) == ["probe_result", "claimed", "resume_requested", "resume_failed", "watcher_run"]
    assert added[3]["effect"] == "none"
    assert added[4]["exit"] == "error" and report.exit == "error"
    view = handoffs_view(log)
    assert view["items"]["h1"]["state"] == "pending" and view["items"]["h1"]["attempt"] == 1


@pytest.mark.parametrize(
    ("mode", "words"),
    [("fail", "exit 3"), ("hang", "timed out"), ("garbage", "no handshake"), ("wrong_id", "someone-else")],
)
def test_resume_that_started_and_failed_is_effect_unknown_and_not_retried(
    tmp_path: Path, mode: str, words: str
) -> None:
    log = write_log(tmp_path / "log.jsonl", [created("h1")])
    report = pass_at(options(log, resume=mode, timeout_s=0.5))
    added = new_lines(log, 1)
    assert types(added) == ["probe_result", "claimed", "resume_requested", "resume_failed", "watcher_run"]
    assert added[3]["effect"] == "unknown" and words in added[3]["error"]
    assert added[4]["exit"] == "ok" and report.exit == "ok"
    assert report.to_person == ["h1"] and report.status == 1  # new work for a person
    assert "h1: resume_failed (effect unknown)" in report.problems[0]
    assert handoffs_view(log)["items"]["h1"]["state"] == "needs_human"
    # The next pass does not touch it: nothing pending, no probe.
    pass_at(options(log), T0 + timedelta(minutes=15))
    assert types(new_lines(log, 6)) == ["watcher_run"]


def test_conflict_handshake_goes_to_a_person(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [created("h1", branch="feature/x", head="abc1234")])
    pass_at(options(log, resume="conflict"))
    added = new_lines(log, 1)
    assert types(added) == ["probe_result", "claimed", "resume_requested", "conflict", "watcher_run"]
    assert "HEAD moved" in added[3]["detail"]
    assert handoffs_view(log)["not_returned"] == {"needs_human": 1}


def test_heartbeat_is_the_last_line_and_says_error_when_the_probe_cannot_start(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [created("h1")])
    report = pass_at(options(log, probe=["/nonexistent/probe"], period_s=300))
    last = lines(log)[-1]
    assert last["type"] == "watcher_run" and last["exit"] == "error" and last["period_s"] == 300
    assert "could not be started" in last["detail"]
    assert report.claimed == []
    assert handoffs_view(log)["watcher"] == {"last_run": last["ts"], "late": False}


def test_read_handshake() -> None:
    good = {"handoff_id": "h1", "branch": "main", "head": "abc", "dirty": True, "todos": "already_done"}
    assert read_handshake("log line\n" + json.dumps(good) + "\n").todos == "already_done"  # type: ignore[union-attr]
    assert read_handshake(json.dumps(good, indent=2)).head == "abc"  # type: ignore[union-attr]
    assert read_handshake('{"conflict": "tree changed"}').conflict == "tree changed"  # type: ignore[union-attr]
    assert isinstance(read_handshake('{"conflict": ""}'), str)
    assert isinstance(read_handshake(json.dumps({**good, "todos": "maybe"})), str)
    assert isinstance(read_handshake(json.dumps({**good, "dirty": "no"})), str)
    assert isinstance(read_handshake("started\n"), str)


# --- the log guards the claim ------------------------------------------------------------------------


def test_a_second_claim_is_refused_by_the_checked_append(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [created("h1")])
    EventLog(log).append([{"type": "claimed", "handoff_id": "h1", "watcher": "a", "attempt": 1}])
    with pytest.raises(Conflict):
        EventLog(log).append([{"type": "claimed", "handoff_id": "h1", "watcher": "b", "attempt": 1}])
    with pytest.raises(Conflict):
        EventLog(log).append([{"type": "claimed", "handoff_id": "nope", "watcher": "b", "attempt": 1}])


_CLAIM = """
import sys
import time
from eventlog.appender import Conflict, EventLog
try:
    EventLog(sys.argv[1]).append([{"type": "claimed", "handoff_id": "h1", "watcher": sys.argv[2], "attempt": 1}])
except Conflict:
    sys.exit(3)
"""


def test_concurrent_claims_from_separate_processes_exactly_one_wins(tmp_path: Path) -> None:
    for round_ in range(3):
        log = write_log(tmp_path / f"log{round_}.jsonl", [created("h1")])
        procs = [
            subprocess.Popen([sys.executable, "-c", _CLAIM, str(log), f"w{i}"], cwd=ROOT)
            for i in range(6)
        ]
        codes = sorted(p.wait(timeout=60) for p in procs)
        assert codes == [0, 3, 3, 3, 3, 3]
        claims = [e for e in lines(log) if e["type"] == "claimed"]
        assert len(claims) == 1


# --- the command line ------------------------------------------------------------------------------


def test_cli_pass_prints_a_summary_and_json(tmp_path: Path, cli: Any) -> None:
    now = datetime.now().astimezone()
    log = write_log(tmp_path / "log.jsonl", [
        {"type": "handoff_created", "ts": (now - timedelta(hours=1)).isoformat(), "handoff_id": "h1",
         "account": "cloud-account-a"},
    ])
    probe = f"{sys.executable} {PROBE} ok"
    resume = f"{sys.executable} {RESUME} noisy"
    out = cli("failback", str(log), "--probe-cmd", probe, "--resume-cmd", resume, "--watcher", "w1", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["claimed"] == ["h1"] and summary["exit"] == "ok"
    assert summary["resumed"][0]["result"] == "verified"
    assert types(lines(log))[-1] == "watcher_run"
    out = cli("failback", str(log), "--probe-cmd", probe, "--resume-cmd", resume, "--watcher", "w1")
    assert out.returncode == 0
    assert "nothing pending: no probe" in out.stdout


def test_cli_pass_that_released_a_stale_claim_says_it_is_pending_again(tmp_path: Path, cli: Any) -> None:
    """A user review: after releasing a stale claim the pass printed "nothing pending: no probe", though the
    replay right after shows it pending, its account due and it first in next_claims."""
    log = write_log(tmp_path / "log.jsonl", [
        created("h-r"),
        {"type": "claimed", "ts": ts(-31), "handoff_id": "h-r", "watcher": "watcher-dead", "attempt": 1},
    ])
    args = ["--probe-cmd", f"{sys.executable} {PROBE} ok", "--resume-cmd", f"{sys.executable} {RESUME} verified",
            "--watcher", "w2"]
    out = cli("failback", str(log), *args, "--at", T0.isoformat())
    assert out.returncode == 0, out.stderr
    assert "nothing pending" not in out.stdout, out.stdout
    assert "released stale claim h-r" in out.stdout and "pending again, claimed on a later pass" in out.stdout
    assert "nothing else pending: no probe" in out.stdout
    handoffs = json.loads(cli("replay", str(log)).stdout)["handoffs"]
    assert handoffs["pending"]["count"] == 1 and handoffs["next_claims"] == ["h-r"]
    # ... and the next pass claims it
    out = cli("failback", str(log), *args, "--at", (T0 + timedelta(minutes=15)).isoformat())
    assert out.returncode == 0 and "claimed h-r" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--probe-cmd", "", "--resume-cmd", "x"],
        ["--probe-cmd", "probe 'unclosed", "--resume-cmd", "x"],
        ["--probe-cmd", "p", "--resume-cmd", "x", "--period", "0"],
        ["--probe-cmd", "p", "--resume-cmd", "x", "--timeout", "0"],
        ["--probe-cmd", "p"],
    ],
)
def test_cli_bad_usage_exits_2(tmp_path: Path, cli: Any, args: list[str]) -> None:
    log = write_log(tmp_path / "log.jsonl", [created("h1")])
    out = cli("failback", str(log), *args)
    assert out.returncode == 2
    assert lines(log) == [created("h1")]  # nothing written


def test_cli_missing_log_exits_2(tmp_path: Path, cli: Any) -> None:
    out = cli("failback", str(tmp_path / "nope.jsonl"), "--probe-cmd", "p", "--resume-cmd", "r")
    assert out.returncode == 2
    assert not (tmp_path / "nope.jsonl").exists()


# --- failures speak (issue 13 point 4, issue 17 point 6) --------------------------------------------


def pending_now(path: Path, n: int = 1) -> Path:
    """A log with ``n`` handoffs created an hour before the wall clock."""
    at = (datetime.now().astimezone() - timedelta(hours=1)).isoformat()
    return write_log(path, [{"type": "handoff_created", "ts": at, "handoff_id": f"h{i}", "account": "cloud-account-a"}
                            for i in range(1, n + 1)])


def test_cli_probe_command_that_does_not_exist_exits_1_and_says_why(tmp_path: Path, cli: Any) -> None:
    log = pending_now(tmp_path / "log.jsonl")
    out = cli("failback", str(log), "--probe-cmd", str(tmp_path / "no-such-probe"), "--resume-cmd", "true")
    assert out.returncode == 1
    [line] = out.stderr.splitlines()
    assert line.startswith("eventlog: probe for cloud-account-a could not be started: ")
    assert "no-such-probe" in line
    heartbeat = lines(log)[-1]
    assert heartbeat["type"] == "watcher_run" and heartbeat["exit"] == "error"
    assert "could not be started" in heartbeat["detail"]


def test_cli_resume_cmd_false_with_8_pending_exits_1_naming_each(tmp_path: Path, cli: Any) -> None:
    log = pending_now(tmp_path / "log.jsonl", 8)
    out = cli("failback", str(log), "--probe-cmd", f"{sys.executable} {PROBE} ok", "--resume-cmd", "false")
    assert out.returncode == 1
    problems = out.stderr.splitlines()
    assert len(problems) == 8
    for i, line in enumerate(problems, 1):
        assert line.startswith(f"eventlog: h{i}: resume_failed (effect unknown) (exit 1): handed to a person")
    view = handoffs_view(log)
    assert view["by_state"] == {"needs_human": 8}
    assert lines(log)[-1]["exit"] == "ok"  # the pass itself did all of its work


def test_cli_bad_lines_are_named_and_exit_1(tmp_path: Path, cli: Any) -> None:
    naive = [{"type": "handoff_created", "ts": f"2026-08-03T09:0{i}:00", "handoff_id": f"h{i}",
              "account": "cloud-account-a"} for i in range(5)]
    log = write_log(tmp_path / "log.jsonl", naive)
    probe = f"{sys.executable} {PROBE} ok"
    resume = f"{sys.executable} {RESUME} verified"
    at = ["--at", "2026-08-03T10:00:00+09:00"]
    out = cli("failback", str(log), "--probe-cmd", probe, "--resume-cmd", resume, *at, "--json")
    assert out.returncode == 1
    assert json.loads(out.stdout)["bad_lines"]["count"] == 5
    [line] = out.stderr.splitlines()
    assert line.startswith(f"eventlog: {log}: 5 bad line(s) skipped, 5 new (no earlier pass of this runner in the "
                           "log); new, first: line 1: no_offset: ts ")
    assert line.count("no_offset") == 3  # the first three are named
    heartbeat = lines(log)[-1]
    assert heartbeat["exit"] == "error" and "5 bad line(s)" in heartbeat["detail"]
    assert heartbeat["ts"] == "2026-08-03T10:00:00.000+09:00"  # --at pins the pass's clock
    # read in the zone they were written in, they are handoffs like any other
    log = write_log(tmp_path / "zoned.jsonl", naive)
    zoned = cli("failback", str(log), "--probe-cmd", probe, "--resume-cmd", resume, *at, "--assume-tz", "Asia/Tokyo",
                "--max-inflight", "5", "--json")
    assert zoned.returncode == 0, zoned.stderr
    assert json.loads(zoned.stdout)["claimed"] == ["h0", "h1", "h2", "h3", "h4"]


def test_pass_reads_the_one_clock(tmp_path: Path) -> None:
    from freezegun import freeze_time

    log = write_log(tmp_path / "log.jsonl", [created("h1")])
    with freeze_time("2026-08-03T01:05:00+00:00"):
        report = run_pass(options(log, probe=["/nonexistent/probe"]))
    assert report.started_at == "2026-08-03T01:05:00.000+00:00"
    assert lines(log)[-1]["ts"] == "2026-08-03T01:05:00.000+00:00"


# --- issue 17: a handshake that can wait, a failure with no effect, probe classes ------------------


def append_cli(cli: Any, log: Path, event: dict[str, Any]) -> Any:
    """What the cloud side does when its session ends: ``eventlog append LOG`` of its answer."""
    return cli("append", str(log), stdin=json.dumps(event) + "\n")


def verified_of(hid: str, attempt: int, minutes: float) -> dict[str, Any]:
    return {"type": "verified", "ts": ts(minutes), "handoff_id": hid, "attempt": attempt, "branch": "main",
            "head": "abc1234", "dirty": False, "todos": "taken_over"}


def test_started_answer_waits_and_a_verified_a_minute_later_returns_it(tmp_path: Path, cli: Any) -> None:
    log = write_log(tmp_path / "log.jsonl", [created("h1")])
    report = pass_at(options(log, resume="started"))
    added = new_lines(log, 1)
    assert types(added) == ["probe_result", "claimed", "resume_requested", "watcher_run"]
    assert report.status == 0 and report.problems == []
    assert report.resumed == [{"handoff_id": "h1", "attempt": 1, "result": "started",
                               "detail": "session-h1; waiting for the cloud side to report attempt 1", "written": True}]
    view = handoffs_view(log, T0 + timedelta(minutes=1))
    assert view["items"]["h1"] == {"state": "resume_requested", "account": "cloud-account-a", "attempt": 1,
                                   "stale": None}
    # The session reports a minute later, through eventlog append: an answer of another attempt is refused.
    wrong = append_cli(cli, log, verified_of("h1", 2, 1))
    assert wrong.returncode == 3
    assert "verified of attempt 2 is fenced off: the live claim of h1 is attempt 1 (by watcher-a)" in wrong.stderr
    right = append_cli(cli, log, verified_of("h1", 1, 1))
    assert right.returncode == 0, right.stderr
    view = handoffs_view(log, T0 + timedelta(minutes=1))
    assert view["items"]["h1"]["state"] == "returned" and view["failback"] == {"returned": 1, "total": 1}
    assert view["latency_s"]["requested_to_verified"]["p50"] == 60


def test_failed_with_no_effect_is_pending_again_and_claimed_on_the_next_pass(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [created("h1")])
    report = pass_at(options(log, resume="failed_none"))
    added = new_lines(log, 1)
    assert types(added) == ["probe_result", "claimed", "resume_requested", "resume_failed", "watcher_run"]
    assert added[3] == {**added[3], "attempt": 1, "effect": "none",
                        "error": "the cloud refused the session before it started"}
    assert report.status == 0 and report.to_person == []  # nothing for a person: it is retried
    assert handoffs_view(log)["items"]["h1"]["state"] == "pending"
    pass_at(options(log), T0 + timedelta(minutes=15))
    added = new_lines(log, 6)
    assert types(added) == ["probe_result", "claimed", "resume_requested", "verified", "watcher_run"]
    assert added[1]["attempt"] == 2 and added[3]["attempt"] == 2


def test_failed_with_unknown_effect_goes_to_a_person(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [created("h1")])
    report = pass_at(options(log, resume="failed_unknown"))
    added = new_lines(log, 1)
    assert added[3] == {**added[3], "type": "resume_failed", "effect": "unknown",
                        "error": "lost the session after it started"}
    assert report.status == 1 and report.to_person == ["h1"]
    assert handoffs_view(log)["items"]["h1"]["state"] == "needs_human"


def test_a_started_session_that_stays_silent_goes_to_a_person_and_its_late_answer_is_taken(
    tmp_path: Path, cli: Any
) -> None:
    log = write_log(tmp_path / "log.jsonl", [created("h1"), created("h2")])
    report = pass_at(options(log, resume="started", max_inflight=1))
    assert report.claimed == ["h1"]  # the waiting request holds the one slot: h2 waits
    report = pass_at(options(log, resume="started", max_inflight=1), T0 + timedelta(minutes=15))
    assert report.claimed == [] and report.free_slots == 0
    # 31 minutes on, nothing came back: a person gets it, the slot goes to h2.
    report = pass_at(options(log, resume="started", max_inflight=1), T0 + timedelta(minutes=31))
    assert [u["handoff_id"] for u in report.unconfirmed] == ["h1"] and report.claimed == ["h2"]
    assert report.status == 1
    # The session's answer comes after all: applied, the handoff returned.
    out = append_cli(cli, log, verified_of("h1", 1, 40))
    assert out.returncode == 0, out.stderr
    view = handoffs_view(log, T0 + timedelta(minutes=40))
    assert view["items"]["h1"]["state"] == "returned" and view["needs_human_reasons"] == {}


def test_auth_error_hands_the_account_to_a_person_until_a_probe_by_hand(tmp_path: Path, cli: Any) -> None:
    log = write_log(tmp_path / "log.jsonl", [created("h1")])
    report = pass_at(options(log, probe="auth"))
    assert report.status == 1
    assert report.problems == ["account cloud-account-a: the probe said auth_error (auth error text: Invalid API "
                               "key · Please run /login): no probe until a person fixes it and probes by hand "
                               "(eventlog handoff probe)"]
    # Later passes do not probe it at all (a probe that cannot start would be an error here).
    later = T0 + timedelta(hours=6)
    report = pass_at(options(log, probe=["/nonexistent/probe"]), later)
    assert report.status == 0 and report.probes == []
    assert report.not_probed == {"cloud-account-a": {"probe": False, "reason": "needs_person", "next_probe_at": None}}
    status = cli("status", str(log), "--at", later.isoformat(), "--json")
    assert status.returncode == 1
    shown = [i for g in json.loads(status.stdout)["groups"] for i in g["items"] if i["id"] == "cloud-account-a"]
    assert [i["reason_code"] for i in shown] == ["auth_error"] and "auth_error" in shown[0]["reason"]
    # The person fixed the login and records it with a probe by hand; the next pass claims.
    still = cli("handoff", "probe", str(log), "cloud-account-a", "--probe-cmd", f"{sys.executable} {PROBE} auth",
                "--at", later.isoformat(), "--actor", "ops")
    assert still.returncode == 1 and "the probe said auth_error" in still.stderr
    fixed = cli("handoff", "probe", str(log), "cloud-account-a", "--probe-cmd", f"{sys.executable} {PROBE} ok",
                "--at", later.isoformat(), "--actor", "ops", "--json")
    assert fixed.returncode == 0, fixed.stderr
    done = json.loads(fixed.stdout)
    assert done["before"]["reason"] == "needs_person" and done["after"]["reason"] == "due"
    assert lines(log)[-1] == {**lines(log)[-1], "type": "probe_result", "outcome": "ok", "actor": "ops"}
    report = pass_at(options(log), later + timedelta(minutes=15))
    assert report.claimed == ["h1"] and report.status == 0


def test_unexpected_probe_backs_off(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [created("h1")])
    report = pass_at(options(log, probe="unexpected"))
    assert report.probes[0]["outcome"] == "unexpected" and report.claimed == []
    plan = handoffs_view(log)["probe_plan"]["cloud-account-a"]
    assert plan["reason"] == "backoff_unexpected" and plan["next_probe_at"] is not None
    # Within the wait the next pass does not probe.
    report = pass_at(options(log, probe=["/nonexistent/probe"]), T0 + timedelta(seconds=30))
    assert report.probes == [] and report.not_probed["cloud-account-a"]["reason"] == "backoff_unexpected"


@pytest.mark.parametrize(
    ("stdout", "kind", "fields"),
    [
        ('{"started": "session-9"}', "Started", {"started": "session-9"}),
        ('{"started": true, "handoff_id": "h1"}', "Started", {"started": True}),
        ('{"failed": "refused", "effect": "none"}', "Failed", {"failed": "refused", "effect": "none"}),
        ('{"failed": "lost it"}', "Failed", {"failed": "lost it", "effect": "unknown"}),
    ],
)
def test_read_the_answers_that_wait_or_fail(stdout: str, kind: str, fields: dict[str, Any]) -> None:
    found = read_handshake("chatter\n" + stdout)
    assert type(found).__name__ == kind
    for name, value in fields.items():
        assert getattr(found, name) == value


@pytest.mark.parametrize("stdout", ['{"started": ""}', '{"started": false}', '{"failed": ""}',
                                    '{"failed": "x", "effect": "maybe"}', '{"started": 3}'])
def test_answers_that_say_nothing_are_no_answer(stdout: str) -> None:
    assert isinstance(read_handshake(stdout), str)


def test_help_lists_every_answer_of_the_resume_command(cli: Any) -> None:
    """The handshake of README's table, as --help must tell a user who writes a resume command."""
    out = cli("failback", "--help")
    assert out.returncode == 0
    for answer in ('{"conflict": "..."}', '{"started": "..."}', '{"failed": "...", "effect": "none"}',
                   '{"failed": "..."}', "resume_unconfirmed"):
        assert answer in out.stdout, answer


# --- the pass's budget (the unit's TimeoutStartSec must never be what ends a pass) ---------------------------


def test_cli_pass_past_its_budget_starts_no_more_commands_and_names_what_it_left(tmp_path: Path, cli: Any) -> None:
    """Five accounts whose probes hang: each probe is stopped at --timeout (2 s), and past --budget (3 s) no
    further probe starts. The pass ends within the budget plus one command, exits 1, and names on stderr, in its
    report and in its heartbeat the accounts it did not probe and their handoffs; a later pass takes them."""
    at = (datetime.now().astimezone() - timedelta(hours=1)).isoformat()
    accounts = [f"acct-{c}" for c in "abcde"]
    log = write_log(tmp_path / "log.jsonl", [
        {"type": "handoff_created", "ts": at, "handoff_id": f"h{i}", "account": a} for i, a in enumerate(accounts, 1)
    ])
    began = time.monotonic()
    out = cli("failback", str(log), "--probe-cmd", f"{sys.executable} {PROBE} hang", "--resume-cmd", "true",
              "--timeout", "2s", "--kill-grace", "1s", "--budget", "3s", "--json")
    took = time.monotonic() - began
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    probed = [p["account"] for p in report["probes"]]
    left = report["not_reached"]
    # The first probe starts at once; the third could only start after two probes of 2 s each, past the budget.
    assert 1 <= len(probed) <= 2 and probed == accounts[:len(probed)]
    assert left["accounts"] == accounts[len(probed):] and left["budget_s"] == 3 and left["after_s"] >= 3
    assert left["handoffs"] == [f"h{i}" for i in range(len(probed) + 1, 6)]
    assert report["claimed"] == [] and report["exit"] == "error"
    assert took < 3 + 2 + 1 + 5, took  # the budget, one command, its grace, and a Python start or two
    *hung, said = out.stderr.splitlines()
    assert hung == [f"eventlog: probe for {a} gave no answer (timed out after 2 s; its process group was stopped): "
                    "recorded as network_timeout" for a in probed]
    assert said.startswith("eventlog: the pass ran past its --budget of 3 s")
    assert "accounts not probed: " + ", ".join(left["accounts"]) in said
    assert "handoffs not claimed: " + ", ".join(left["handoffs"]) in said
    heartbeat = lines(log)[-1]
    assert heartbeat["type"] == "watcher_run" and heartbeat["exit"] == "error"
    assert "ran past its --budget" in heartbeat["detail"] and left["accounts"][-1] in heartbeat["detail"]
    assert types(lines(log)[5:-1]) == ["probe_result"] * len(probed)


def test_budget_stops_claims_too_and_a_pass_within_it_reaches_everything(tmp_path: Path) -> None:
    """Past the budget no claim is made (a claim runs the resume command); with time left, all is reached."""
    log = write_log(tmp_path / "log.jsonl", [created("h1"), created("h2")])
    report = pass_at(options(log, budget_s=1e-9))
    assert report.status == 1 and report.probes == [] and report.claimed == []
    assert report.not_reached is not None and report.not_reached.handoffs == ["h1", "h2"]
    log = write_log(tmp_path / "log2.jsonl", [created("h1"), created("h2")])
    report = pass_at(options(log, budget_s=60))
    assert report.status == 0 and report.claimed == ["h1", "h2"] and report.not_reached is None


def test_cli_budget_must_be_more_than_0(tmp_path: Path, cli: Any) -> None:
    log = write_log(tmp_path / "log.jsonl", [created("h1")])
    out = cli("failback", str(log), "--probe-cmd", "p", "--resume-cmd", "r", "--budget", "0")
    assert out.returncode == 2 and "--budget must be more than 0" in out.stderr
    assert lines(log) == [created("h1")]


# --- probes that give no answer, answers too long, work left in the background (issue F2) ------------------


def sh_script(path: Path, body: str) -> str:
    """A shell script at ``path``; its path, to give as a command."""
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize(("probe", "outcome", "why"), [
    ("exit 127", "unexpected", "exit 127"),
    ("echo half an answer; kill -9 $$", "unexpected", "killed by SIGKILL"),
    ("sleep 30", "network_timeout", "timed out after 1 s; its process group was stopped"),
])
def test_cli_a_probe_that_gives_no_answer_is_an_error_of_the_pass(
    tmp_path: Path, cli: Any, probe: str, outcome: str, why: str,
) -> None:
    """OUTPUTS.md: a pass that could not do its own work says so on stderr and exits 1. A probe that could not
    give an answer (exit 126/127, a signal, our timeout) is recorded with the outcome the table gives, the
    exit or signal in its detail (not "no rule matched"), and the heartbeat says error with why."""
    log = pending_now(tmp_path / "log.jsonl")
    cmd = sh_script(tmp_path / "probe.sh", probe + "\n")
    out = cli("failback", str(log), "--probe-cmd", cmd, "--resume-cmd", "true", "--timeout", "1s",
              "--kill-grace", "1s")
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr.splitlines() == [
        f"eventlog: probe for cloud-account-a gave no answer ({why}): recorded as {outcome}"]
    *_, probe_result, heartbeat = lines(log)
    assert probe_result["type"] == "probe_result" and probe_result["outcome"] == outcome
    assert probe_result["detail"].startswith(why)
    assert heartbeat["type"] == "watcher_run" and heartbeat["exit"] == "error" and why in heartbeat["detail"]
    assert "error" in out.stdout.splitlines()[0]


def test_cli_a_probe_that_bounds_itself_with_timeout_1_answered(tmp_path: Path, cli: Any) -> None:
    """Exit 124 (``timeout(1)`` around the probe) is the probe's own answer: network_timeout, no error."""
    log = pending_now(tmp_path / "log.jsonl")
    out = cli("failback", str(log), "--probe-cmd", sh_script(tmp_path / "probe.sh", "exit 124\n"),
              "--resume-cmd", "true")
    assert out.returncode == 0, out.stderr
    assert lines(log)[-2]["outcome"] == "network_timeout" and lines(log)[-1]["exit"] == "ok"


def test_cli_a_probe_by_hand_that_gives_no_answer_names_the_signal(tmp_path: Path, cli: Any) -> None:
    log = pending_now(tmp_path / "log.jsonl")
    out = cli("handoff", "probe", str(log), "cloud-account-a", "--probe-cmd",
              sh_script(tmp_path / "probe.sh", "kill -9 $$\n"))
    assert out.returncode == 1
    assert "the probe said unexpected (killed by SIGKILL)" in out.stderr
    assert lines(log)[-1]["detail"] == "killed by SIGKILL"


def test_cli_a_resume_answer_too_long_for_a_line_is_cut_and_recorded(tmp_path: Path, cli: Any) -> None:
    """A ``failed`` answer of 2 MB is recorded, cut to 200 characters with a mark, with the effect the command
    gave (none: pending again), not lost to a too_long append and later sent to a person as effect unknown."""
    log = pending_now(tmp_path / "log.jsonl")
    resume = sh_script(tmp_path / "resume.sh", f"{sys.executable} -c 'import json; print(json.dumps("
                                               "{\"failed\": \"x\" * 2_000_000, \"effect\": \"none\"}))'\n")
    out = cli("failback", str(log), "--probe-cmd", "echo PING_OK", "--resume-cmd", resume, "--json")
    assert out.returncode == 0, out.stderr
    *_, failed, heartbeat = lines(log)
    assert failed["type"] == "resume_failed" and failed["effect"] == "none"
    assert failed["error"] == "x" * 200 + "... [cut: 2000000 characters in all]"
    assert heartbeat["exit"] == "ok"
    assert handoffs_view(log, datetime.now().astimezone())["by_state"] == {"pending": 1}


def test_cli_a_resume_that_starts_the_session_in_the_background_is_not_a_timeout(tmp_path: Path, cli: Any) -> None:
    """An asynchronous resume: it answers ``started`` and exits while the session it started still holds its
    stdout. The answer is taken at its exit; the session is not stopped."""
    log = pending_now(tmp_path / "log.jsonl")
    late = tmp_path / "late"
    resume = sh_script(tmp_path / "resume.sh",
                       f"(sleep 3; echo done > {late}) &\necho '{{\"started\": \"session-1\"}}'\nexit 0\n")
    out = cli("failback", str(log), "--probe-cmd", "echo PING_OK", "--resume-cmd", resume, "--timeout", "1s",
              "--json")
    assert out.returncode == 0, out.stderr
    [resumed] = json.loads(out.stdout)["resumed"]
    assert resumed["result"] == "started" and resumed["detail"].startswith("session-1")
    assert types(lines(log))[-3:] == ["claimed", "resume_requested", "watcher_run"]
    for _ in range(200):
        if late.exists():
            break
        time.sleep(0.05)
    assert late.read_text() == "done\n"


def test_cli_a_resume_that_prints_50_mb_costs_the_runner_a_few_mb_and_its_answer_is_read(tmp_path: Path) -> None:
    """Review R9: a runner held a command's whole output (a resume printing 30 MB took failback to 200 MB RSS),
    though only an excerpt is ever recorded. Only its start and end are kept while it streams; the handshake on
    its last line is still read. Measured without timing: the runner's peak RSS with 50 MB printed against
    with nothing printed."""
    printer = tmp_path / "resume.py"
    printer.write_text("import sys\nfor _ in range(int(sys.argv[1])):\n"
                       "    sys.stdout.write(('y' * 1023 + '\\n') * 1024)\n"
                       "print('{\"failed\": \"quota still gone\", \"effect\": \"none\"}')\n")
    peaks: dict[int, int] = {}
    for mb in (0, 50):
        log = pending_now(tmp_path / f"log{mb}.jsonl")
        code, peaks[mb] = peak_rss_kb([sys.executable, "-m", "eventlog", "failback", str(log), "--probe-cmd",
                                       "echo PING_OK", "--resume-cmd", f"{sys.executable} {printer} {mb}"])
        assert code == 0
        *_, failed, heartbeat = lines(log)
        assert (failed["type"], failed["effect"], failed["error"]) == ("resume_failed", "none", "quota still gone")
        assert heartbeat["exit"] == "ok"
    assert peaks[50] - peaks[0] < 20 * 1024, peaks  # the whole would be 50 MB more, and more again as text
