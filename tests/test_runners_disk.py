"""Catch-up and lanes on a disk that refuses: never act unjournaled, never lose a run (issue F1 of session 30).

A user review filled a disk under the runners: catch-up re-ran a job, could not write its end, and reported
"nothing kicked" with no run in its JSON; the lanes runner sent the same resume on every run while no line of
it could be written; a lock file it could not create was "bad usage" (exit 2). Here a full disk is a file size
limit (RLIMIT_FSIZE: every write past the log's size fails, for root too), set before the runner starts or, by the
fake command, on the runner while it runs, so the append fails at the exact point. Real processes throughout.
"""

from __future__ import annotations

import json
import resource
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, bound_by_permissions, run_cli, write_log
from tests.test_catchup_runner import AT, KICK, PROBE, registered, skipped
from tests.test_lanes_pass import ago, events, pasted

ENQUEUE = ROOT / "tests" / "fakes" / "lanes_enqueue.py"
#: Where the line that says what the log did not take gives the command to paste (``Unwritten``, every runner).
PASTE = "once it takes writes again, append it: "


def cli(*args: str, full: Path | None = None, via: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """``eventlog ARGS``; ``full``: no room left to write past that file's size (a full disk, from the start);
    ``via``: the command it runs under."""
    def no_room() -> None:
        assert full is not None
        size = full.stat().st_size
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return subprocess.run([*(via or []), sys.executable, "-m", "eventlog", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, preexec_fn=None if full is None else no_room, check=False)


# --- catch-up ------------------------------------------------------------------------------------------------


def catchup_log(tmp_path: Path) -> Path:
    return write_log(tmp_path / "catchup.jsonl", [registered("com.lily.a"), registered("com.lily.b"),
                                                  skipped("com.lily.a"), skipped("com.lily.b")])


def catchup(log: Path, plan: dict[str, str], *extra: str, full: Path | None = None) -> Any:
    kicks = log.parent / "kicks.jsonl"
    return cli("catchup", str(log), "--probe-cmd", shlex.join([sys.executable, str(PROBE), str(log.parent / "p"), "0"]),
               "--kick-cmd", shlex.join([sys.executable, str(KICK), str(kicks), json.dumps(plan)]), "--at", AT,
               *extra, full=full)


def kicked(log: Path) -> list[str]:
    kicks = log.parent / "kicks.jsonl"
    return [json.loads(line)["label"] for line in kicks.read_text().splitlines()] if kicks.exists() else []


def test_a_rerun_whose_end_cannot_be_written_is_reported_with_its_exit_and_the_line_to_paste(tmp_path: Path) -> None:
    """Room for catchup_kicked, none for catchup_finished: job a ran and exited 0. The report says so (text and
    JSON), stderr says its end was not written and prints the exact line, and nothing more is kicked."""
    log = catchup_log(tmp_path)
    out = catchup(log, {"com.lily.a": f"full:{log}"}, "--json")
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    assert report["runs"] == [{"label": "com.lily.a", "outcome": "exited", "exit": 0, "written": False}]
    assert report["not_kicked"] == ["com.lily.b"] and kicked(log) == ["com.lily.a"]
    [lost] = report["unwritten"]
    [line] = lost["events"]
    assert line["type"] == "catchup_finished" and line["exit"] == 0
    assert (f"eventlog: cannot append the end of the re-run of com.lily.a to the log: could not write {log}: File too "
            "large; nothing was written; nothing more is kicked") in out.stderr
    [said] = [line for line in out.stderr.splitlines() if PASTE in line]
    assert said.startswith(f"eventlog: the re-run of com.lily.a ended: exited (exit 0): no line of {log} says so")
    assert report["note"] == "1 re-run(s) done; 1 end(s) NOT written to the log: nothing more kicked"
    assert [e["type"] for e in events(log)][-1] == "catchup_kicked"  # the disk took that, and no more

    paste = said.split(PASTE, 1)[1]
    assert paste == lost["command"]
    assert pasted(paste, tmp_path).returncode == 0, paste
    end = events(log)[-1]
    assert (end["type"], end["label"], end["outcome"], end["exit"]) == ("catchup_finished", "com.lily.a", "exited", 0)
    again = catchup(log, {})  # a is done; b, never kicked, is
    assert again.returncode == 0, again.stderr
    assert kicked(log) == ["com.lily.a", "com.lily.b"]


def test_the_text_report_names_the_rerun_whose_end_was_not_written(tmp_path: Path) -> None:
    log = catchup_log(tmp_path)
    out = catchup(log, {"com.lily.b": f"full:{log}"})  # room for a's lines and b's kick: b ran too
    assert out.returncode == 1
    assert out.stdout.splitlines() == [
        "com.lily.a: exited (exit 0)",
        "com.lily.b: exited (exit 0) (NOT written to the log: the line to append is on stderr)",
        "2 re-run(s) done; 1 end(s) NOT written to the log: nothing more kicked"]
    assert "eventlog: cannot append the end of the re-run of com.lily.b to the log: " in out.stderr
    assert f"| eventlog append {log}" in out.stderr


def test_no_job_is_kicked_whose_kick_cannot_be_written(tmp_path: Path) -> None:
    log = catchup_log(tmp_path)
    before = log.read_bytes()
    out = catchup(log, {}, "--json", full=log)
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert kicked(log) == [] and report["runs"] == [] and report["not_kicked"] == ["com.lily.a", "com.lily.b"]
    assert (f"eventlog: com.lily.a: its catchup_kicked could not be written (could not write {log}: File too large; "
            "nothing was written): it is not kicked, nor is any job after it") in out.stderr
    assert log.read_bytes() == before


def test_catchup_on_a_log_it_may_read_but_not_write_says_the_write_failed(tmp_path: Path) -> None:
    log = catchup_log(tmp_path)
    log.chmod(0o444)
    out = cli("catchup", str(log), "--probe-cmd", "true", "--kick-cmd", "true", "--at", AT,
              via=bound_by_permissions())
    assert out.returncode == 1
    assert out.stdout.splitlines() == ["the log could not be written: nothing kicked"]
    assert (f"eventlog: cannot write the log (it can be read, not written): cannot open {log} to read and write it: "
            "Permission denied") in out.stderr.splitlines()


# --- lanes ---------------------------------------------------------------------------------------------------


def lanes_log(tmp_path: Path) -> Path:
    return write_log(tmp_path / "lanes.jsonl", [
        {"type": "status_updated", "ts": ago(31), "product": "quiet", "state": "running"},
    ])


def lanes(log: Path, mode: str = "ok", *extra: str, full: Path | None = None) -> Any:
    cmd = shlex.join([sys.executable, str(ENQUEUE), str(log.parent / "calls.jsonl"), mode])
    return cli("lanes", str(log), "--enqueue-cmd", cmd, *extra, full=full)


def sent(log: Path) -> int:
    calls = log.parent / "calls.jsonl"
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def test_lanes_sends_no_resume_while_its_lane_check_cannot_be_written(tmp_path: Path) -> None:
    """A disk with no room: the lane_check is written before any command runs, so none runs, run after run."""
    log = lanes_log(tmp_path)
    before = log.read_bytes()
    for _ in range(3):
        out = lanes(log, full=log)
        assert out.returncode == 1
        assert f"eventlog: cannot append the lane check: could not write {log}: File too large" in out.stderr
        assert ("eventlog: no resume sent for 1 stall(s), since nothing could record it (its lane_check could not be "
                "written); the next run that can write tries again") in out.stderr.splitlines()
        assert out.stdout.splitlines()[1:] == [
            "  quiet: status-quiet, not enqueued (its lane check could not be written: nothing would record the "
            "resume)"]
    assert sent(log) == 0 and log.read_bytes() == before


def test_lanes_writes_its_lane_check_before_the_send_and_prints_a_resume_it_could_not_record(tmp_path: Path) -> None:
    """The command sends, then leaves no room: its resume_enqueued cannot be written. The lane_check was written
    before it ran, naming the send; stderr prints the exact line; the next run asks whether it arrived (never sends
    it again), and once pasted, the stall is covered."""
    log = lanes_log(tmp_path)
    out = lanes(log, f"full:{log}", "--json")
    assert out.returncode == 1 and sent(log) == 1
    assert [e["type"] for e in events(log)] == ["status_updated", "lane_check"]
    assert events(log)[-1]["exit"] == "sending"  # as the pass stood before it sent: the send's end is on stderr
    assert events(log)[-1]["sending"] == {"quiet": "status-quiet"}
    report = json.loads(out.stdout)
    [sent_] = report["unrecorded"]
    assert (sent_["product"], sent_["kind"], sent_["task_branch"]) == ("quiet", "status-quiet",
                                                                       "resume/quiet/status-quiet")
    [lost] = report["unwritten"]
    assert [e["task_branch"] for e in lost["events"]] == ["resume/quiet/status-quiet"]
    assert (f"eventlog: quiet: status-quiet: enqueued, but cannot append resume_enqueued: could not write {log}: File "
            "too large") in out.stderr
    [said] = [line for line in out.stderr.splitlines() if PASTE in line]
    assert said.startswith("eventlog: the resume of quiet (status-quiet) was enqueued (task branch "
                           f"resume/quiet/status-quiet): no line of {log} says so")
    assert f"cannot append the lane check: could not write {log}: File too large" in out.stderr  # its second one

    paste = said.split(PASTE, 1)[1]
    assert paste == lost["command"]
    asked = lanes(log)
    assert asked.returncode == 1 and "did it arrive?" in asked.stderr and sent(log) == 1
    assert pasted(paste, tmp_path).returncode == 0, paste
    resume = events(log)[-1]
    assert (resume["type"], resume["product"], resume["kind"]) == ("resume_enqueued", "quiet", "status-quiet")
    again = lanes(log)
    assert again.returncode == 0, again.stderr
    assert "  quiet: status-quiet, resume already enqueued" in again.stdout.splitlines() and sent(log) == 1


def test_a_send_that_fails_after_the_lane_check_leaves_a_second_one_that_says_so(tmp_path: Path) -> None:
    log = lanes_log(tmp_path)
    out = lanes(log, "fail")
    assert out.returncode == 1 and sent(log) == 1
    first, second = [e for e in events(log) if e["type"] == "lane_check"]
    assert first["exit"] == "sending" and first["ts"] == second["ts"]
    assert second["unsent"] == {"quiet": "status-quiet"} and "sending" not in second
    assert second["exit"] == "error" and "quiet: status-quiet: --enqueue-cmd failed (exit 4)" in second["detail"]


# --- the runners' lock files ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("runner", "args"), [
    ("lanes", ["--enqueue-cmd", "true"]),
    ("catchup", ["--probe-cmd", "true", "--kick-cmd", "true", "--at", AT]),
])
def test_a_lock_file_that_cannot_be_opened_is_exit_1_naming_it_and_why(tmp_path: Path, runner: str,
                                                                        args: list[str]) -> None:
    """Not bad usage (exit 2): the log could not be written, as append says (here the lock's name is taken by a
    directory; another user's file and no inode left fail alike; a directory this user may not write:
    tests/test_write_refused.py). The report says it too (--json)."""
    log = lanes_log(tmp_path) if runner == "lanes" else catchup_log(tmp_path)
    lock = Path(f"{log}.{runner}.lock")
    lock.mkdir()
    out = run_cli(runner, str(log), *args, "--json")
    assert out.returncode == 1, out.stderr
    said = f"cannot open the lock file {lock}: Is a directory; nothing was done"
    assert f"eventlog: {said}" in out.stderr.splitlines(), out.stderr
    assert said in json.loads(out.stdout)["problems"]
