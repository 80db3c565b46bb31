"""When the disk refuses: what a runner did is never lost for want of a line, and every refusal says why.

A write is made to fail at the exact point as a user's full disk would: under a file size limit
(``RLIMIT_FSIZE``, every write past it fails with EFBIG, even for root; Python ignores SIGXFSZ), set where the
line that must not fit begins. A log or directory the process may not write is a chmod, run as root without
the capabilities that pass it by (``bound_by_permissions``).
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, bound_by_permissions, write_log
from tests.serving import start_server

FAKES = ROOT / "tests" / "fakes"
AT = "2026-08-03T10:00:00+09:00"
CREATED = {"type": "handoff_created", "ts": "2026-08-03T09:00:00+09:00", "handoff_id": "h1",
           "account": "cloud-account-a"}
FAILBACK = ["--probe-cmd", shlex.join([sys.executable, str(FAKES / "failback_probe.py"), "ok"]),
            "--resume-cmd", shlex.join([sys.executable, str(FAKES / "failback_resume.py"), "verified"]),
            "--watcher", "w1", "--at", AT]
PASTE = "once it takes writes again, append it: "


def eventlog(*args: str, limit: int | None = None, via: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """``eventlog ARGS``; ``limit``: no file it writes may grow past that many bytes."""
    def no_growth() -> None:
        assert limit is not None
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return subprocess.run([*(via or []), sys.executable, "-m", "eventlog", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, preexec_fn=no_growth if limit is not None else None, check=False)


def room_for(tmp: Path, name: str, events: list[dict[str, Any]], args: list[str], kept: int) -> int:
    """How many bytes the log of ``events`` holds once ``args`` (LOG in it) appended its first ``kept`` lines: a
    run on a copy that may grow says where the line that must not fit begins (the runs are pinned by --at)."""
    free = write_log(tmp / f"free-{name}.jsonl", events)
    done = eventlog(*[str(free) if a == "LOG" else a for a in args])
    assert done.returncode == 0, done.stderr
    return sum(len(line) for line in free.read_bytes().splitlines(keepends=True)[:len(events) + kept])


def pasted(stderr: str, act: str) -> str:
    """The command stderr gives to append by hand what ``act`` gave, checked to be the one line that says it."""
    [said] = [line for line in stderr.splitlines() if line.startswith(f"eventlog: {act}: no line of ")]
    assert PASTE in said, said
    return said.split(PASTE, 1)[1]


def paste(command: str) -> None:
    """Run a pasted command as a person would, in sh, with this eventlog on PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    done = subprocess.run(["sh", "-c", command], env={**os.environ, "PATH": path}, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


# --- 1. what an act gave, printed to paste when the log does not take it -----------------------------------


def test_failback_a_handshake_the_log_does_not_take_is_shown_and_printed_to_paste(tmp_path: Path) -> None:
    # room for probe_result, claimed and resume_requested only: the resume runs, and its verified does not fit
    args = ["failback", "LOG", *FAILBACK]
    room = room_for(tmp_path, "failback", [CREATED], args, 3)
    for as_json in (False, True):
        log = write_log(tmp_path / f"full-{as_json}.jsonl", [CREATED])
        out = eventlog("failback", str(log), *FAILBACK, *(["--json"] if as_json else []), limit=room)
        assert out.returncode == 1, out.stderr
        assert [e["type"] for e in lines(log)] == ["handoff_created", "probe_result", "claimed", "resume_requested"]
        assert (f"eventlog: cannot append verified of h1 (attempt 1) to the log: could not write {log}: File too "
                "large; nothing was written") in out.stderr.splitlines()
        command = pasted(out.stderr, "the resume of h1 (attempt 1) answered verified (main abc1234)")
        if as_json:
            report = json.loads(out.stdout)
            assert report["resumed"] == [{"handoff_id": "h1", "attempt": 1, "result": "verified",
                                          "detail": "main abc1234", "written": False}]
            [lost] = report["unwritten"]
            assert lost["command"] == command and [e["type"] for e in lost["events"]] == ["verified"]
        else:
            assert ("  h1 (attempt 1): verified - main abc1234 (NOT written to the log: the line to append is on "
                    "stderr)") in out.stdout.splitlines()
        paste(command)  # the disk has room again
        assert {**lines(log)[-1], "seq": None} == {
            "type": "verified", "handoff_id": "h1", "attempt": 1, "branch": "main", "head": "abc1234", "dirty": False,
            "todos": "taken_over", "ts": "2026-08-03T10:00:00.000+09:00", "seq": None}
        dump = eventlog("replay", str(log))
        assert json.loads(dump.stdout)["handoffs"]["failback"] == {"returned": 1, "total": 1}, dump.stderr


def test_handoff_probe_a_result_the_log_does_not_take_is_shown_and_printed_to_paste(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [CREATED])
    out = eventlog("handoff", "probe", str(log), "cloud-account-a", "--probe-cmd", "echo PING_OK", "--actor", "ann",
                   "--at", AT, limit=log.stat().st_size)
    assert out.returncode == 1, out.stderr
    assert out.stdout.startswith("account cloud-account-a: probe said ok (NOT written to the log")
    command = pasted(out.stderr, "the probe of cloud-account-a said ok (expected answer: PING_OK)")
    paste(command)
    assert {k: v for k, v in lines(log)[-1].items() if k != "seq"} == {
        "type": "probe_result", "ts": "2026-08-03T10:00:00+09:00", "account": "cloud-account-a", "outcome": "ok",
        "detail": "expected answer: PING_OK", "actor": "ann"}


def test_catchup_a_rerun_end_the_log_does_not_take_is_shown_and_printed_to_paste(tmp_path: Path) -> None:
    events = [{"type": "job_registered", "ts": "2026-08-21T07:00:00+09:00", "label": "com.lily.a", "guarded": True,
               "calendar": [{"Hour": 9, "Minute": 0}], "interval_s": None},
              {"type": "job_skipped", "ts": "2026-08-21T09:00:05+09:00", "label": "com.lily.a", "reason": "quota",
               "remaining_s": 60}]
    args = ["catchup", "LOG", "--probe-cmd", "echo PING_OK", "--at", "2026-08-21T10:00:00+09:00"]
    room = room_for(tmp_path, "catchup", events, [*args, "--kick-cmd", "true"], 1)  # room for catchup_kicked only
    log = write_log(tmp_path / "full.jsonl", events)
    out = eventlog(*[str(log) if a == "LOG" else a for a in args], "--kick-cmd", "sh -c 'exit 3'", "--json",
                   limit=room)
    assert out.returncode == 1, out.stderr
    assert [e["type"] for e in lines(log)][-1] == "catchup_kicked"
    report = json.loads(out.stdout)
    assert report["runs"] == [{"label": "com.lily.a", "outcome": "exited", "exit": 3, "written": False}]
    command = pasted(out.stderr, "the re-run of com.lily.a ended: exited (exit 3)")
    assert report["unwritten"][0]["command"] == command
    paste(command)
    assert {k: v for k, v in lines(log)[-1].items() if k not in ("seq", "ts")} == {
        "type": "catchup_finished", "label": "com.lily.a", "outcome": "exited", "exit": 3}


# --- 2. a log the process may not write ---------------------------------------------------------------------


def read_only(log: Path) -> list[str]:
    """Make ``log`` one this test's processes may read, not write; the command that runs them bound by it."""
    via = bound_by_permissions()
    log.chmod(0o444)
    return via


def test_failback_on_a_log_it_may_not_write_exits_1_with_the_reason_and_a_json_report(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [CREATED])
    via = read_only(log)
    said = f"cannot open {log} to read and write it: Permission denied"
    out = eventlog("failback", str(log), *FAILBACK, via=via)
    assert out.returncode == 1 and f"eventlog: {said}" in out.stderr.splitlines(), out.stderr
    as_json = eventlog("failback", str(log), *FAILBACK, "--json", via=via)
    assert as_json.returncode == 1, as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["exit"] == "error" and said in report["problems"] and report["heartbeat"] is None
    unnamed = write_log(tmp_path / "unnamed.jsonl", [CREATED, {"type": "watcher_run", "ts": CREATED["ts"],
                                                               "watcher": "", "exit": "ok", "period_s": 900}])
    unnamed_via = read_only(unnamed)  # a pass named '' reads the log for that name first: read, never written
    out = eventlog("failback", str(unnamed), *FAILBACK[:-4], "--watcher", "", *FAILBACK[-2:], via=unnamed_via)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert f"eventlog: cannot open {unnamed} to read and write it: Permission denied" in out.stderr.splitlines()
    retire = eventlog("failback", str(log), "--retire", "w1", "--reason", "host renamed", via=via)
    assert retire.returncode == 1 and said in retire.stderr, retire.stderr
    probe = eventlog("handoff", "probe", str(log), "cloud-account-a", "--probe-cmd", "echo PING_OK", via=via)
    assert probe.returncode == 1 and said in probe.stderr and "Traceback" not in probe.stderr, probe.stderr
    assert lines(log) == [CREATED]


# --- 3. a directory where a runner may not make its lock file -----------------------------------------------


RUNNERS: dict[str, tuple[list[str], str]] = {
    "import quota-log": (["import", "quota-log", "LOG", "DIR/quota.log"], "import"),
    "observe lane": (["observe", "lane", "LOG", "p1", "--stop-file", "DIR/stop"], "observe"),
    "lanes": (["lanes", "LOG", "--enqueue-cmd", "true"], "lanes"),
    "catchup": (["catchup", "LOG", "--probe-cmd", "echo PING_OK", "--kick-cmd", "true"], "catchup"),
}


@pytest.mark.parametrize("name", list(RUNNERS))
def test_a_lock_file_that_cannot_be_made_is_named_with_the_reason_and_exit_1(tmp_path: Path, name: str) -> None:
    args, lock = RUNNERS[name]
    home = tmp_path / "home"
    home.mkdir()
    (home / "quota.log").write_text("")
    (tmp_path / "shared").mkdir()
    log = write_log(tmp_path / "shared" / "log.jsonl", [CREATED])
    via = bound_by_permissions()
    log.chmod(0o666)
    log.parent.chmod(0o555)  # the log may be read and written; nothing may be made beside it
    try:
        out = eventlog(*[str(log) if a == "LOG" else a.replace("DIR", str(home)) for a in args], via=via)
    finally:
        log.parent.chmod(0o755)
    assert out.returncode == 1, out.stderr
    assert (f"eventlog: cannot create the lock file {log}.{lock}.lock: Permission denied; nothing was done"
            in out.stderr.splitlines()), out.stderr
    assert lines(log) == [CREATED]


# --- 4. serve says why it refuses writes, once per reason ---------------------------------------------------


def test_serve_says_once_why_the_log_refuses_writes_and_when_it_takes_them_again(tmp_path: Path) -> None:
    # a log large enough that the server's own output (its stderr, a file under the same limit) stays below it
    log = write_log(tmp_path / "log.jsonl", [{**CREATED, "handoff_id": f"h{i}"} for i in range(2000)])
    size = log.stat().st_size

    def no_growth() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))

    server = start_server(log, tmp_path, preexec=no_growth)
    refused = f"could not write {log}: File too large; nothing was written"
    try:
        c = server.client("ops")

        def post(n: int) -> httpx.Response:
            return c.post("/v1/events", content=json.dumps({**CREATED, "handoff_id": f"new{n}"}) + "\n")

        for n in range(3):
            r = post(n)
            assert (r.status_code, r.json()["code"]) == (503, "LOG_UNAVAILABLE") and refused in r.json()["message"]
        said = wait_for(server.stderr, lambda text: refused in text)
        assert [line for line in said.splitlines() if refused in line] == [
            f"a write was refused with 503 LOG_UNAVAILABLE: {refused} (said again for another reason, and once a "
            "write is taken)"]
        resource.prlimit(server.proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        assert post(3).status_code == 200 and post(4).status_code == 200
        back = f"{log} takes writes again (the last refused: {refused})"
        said = wait_for(server.stderr, lambda text: back in text)
        assert said.count(back) == 1 and said.count(refused) == 2, said
        resource.prlimit(server.proc.pid, resource.RLIMIT_FSIZE, (log.stat().st_size, resource.RLIM_INFINITY))
        assert post(5).status_code == 503
        said = wait_for(server.stderr, lambda text: text.count(refused) == 3)  # refused again after a write taken
    finally:
        server.stop()


def wait_for(path: Path, seen: Callable[[str], bool], timeout: float = 10.0) -> str:
    """The text of ``path`` once ``seen`` says so (a server's stderr is written as it goes)."""
    deadline = time.monotonic() + timeout
    while True:
        text = path.read_text(errors="replace")
        if seen(text) or time.monotonic() > deadline:
            assert seen(text), text
            return text
        time.sleep(0.05)

