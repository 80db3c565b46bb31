"""``eventlog stalls`` and ``eventlog lanes`` (the runner that sends resumes), with real processes."""

from __future__ import annotations

import json
import shlex
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from conftest import ROOT, run_cli, write_log

FAKE = ROOT / "tests" / "fakes" / "lanes_enqueue.py"
SEED_LINE = (
    '{"schema": "impl-lane-watch/v1", "checked_at": "2026-08-08T10:40:01.288710+09:00", '
    '"results": [{"product": "sashiko-repair", "stalled": true, "kind": "status-quiet", '
    '"detail": "進捗の更新が31時間止まっています", "updated_at": "2026-08-07T03:10:00+09:00"}]}'
)


def ago(hours: float) -> str:
    return (datetime.now().astimezone() - timedelta(hours=hours)).isoformat()


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def enqueue_cmd(record: Path, mode: str = "ok") -> str:
    return shlex.join([sys.executable, str(FAKE), str(record), mode])


def lanes(log: Path, record: Path, mode: str = "ok", *extra: str) -> Any:
    return run_cli("lanes", str(log), "--enqueue-cmd", enqueue_cmd(record, mode), *extra)


# --- eventlog stalls -------------------------------------------------------------------------


def test_stalls_prints_the_seed_line_and_exits_1() -> None:
    out = run_cli("stalls", str(ROOT / "fixtures" / "lanes_seed_sample.jsonl"),
                  "--at", "2026-08-08T10:40:01.288710+09:00")
    assert out.returncode == 1
    assert out.stdout == SEED_LINE + "\n"


def test_stalls_exit_0_when_moving(tmp_path: Path) -> None:
    out = run_cli("stalls", str(ROOT / "fixtures" / "lanes_seed_sample.jsonl"), "--at", "2026-08-07T11:09:59+09:00")
    assert out.returncode == 0
    assert json.loads(out.stdout)["results"] == [{"product": "sashiko-repair", "stalled": False, "reason": "moving"}]


def test_stalls_now_by_default(tmp_path: Path) -> None:
    log = write_log(tmp_path / "l.jsonl", [
        {"type": "status_updated", "ts": ago(31.5), "product": "p", "state": "running"},
        {"type": "status_updated", "ts": ago(0.5), "product": "q", "state": "running"},
    ])
    out = run_cli("stalls", str(log))
    assert out.returncode == 1
    record = json.loads(out.stdout)
    assert datetime.fromisoformat(record["checked_at"]).tzinfo is not None
    assert [(r["product"], r["stalled"]) for r in record["results"]] == [("p", True), ("q", False)]
    assert record["results"][0]["detail"] == "進捗の更新が31時間止まっています"
    assert len(read(log)) == 2  # stalls writes nothing


def test_stalls_assume_tz_and_thresholds(tmp_path: Path) -> None:
    log = write_log(tmp_path / "l.jsonl", [
        {"type": "job_finished", "ts": "2026-08-05T12:54:00", "product": "p"},
    ])
    out = run_cli("stalls", str(log), "--assume-tz", "Asia/Tokyo", "--at", "2026-08-05T13:30:00")
    assert out.returncode == 0
    out = run_cli("stalls", str(log), "--assume-tz", "Asia/Tokyo", "--at", "2026-08-05T13:30:00",
                  "--unpicked-minutes", "30")
    assert out.returncode == 1
    record = json.loads(out.stdout)
    assert record["checked_at"] == "2026-08-05T13:30:00+09:00"
    assert record["results"][0]["finished_at"] == "2026-08-05T12:54:00+09:00"
    assert record["results"][0]["detail"].startswith("作業は0時間36分前に")


def test_stalls_bad_usage(tmp_path: Path) -> None:
    assert run_cli("stalls", str(tmp_path / "missing.jsonl")).returncode == 2
    assert run_cli("stalls", str(ROOT / "fixtures" / "lanes_seed_sample.jsonl"), "--at", "yesterday").returncode == 2
    assert run_cli("stalls", str(ROOT / "fixtures" / "lanes_seed_sample.jsonl"),
                   "--at", "2026-08-08T10:40:00").returncode == 2  # no offset, no --assume-tz


# --- eventlog lanes ----------------------------------------------------------------------------


def stalled_log(tmp_path: Path) -> Path:
    return write_log(tmp_path / "lanes.jsonl", [
        {"type": "status_updated", "ts": ago(31), "product": "quiet", "state": "running"},
        {"type": "status_updated", "ts": ago(30), "product": "unpicked", "state": "running"},
        {"type": "job_finished", "ts": ago(21), "product": "unpicked", "job_id": "fix-1"},
        {"type": "status_updated", "ts": ago(40), "product": "idle", "state": "idle"},
        {"type": "job_finished", "ts": ago(39), "product": "idle"},
        {"type": "status_updated", "ts": ago(40), "product": "stopped", "state": "running"},
        {"type": "lane_stopped", "ts": ago(39), "product": "stopped"},
        {"type": "status_updated", "ts": ago(0.1), "product": "moving", "state": "running"},
    ])


def test_enqueues_once_per_stall(tmp_path: Path) -> None:
    log, record = stalled_log(tmp_path), tmp_path / "calls.jsonl"
    out = lanes(log, record)
    assert out.returncode == 0, out.stderr
    calls = read(record)
    # one call per stalled lane, product and kind as the last arguments and in the environment;
    # none for the idle, stopped and moving lanes.
    assert sorted((c["argv"][0], c["argv"][1], c["product"], c["kind"]) for c in calls) == [
        ("quiet", "status-quiet", "quiet", "status-quiet"),
        ("unpicked", "job-unpicked", "unpicked", "job-unpicked"),
    ]
    events = read(log)
    check = events[8]  # written before the sends (intent before the act); they went well: no second one
    assert check["type"] == "lane_check" and check["exit"] == "sending" and "detail" not in check
    assert check["sending"] == {"quiet": "status-quiet", "unpicked": "job-unpicked"}
    resumes = [e for e in events if e["type"] == "resume_enqueued"]
    assert [(e["product"], e["kind"], e["task_branch"]) for e in resumes] == [
        ("quiet", "status-quiet", "resume/quiet/status-quiet"),  # the last non-empty stdout line
        ("unpicked", "job-unpicked", "resume/unpicked/job-unpicked"),
    ]
    assert [e["type"] for e in events[8:]] == ["lane_check", "resume_enqueued", "resume_enqueued"]

    # a second run: a new lane_check, the same stalls, no call, nothing enqueued again.
    out = lanes(log, record, "ok", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["enqueued"] == [] and report["failed"] == []
    assert sorted(r["product"] for r in report["already_enqueued"]) == ["quiet", "unpicked"]
    assert len(read(record)) == 2
    events = read(log)
    assert [e["type"] for e in events[-1:]] == ["lane_check"]
    assert len([e for e in events if e["type"] == "resume_enqueued"]) == 2
    assert report["check"]["checked_at"] == events[-1]["ts"]
    assert {r["product"]: r.get("reason") for r in report["check"]["results"]} == {
        "idle": "lane-idle", "moving": "moving", "quiet": None, "stopped": "stopped-on-purpose", "unpicked": None,
    }


def test_a_new_finish_is_a_new_stall(tmp_path: Path) -> None:
    log, record = stalled_log(tmp_path), tmp_path / "calls.jsonl"
    assert lanes(log, record).returncode == 0
    with log.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"type": "job_finished", "ts": ago(2), "product": "unpicked", "job_id": "fix-2"}) + "\n")
    out = lanes(log, record, "ok", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["enqueued"] == [
        {"product": "unpicked", "kind": "job-unpicked", "task_branch": "resume/unpicked/job-unpicked"},
    ]
    assert [c["product"] for c in read(record)].count("unpicked") == 2


def test_a_failing_command_is_retried_next_run(tmp_path: Path) -> None:
    log, record = stalled_log(tmp_path), tmp_path / "calls.jsonl"
    out = lanes(log, record, "fail", "--json")
    assert out.returncode == 1
    assert "exit 4" in out.stderr and "next run retries" in out.stderr
    report = json.loads(out.stdout)
    assert sorted((f["product"], f["error"]) for f in report["failed"]) == [
        ("quiet", "exit 4"), ("unpicked", "exit 4"),
    ]
    assert [e for e in read(log) if e["type"] == "resume_enqueued"] == []
    out = lanes(log, record, "quiet")  # succeeds, prints no task branch
    assert out.returncode == 0, out.stderr
    resumes = [e for e in read(log) if e["type"] == "resume_enqueued"]
    assert sorted(e["product"] for e in resumes) == ["quiet", "unpicked"]
    assert all("task_branch" not in e for e in resumes)
    assert len(read(record)) == 4


def test_a_command_over_its_timeout_is_killed_and_not_recorded(tmp_path: Path) -> None:
    log = write_log(tmp_path / "lanes.jsonl", [
        {"type": "status_updated", "ts": ago(31), "product": "quiet", "state": "running"},
    ])
    record = tmp_path / "calls.jsonl"
    out = lanes(log, record, "sleep", "--timeout", "1")
    assert out.returncode == 1
    assert "timed out after 1 s" in out.stderr
    assert [e["type"] for e in read(log)] == ["status_updated", "lane_check", "lane_check"]  # before, and the end


def test_a_command_that_cannot_start(tmp_path: Path) -> None:
    log = write_log(tmp_path / "lanes.jsonl", [
        {"type": "status_updated", "ts": ago(31), "product": "quiet", "state": "running"},
    ])
    out = run_cli("lanes", str(log), "--enqueue-cmd", str(tmp_path / "no-such-command"))
    assert out.returncode == 1
    assert "could not start" in out.stderr
    assert [e["type"] for e in read(log)] == ["status_updated", "lane_check", "lane_check"]  # before, and the end


def test_nothing_stalled_runs_nothing(tmp_path: Path) -> None:
    log = write_log(tmp_path / "lanes.jsonl", [
        {"type": "status_updated", "ts": ago(1), "product": "p", "state": "running"},
    ])
    record = tmp_path / "calls.jsonl"
    out = lanes(log, record)
    assert out.returncode == 0
    assert "p: moving" in out.stdout
    assert not record.exists()


def test_lanes_bad_usage(tmp_path: Path) -> None:
    assert run_cli("lanes", str(tmp_path / "missing.jsonl"), "--enqueue-cmd", "true").returncode == 2
    assert not (tmp_path / "missing.jsonl").exists()
    log = write_log(tmp_path / "l.jsonl", [])
    assert run_cli("lanes", str(log), "--enqueue-cmd", "'unclosed").returncode == 2
    assert run_cli("lanes", str(log), "--enqueue-cmd", "").returncode == 2
    assert log.read_text() == ""


# --- thresholds, --at, failures that speak ----------------------------------------------------


NAIVE = [
    {"type": "status_updated", "ts": "2026-08-07T03:10:00", "product": "sashiko-repair", "state": "running"},
    {"type": "status_updated", "ts": "2026-08-07T03:20:00", "product": "other", "state": "running"},
]


def test_stalls_names_bad_lines_and_exits_1(tmp_path: Path) -> None:
    log = write_log(tmp_path / "naive.jsonl", NAIVE)
    out = run_cli("stalls", str(log), "--at", "2026-08-08T10:40:01+09:00")
    assert out.returncode == 1  # no lane is judged: its lines were skipped, and that is said
    assert json.loads(out.stdout)["results"] == []
    assert out.stderr == (f"eventlog: {log}: 2 bad line(s) skipped: line 1: no_offset: ts '2026-08-07T03:10:00' has "
                          "no UTC offset (give --assume-tz); line 2: no_offset: ts '2026-08-07T03:20:00' has no UTC "
                          "offset (give --assume-tz)\n")
    zoned = run_cli("stalls", str(log), "--at", "2026-08-08T10:40:01+09:00", "--assume-tz", "Asia/Tokyo")
    assert zoned.returncode == 1 and zoned.stderr == ""
    assert [r["stalled"] for r in json.loads(zoned.stdout)["results"]] == [True, True]


def test_stalls_thresholds_take_durations_and_the_old_flags_say_they_are_old() -> None:
    seed = str(ROOT / "fixtures" / "lanes_seed_sample.jsonl")
    at = ["--at", "2026-08-08T10:40:01.288710+09:00"]
    assert run_cli("stalls", seed, *at, "--quiet", "32h").returncode == 0  # quiet for 31.5 h: not yet
    assert run_cli("stalls", seed, *at, "--quiet", "1d7h").returncode == 1
    old = run_cli("stalls", seed, *at, "--quiet-hours", "32")
    assert old.returncode == 0
    assert old.stderr == "eventlog: --quiet-hours is deprecated: use --quiet (here: --quiet 32h)\n"
    bad = run_cli("stalls", seed, *at, "--quiet", "8 hours")
    assert bad.returncode == 2 and "is not a duration" in bad.stderr


def test_stalls_at_log_is_the_last_line() -> None:
    seed = str(ROOT / "fixtures" / "lanes_seed_sample.jsonl")
    out = run_cli("stalls", seed, "--at", "log")
    last = json.loads((ROOT / "fixtures" / "lanes_seed_sample.jsonl").read_text().splitlines()[-1])
    assert json.loads(out.stdout)["checked_at"] == last["ts"]


def test_lanes_at_pins_the_check_and_thresholds_apply(tmp_path: Path) -> None:
    log = write_log(tmp_path / "lanes.jsonl", [
        {"type": "status_updated", "ts": "2026-08-07T03:10:00+09:00", "product": "quiet", "state": "running"},
    ])
    record = tmp_path / "calls.jsonl"
    at = "2026-08-07T12:00:00+09:00"  # quiet for 8 h 50 min
    out = lanes(log, record, "ok", "--at", at, "--quiet", "9h", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["enqueued"] == [] and not record.exists()
    assert read(log)[-1] == {"type": "lane_check", "ts": at, "unpicked_s": 5400, "quiet_s": 32400, "period_s": 3600,
                             "exit": "ok", "seq": 2}
    out = lanes(log, record, "ok", "--at", at, "--json")  # the default 8h: stalled
    assert [e["product"] for e in json.loads(out.stdout)["enqueued"]] == ["quiet"]


def test_lanes_names_bad_lines_and_exits_1(tmp_path: Path) -> None:
    log = write_log(tmp_path / "naive.jsonl", NAIVE)
    record = tmp_path / "calls.jsonl"
    out = lanes(log, record, "ok", "--json")
    assert out.returncode == 1
    assert json.loads(out.stdout)["bad_lines"]["count"] == 2
    assert out.stderr.startswith(f"eventlog: {log}: 2 bad line(s) skipped, 2 new (no earlier pass of this runner "
                                 "in the log); new: line 1: no_offset")
    assert not record.exists()
    zoned = write_log(tmp_path / "zoned.jsonl", NAIVE)
    out = lanes(zoned, record, "ok", "--assume-tz", "Asia/Tokyo", "--json")
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["enqueued"]) == 2


def test_lanes_sends_nothing_to_a_log_that_takes_no_append(tmp_path: Path) -> None:
    """A log every append refuses (here an unfinished last line no append cuts): nothing could record a resume, so
    none is sent (each run would send it again), and the run says why."""
    log = write_log(tmp_path / "lanes.jsonl", [
        {"type": "status_updated", "ts": ago(31), "product": "quiet", "state": "running"},
    ])
    with log.open("a", encoding="utf-8") as f:
        f.write("x" * 300)  # not the start of a log line: no append cuts it
    record = tmp_path / "calls.jsonl"
    out = lanes(log, record)
    assert out.returncode == 1
    assert "no resume sent for 1 stall(s), since nothing could record it" in out.stderr
    assert "cannot append the lane check" in out.stderr
    assert not record.exists()


def test_at_pins_the_time_of_every_line_the_run_appends(tmp_path: Path) -> None:
    """README: for a runner ``--at`` pins its clock, so the lines it appends carry that time; the
    ``resume_enqueued`` too, not only the ``lane_check`` (a replay of the log then reads one moment)."""
    log, record = tmp_path / "lanes.jsonl", tmp_path / "calls.jsonl"
    log.write_bytes((ROOT / "fixtures" / "lanes_seed_sample.jsonl").read_bytes())
    at = "2026-08-08T11:00:00+09:00"
    assert lanes(log, record, "ok", "--at", at).returncode == 0
    appended = read(log)[-2:]
    assert [e["type"] for e in appended] == ["lane_check", "resume_enqueued"]
    assert [e["ts"] for e in appended] == [at, at]


# --- what the enqueue command leaves behind and prints (issue F2) ------------------------------------


def script(path: Path, body: str) -> str:
    """A shell script at ``path`` (its path, to give as --enqueue-cmd)."""
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_an_asynchronous_enqueue_is_sent_once_and_left_running(tmp_path: Path) -> None:
    """Seed 001's resume is asynchronous: a command that starts the work in the background and exits 0 at
    once has enqueued it (its stdout up to then is the task ref), although its child still holds stdout.
    It is recorded, not sent again by the next run, and the work it started is not stopped."""
    log = write_log(tmp_path / "lanes.jsonl", [
        {"type": "status_updated", "ts": ago(31), "product": "quiet", "state": "running"},
    ])
    sends, calls = tmp_path / "sends", tmp_path / "calls"
    cmd = script(tmp_path / "r.sh", f"echo sent >> {sends}\n(sleep 3; echo done >> {calls}) &\necho task/bg\nexit 0\n")
    said = []
    for _ in range(2):
        out = run_cli("lanes", str(log), "--enqueue-cmd", cmd, "--timeout", "1s")
        assert out.returncode == 0, out.stdout + out.stderr
        said.append(out.stdout.splitlines()[1])
    assert said == ["  quiet: status-quiet, resume enqueued (task branch task/bg)",
                    "  quiet: status-quiet, resume already enqueued"]
    assert sends.read_text() == "sent\n"  # never twice for one stall
    resumes = [e for e in read(log) if e["type"] == "resume_enqueued"]
    assert [(e["product"], e["task_branch"]) for e in resumes] == [("quiet", "task/bg")]
    for _ in range(200):  # the background work ran to its end
        if calls.exists():
            break
        time.sleep(0.05)
    assert calls.read_text() == "done\n"


def test_a_task_ref_too_long_for_a_line_is_cut_and_recorded(tmp_path: Path) -> None:
    """The last stdout line is copied into resume_enqueued cut to 200 characters with a mark, so the send
    is recorded (not refused as too_long, and so sent again on every run)."""
    log = write_log(tmp_path / "lanes.jsonl", [
        {"type": "status_updated", "ts": ago(31), "product": "quiet", "state": "running"},
    ])
    sends = tmp_path / "sends"
    cmd = script(tmp_path / "e.sh", f"echo sent >> {sends}\n{sys.executable} -c \"print('t' * 1_100_000)\"\n")
    out = run_cli("lanes", str(log), "--enqueue-cmd", cmd, "--json")
    assert out.returncode == 0, out.stderr
    [event] = [e for e in read(log) if e["type"] == "resume_enqueued"]
    assert event["task_branch"] == "t" * 200 + "... [cut: 1100000 characters in all]"
    assert json.loads(out.stdout)["enqueued"][0]["task_branch"] == event["task_branch"]
    assert run_cli("lanes", str(log), "--enqueue-cmd", cmd).returncode == 0
    assert sends.read_text() == "sent\n"


def test_an_enqueue_that_cannot_be_recorded_is_said_alike_on_stdout_and_stderr(tmp_path: Path) -> None:
    """The command enqueued, then resume_enqueued could not be appended (here the command left bytes at the
    end of LOG that no append cuts): both outputs say it was sent and not recorded; the lanes after it were
    not tried."""
    def spoiled(*extra: str) -> Any:
        log = write_log(tmp_path / "lanes.jsonl", [
            {"type": "status_updated", "ts": ago(31), "product": "a-quiet", "state": "running"},
            {"type": "status_updated", "ts": ago(31), "product": "b-quiet", "state": "running"},
        ])
        cmd = script(tmp_path / "spoil.sh", f"printf 'not a log line' >> {log}\necho task/$1\n")
        return run_cli("lanes", str(log), "--enqueue-cmd", cmd, *extra)

    out = spoiled("--json")
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert report["enqueued"] == [] and report["failed"] == []
    [unrecorded] = report["unrecorded"]
    assert (unrecorded["product"], unrecorded["task_branch"]) == ("a-quiet", "task/a-quiet")
    said, lost = [line for line in out.stderr.splitlines() if "a-quiet" in line]
    assert said.startswith("eventlog: a-quiet: status-quiet: enqueued, but cannot append resume_enqueued: ")
    assert "later runs ask whether it arrived (never send it again) until its line is appended" in said
    assert lost.startswith("eventlog: the resume of a-quiet (status-quiet) was enqueued (task branch task/a-quiet): ")
    text = spoiled().stdout
    assert "a-quiet: status-quiet, resume enqueued but NOT recorded (append its line: " in text
    assert "b-quiet: status-quiet, not enqueued (the run stopped)" in text
