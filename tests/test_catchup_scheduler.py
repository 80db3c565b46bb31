"""``eventlog catchup --scheduler launchd|systemd``: jobs re-run under the scheduler, stopped through it.

The fake ``launchctl``/``systemctl`` (tests/fakes/scheduler.py) sit on PATH, run each job in a session of
its own (as launchd does: outside any process group of ours) and record every call with the jobs running
at that moment, so "stopped before the next kick starts" is read from what the scheduler saw.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eventlog.runners.schedulers import JobState, SchedulerError, Systemd, run_job
from tests.conftest import ROOT, write_log

FAKE = ROOT / "tests" / "fakes" / "scheduler.py"
PROBE = ROOT / "tests" / "fakes" / "catchup_probe.py"
AT = "2026-08-21T10:00:00+09:00"  # a Friday; the jobs' 9:00 slot has passed


def registered(label: str) -> dict[str, Any]:
    return {"type": "job_registered", "ts": "2026-08-21T07:00:00+09:00", "label": label, "guarded": True,
            "calendar": [{"Hour": 9, "Minute": 0}], "interval_s": None}


def skipped(label: str) -> dict[str, Any]:
    return {"type": "job_skipped", "ts": "2026-08-21T09:00:05+09:00", "label": label, "reason": "quota",
            "remaining_s": 60}


class Fake:
    """A fake scheduler on PATH and a log with two skipped jobs, com.lily.a and com.lily.b."""

    def __init__(self, tmp: Path) -> None:
        self.dir = tmp / "scheduler"
        self.dir.mkdir()
        bin_ = tmp / "bin"
        bin_.mkdir()
        for tool in ("launchctl", "systemctl"):
            wrapper = bin_ / tool
            run = shlex.join([sys.executable, str(FAKE), tool])
            wrapper.write_text(f'#!/bin/sh\nexec {run} "$@"\n')
            wrapper.chmod(0o755)
        self.env = {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}",
                    "FAKE_SCHEDULER_DIR": str(self.dir)}
        self.log = write_log(tmp / "jobs.jsonl", [registered("com.lily.a"), registered("com.lily.b"),
                                                  skipped("com.lily.a"), skipped("com.lily.b")])
        self.probes = tmp / "probes.txt"

    def plan(self, **modes: str) -> None:
        (self.dir / "plan.json").write_text(json.dumps({k.replace("_", "."): v for k, v in modes.items()}))

    def catchup(self, scheduler: str, *extra: str, probe: list[str] | None = None) -> subprocess.CompletedProcess[str]:
        probe = probe or [sys.executable, str(PROBE), str(self.probes), "0"]
        return subprocess.run(
            [sys.executable, "-m", "eventlog", "catchup", str(self.log), "--probe-cmd", shlex.join(probe),
             "--scheduler", scheduler, "--launchd-domain", "gui/501", "--poll", "0.05s", "--at", AT, "--json",
             *extra],
            capture_output=True, text=True, env=self.env, cwd=ROOT, timeout=60, check=False,
        )

    def calls(self) -> list[dict[str, Any]]:
        path = self.dir / "record.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def tail(self) -> list[tuple[str, str, str | None, int | None]]:
        events = [json.loads(line) for line in self.log.read_text().splitlines()][4:]
        return [(e["type"], e["label"], e.get("outcome"), e.get("exit")) for e in events]

    def stop_leftovers(self) -> None:
        """SIGKILL any job still running (only the ones these tests started)."""
        for pid_file in self.dir.glob("*.pid"):
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except (OSError, ValueError):
                pass


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[Fake]:
    f = Fake(tmp_path)
    yield f
    f.stop_leftovers()


def kicks(calls: list[dict[str, Any]], verb: str) -> list[dict[str, Any]]:
    return [c for c in calls if verb in c["argv"]]


def test_launchd_job_that_overruns_is_stopped_before_the_next_kick(fake: Fake) -> None:
    fake.plan(com_lily_a="forever", com_lily_b="exit:0")
    out = fake.catchup("launchd", "--timeout", "1s", "--kill-grace", "5s")
    assert out.returncode == 1  # the re-run timed out
    assert out.stderr.strip() == "eventlog: com.lily.a: re-run timed out after 1 s; stopped"
    calls = fake.calls()
    verbs = [c["argv"][0] + (" " + c["argv"][1] if c["argv"][0] == "kill" else "") for c in calls
             if c["argv"][0] != "list"]
    assert verbs == ["kickstart", "kill SIGTERM", "kickstart"]
    assert [c["argv"][-1] for c in kicks(calls, "kickstart")] == ["gui/501/com.lily.a", "gui/501/com.lily.b"]
    # What launchd saw: a ran when it was told to stop, and nothing ran when b was kicked.
    assert kicks(calls, "SIGTERM")[0]["running"] == ["com.lily.a"]
    assert kicks(calls, "kickstart")[1]["running"] == []
    assert fake.tail() == [
        ("catchup_kicked", "com.lily.a", None, None), ("catchup_finished", "com.lily.a", "timeout_killed", None),
        ("catchup_kicked", "com.lily.b", None, None), ("catchup_finished", "com.lily.b", "exited", 0),
    ]


def test_launchd_job_that_ignores_sigterm_gets_sigkill_after_the_grace(fake: Fake) -> None:
    fake.plan(com_lily_a="ignore-term", com_lily_b="exit:0")
    out = fake.catchup("launchd", "--timeout", "0.5s", "--kill-grace", "0.5s")
    assert out.returncode == 1
    calls = [c for c in fake.calls() if c["argv"][0] != "list"]
    assert [c["argv"][:2] for c in calls] == [["kickstart", "gui/501/com.lily.a"], ["kill", "SIGTERM"],
                                              ["kill", "SIGKILL"], ["kickstart", "gui/501/com.lily.b"]]
    assert calls[2]["running"] == ["com.lily.a"] and calls[3]["running"] == []
    assert (fake.dir / "com.lily.a.status").read_text() == str(-signal.SIGKILL)


def test_launchd_exit_statuses_are_recorded(fake: Fake) -> None:
    fake.plan(com_lily_a="exit:3", com_lily_b="sleep:0.2")
    out = fake.catchup("launchd")
    assert out.returncode == 1
    assert out.stderr.strip() == "eventlog: com.lily.a: re-run exit 3"
    assert fake.tail()[1] == ("catchup_finished", "com.lily.a", "exited", 3)
    assert fake.tail()[3] == ("catchup_finished", "com.lily.b", "exited", 0)
    assert json.loads(out.stdout)["runs"] == [
        {"label": "com.lily.a", "outcome": "exited", "exit": 3, "written": True},
        {"label": "com.lily.b", "outcome": "exited", "exit": 0, "written": True}]


def test_an_exit_status_recorded_late_is_still_the_one_read(fake: Fake) -> None:
    # The scheduler reports a run as ended only with its status: a job that has exited but whose
    # status is not yet written must not read as "exit 0" (a CI run once saw exactly that).
    fake.env["FAKE_SCHEDULER_STATUS_DELAY"] = "0.5"
    fake.plan(com_lily_a="exit:3", com_lily_b="exit:0")
    out = fake.catchup("launchd")
    assert out.returncode == 1
    assert [r["exit"] for r in json.loads(out.stdout)["runs"]] == [3, 0]


def test_a_label_launchd_does_not_know_could_not_start(fake: Fake) -> None:
    fake.plan(com_lily_b="exit:0")
    out = fake.catchup("launchd")
    assert out.returncode == 1
    assert out.stderr.startswith("eventlog: com.lily.a: launchd could not start it: launchctl kickstart "
                                 "gui/501/com.lily.a: exit 113: Could not find service")
    assert fake.tail()[:2] == [("catchup_kicked", "com.lily.a", None, None),
                               ("catchup_finished", "com.lily.a", "exited", 127)]
    assert fake.tail()[3] == ("catchup_finished", "com.lily.b", "exited", 0)


def test_a_job_the_scheduler_cannot_stop_stops_the_catchup(fake: Fake) -> None:
    fake.plan(com_lily_a="immortal", com_lily_b="exit:0")
    out = fake.catchup("launchd", "--timeout", "0.5s", "--kill-grace", "0.5s")
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        "eventlog: com.lily.a: re-run timed out after 0.5 s; could not stop com.lily.a: launchctl kill "
        "SIGTERM gui/501/com.lily.a: exit 1: Could not signal service: 1: Operation not permitted: it may still "
        "run, so no end is written and nothing more is kicked (re-runs never overlap)",
    ]
    assert json.loads(out.stdout)["not_kicked"] == ["com.lily.b"]
    assert [c["argv"][-1] for c in kicks(fake.calls(), "kickstart")] == ["gui/501/com.lily.a"]
    # no end is written that did not happen: it still runs
    assert fake.tail() == [("catchup_kicked", "com.lily.a", None, None)]


def test_an_interrupted_catchup_stops_the_job_it_started(fake: Fake) -> None:
    import time

    fake.plan(com_lily_a="forever", com_lily_b="exit:0")
    proc = subprocess.Popen(
        [sys.executable, "-m", "eventlog", "catchup", str(fake.log), "--probe-cmd",
         shlex.join([sys.executable, str(PROBE), str(fake.probes), "0"]), "--scheduler", "launchd",
         "--poll", "0.05s", "--kill-grace", "5s", "--at", AT],
        env=fake.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not list(fake.dir.glob("com.lily.a.pid")) and time.monotonic() < deadline:
            time.sleep(0.05)  # until the job runs
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert [c["argv"][:2] for c in fake.calls() if c["argv"][0] == "kill"] == [["kill", "SIGTERM"]]
    assert not list(fake.dir.glob("*.pid"))  # the job is gone
    # launchd no longer runs it: its end is written (no exit status: stopped); never kicked again today
    assert fake.tail() == [("catchup_kicked", "com.lily.a", None, None),
                           ("catchup_finished", "com.lily.a", "exited", None)]


def test_systemd_unit_that_overruns_is_stopped_before_the_next_start(fake: Fake) -> None:
    fake.plan(com_lily_a="forever", com_lily_b="exit:4")
    out = fake.catchup("systemd", "--systemd-user", "--timeout", "1s", "--kill-grace", "5s")
    assert out.returncode == 1
    calls = [c for c in fake.calls() if c["argv"][1] != "show"]
    assert [c["argv"] for c in calls] == [
        ["--user", "start", "--no-block", "com.lily.a.service"],
        ["--user", "kill", "--signal=SIGTERM", "com.lily.a.service"],
        ["--user", "start", "--no-block", "com.lily.b.service"],
    ]
    assert calls[1]["running"] == ["com.lily.a"] and calls[2]["running"] == []
    assert fake.tail()[1] == ("catchup_finished", "com.lily.a", "timeout_killed", None)
    # start --no-block returns before the unit runs: its end is read from the new invocation, not the old state.
    assert fake.tail()[3] == ("catchup_finished", "com.lily.b", "exited", 4)


def test_a_probe_that_says_usage_limit_reached_with_exit_0_kicks_nothing(fake: Fake) -> None:
    # Issue 17: "a probe printing 'usage limit reached' with exit 0 kicks every job".
    fake.plan(com_lily_a="exit:0", com_lily_b="exit:0")
    out = fake.catchup("launchd", probe=[sys.executable, str(PROBE), str(fake.probes), "0",
                                         "Claude AI usage limit reached|1787000000"])
    assert out.returncode == 1
    assert "probe failed (quota_limited, exit 0: quota limit text: Claude AI usage limit reached" in out.stderr
    assert json.loads(out.stdout)["probe"] == "quota_limited"
    assert fake.calls() == [] and fake.tail() == []


def test_scheduler_and_kick_cmd_exclude_each_other(fake: Fake) -> None:
    fake.plan(com_lily_a="exit:0")
    out = fake.catchup("launchd", "--kick-cmd", "true")
    assert out.returncode == 2 and "--kick-cmd and --scheduler: give one of them" in out.stderr
    assert fake.calls() == []


class Never:
    """A scheduler whose job never ends and only dies of SIGKILL; it records the calls, with the fake clock."""

    name = "never"
    queued = False

    def __init__(self, clock: list[float], ignores_term: bool) -> None:
        self.clock, self.ignores_term = clock, ignores_term
        self.calls: list[tuple[str, float]] = []
        self.alive = False

    def state(self, label: str) -> JobState:
        return JobState(running=self.alive, run="1" if self.alive else None, exit=-9)

    def kick(self, label: str) -> None:
        self.calls.append(("kick", self.clock[0]))
        self.alive = True

    def signal(self, label: str, signal: str) -> None:
        self.calls.append((signal, self.clock[0]))
        if signal == "SIGKILL" or not self.ignores_term:
            self.alive = False


def test_run_job_stops_after_the_timeout_and_kills_after_the_grace() -> None:
    clock = [0.0]

    def sleep(s: float) -> None:
        clock[0] += s

    job = Never(clock, ignores_term=True)
    ran = run_job(job, "x", timeout_s=2700, grace_s=30, poll_s=2, sleep=sleep, monotonic=lambda: clock[0])
    assert ran.timed_out and ran.exit is None and ran.error is None
    assert job.calls == [("kick", 0.0), ("SIGTERM", 2700.0), ("SIGKILL", 2730.0)]
    job = Never(clock := [0.0], ignores_term=False)
    ran = run_job(job, "x", timeout_s=60, grace_s=30, poll_s=2, sleep=sleep, monotonic=lambda: clock[0])
    assert ran.timed_out and job.calls == [("kick", 0.0), ("SIGTERM", 60.0)]


def test_run_job_that_cannot_be_stopped_says_so() -> None:
    clock = [0.0]

    class Immortal(Never):
        def signal(self, label: str, signal: str) -> None:
            self.calls.append((signal, self.clock[0]))

    job = Immortal(clock, ignores_term=True)
    ran = run_job(job, "x", timeout_s=10, grace_s=5, poll_s=1, sleep=lambda s: clock.__setitem__(0, clock[0] + s),
                  monotonic=lambda: clock[0])
    assert ran.timed_out and ran.error == "x still runs after SIGKILL and 5 s"

    class Refusing(Never):
        def signal(self, label: str, signal: str) -> None:
            raise SchedulerError("launchctl kill: exit 1: Operation not permitted")

    clock[0] = 0.0
    ran = run_job(Refusing(clock, ignores_term=True), "x", timeout_s=10, grace_s=5, poll_s=1,
                  sleep=lambda s: clock.__setitem__(0, clock[0] + s), monotonic=lambda: clock[0])
    assert ran.error == "could not stop x: launchctl kill: exit 1: Operation not permitted"


def test_systemd_unit_names() -> None:
    assert Systemd.unit("com.lily.a") == "com.lily.a.service"
    assert Systemd.unit("backup.service") == "backup.service"


def test_run_job_interrupted_while_kicking_stops_what_it_may_have_started() -> None:
    clock = [0.0]

    class Interrupted(Never):
        def kick(self, label: str) -> None:
            super().kick(label)
            raise KeyboardInterrupt

    job = Interrupted(clock, ignores_term=False)
    with pytest.raises(KeyboardInterrupt):
        run_job(job, "x", timeout_s=10, grace_s=5, poll_s=1, sleep=lambda s: None, monotonic=lambda: clock[0])
    assert job.calls == [("kick", 0.0), ("SIGTERM", 0.0)] and not job.alive


def test_a_launchd_domain_launchctl_does_not_name_so_is_bad_usage(fake: Fake) -> None:
    """The domain is written on each ``catchup_kicked`` and offered back in a command: only launchctl's forms."""
    fake.plan(com_lily_a="exit:0", com_lily_b="exit:0")
    out = fake.catchup("launchd", "--launchd-domain", "gui/501/x; rm -rf ~")
    assert out.returncode == 2 and "not a launchd domain" in out.stderr
    assert fake.calls() == [] and fake.tail() == []


def _reruns(log: Path) -> list[tuple[str, str, str | None, int | None]]:
    events = [json.loads(line) for line in log.read_text().splitlines()]
    return [(e["type"], e["label"], e.get("outcome"), e.get("exit")) for e in events if e["type"].startswith("catchup")]


def _explained_next(log: Path, label: str, env: dict[str, str]) -> list[str]:
    """What `explain` prints next for a job label (`--` before it: it starts with `-`)."""
    out = subprocess.run([sys.executable, "-m", "eventlog", "explain", str(log), "--at", AT, "--json", "--", label],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return [cmd for v in json.loads(out.stdout)["verdicts"] for cmd in v["next"]]


def test_a_label_that_starts_with_a_dash_is_kicked_and_shown_after_a_double_dash(fake: Fake) -> None:
    """systemctl reads `-dash.sd.service` as options ("invalid option -- 'd'"): the runner's own start, show and
    kill, and the commands `explain` prints, put `--` before such a unit, as every command to copy does; a kick
    command gets `--` before the label too; a launchd job's check is `launchctl print DOMAIN/LABEL`."""
    fake.plan(**{"-dash.sd": "exit:3"})
    fake.log.write_text("".join(json.dumps(e) + "\n" for e in (registered("-dash.sd"), skipped("-dash.sd"))))
    out = fake.catchup("systemd")
    assert out.returncode == 1 and out.stderr.strip() == "eventlog: -dash.sd: re-run exit 3", out.stderr
    assert _reruns(fake.log) == [("catchup_kicked", "-dash.sd", None, None),
                                 ("catchup_finished", "-dash.sd", "exited", 3)]
    assert [c["argv"] for c in kicks(fake.calls(), "start")] == [["start", "--no-block", "--", "-dash.sd.service"]]
    # by hand, where catch-up kicked it: pasted, systemd starts it
    start = "systemctl start -- -dash.sd.service"
    assert start in _explained_next(fake.log, "-dash.sd", fake.env)
    by_hand = subprocess.run(["sh", "-c", start], capture_output=True, text=True, env=fake.env, timeout=60,
                             check=False)
    assert by_hand.returncode == 0, by_hand.stderr
    assert fake.calls()[-1]["argv"] == ["start", "--", "-dash.sd.service"]
    # a re-run with no end: the check comes first, and it works pasted too
    with fake.log.open("a") as f:
        f.write(json.dumps({"type": "catchup_kicked", "ts": "2026-08-21T09:10:00+09:00", "label": "-dash.sd",
                            "kicked_by": "systemd_user", "timeout_s": 60, "kill_grace_s": 5}) + "\n")
    commands = _explained_next(fake.log, "-dash.sd", fake.env)
    assert (commands[0], commands[-1]) == ("systemctl --user is-active -- -dash.sd.service",
                                           "systemctl --user start -- -dash.sd.service"), commands
    checked = subprocess.run(["sh", "-c", commands[0]], capture_output=True, text=True, env=fake.env, timeout=60,
                             check=False)
    assert "invalid option" not in checked.stderr and checked.stdout.strip() in ("active", "inactive")
    assert fake.calls()[-1]["argv"] == ["--user", "is-active", "--", "-dash.sd.service"]
    with fake.log.open("a") as f:
        f.write(json.dumps({"type": "catchup_kicked", "ts": "2026-08-21T09:20:00+09:00", "label": "-dash.sd",
                            "kicked_by": "launchd", "launchd_domain": "gui/501", "timeout_s": 60,
                            "kill_grace_s": 5}) + "\n")
    commands = _explained_next(fake.log, "-dash.sd", fake.env)
    assert (commands[0], commands[-1]) == ("launchctl print gui/501/-dash.sd", "launchctl kickstart gui/501/-dash.sd")


def test_a_kick_command_gets_a_double_dash_before_a_label_that_starts_with_one(fake: Fake) -> None:
    fake.plan(**{"-dash.sd": "exit:0"})
    fake.log.write_text("".join(json.dumps(e) + "\n" for e in (registered("-dash.sd"), skipped("-dash.sd"))))
    out = subprocess.run(
        [sys.executable, "-m", "eventlog", "catchup", str(fake.log), "--probe-cmd",
         shlex.join([sys.executable, str(PROBE), str(fake.probes), "0"]), "--kick-cmd", "systemctl start",
         "--at", AT], capture_output=True, text=True, env=fake.env, cwd=ROOT, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert [c["argv"] for c in fake.calls()] == [["start", "--", "-dash.sd"]]
    assert _reruns(fake.log)[-1] == ("catchup_finished", "-dash.sd", "exited", 0)
