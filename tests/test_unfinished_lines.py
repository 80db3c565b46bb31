"""A last line still being written (no newline yet) is not read by any line-reading importer, and is read once
it ends: ``import quota-log``, ``import worker-log``, ``import ledger`` and ``observe lane --worker-log``.

A cut marker still matches its format (``ts=17961`` of ``ts=1796100000`` is a time in 1970), and a cut
"job finished" time is an earlier time (``2026-08-05T13`` of ``13:54``): read as they stood, they wrote an
event no later import could take back, and a second one when the line ended. A line left without its
newline for a minute is no write at work: it is named on stderr (exit 1), still not read.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, write_log

#: 2026-12-01T00:00:00Z, and the five digits a writer had written of it.
EPOCH = "1796083200"


def lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def write(path: Path, text: str, age_s: float = 0.0) -> Path:
    """Append ``text`` to ``path``, its mtime ``age_s`` seconds ago."""
    with path.open("a", encoding="utf-8") as f:
        f.write(text)
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))
    return path


def test_quota_log_reads_a_cut_marker_once_it_ends(tmp_path: Path) -> None:
    log, err = tmp_path / "jobs.jsonl", tmp_path / "guard.err"
    write(err, "CLAUDE_QUOTA_JOB_RAN job=a exit=0 ts=1796080000\n"
               f"CLAUDE_QUOTA_JOB_SKIPPED job=a reason=quota remaining=60s ts={EPOCH[:5]}")
    out = run_cli("import", "quota-log", str(log), str(err), "--assume-tz", "UTC", "--json")
    assert out.returncode == 0, out.stderr
    assert [e["type"] for e in lines(log)] == ["job_ran"]  # no job_skipped dated 1970
    assert out.stderr == ""  # a line being written is no problem
    got = json.loads(out.stdout)
    assert (got["imported"], got["unfinished"]) == (1, [f"{err}:2"])
    words = run_cli("import", "quota-log", str(log), str(err), "--assume-tz", "UTC")
    assert words.stdout == ("0 marker(s) imported, 1 already in the log, 0 older than their job's latest marker in the "
                            f"log, 1 line(s) not ended yet, read once they end: {err}:2\n")

    write(err, EPOCH[5:] + "\n")
    done = run_cli("import", "quota-log", str(log), str(err), "--assume-tz", "UTC", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["unfinished"] == []
    assert [(e["type"], e["ts"]) for e in lines(log)] == [
        ("job_ran", "2026-11-30T23:06:40+00:00"), ("job_skipped", "2026-12-01T00:00:00+00:00")]


def test_a_line_left_without_its_newline_is_named_and_still_not_read(tmp_path: Path) -> None:
    log, err = tmp_path / "jobs.jsonl", tmp_path / "guard.err"
    write(err, f"CLAUDE_QUOTA_JOB_SKIPPED job=a reason=quota remaining=60s ts={EPOCH[:5]}", age_s=120)
    out = run_cli("import", "quota-log", str(log), str(err), "--assume-tz", "UTC")
    assert out.returncode == 1
    assert out.stderr == (f"eventlog: {err}:1: the last line has no newline and the file has not changed for a "
                          "minute: not read (a writer stopped mid-line?); it is read once it ends with a newline\n")
    assert lines(log) == []


def lane(tmp_path: Path, *extra: str) -> Any:
    return run_cli("observe", "lane", str(tmp_path / "lanes.jsonl"), "sashiko-repair", "--worker-log",
                   str(tmp_path / "worker.log"), "--assume-tz", "Asia/Tokyo", *extra)


def test_observe_lane_reads_a_cut_finished_line_once_it_ends(tmp_path: Path) -> None:
    worker = write(tmp_path / "worker.log", "starting fix-9\nJOB_FINISHED job=fix-9 ts=2026-08-05T13")
    out = lane(tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == ("sashiko-repair: nothing changed, nothing written; 1 line(s) not ended yet, read once they "
                          f"end: {worker}:2\n")
    assert lines(tmp_path / "lanes.jsonl") == []  # no job_finished at 13:00
    write(worker, ":54:00\n")
    done = lane(tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["unfinished"] == []
    assert [(e["type"], e["ts"], e["job_id"]) for e in lines(tmp_path / "lanes.jsonl")] == [
        ("job_finished", "2026-08-05T13:54:00+09:00", "fix-9")]  # once, at the time the line says


def test_observe_lane_names_a_finished_line_left_cut(tmp_path: Path) -> None:
    worker = write(tmp_path / "worker.log", "JOB_FINISHED job=fix-9 ts=2026-08-05T13", age_s=600)
    out = lane(tmp_path, "--json")
    assert out.returncode == 1
    assert json.loads(out.stdout)["unfinished"] == [f"{worker}:1"]
    assert f"eventlog: {worker}:1: the last line has no newline" in out.stderr
    assert lines(tmp_path / "lanes.jsonl") == []


RESULT = {"msg": "control.result", "ts": "2026-08-06T17:00:30.240+09:00", "session_id": "s-7",
          "control_id": "ctl-9", "operation": "interrupt", "outcome": "completed"}


def test_worker_log_import_counts_a_cut_json_line_as_not_ended_not_as_not_json(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [])
    text = json.dumps(RESULT)
    src = write(tmp_path / "worker.log", json.dumps({"msg": "worker.started", "ts": RESULT["ts"]}) + "\n" + text[:40])
    out = run_cli("import", "worker-log", str(log), str(src), "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert (got["imported"], got["not_json"], got["unfinished"]) == (0, 0, [f"{src}:2"])
    write(src, text[40:])  # a JSON object ends with its brace: whole without its newline
    done = run_cli("import", "worker-log", str(log), str(src), "--json")
    assert done.returncode == 0, done.stderr
    assert (json.loads(done.stdout)["imported"], json.loads(done.stdout)["unfinished"]) == (1, [])
    assert [e["type"] for e in lines(log)] == ["control_result"]


LIMIT = {"account": "cloud-account-a", "limitedAt": "2026-08-03T01:20:00+09:00",
         "resetAt": "2026-08-03T17:00:00+09:00", "source": "parsed-limit-message", "confidence": "explicit"}


@pytest.mark.parametrize("age_s", [0.0, 120.0])
def test_ledger_import_reads_a_cut_json_line_once_it_ends(tmp_path: Path, age_s: float) -> None:
    log = tmp_path / "log.jsonl"
    later = {**LIMIT, "limitedAt": "2026-08-04T01:20:00+09:00", "resetAt": None}
    text = json.dumps(later)
    ledger = write(tmp_path / "ledger.jsonl", json.dumps(LIMIT) + "\n" + text[:30], age_s=age_s)
    out = run_cli("import", "ledger", str(log), str(ledger), "--json")
    got = json.loads(out.stdout)
    assert (got["imported"], got["unfinished"]) == (1, [f"{ledger}:2"])
    if age_s:
        assert out.returncode == 1
        assert out.stderr.startswith(f"eventlog: {ledger}:2: the last line has no newline and the file has not "
                                     "changed for a minute: not read")
    else:
        assert (out.returncode, out.stderr) == (0, "")  # not "not_json" while it is being written
    write(ledger, text[30:])
    done = run_cli("import", "ledger", str(log), str(ledger))
    assert done.returncode == 0, done.stderr
    assert [datetime.fromisoformat(e["limited_at"]).day for e in lines(log)] == [3, 4]


# --- a last line that can never become a record is no record: nothing to hold back ----------------------------


def test_quota_log_reads_a_job_s_stderr_ending_without_a_newline(tmp_path: Path) -> None:
    """/var/log/claude-jobs/*.err holds every job's stderr: a progress line left without its newline can never
    become a marker. Held back, it failed the import (and every catch-up pass) after a minute, until the file was
    written again."""
    log, err = tmp_path / "jobs.jsonl", tmp_path / "a.err"
    write(err, "CLAUDE_QUOTA_JOB_RAN job=a exit=0 ts=1796080000\nDownloading... 100%", age_s=120)
    out = run_cli("import", "quota-log", str(log), str(err), "--assume-tz", "UTC", "--json")
    assert (out.returncode, out.stderr) == (0, "")
    got = json.loads(out.stdout)
    assert (got["imported"], got["unfinished"], got["problems"]) == (1, [], [])
    assert [e["type"] for e in lines(log)] == ["job_ran"]


@pytest.mark.parametrize("tail", ["CLAUDE_QUOTA_JOB_R", "2026-08-05 13:00 CLAUDE_QUOTA_JOB_", "CLAUDE_QUOTA_JOB_RAN",
                                  "CLAUDE_QUOTA_JOB_RAN job=a exi", "x CLAUDE_QUOTA_JOB_SKIPPED job=a reason=quota"])
def test_quota_log_holds_back_the_start_of_a_marker_and_names_it_after_a_minute(tmp_path: Path, tail: str) -> None:
    log, err = tmp_path / "jobs.jsonl", tmp_path / "guard.err"
    write(err, "CLAUDE_QUOTA_JOB_RAN job=a exit=0 ts=1796080000\n" + tail)
    fresh = run_cli("import", "quota-log", str(log), str(err), "--assume-tz", "UTC", "--json")
    assert (fresh.returncode, fresh.stderr) == (0, "")  # a marker being written: no "not in the guard's format"
    assert json.loads(fresh.stdout)["unfinished"] == [f"{err}:2"]
    os.utime(err, (time.time() - 120, time.time() - 120))
    stuck = run_cli("import", "quota-log", str(log), str(err), "--assume-tz", "UTC")
    assert stuck.returncode == 1
    assert stuck.stderr == (f"eventlog: {err}:2: the last line has no newline and the file has not changed for a "
                            "minute: not read (a writer stopped mid-line?); it is read once it ends with a newline\n")
    assert [e["type"] for e in lines(log)] == ["job_ran"]


def test_worker_log_import_reads_a_last_line_that_is_no_json_object(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [])
    src = write(tmp_path / "worker.log", json.dumps(RESULT) + "\npanic: runtime error: index out of range",
                age_s=120)
    out = run_cli("import", "worker-log", str(log), str(src), "--json")
    assert (out.returncode, out.stderr) == (0, "")
    got = json.loads(out.stdout)
    assert (got["imported"], got["not_json"], got["unfinished"]) == (1, 1, [])
    stuck = write(tmp_path / "cut.log", json.dumps(RESULT)[:40], age_s=120)  # an object begun: still held, named
    held = run_cli("import", "worker-log", str(log), str(stuck), "--json")
    assert held.returncode == 1
    assert json.loads(held.stdout)["unfinished"] == [f"{stuck}:1"]
    assert f"eventlog: {stuck}:1: the last line has no newline" in held.stderr


@pytest.mark.parametrize("tail", ["Downloading... 100%", "fix-9: exit 0"])
def test_observe_lane_reads_a_last_line_that_can_never_be_a_finished_line(tmp_path: Path, tail: str) -> None:
    write(tmp_path / "worker.log", "JOB_FINISHED job=fix-8 ts=2026-08-05T12:00:00\n" + tail, age_s=600)
    out = lane(tmp_path, "--json")
    assert (out.returncode, out.stderr) == (0, "")
    assert json.loads(out.stdout)["unfinished"] == []
    assert [e["job_id"] for e in lines(tmp_path / "lanes.jsonl")] == ["fix-8"]


@pytest.mark.parametrize("tail", ["JOB_FIN", "JOB_FINISHED job=fix-9"])
def test_observe_lane_holds_back_the_start_of_a_finished_line(tmp_path: Path, tail: str) -> None:
    worker = write(tmp_path / "worker.log", "starting fix-9\n" + tail, age_s=600)
    out = lane(tmp_path, "--json")
    assert out.returncode == 1
    assert json.loads(out.stdout)["unfinished"] == [f"{worker}:2"]
    assert f"eventlog: {worker}:2: the last line has no newline" in out.stderr


def test_observe_lane_with_a_regex_of_its_own_holds_back_only_a_line_it_finds(tmp_path: Path) -> None:
    """What a user's regex reads cannot be told from its start: a last line it finds is held (its time may be cut);
    one it does not find yields nothing now, and is read again on the next pass."""
    regex = ("--finished-regex", r"(?P<ts>\S+) finished job (?P<job_id>\S+)")
    worker = write(tmp_path / "worker.log", "2026-08-05T12:00:00 finished job fix-8\nDownloading... 100%",
                   age_s=600)
    out = lane(tmp_path, *regex, "--json")
    assert (out.returncode, out.stderr) == (0, "")
    assert json.loads(out.stdout)["unfinished"] == []
    worker.write_text("2026-08-05T12:00:00 finished job fix-8\n2026-08-05T13:54:00 finished job fix-")
    os.utime(worker, (time.time() - 600, time.time() - 600))
    held = lane(tmp_path, *regex, "--json")
    assert held.returncode == 1
    assert json.loads(held.stdout)["unfinished"] == [f"{worker}:2"]
    assert [e["job_id"] for e in lines(tmp_path / "lanes.jsonl")] == ["fix-8"]  # never a job "fix-"
