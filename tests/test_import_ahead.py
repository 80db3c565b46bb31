"""A record dated ahead of now (2062 typed for 2026, a writer's clock ahead) never blocks the true records after it.

The reviewers' stories, run as a user runs them (the CLI in a subprocess): a marker, a ledger limit or a
``job_finished`` dated years ahead made the importers' "newer than what the log has" mark, so every later true
record was dropped as "older", unnamed, with exit 0, while ``status`` said the next record with a true time would
end it. Now the mark is the latest record *not* dated ahead (more than the views' 5 min tolerance), a record of the
input dated ahead is not appended and is named (``FILE:LINE``, exit 1, counted in ``dated_ahead``), and a record
left because the log holds a later one is named too (``left``; ``observe lane``: ``older``).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, write_log

#: The reviewer's marker: ``ts=1896166005`` is 2030-02-01, a typo of the year.
AHEAD_EPOCH = 1896166005
AHEAD_TS = datetime.fromtimestamp(AHEAD_EPOCH, UTC).isoformat()
#: The reviewer's ledger typo: 2062 for 2026.
TYPO = "2062-12-01T08:00:00+00:00"


def at(hours: float) -> datetime:
    """A time ``hours`` from now (ago when negative), whole seconds: the stories are judged by the wall clock."""
    return datetime.now(UTC).replace(microsecond=0) + timedelta(hours=hours)


def lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def ahead_items(log: Path) -> list[dict[str, Any]]:
    out = run_cli("status", str(log), "--json", "--all")
    view = json.loads(out.stdout)
    return [it for g in view["groups"] if g["reason_code"] == "dated_ahead" for it in g["items"]]


def said(out: Any) -> list[str]:
    return out.stderr.splitlines()  # type: ignore[no-any-return]


# --- import quota-log ----------------------------------------------------------------------------------------


def skip_line(when: int, label: str = "j1") -> str:
    return f"CLAUDE_QUOTA_JOB_SKIPPED job={label} reason=quota remaining=5s ts={when}\n"


def ran_line(when: int, label: str = "j1") -> str:
    return f"CLAUDE_QUOTA_JOB_RAN job={label} exit=0 ts={when}\n"


REGISTERED = {"type": "job_registered", "ts": at(-48).isoformat(), "label": "j1", "guarded": True,
              "calendar": [{"Hour": 0, "Minute": 0}], "interval_s": None}


def test_a_marker_in_the_log_dated_ahead_does_not_make_the_true_markers_older(tmp_path: Path) -> None:
    """The log holds the 2030 skip (imported before, or written by another writer): the true markers after it are
    imported, and the first of them ends the ``catchup_skip`` item, as ``status`` says it will."""
    log = write_log(tmp_path / "jobs.jsonl", [
        REGISTERED, {"type": "job_skipped", "ts": AHEAD_TS, "label": "j1", "reason": "quota", "remaining_s": 5}])
    assert [it["id"] for it in ahead_items(log)] == ["line 2"]  # named, "its next marker with a true time ends this"
    now = int(at(0).timestamp())
    guard = tmp_path / "guard.err"
    guard.write_text(skip_line(now - 300) + ran_line(now - 200) + ran_line(now - 100))
    out = run_cli("import", "quota-log", str(log), str(guard), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"imported": 3, "already": 0, "older": 0, "problems": [], "unfinished": [],
                                      "bad_lines": {"count": 0, "first": []}, "left": [], "dated_ahead": 0,
                                      "notes": []}
    assert [e["type"] for e in lines(log)[2:]] == ["job_skipped", "job_ran", "job_ran"]
    assert ahead_items(log) == []
    # importing again adds nothing, and says nothing
    again = run_cli("import", "quota-log", str(log), str(guard))
    assert again.returncode == 0 and again.stderr == ""
    assert "0 marker(s) imported, 3 already in the log, 0 older" in again.stdout


def test_a_marker_dated_ahead_is_not_imported_and_is_named_with_exit_1(tmp_path: Path) -> None:
    """The typo in the guard's file: named with its file and line, counted, exit 1; the true markers around it are
    imported, and a later import of true markers is not refused."""
    now = int(at(0).timestamp())
    guard = tmp_path / "guard.err"
    guard.write_text(skip_line(now - 600) + skip_line(AHEAD_EPOCH) + ran_line(now - 500, "j2"))
    log = tmp_path / "jobs.jsonl"
    out = run_cli("import", "quota-log", str(log), str(guard), "--json")
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert (report["imported"], report["dated_ahead"], report["older"]) == (2, 1, 0)
    [problem] = report["problems"]
    assert problem.startswith(f"{guard}:2: dated {AHEAD_TS}, ") and "ahead of now" in problem
    assert said(out) == [f"eventlog: {problem}"]
    assert [(e["label"], e["type"]) for e in lines(log)] == [("j1", "job_skipped"), ("j2", "job_ran")]
    later = tmp_path / "later.err"
    later.write_text(ran_line(now - 60))
    out = run_cli("import", "quota-log", str(log), str(later))
    assert out.returncode == 0, out.stderr
    assert lines(log)[-1]["type"] == "job_ran" and lines(log)[-1]["label"] == "j1"
    # for people: the count on stdout, the line on stderr
    out = run_cli("import", "quota-log", str(log), str(guard))
    assert out.returncode == 1
    assert out.stdout == ("0 marker(s) imported, 2 already in the log, 0 older than their job's latest marker in "
                          "the log, 1 dated ahead of now, 1 problem(s)\n")
    assert [line.split(": dated ")[0] for line in said(out)] == [f"eventlog: {guard}:2"]


def test_a_marker_older_than_its_jobs_latest_is_counted_and_named(tmp_path: Path) -> None:
    now = int(at(0).timestamp())
    log = tmp_path / "jobs.jsonl"
    newer = tmp_path / "new.err"
    newer.write_text(ran_line(now - 60))
    assert run_cli("import", "quota-log", str(log), str(newer)).returncode == 0
    older = tmp_path / "old.err"
    older.write_text("other output\n" + skip_line(now - 3600))
    out = run_cli("import", "quota-log", str(log), str(older), "--json")
    assert out.returncode == 0, out.stderr  # the log knows better: nothing is wrong with the input
    report = json.loads(out.stdout)
    [left] = report["left"]
    assert report["older"] == 1 and left.startswith(f"{older}:2: the job_skipped of job j1 at ")
    assert "is older than the job's latest marker in the log (" in left
    assert said(out) == [f"eventlog: left: {left}"]


# --- import ledger ---------------------------------------------------------------------------------------------


def limit(limited: str, reset: str | None, account: str = "acct-y") -> dict[str, Any]:
    return {"account": account, "limitedAt": limited, "resetAt": reset, "source": "parsed-limit-message",
            "confidence": "explicit"}


def account_code(log: Path, account: str = "acct-y") -> str:
    out = run_cli("explain", str(log), account, "--json")
    return json.loads(out.stdout)["verdicts"][0]["code"]  # type: ignore[no-any-return]


def test_a_limit_in_the_log_dated_ahead_does_not_keep_the_corrected_ledger_out(tmp_path: Path) -> None:
    """The log holds the 2062 limit (its reset long past: "probe now"); the corrected ledger says limited until
    tomorrow. Imported, it becomes the account's latest, and the watcher waits for the reset (seed 000: a limited
    account is not probed)."""
    typo = {"type": "limit_recorded", "ts": TYPO, "account": "acct-y", "limited_at": TYPO,
            "reset_at": at(-20).isoformat(), "source": "parsed-limit-message", "confidence": "explicit"}
    log = write_log(tmp_path / "work.jsonl", [
        {"type": "handoff_created", "ts": at(-2).isoformat(), "handoff_id": "h1", "account": "acct-y"}, typo])
    assert account_code(log) == "due"
    tomorrow = at(20).isoformat()
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text(json.dumps(limit(at(-1).isoformat(), tomorrow)) + "\n")
    out = run_cli("import", "ledger", str(log), str(ledger))
    assert out.returncode == 0, out.stderr
    assert out.stdout == "1 event(s) imported, 0 already in the log\n" and out.stderr == ""
    assert lines(log)[-1]["reset_at"] == tomorrow
    assert account_code(log) == "waiting_reset"


def test_a_ledger_entry_dated_ahead_is_not_imported_and_is_named_with_exit_1(tmp_path: Path) -> None:
    """The 2062 entry beside the true one: sorted by time it would be appended last and its past reset would decide
    the account's plan ("probe now"). It is named and left out; the true one is imported."""
    log = write_log(tmp_path / "work.jsonl", [
        {"type": "handoff_created", "ts": at(-2).isoformat(), "handoff_id": "h1", "account": "acct-y"}])
    tomorrow = at(20).isoformat()
    ledger = tmp_path / "ledger.json"
    ledger.write_text(json.dumps([limit(TYPO, at(-20).isoformat()), limit(at(-1).isoformat(), tomorrow)]))
    out = run_cli("import", "ledger", str(log), str(ledger), "--json")
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert (report["imported"], report["dated_ahead"]) == (1, 1)
    [problem] = report["problems"]
    assert problem.startswith(f"{ledger}: entry 1: dated {TYPO}, ") and "ahead of now" in problem
    assert [e["reset_at"] for e in lines(log)[1:]] == [tomorrow]
    assert account_code(log) == "waiting_reset"
    out = run_cli("import", "ledger", str(log), str(ledger))
    assert out.returncode == 1
    assert out.stdout == "0 event(s) imported, 1 already in the log, 1 dated ahead of now, 1 problem(s)\n"


# --- observe lane ----------------------------------------------------------------------------------------------


def observe(log: Path, *sources: str, json_out: bool = True) -> Any:
    return run_cli("observe", "lane", str(log), "p1", *sources, *(["--json"] if json_out else []))


def finished(when: datetime | str, job: str) -> str:
    return f"JOB_FINISHED job={job} ts={when if isinstance(when, str) else when.isoformat()}\n"


def test_a_job_finished_in_the_log_dated_ahead_does_not_keep_the_true_lines_out(tmp_path: Path) -> None:
    log = write_log(tmp_path / "lanes.jsonl", [
        {"type": "job_finished", "ts": TYPO, "product": "p1", "job_id": "typo"}])
    assert [it["id"] for it in ahead_items(log)] == ["line 1"]  # "its next job_finished with a true time ends this"
    worker = tmp_path / "worker.log"
    worker.write_text(finished(at(-2), "a") + finished(at(-1), "b"))
    out = observe(log, "--worker-log", str(worker))
    assert out.returncode == 0, out.stderr
    assert [e["job_id"] for e in json.loads(out.stdout)["appended"]] == ["a", "b"]
    assert [e.get("job_id") for e in lines(log)] == ["typo", "a", "b"]
    assert ahead_items(log) == []


def test_a_status_in_the_log_dated_ahead_does_not_keep_the_true_mtime_out(tmp_path: Path) -> None:
    log = write_log(tmp_path / "lanes.jsonl", [
        {"type": "status_updated", "ts": TYPO, "product": "p1", "state": "running"}])
    progress = tmp_path / "progress.md"
    progress.write_text("state: idle\n")
    out = observe(log, "--progress", str(progress))
    assert out.returncode == 0, out.stderr
    [ev] = json.loads(out.stdout)["appended"]
    assert (ev["type"], ev["state"]) == ("status_updated", "idle")
    assert ahead_items(log) == []


def test_a_worker_line_or_an_mtime_dated_ahead_is_not_appended_and_is_named_with_exit_1(tmp_path: Path) -> None:
    log = tmp_path / "lanes.jsonl"
    worker = tmp_path / "worker.log"
    worker.write_text(finished(at(-2), "a") + finished(TYPO, "typo") + finished(at(-1), "b"))
    progress = tmp_path / "progress.md"
    progress.write_text("state: running\n")
    stamp = datetime.fromisoformat(TYPO).timestamp()
    os.utime(progress, (stamp, stamp))
    out = observe(log, "--worker-log", str(worker), "--progress", str(progress))
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert [e["job_id"] for e in report["appended"]] == ["a", "b"]
    assert report["dated_ahead"] == 2
    line, mtime = report["problems"]
    assert line.startswith(f"{worker}:2: dated {TYPO}, ") and "ahead of now" in line
    assert mtime.startswith(f"the progress file {progress} (its mtime): dated ")
    assert said(out) == [f"eventlog: {line}", f"eventlog: {mtime}"]
    # the file's mtime fixed: the status is written, while the worker log still holds its line (named again)
    os.utime(progress)
    out = observe(log, "--worker-log", str(worker), "--progress", str(progress), json_out=False)
    assert out.returncode == 1
    assert out.stdout.startswith("p1: status_updated at ")
    assert [s.split(": dated ")[0] for s in said(out)] == [f"eventlog: {worker}:2"]


@pytest.mark.parametrize("json_out", [True, False])
def test_a_worker_line_older_than_the_lanes_latest_is_counted_in_older(tmp_path: Path, json_out: bool) -> None:
    """Judged against the latest not dated ahead (b, not the 2062 typo after it): c, after b, is appended; a, before
    b, is counted in ``older`` (``FILE:LINE``, the key ``observe lane`` shipped) and said in the words on stdout,
    exit 0, with no second message on stderr."""
    log = write_log(tmp_path / "lanes.jsonl", [
        {"type": "job_finished", "ts": at(-1).isoformat(), "product": "p1", "job_id": "b"},
        {"type": "job_finished", "ts": TYPO, "product": "p1", "job_id": "typo"}])
    worker = tmp_path / "worker.log"
    c_at = at(-0.5)
    worker.write_text(finished(at(-2), "a") + finished(c_at, "c"))
    out = observe(log, "--worker-log", str(worker), json_out=json_out)
    assert out.returncode == 0, out.stderr  # the log knows better: nothing is wrong with the input
    assert out.stderr == ""
    if json_out:
        report = json.loads(out.stdout)
        assert ([e["job_id"] for e in report["appended"]], report["older"]) == (["c"], [f"{worker}:1"])
        assert "left" not in report
    else:
        assert out.stdout == (f"p1: job_finished at {c_at.isoformat()} (c)\n"
                              "p1: 1 finished line(s) older than the lane's latest job_finished, not appended: "
                              f"{worker}:1\n")
    assert [e.get("job_id") for e in lines(log)] == ["b", "typo", "c"]
