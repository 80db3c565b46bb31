"""A catch-up re-run that did not end well is named everywhere until the job runs again (seed 002).

Real shell-script jobs behind ``--kick-cmd``, and the fake ``launchctl`` of tests/fakes/scheduler.py: a re-run that
exited 3, ran over its timeout, could not start (a typo in the kick command), was cut short by SIGTERM, lost its
runner to SIGKILL, or could not be stopped is named by ``status``, ``explain``, ``serve``, ``follow --prom`` and every
later catch-up pass (exit 1), and while one may still run nothing else is kicked (re-runs never overlap).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from eventlog.runners.schedulers import CallTimedOut, JobState, run_job
from tests.conftest import ROOT, run_cli, write_log
from tests.serving import start_server
from tests.test_catchup_scheduler import Fake
from tests.test_follow import following

AT = "2026-08-21T10:00:00+09:00"  # a Friday; the jobs' 9:00 slot has passed
LATER = "2026-08-21T12:00:00+09:00"

#: The kick command: runs the job named by its last argument, a shell script of the jobs folder.
KICK = """#!/bin/sh
echo "$$" >> "$(dirname "$0")/pids"
exec "$(dirname "$0")/jobs/$1.sh"
"""


def registered(label: str) -> dict[str, Any]:
    return {"type": "job_registered", "ts": "2026-08-21T07:00:00+09:00", "label": label, "guarded": True,
            "calendar": [{"Hour": 9, "Minute": 0}], "interval_s": None}


def skipped(label: str, ts: str = "2026-08-21T09:00:05+09:00") -> dict[str, Any]:
    return {"type": "job_skipped", "ts": ts, "label": label, "reason": "quota", "remaining_s": 60}


class Jobs:
    """A log of skipped jobs, each a shell script, and the kick command that runs them."""

    def __init__(self, tmp: Path, **scripts: str) -> None:
        self.dir = tmp
        tmp.mkdir(exist_ok=True)
        labels = [label.replace("_", ".") for label in scripts]
        self.log = write_log(tmp / "jobs.jsonl", [*map(registered, labels), *map(skipped, labels)])
        (tmp / "jobs").mkdir()
        for label, body in scripts.items():
            job = tmp / "jobs" / f"{label.replace('_', '.')}.sh"
            job.write_text(f"#!/bin/sh\n{body}\n")
            job.chmod(0o755)
        self.kick = tmp / "kick.sh"
        self.kick.write_text(KICK)
        self.kick.chmod(0o755)

    def catchup(self, *extra: str, kick: str | None = None, at: str = AT) -> subprocess.CompletedProcess[str]:
        return run_cli("catchup", str(self.log), "--probe-cmd", "echo PING_OK", "--kick-cmd", kick or str(self.kick),
                       "--at", at, *extra, timeout=60)

    def popen(self, *extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "eventlog", "catchup", str(self.log), "--probe-cmd", "echo PING_OK", "--kick-cmd",
             str(self.kick), "--at", AT, *extra],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_kicked(self) -> None:
        deadline = time.monotonic() + 30
        while not (self.dir / "pids").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # the kick script has exec'd its job

    def status(self, at: str = LATER) -> tuple[int, dict[str, dict[str, Any]]]:
        out = run_cli("status", str(self.log), "--at", at, "--json", "--all")
        items = {i["id"]: i for g in json.loads(out.stdout)["groups"] for i in g["items"]}
        return out.returncode, items

    def explain(self, label: str, at: str = LATER) -> dict[str, Any]:
        got = json.loads(run_cli("explain", str(self.log), label, "--at", at, "--json").stdout)
        [verdict] = got["verdicts"]
        return verdict  # type: ignore[no-any-return]

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def append(self, *events: dict[str, Any]) -> None:
        done = run_cli("append", str(self.log), stdin="".join(json.dumps(e) + "\n" for e in events))
        assert done.returncode == 0, done.stderr



def kill_started(folder: Path) -> None:
    """SIGKILL the process group of every job the kick script of ``folder`` started (only these tests' jobs)."""
    pids = folder / "pids"
    for pid in pids.read_text().split() if pids.exists() else []:
        try:
            os.killpg(int(pid), signal.SIGKILL)
        except OSError:
            pass


@pytest.fixture
def jobs_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    kill_started(tmp_path)


def test_a_rerun_that_exited_3_is_named_everywhere_until_the_job_runs_again(jobs_dir: Path) -> None:
    j = Jobs(jobs_dir, com_x="exit 3")
    first = j.catchup()
    assert first.returncode == 1 and "com.x: re-run exit 3" in first.stderr

    code, items = j.status()
    assert code == 1
    item = items["com.x"]
    assert item["reason_code"] == "rerun_failed" and item["domain"] == "catchup" and item["needs_decision"]
    assert item["reason"].startswith(f"catch-up re-ran it at {AT} (line 3): it ended with exit 3 at {AT} (line 4)")
    assert item["since"] == AT and item["next"] == f"eventlog explain {j.log} com.x"
    verdict = j.explain("com.x")
    assert verdict["code"] == "rerun_failed"
    assert verdict["next"] == []  # a kick command's re-run: no OS command fits (in words: run it as the kick does)
    assert "this clears once the job runs again" in verdict["says"]

    # the next timer pass has no candidate, and still names it: exit 1 (the unit stays failed), dry run too
    for extra in ((), ("--dry-run",)):
        again = j.catchup(*extra, at=LATER)
        assert again.returncode == 1, extra
        assert f"com.x: catch-up re-ran it at {AT} (line 3): it ended with exit 3" in again.stderr
        assert f"(eventlog explain {j.log} com.x says how)" in again.stderr

    server = start_server(j.log, jobs_dir)
    try:
        with server.client() as c:
            status = c.get("/v1/status").json()
            metrics = c.get("/metrics").text
        # judged now: the job has no marker of today's date either, so once its 9:00 slot is 2 h past it is also
        # named as a job nothing feeds (unfed)
        assert status["groups"][0]["reason_code"] == "rerun_failed" and status["groups"][0]["count"] == 1
        assert {g["reason_code"] for g in status["groups"]} <= {"rerun_failed", "unfed"}
        assert f'recovery_catchup_reruns{{log="{j.log}",kind="failed"}} 1' in metrics
    finally:
        server.stop()
    with following(j.log, jobs_dir) as (_dump, prom):
        deadline = time.monotonic() + 30
        while not prom.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        text = prom.read_text()
    assert f'recovery_catchup_reruns{{log="{j.log}",kind="failed"}} 1' in text
    assert f'recovery_catchup_reruns{{log="{j.log}",kind="no_end"}} 0' in text

    # the guard's own marker of that re-run (exit 3, dated within it) does not clear it; a run that went well does
    j.append({"type": "job_ran", "ts": AT, "label": "com.x", "exit": 3})
    assert j.status()[1]["com.x"]["reason_code"] == "rerun_failed"
    j.append({"type": "job_ran", "ts": "2026-08-21T11:00:00+09:00", "label": "com.x", "exit": 0})
    assert j.status() == (0, {})


def test_a_timeout_and_a_typo_in_the_kick_command_are_named(jobs_dir: Path) -> None:
    j = Jobs(jobs_dir, com_slow="exec sleep 30")
    out = j.catchup("--timeout", "1s", "--kill-grace", "1s")
    assert out.returncode == 1
    [item] = j.status()[1].values()
    assert item["reason"].startswith(f"catch-up re-ran it at {AT} (line 3): it ran over its timeout (1 s) and was "
                                     f"killed at {AT} (line 4)")

    typo = Jobs(jobs_dir / "typo", com_a="exit 0", com_b="exit 0")
    out = typo.catchup(kick=str(jobs_dir / "typo" / "kick.shh"))
    assert out.returncode == 1 and out.stderr.count("kick command could not start") == 2
    code, items = typo.status()
    assert code == 1 and sorted(items) == ["com.a", "com.b"]
    assert all("it could not start (exit 127" in i["reason"] for i in items.values())
    assert typo.catchup(at=LATER).returncode == 1  # "no candidates", but the day's catch-up was lost


def test_a_rerun_cut_short_by_sigterm_is_named_at_once(jobs_dir: Path) -> None:
    j = Jobs(jobs_dir, com_x="exec sleep 30")
    runner = j.popen("--kill-grace", "1s")
    try:
        j.wait_kicked()
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(timeout=30) == 1
    finally:
        if runner.poll() is None:
            runner.kill()
        runner.communicate()
    code, items = j.status(at=AT)
    assert code == 1 and items["com.x"]["reason_code"] == "rerun_failed"
    assert "it ended at " in items["com.x"]["reason"] and "with no exit status" in items["com.x"]["reason"]


def test_a_runner_killed_mid_rerun_leaves_an_open_kick_that_blocks_the_kick_cmd_until_settled(jobs_dir: Path) -> None:
    j = Jobs(jobs_dir, com_x="exec sleep 30", com_y="exit 0")
    (jobs_dir / "jobs" / "com.y.sh").write_text(f"#!/bin/sh\ntouch {jobs_dir / 'y-ran'}\n")
    runner = j.popen("--timeout", "20s", "--kill-grace", "2s")
    try:
        j.wait_kicked()
        runner.send_signal(signal.SIGKILL)  # the runner dies; its job (its own process group) runs on
        runner.wait(timeout=30)
    finally:
        if runner.poll() is None:
            runner.kill()
        runner.communicate()
    kicked = j.events()[4:]
    assert kicked == [{"type": "catchup_kicked", "ts": AT, "label": "com.x", "timeout_s": 20.0, "kill_grace_s": 2.0,
                       "kicked_by": "kick_cmd", "seq": 5}]
    # within its timeout, two kill graces and 5 min it may still run: no item, and explain says so
    within = (datetime.fromisoformat(AT) + timedelta(seconds=20 + 4 + 299)).isoformat()
    past = (datetime.fromisoformat(AT) + timedelta(seconds=20 + 4 + 300)).isoformat()
    assert "com.x" not in j.status(at=within)[1]
    assert j.explain("com.x", at=within)["code"] == "kicked"
    assert "has no end written yet: it may still run" in j.explain("com.x", at=within)["says"]
    code, items = j.status(at=past)
    assert code == 1 and items["com.x"]["reason_code"] == "rerun_no_end"
    assert "no end was ever written" in items["com.x"]["reason"] and "(line 5)" in items["com.x"]["reason"]

    # the next pass (com.y is a candidate) kicks nothing: with --kick-cmd it cannot know whether com.x still runs
    out = j.catchup("--json")
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert report["waits_for"] == ["com.x"] and report["runs"] == []
    assert not (jobs_dir / "y-ran").exists()
    settle = f"printf '%s\\n' '{{\"type\": \"catchup_finished\", \"label\": \"com.x\", \"outcome\": \"exited\"}}' | " \
             f"eventlog append {j.log}"
    assert f"once it no longer runs, record its end: {settle}" in out.stderr
    assert settle in j.explain("com.x", at=past)["next"]

    # a person checks it no longer runs and types the command; the next pass re-runs com.y
    kill_started(jobs_dir)
    typed = subprocess.run(["bash", "-c", settle], capture_output=True, text=True, cwd=ROOT, check=False,
                           env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert typed.returncode == 0, typed.stderr
    out = j.catchup("--json")
    assert json.loads(out.stdout)["runs"] == [{"label": "com.y", "outcome": "exited", "exit": 0, "written": True}]
    assert (jobs_dir / "y-ran").exists()
    assert out.returncode == 1 and "com.x: catch-up re-ran it" in out.stderr  # ended, how unknown: still named


def test_a_job_sigkill_does_not_end_is_not_recorded_as_ended_and_nothing_overlaps_it(tmp_path: Path) -> None:
    fake = Fake(tmp_path)
    try:
        fake.plan(com_lily_a="deaf", com_lily_b="exit:0")
        out = fake.catchup("launchd", "--timeout", "0.5s", "--kill-grace", "0.5s")
        assert out.returncode == 1
        assert "com.lily.a: re-run timed out after 0.5 s; com.lily.a still runs after SIGKILL and 0.5 s: it may " \
               "still run, so no end is written" in out.stderr
        assert fake.tail() == [("catchup_kicked", "com.lily.a", None, None)]  # no end that did not happen

        # the next pass asks launchd: it still runs, so com.lily.b is not kicked; the command to stop it is named
        again = fake.catchup("launchd", "--timeout", "0.5s", "--kill-grace", "0.5s")
        assert again.returncode == 1
        assert json.loads(again.stdout)["waits_for"] == ["com.lily.a"]
        assert "launchd still runs it, so nothing is kicked until it ends (re-runs never overlap): wait, or stop " \
               "it: launchctl kill SIGKILL gui/501/com.lily.a" in again.stderr
        assert [c["argv"][-1] for c in fake.calls() if c["argv"][0] == "kickstart"] == ["gui/501/com.lily.a"]

        # it ends (a person killed it): its end is written, how it ended unknown, and com.lily.b is re-run alone
        fake.stop_leftovers()
        deadline = time.monotonic() + 30
        while list(fake.dir.glob("com.lily.a.pid")) and time.monotonic() < deadline:
            time.sleep(0.05)
        last = fake.catchup("launchd")
        assert last.returncode == 1 and "launchd no longer runs it: its end is written" in last.stderr
        assert fake.tail()[1:] == [("catchup_finished", "com.lily.a", "exited", None),
                                   ("catchup_kicked", "com.lily.b", None, None),
                                   ("catchup_finished", "com.lily.b", "exited", 0)]
    finally:
        fake.stop_leftovers()


class TimesOut:
    """A scheduler whose kick call times out; the job started anyway (``starts``), or not, or nobody can tell."""

    name = "launchd"
    queued = False

    def __init__(self, starts: bool | None) -> None:
        self.starts, self.kicked, self.polls = starts, False, 0

    def state(self, label: str) -> JobState:
        if self.kicked and self.starts is None:
            raise CallTimedOut("launchctl list: timed out after 30 s")
        self.polls += self.kicked
        running = bool(self.kicked and self.starts and self.polls < 3)
        return JobState(running=running, run="42" if running else None, exit=3)

    def kick(self, label: str) -> None:
        self.kicked = True
        raise CallTimedOut(f"launchctl kickstart gui/501/{label}: timed out after 30 s")

    def signal(self, label: str, signal: str) -> None:
        raise AssertionError("never stopped")


def test_a_kick_call_that_timed_out_asks_the_scheduler_before_saying_not_started() -> None:
    started = run_job(TimesOut(starts=True), "com.x", timeout_s=60, grace_s=1, poll_s=0.01)
    assert started.started and started.exit == 3 and not started.may_run  # waited for like any run
    never = run_job(TimesOut(starts=False), "com.x", timeout_s=60, grace_s=1, poll_s=0.01)
    assert not never.started and never.error == ("launchctl kickstart gui/501/com.x: timed out after 30 s; launchd "
                                                 "shows no run of it: not started")
    unknown = run_job(TimesOut(starts=None), "com.x", timeout_s=60, grace_s=1, poll_s=0.01)
    assert unknown.started and unknown.may_run and unknown.exit is None
    assert "whether it started cannot be told" in (unknown.error or "")


def test_a_link_to_the_log_shares_its_lock(jobs_dir: Path) -> None:
    """One catch-up per log, whatever path names it: a second one through a symbolic link re-ran com.b beside
    com.a."""
    j = Jobs(jobs_dir, com_a=f"while [ ! -e {jobs_dir / 'release'} ]; do sleep 0.05; done", com_b="exit 0")
    link = jobs_dir / "link.jsonl"
    link.symlink_to(j.log.name)
    first = j.popen()
    try:
        j.wait_kicked()  # com.a runs
        second = run_cli("catchup", str(link), "--probe-cmd", "echo PING_OK", "--kick-cmd", str(j.kick), "--at", AT)
        assert second.returncode == 0 and "another catch-up holds the lock" in second.stderr
        assert len((jobs_dir / "pids").read_text().split()) == 1  # com.b was not kicked beside it
        (jobs_dir / "release").touch()
        assert first.wait(timeout=30) == 0
    finally:
        (jobs_dir / "release").touch()
        if first.poll() is None:
            first.kill()
        first.communicate()
    assert len((jobs_dir / "pids").read_text().split()) == 2  # then one after the other


#: How a catch-up kicks (its flags), and the program of every OS command a view may offer for it (None: none).
METHODS = [
    (("--scheduler", "launchd", "--launchd-domain", "gui/501"), ["launchctl"]),
    (("--scheduler", "systemd"), ["systemctl"]),
    (("--scheduler", "systemd", "--systemd-user"), ["systemctl", "--user"]),
    (("--kick-cmd", "exit3"), None),
]


@pytest.mark.parametrize(("method", "program"), METHODS, ids=lambda v: " ".join(v or ["none"]))
def test_explain_offers_the_commands_of_the_scheduler_that_kicked_the_rerun(
        tmp_path: Path, method: tuple[str, ...], program: list[str] | None) -> None:
    fake = Fake(tmp_path)
    fake.plan(com_lily_a="exit:3", com_lily_b="exit:0")
    kick = tmp_path / "exit3"
    kick.write_text("#!/bin/sh\nexit 3\n")
    kick.chmod(0o755)
    flags = [str(kick) if arg == "exit3" else arg for arg in method]
    try:
        out = run_cli("catchup", str(fake.log), "--probe-cmd", "echo PING_OK", *flags, "--poll", "0.05s", "--at", AT,
                      env={k: fake.env[k] for k in ("PATH", "FAKE_SCHEDULER_DIR")})
        assert out.returncode == 1 and "com.lily.a: " in out.stderr, out.stderr
        lines = fake.log.read_text().splitlines()
        # the same re-run, its end never written (the runner was killed): rerun_no_end once its deadline passed
        no_end = tmp_path / "no_end.jsonl"
        no_end.write_text("".join(line + "\n" for line in lines if '"catchup_finished"' not in line))
        for log, code in ((fake.log, "rerun_failed"), (no_end, "rerun_no_end")):
            items = {i["id"]: i for g in json.loads(run_cli("status", str(log), "--at", LATER, "--json").stdout)[
                "groups"] for i in g["items"]}
            assert items["com.lily.a"]["reason_code"] == code
            assert items["com.lily.a"]["next"] == f"eventlog explain {log} com.lily.a"
            [verdict] = json.loads(run_cli("explain", str(log), "com.lily.a", "--at", LATER, "--json").stdout)[
                "verdicts"]
            assert verdict["code"] == code
            os_cmds = [cmd for cmd in verdict["next"] if not cmd.startswith(("eventlog ", "printf "))]
            if program is None:  # a kick command: no OS command, in next or in words
                assert os_cmds == [] and "launchctl" not in verdict["says"] and "systemctl" not in verdict["says"]
                assert "the way the catch-up does: its --kick-cmd, that command with com.lily.a as its last " \
                       "argument" in verdict["says"]
                continue
            assert len(os_cmds) == (2 if code == "rerun_no_end" else 1)
            for cmd in os_cmds:  # each one the program of the method, and it works where it is pasted
                assert shlex.split(cmd)[:len(program)] == program, cmd
                assert cmd in verdict["says"]
                pasted = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=fake.env,
                                        check=False, timeout=30)
                assert pasted.returncode == 0 or pasted.stdout == "inactive\n", (cmd, pasted.stderr)
                assert fake.calls()[-1]["argv"] == shlex.split(cmd)[1:]
            if program[0] == "launchctl":
                assert "launchctl kickstart gui/501/com.lily.a" in os_cmds
    finally:
        fake.stop_leftovers()


def test_a_rerun_no_end_says_the_times_its_rule_adds(jobs_dir: Path) -> None:
    j = Jobs(jobs_dir)
    j.append({"type": "catchup_kicked", "ts": AT, "label": "com.x", "timeout_s": 600, "kill_grace_s": 45})
    verdict = j.explain("com.x")
    assert verdict["code"] == "rerun_no_end"
    assert "though its timeout (10 min), twice its kill grace (1 min 30 s) and 5 min more passed by " \
           "2026-08-21T10:16:30+09:00" in verdict["says"]


@pytest.mark.parametrize("fields", [{}, {"kicked_by": "sh -c 'touch /tmp/x'"}, {"kicked_by": 5},
                                    {"kicked_by": "launchd", "launchd_domain": "gui/501/x; touch /tmp/x #"}],
                         ids=json.dumps)
def test_a_kick_that_does_not_say_how_as_the_project_writes_it_offers_no_os_command(
        jobs_dir: Path, fields: dict[str, Any]) -> None:
    """An older line (no ``kicked_by``), or another writer's value: kept and ignored; no command from the log."""
    j = Jobs(jobs_dir)
    j.append({"type": "catchup_kicked", "ts": AT, "label": "com.x", **fields},
             {"type": "catchup_finished", "ts": AT, "label": "com.x", "outcome": "exited", "exit": 3})
    assert json.loads(run_cli("replay", str(j.log)).stdout)["bad_lines"] == []
    verdict = j.explain("com.x")
    assert verdict["code"] == "rerun_failed"
    if "launchd_domain" in fields:  # launchd, its foreign domain ignored: the runner's own gui/UID
        assert verdict["next"] == ["launchctl kickstart gui/$(id -u)/com.x"]
    else:
        assert verdict["next"] == []
        assert "its catchup_kicked does not say how it kicked (an older line): with its --kick-cmd, that command " \
               "with com.x as its last argument; with its --scheduler, through that scheduler" in verdict["says"]
    assert "touch" not in json.dumps(verdict["next"]) and "touch" not in verdict["says"]
