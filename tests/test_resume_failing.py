"""A handoff whose resume keeps failing with effect none reaches a person (seed 000: 人へ知らせた上で).

The reviewers' story: ``claude`` is not installed, so every pass answered ``resume_failed (effect none) - cannot
start the session: claude not found``, exit 0, nothing on stderr, for 48 passes, while ``status`` said "Nothing
needs a person." Now the pass that ends the third such attempt in a row hands it to a person (``needs_human``,
``resume_failing``), says so on stderr and exits 1 (``failback --help``); a person's ``handoff release`` sends it
back. Run as a user runs them: each pass a cron line, ``--at`` its time.
"""

from __future__ import annotations

import json
import shlex
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, run_cli, write_log
from tests.test_prom import replayed, value

FAKES = ROOT / "tests" / "fakes"
PROBE = f"{sys.executable} {FAKES / 'failback_probe.py'} ok"
T0 = datetime.fromisoformat("2026-08-03T10:00:00+09:00")
NOT_FOUND = "cannot start the session: claude not found"


def at(minutes: float) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat()


def failing_resume(tmp_path: Path) -> str:
    """What examples/failback/resume_async.sh answers when its session command is not installed."""
    script = tmp_path / "resume.sh"
    script.write_text("#!/bin/sh\nprintf '%s\\n' '" + json.dumps({"failed": NOT_FOUND, "effect": "none"}) +
                      "'\nexit 1\n")
    script.chmod(0o755)
    return f"{script} {{handoff_id}}"


def failback(log: Path, resume: str, minutes: float, *more: str) -> Any:
    """One pass, as cron runs it every 15 minutes."""
    return run_cli("failback", str(log), "--probe-cmd", PROBE, "--resume-cmd", resume, "--watcher", "w1",
                   "--at", at(minutes), *more)


def lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def item(log: Path, minutes: float) -> dict[str, Any]:
    out = run_cli("replay", "--at", at(minutes), str(log))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["handoffs"]  # type: ignore[no-any-return]


def status(log: Path, minutes: float) -> Any:
    return run_cli("status", str(log), "--at", at(minutes), "--json")


def created(log: Path) -> Path:
    return write_log(log, [{"type": "handoff_created", "ts": at(-60), "handoff_id": "h1",
                            "account": "cloud-account-a"}])


def test_the_third_failure_in_a_row_goes_to_a_person_and_says_so(tmp_path: Path) -> None:
    log = created(tmp_path / "work.jsonl")
    resume = failing_resume(tmp_path)
    for n in (1, 2):  # retried: nothing for a person yet
        out = failback(log, resume, 15 * n)
        assert out.returncode == 0 and out.stderr == "", out.stderr
        assert f"h1 (attempt {n}): resume_failed (effect none) - {NOT_FOUND}" in out.stdout
    assert item(log, 31)["items"]["h1"]["state"] == "pending"
    assert status(log, 31).returncode == 0  # two failures are a retry, not a person's yet

    out = failback(log, resume, 45)
    assert out.returncode == 1, out.stdout
    [said] = out.stderr.splitlines()
    assert said.startswith("eventlog: h1: its resume failed with effect none 3 times in a row (attempts 1-3); "
                           f"the last: {NOT_FOUND}: handed to a person (resume_failing)"), said
    assert f"eventlog handoff release {log} h1 --reason" in said
    assert "handed to a person (resume_failing): h1 (attempt 3, 3 resume failures in a row with effect none)" \
        in out.stdout
    handed = lines(log)[-2]
    assert handed == {**handed, "type": "needs_human", "handoff_id": "h1", "reason": "resume_failing", "attempt": 3}
    assert lines(log)[-1] == {**lines(log)[-1], "type": "watcher_run", "exit": "ok"}  # the pass did its own work

    # every view shows it through the needs_human item, its reason counted
    dump = item(log, 46)
    assert dump["items"]["h1"]["state"] == "needs_human"
    assert dump["needs_human_reasons"] == {"resume_failing": 1}
    judged = status(log, 46)
    assert judged.returncode == 1
    [group] = json.loads(judged.stdout)["groups"]
    assert group["reason_code"] == "needs_human" and group["items"][0]["id"] == "h1"
    assert "failed with effect none 3 times in a row (resume_failing)" in group["items"][0]["reason"]
    _dump, prom = replayed(log, at(46))
    assert value(prom, "recovery_handoff_needs_human", reason="resume_failing") == 1
    explained = json.loads(run_cli("explain", str(log), "h1", "--at", at(46), "--json").stdout)
    [verdict] = explained["verdicts"]
    assert verdict["next"][0].startswith(f"eventlog handoff release {log} h1 --reason ")
    assert verdict["next"][1].startswith(f"eventlog handoff skip {log} h1 --reason ")

    # the next pass leaves it alone: nothing pending, no probe, nothing new for a person
    quiet = failback(log, resume, 60)
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert [e["type"] for e in lines(log)[-3:]] == ["needs_human", "watcher_run", "watcher_run"]

    # a person fixes the cause and sends it back: a new run of three starts
    released = run_cli("handoff", "release", str(log), "h1", "--reason", "installed claude on the watcher host",
                       "--at", at(70))
    assert released.returncode == 0, released.stderr
    assert item(log, 70)["items"]["h1"]["state"] == "pending"
    again = failback(log, resume, 75)
    assert again.returncode == 0 and again.stderr == "", again.stderr
    assert "h1 (attempt 4): resume_failed (effect none)" in again.stdout


def test_only_failures_in_a_row_count(tmp_path: Path) -> None:
    """An attempt that ended otherwise, and a person's requeue of a request, start the count again."""
    log = created(tmp_path / "work.jsonl")
    resume = failing_resume(tmp_path)
    assert failback(log, resume, 15).returncode == 0
    assert failback(log, resume, 30).returncode == 0
    # attempt 3 starts the cloud session, which never reports; a person checks and requeues it
    started = f"{sys.executable} {FAKES / 'failback_resume.py'} started"
    assert failback(log, started, 45).returncode == 0
    requeued = run_cli("handoff", "requeue", str(log), "h1", "--reason", "the session never started: checked",
                       "--at", at(50))
    assert requeued.returncode == 0, requeued.stderr
    for minutes in (60, 75):
        out = failback(log, resume, minutes)
        assert out.returncode == 0 and out.stderr == "", out.stderr
    assert failback(log, resume, 90).returncode == 1  # the third in a row since the person's requeue


def test_failures_the_cloud_side_reported_are_handed_over_before_any_claim(tmp_path: Path) -> None:
    """The count is the fold's: three effect-none failures appended by the cloud side (or left by an older
    watcher that retried 48 times) are handed to a person by the next pass, which claims nothing."""
    log = created(tmp_path / "work.jsonl")
    events = []
    for attempt in (1, 2, 3):
        events += [{"type": "claimed", "handoff_id": "h1", "watcher": "old", "attempt": attempt,
                    "ts": at(attempt)},
                   {"type": "resume_requested", "handoff_id": "h1", "attempt": attempt, "ts": at(attempt)},
                   {"type": "resume_failed", "handoff_id": "h1", "attempt": attempt, "effect": "none",
                    "error": NOT_FOUND, "ts": at(attempt)}]
    appended = run_cli("append", str(log), stdin="".join(json.dumps(e) + "\n" for e in events))
    assert appended.returncode == 0, appended.stderr
    out = failback(log, f"{sys.executable} {FAKES / 'failback_resume.py'} verified", 15)
    assert out.returncode == 1
    assert "h1: its resume failed with effect none 3 times in a row (attempts 1-3): handed to a person" in out.stderr
    assert [e["type"] for e in lines(log)[-2:]] == ["needs_human", "watcher_run"]  # no probe, no claim


def claim_by_hand(log: Path, attempt: int, minutes: float) -> None:
    """A watcher claims attempt ATTEMPT at MINUTES and is never heard of again (a claim that goes stale)."""
    claimed = {"type": "claimed", "handoff_id": "h1", "watcher": "w-gone", "attempt": attempt, "ts": at(minutes)}
    appended = run_cli("append", str(log), stdin=json.dumps(claimed) + "\n")
    assert appended.returncode == 0, appended.stderr


def test_a_persons_release_starts_the_count_again_and_the_hint_pastes(tmp_path: Path) -> None:
    """A person's release of a claim (its line carries actor) starts the run again, as --help says; the stderr
    hint is one command a shell takes as printed, with the log path holding a space."""
    (tmp_path / "sp ace").mkdir()
    log = created(tmp_path / "sp ace" / "f 3.jsonl")
    resume = failing_resume(tmp_path)
    for minutes in (15, 30):
        assert failback(log, resume, minutes).returncode == 0
    claim_by_hand(log, 3, 35)
    released = run_cli("handoff", "release", str(log), "h1", "--reason", "that watcher's host is gone",
                       "--at", at(40))
    assert released.returncode == 0, released.stderr
    [verdict] = json.loads(run_cli("explain", str(log), "h1", "--at", at(41), "--json").stdout)["verdicts"]
    assert verdict["facts"]["failing_in_a_row"] == 0
    for minutes in (45, 60):  # attempts 4 and 5: two in a row since the person's release
        out = failback(log, resume, minutes)
        assert out.returncode == 0 and out.stderr == "", out.stderr
    out = failback(log, resume, 75)
    assert out.returncode == 1, out.stdout
    [said] = out.stderr.splitlines()
    assert "3 times in a row (attempts 4-6)" in said, said
    hint = f"eventlog handoff release {shlex.quote(str(log))} h1 --reason '<what was fixed>'"
    assert said.endswith(f"once the cause is fixed, {hint} sends it back"), said
    assert shlex.split(hint)[3] == str(log)  # pasted, the log is one word
    [verdict] = json.loads(run_cli("explain", str(log), "h1", "--at", at(76), "--json").stdout)["verdicts"]
    assert hint in verdict["next"]  # the same command explain offers


def test_the_runners_own_release_of_a_stale_claim_neither_counts_nor_breaks_the_run(tmp_path: Path) -> None:
    """Attempts 1 and 2 fail, attempt 3's claim goes stale and the pass releases it (no actor), attempt 4 fails:
    three in a row, and the detail names the attempts that failed, not 2-4."""
    log = created(tmp_path / "work.jsonl")
    resume = failing_resume(tmp_path)
    for minutes in (15, 30):
        assert failback(log, resume, minutes).returncode == 0
    claim_by_hand(log, 3, 35)
    out = failback(log, resume, 35 + 130)  # past --stale-after's 2 h default: released, not retried this pass
    assert out.returncode == 0 and "released stale claim h1" in out.stdout, out.stdout + out.stderr
    assert "actor" not in next(e for e in lines(log) if e["type"] == "released")
    out = failback(log, resume, 35 + 145)
    assert out.returncode == 1, out.stdout
    assert "3 times in a row (attempts 1, 2 and 4)" in out.stderr, out.stderr
    handed = next(e for e in lines(log) if e["type"] == "needs_human")
    assert handed["detail"].startswith("its resume failed with effect none 3 times in a row (attempts 1, 2 and 4)")
