"""The platform seam of the catch-up runner: start a scheduled job by its label, wait for it, stop it.

Seed 002's ``kick_and_wait`` kicks a launchd job with ``launchctl kickstart`` and
polls until launchd no longer runs it; ``terminate_job`` stops one that overran
with ``launchctl kill SIGTERM``, then ``SIGKILL``, each followed by up to the
grace: "待つのをやめる" (stop waiting) and "ジョブを止める" (stop the job) are
not the same, and only the second keeps re-runs serial. A job started this way
runs under the scheduler, not in any process group of ours, so it can only be
stopped through the scheduler. :class:`Scheduler` is that seam:

- :class:`Launchd`: ``launchctl kickstart DOMAIN/LABEL``; ``launchctl list``
  (the ``PID``, ``Status`` and ``Label`` columns: no PID is not running, the
  status is the last exit, negative for the signal that ended it); ``launchctl
  kill SIGNAL DOMAIN/LABEL``. ``DOMAIN`` is ``gui/<uid>`` unless given.
- :class:`Systemd`: ``systemctl [--user] start --no-block UNIT``;
  ``systemctl [--user] show -p InvocationID,ActiveState,MainPID,ExecMainCode,ExecMainStatus UNIT``
  (a new ``InvocationID`` is this run; running while ``activating``,
  ``deactivating``, ``reloading``, or ``active`` with a main PID: a
  ``Type=oneshot`` unit without ``RemainAfterExit`` is what fits);
  ``systemctl [--user] kill --signal=SIGNAL UNIT`` (every process of the unit).

:func:`run_job` kicks, waits and stops, and says how it went as a
:class:`JobRan` (a :class:`~eventlog.runners.process.Ran` that also says
whether the job may still run). Every ``launchctl``/``systemctl`` call
goes through :func:`eventlog.runners.process.run` (bounded by ``CALL_TIMEOUT_S``;
not cut short by a stop signal: stopping a job needs them). A kick call that
timed out is ambiguous (the job may have started): the scheduler is asked
before it is taken as not started. A stop signal
(:func:`eventlog.runners.process.stop_on_signals`) cuts the wait for the job
short, and the job is stopped as over its timeout.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from eventlog.events import LAUNCHD_DOMAIN
from eventlog.runners.process import Ran, check_stop, run, started, waiting
from projections.catchup import systemd_unit
from projections.triage import command

#: Bound on one ``launchctl``/``systemctl`` call.
CALL_TIMEOUT_S = 30.0
#: How often a running job is looked at (the seed: every 2 s).
POLL_S = 2.0

SIGNALS = ("SIGTERM", "SIGKILL")


@dataclass(frozen=True)
class JobState:
    """What the scheduler says of a job now; ``run`` names its latest run (a pid, an invocation id) when it says."""

    running: bool
    run: str | None = None
    exit: int | None = None


class SchedulerError(Exception):
    """A scheduler call that failed (it could not start, or it said no)."""


class CallTimedOut(SchedulerError):
    """A scheduler call that did not answer within ``CALL_TIMEOUT_S``: what it was asked may have happened."""


@dataclass(frozen=True)
class JobRan(Ran):
    """How a scheduled job went; ``may_run``: it may still run (it could not be stopped, or whether it started
    cannot be told), so no end may be recorded and nothing may start after it."""

    may_run: bool = False


class Scheduler(Protocol):
    """Start, look at and signal a scheduled job by its label."""

    #: ``launchd`` or ``systemd``.
    name: str
    #: Whether ``kick`` only queues the start (until the run shows, the job counts as not begun yet).
    queued: bool

    def state(self, label: str) -> JobState:
        """The job now (SchedulerError when it cannot be told)."""
        ...

    def kick(self, label: str) -> None:
        """Start the job now (SchedulerError when it is refused)."""
        ...

    def signal(self, label: str, signal: str) -> None:
        """Send ``SIGTERM`` or ``SIGKILL`` to the job (SchedulerError when it cannot be sent)."""
        ...

    def kill_command(self, label: str) -> str:
        """The shell command a person types to SIGKILL the job."""
        ...

    def kicked_by(self) -> dict[str, str]:
        """How it kicks, as ``catchup_kicked`` records it (its ``kicked_by``, and ``launchd_domain``)."""
        ...


def _call(argv: list[str]) -> str:
    ran = run(argv, timeout_s=CALL_TIMEOUT_S, grace_s=1.0, capture_stdout=True, capture_stderr=True, stoppable=False)
    if not ran.ok:
        said = ran.said()
        error = CallTimedOut if ran.timed_out else SchedulerError
        raise error(f"{' '.join(argv)}: {ran.failure(CALL_TIMEOUT_S)}" + (f": {said}" if said else ""))
    if ran.stdout_cut:  # read whole, or not at all: a part of it read as the whole would be a wrong answer
        raise SchedulerError(f"{' '.join(argv)}: printed more than can be kept ({ran.stdout_cut} bytes not kept)")
    return ran.stdout


@dataclass
class Launchd:
    """launchd, through ``launchctl`` (macOS)."""

    domain: str = field(default_factory=lambda: f"gui/{os.getuid()}")
    name: str = "launchd"
    queued: bool = False  # kickstart returns once the job was spawned

    def target(self, label: str) -> str:
        """``DOMAIN/LABEL``, as ``kickstart`` and ``kill`` take it."""
        return f"{self.domain}/{label}"

    def state(self, label: str) -> JobState:
        """From ``launchctl list``: the label's line (none: not loaded, not running)."""
        for line in _call(["launchctl", "list"]).splitlines():
            parts = line.split("\t") if "\t" in line else line.split()
            if len(parts) >= 3 and parts[2] == label:
                pid, status = parts[0], parts[1]
                exit_ = int(status) if status.lstrip("-").isdigit() else None
                return JobState(running=pid.isdigit(), run=pid if pid.isdigit() else None, exit=exit_)
        return JobState(running=False)

    def kick(self, label: str) -> None:
        """``launchctl kickstart``: it returns once the job runs."""
        _call(["launchctl", "kickstart", self.target(label)])

    def signal(self, label: str, signal: str) -> None:
        """``launchctl kill SIGNAL DOMAIN/LABEL``."""
        _call(["launchctl", "kill", signal, self.target(label)])

    def kill_command(self, label: str) -> str:
        """``launchctl kill SIGKILL DOMAIN/LABEL``."""
        return shlex.join(["launchctl", "kill", "SIGKILL", self.target(label)])

    def kicked_by(self) -> dict[str, str]:
        """``launchd`` and the domain."""
        return {"kicked_by": "launchd", "launchd_domain": self.domain}


_SYSTEMD_RUNNING = frozenset({"activating", "deactivating", "reloading", "refreshing"})
#: ``ExecMainCode`` values that mean a signal ended the main process (CLD_KILLED, CLD_DUMPED).
_SYSTEMD_KILLED = frozenset({"2", "3"})


@dataclass
class Systemd:
    """systemd, through ``systemctl`` (Linux); ``user``: the user's manager (``--user``)."""

    user: bool = False
    name: str = "systemd"
    queued: bool = True  # start --no-block queues a start job

    def _systemctl(self, *args: str, label: str) -> str:
        """``systemctl [--user] ARGS... UNIT``: ``-- UNIT`` when the unit starts with ``-`` (else an option)."""
        unit = self.unit(label)
        return _call(["systemctl", *(["--user"] if self.user else []), *args, *(["--"] if unit.startswith("-") else []),
                      unit])

    unit = staticmethod(systemd_unit)

    def state(self, label: str) -> JobState:
        """From ``systemctl show``."""
        props = dict(line.split("=", 1) for line in self._systemctl(
            "show", "-p", "InvocationID", "-p", "ActiveState", "-p", "MainPID", "-p", "ExecMainCode",
            "-p", "ExecMainStatus", label=label).splitlines() if "=" in line)
        active = props.get("ActiveState", "")
        running = active in _SYSTEMD_RUNNING or (active == "active" and props.get("MainPID", "0") not in ("", "0"))
        status = props.get("ExecMainStatus", "")
        exit_ = int(status) if status.isdigit() else None
        if exit_ is not None and props.get("ExecMainCode") in _SYSTEMD_KILLED:
            exit_ = -exit_
        return JobState(running=running, run=props.get("InvocationID") or None, exit=exit_)

    def kick(self, label: str) -> None:
        """``systemctl start --no-block`` (a oneshot unit would block the call until it ends)."""
        self._systemctl("start", "--no-block", label=label)

    def signal(self, label: str, signal: str) -> None:
        """``systemctl kill --signal=SIGNAL UNIT``: every process of the unit."""
        self._systemctl("kill", f"--signal={signal}", label=label)

    def kill_command(self, label: str) -> str:
        """``systemctl [--user] kill --signal=SIGKILL UNIT`` (``-- UNIT`` when it starts with ``-``)."""
        return command("systemctl" + (" --user" if self.user else "") + " kill --signal=SIGKILL", [self.unit(label)])

    def kicked_by(self) -> dict[str, str]:
        """``systemd``, or ``systemd_user`` for the user's manager."""
        return {"kicked_by": "systemd_user" if self.user else "systemd"}


def run_job(
    scheduler: Scheduler,
    label: str,
    *,
    timeout_s: float,
    grace_s: float,
    poll_s: float = POLL_S,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> JobRan:
    """Kick ``label``, wait until the scheduler no longer runs it; over ``timeout_s`` stop it, as seed 002 does.

    Stopping: ``SIGTERM``, then up to ``grace_s`` for it to end, then ``SIGKILL`` and up to ``grace_s``
    again. The result: not started (``error``: the kick was refused, or it timed out and the scheduler
    shows no run of it), its exit status, or ``timed_out`` (``exit`` None; ``error`` set when even SIGKILL
    did not end it, or it could not be signalled: ``may_run``, the next job must not start). A kick that
    timed out while the scheduler cannot say whether the job runs is ``may_run`` too. A scheduler that
    stops answering while the job runs is treated as a timeout (the job is stopped). An interruption
    (KeyboardInterrupt, :class:`~eventlog.runners.process.Interrupted`) stops the job the same way, then
    goes on; after a stop signal no job is kicked.
    """
    check_stop()
    try:
        before = scheduler.state(label)
    except SchedulerError as err:
        return JobRan(False, error=str(err))
    try:
        scheduler.kick(label)
    except CallTimedOut as err:  # it may have started: ask before saying it did not
        try:
            now = scheduler.state(label)
        except SchedulerError as unknown:
            return JobRan(True, None, error=f"{err}; whether it started cannot be told: {unknown}", may_run=True)
        if not (now.running or now.run != before.run):
            return JobRan(False, error=f"{err}; {scheduler.name} shows no run of it: not started")
    except SchedulerError as err:
        return JobRan(False, error=str(err))
    except BaseException as err:  # interrupted while kicking: the job may have started
        started(err)
        _stop(scheduler, label, grace_s, poll_s, sleep, monotonic)
        raise
    deadline = monotonic() + timeout_s
    try:
        with waiting():
            ended = _wait(scheduler, label, before, deadline, poll_s, sleep, monotonic)
    except SchedulerError as err:
        problem = _stop(scheduler, label, grace_s, poll_s, sleep, monotonic)
        return JobRan(True, None, timed_out=True, may_run=problem is not None,
                      error=f"lost sight of {label} ({err}); " + (problem or "sent SIGTERM, it no longer runs"))
    except BaseException as err:  # interrupted: the job must not outlive the catch-up that started it
        started(err)
        _stop(scheduler, label, grace_s, poll_s, sleep, monotonic)
        raise
    if ended is not None:
        return ended
    problem = _stop(scheduler, label, grace_s, poll_s, sleep, monotonic)
    return JobRan(True, None, timed_out=True, error=problem, may_run=problem is not None)


def _wait(scheduler: Scheduler, label: str, before: JobState, deadline: float, poll_s: float,
          sleep: Callable[[float], None], monotonic: Callable[[], float]) -> JobRan | None:
    """Poll until the job ran and ended (how it went), or the deadline passed (None)."""
    while True:
        now = scheduler.state(label)
        begun = not scheduler.queued or now.running or now.run != before.run
        if begun and not now.running:
            return JobRan(True, now.exit if now.exit is not None else 0)
        if monotonic() >= deadline:
            return None
        sleep(min(poll_s, max(0.0, deadline - monotonic())))


def _stop(
    scheduler: Scheduler,
    label: str,
    grace_s: float,
    poll_s: float,
    sleep: Callable[[float], None],
    monotonic: Callable[[], float],
) -> str | None:
    """SIGTERM, up to ``grace_s``, SIGKILL, up to ``grace_s``: None once the job no longer runs, else why not."""
    try:
        for sig in SIGNALS:
            try:
                scheduler.signal(label, sig)
            except SchedulerError:
                if not scheduler.state(label).running:  # it ended on its own meanwhile: nothing to signal
                    return None
                raise
            until = monotonic() + grace_s
            while scheduler.state(label).running:
                if monotonic() >= until:
                    break
                sleep(min(poll_s, max(0.0, until - monotonic())))
            else:
                return None
    except SchedulerError as err:
        return f"could not stop {label}: {err}"
    return f"{label} still runs after SIGKILL and {grace_s:g} s"


def scheduler(name: str, *, launchd_domain: str | None = None, systemd_user: bool = False) -> Scheduler:
    """The scheduler named ``launchd`` or ``systemd`` (ValueError for another name, or a domain launchctl does not
    name so: :data:`eventlog.events.LAUNCHD_DOMAIN`)."""
    if launchd_domain is not None and not re.fullmatch(LAUNCHD_DOMAIN, launchd_domain):
        raise ValueError(f"--launchd-domain {launchd_domain!r}: not a launchd domain (system, gui/UID, user/UID, "
                         "login/ASID or pid/PID)")
    if name == "launchd":
        return Launchd(domain=launchd_domain) if launchd_domain else Launchd()
    if name == "systemd":
        return Systemd(user=systemd_user)
    raise ValueError(f"unknown scheduler {name!r} (launchd or systemd)")


__all__ = ["CALL_TIMEOUT_S", "POLL_S", "CallTimedOut", "JobRan", "JobState", "Launchd", "Scheduler", "SchedulerError",
           "Systemd", "run_job", "scheduler"]
