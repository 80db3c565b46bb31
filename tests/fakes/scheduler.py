"""A fake ``launchctl`` and ``systemctl`` for the catch-up tests: a scheduler that runs jobs outside our process group.

Installed on PATH as two one-line wrappers (``launchctl``, ``systemctl``) that run
``scheduler.py TOOL ARGS...``. State lives in ``$FAKE_SCHEDULER_DIR``:

- ``plan.json``: ``{LABEL: MODE}``, the jobs it knows; MODE is ``exit:N``, ``sleep:S``, ``wait:FILE``
  (exit 0 once FILE exists), ``forever`` (sleeps until signalled), ``ignore-term`` (ignores SIGTERM),
  ``immortal`` (runs on: ``launchctl kill`` is refused with "Operation not permitted") or ``deaf`` (runs on:
  ``launchctl kill`` says nothing and does nothing, as when SIGKILL does not end a job);
- ``record.jsonl``: one line per call: the tool, its argv, and the labels whose job runs at that moment
  (a kick that finds another job running is an overlap);
- ``LABEL.pid`` while a job runs, ``LABEL.status`` its last exit (negative: the signal), ``LABEL.inv`` the
  systemd invocation id (written once the job was spawned), ``LABEL.sup`` its supervisor's pid.

A kick starts a supervisor in a new session (as launchd or systemd would: not a child of the caller, not
in its process group); the supervisor runs the job, waits for it and writes its status. ``launchctl
kickstart`` returns once the job runs; ``systemctl start --no-block`` returns before it does (a queued
start job).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

HERE = os.path.abspath(__file__)
DIR = os.environ.get("FAKE_SCHEDULER_DIR", "")


def path(name: str) -> str:
    return os.path.join(DIR, name)


def plan() -> dict[str, str]:
    with open(path("plan.json"), encoding="utf-8") as f:
        return json.load(f)  # type: ignore[no-any-return]


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie left for init to reap counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pid_in(name: str) -> int | None:
    try:
        with open(path(name), encoding="ascii") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def pid_of(label: str) -> int | None:
    """The job's pid while the scheduler counts it as running.

    That lasts until its supervisor has recorded the exit status (as launchd and systemd report the
    exit together with the end of the run): a job that has ended but whose status is not yet written
    still runs, so ``list`` never shows a stale status beside a finished job.
    """
    pid = pid_in(f"{label}.pid")
    if pid is None:
        return None
    supervisor = pid_in(f"{label}.sup")
    return pid if alive(pid) or (supervisor is not None and alive(supervisor)) else None


def read(name: str, default: str) -> str:
    try:
        with open(path(name), encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return default


def write(name: str, text: str) -> None:
    with open(path(name + ".tmp"), "w", encoding="ascii") as f:
        f.write(text)
    os.replace(path(name + ".tmp"), path(name))


def record(tool: str, argv: list[str]) -> None:
    running = sorted(label for label in plan() if pid_of(label) is not None)
    with open(path("record.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps({"tool": tool, "argv": argv, "running": running}) + "\n")


def start(label: str, delay: float) -> None:
    """Start the supervisor of one run, in a new session."""
    subprocess.Popen([sys.executable, HERE, "--supervise", label, str(delay)], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     env={**os.environ, "FAKE_SCHEDULER_DIR": DIR})


def supervise(label: str, delay: float) -> None:
    time.sleep(delay)
    write(f"{label}.sup", str(os.getpid()))
    job = subprocess.Popen([sys.executable, HERE, "--job", plan()[label]])
    write(f"{label}.pid", str(job.pid))
    write(f"{label}.inv", uuid.uuid4().hex)
    code = job.wait()
    time.sleep(float(os.environ.get("FAKE_SCHEDULER_STATUS_DELAY", "0")))  # a slow supervisor, for tests
    write(f"{label}.status", str(code))
    os.remove(path(f"{label}.pid"))


def job(mode: str) -> int:
    if mode.startswith("exit:"):
        return int(mode[5:])
    if mode.startswith("sleep:"):
        time.sleep(float(mode[6:]))
    elif mode.startswith("wait:"):
        while not os.path.exists(mode[5:]):
            time.sleep(0.02)
    elif mode in ("forever", "ignore-term", "immortal", "deaf"):
        if mode == "ignore-term":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(60)
    return 0


def launchctl(argv: list[str]) -> int:
    record("launchctl", argv)
    known = plan()
    if argv[:1] == ["list"]:
        print("PID\tStatus\tLabel")
        for label in sorted(known):
            pid = pid_of(label)
            print(f"{pid if pid else '-'}\t{read(f'{label}.status', '0')}\t{label}")
        return 0
    label = argv[-1].rsplit("/", 1)[-1]
    if label not in known:
        print(f'Could not find service "{label}" in domain for uid: {os.getuid()}', file=sys.stderr)
        return 113
    if argv[0] == "kickstart":
        if pid_of(label) is None:
            inv = read(f"{label}.inv", "")
            start(label, 0)
            deadline = time.monotonic() + 10  # until the job was spawned (it may have ended already)
            while read(f"{label}.inv", "") == inv and time.monotonic() < deadline:
                time.sleep(0.01)
        if "-p" in argv:
            print(f"{label}: pid {pid_of(label)}")
        return 0
    if argv[0] == "kill":
        pid = pid_of(label)
        if pid is None:
            print("Could not signal service: 3: No such process", file=sys.stderr)
            return 3
        if known[label] == "immortal":
            print("Could not signal service: 1: Operation not permitted", file=sys.stderr)
            return 1
        if known[label] == "deaf":
            return 0
        os.kill(pid, getattr(signal, argv[1]))
        return 0
    print(f"unknown launchctl command {argv}", file=sys.stderr)
    return 64


#: The options of systemctl the runner and the views use (``-p`` takes the next word).
SYSTEMCTL_OPTIONS = ("--user", "--no-block", "-p")


def systemctl(argv: list[str]) -> int:
    """As systemctl(1) reads its words (getopt): options anywhere, ``--`` ends them, an unknown one is refused."""
    record("systemctl", argv)
    given, signal_option, args = iter(argv), "", []
    for word in given:
        if word == "--":
            args += list(given)
        elif word.startswith("--signal="):
            signal_option = word.removeprefix("--signal=")
        elif word == "-p":
            next(given)
        elif word.startswith("-") and word not in SYSTEMCTL_OPTIONS:
            print(f"systemctl: invalid option -- '{word.lstrip('-')[:1]}'", file=sys.stderr)
            return 1
        elif not word.startswith("-"):
            args.append(word)
    label = args[-1].removesuffix(".service")
    if label not in plan():
        print(f"Unit {args[-1]} not found.", file=sys.stderr)
        return 5
    pid = pid_of(label)
    if args[0] == "start":
        if pid is None:
            start(label, 0.2)
        return 0
    if args[0] == "show":
        status = int(read(f"{label}.status", "0"))
        state = "activating" if pid else ("failed" if status else "inactive")
        print(f"InvocationID={read(f'{label}.inv', '')}\nActiveState={state}\nMainPID={pid or 0}\n"
              f"ExecMainCode={2 if status < 0 else 1}\nExecMainStatus={abs(status)}")
        return 0
    if args[0] == "is-active":  # systemctl(1): the state on stdout, exit 0 only when active
        print("active" if pid else "inactive")
        return 0 if pid else 3
    if args[0] == "kill":
        if pid is not None:
            os.kill(pid, getattr(signal, signal_option))
        return 0
    print(f"unknown systemctl command {argv}", file=sys.stderr)
    return 64


if __name__ == "__main__":
    if sys.argv[1] == "--supervise":
        supervise(sys.argv[2], float(sys.argv[3]))
    elif sys.argv[1] == "--job":
        sys.exit(job(sys.argv[2]))
    else:
        sys.exit({"launchctl": launchctl, "systemctl": systemctl}[sys.argv[1]](sys.argv[2:]))
