"""What a person does with one handoff, with an account a probe said is broken, and with a watcher gone (seed 000).

The seed asks "古いclaimから戻る方法があるか" and that a handoff is never closed by a
timer: a person releases, requeues or skips it with a reason. Each is one checked
append at the handoff's revision as read (a handoff that moved meanwhile is
refused, never overwritten), and carries ``actor`` (who; an extra field):

============  ===================  ==========================================================
action        from                 appends
============  ===================  ==========================================================
``release``   ``claimed``          ``released`` (a claim given back before any request)
              ``needs_human``      ``released``, only when the reason is ``resume_failing``
                                   (every attempt failed with effect none: nothing went out)
``requeue``   ``claimed``          ``released``
              ``needs_human``      ``released`` (the spec's "a person sends it back")
              ``resume_requested`` ``resume_failed`` of the live attempt, ``effect: none``:
                                   the person checked that nothing happened outside
``skip``      any open state       ``skip`` (closed without returning, with its reason)
============  ===================  ==========================================================

``release`` refuses a handoff whose request went out (``resume_requested``), and
one with a person for any other reason than ``resume_failing``: only a person
who looked can say it had no effect, and that is ``requeue``.
Anything else (a returned or skipped handoff, a pending one to release or
requeue) is refused with the reason.

:func:`probe_once` is how a person records that an account's broken login is
fixed: it runs the probe once, whatever the plan says, and appends its
``probe_result`` (and ``limit_recorded`` as the watcher would). An outcome
other than ``auth_error`` ends the account's ``needs_person`` plan.

:func:`retire` is how a person says a failback watcher stopped for good (a
renamed host, a one-off ``--watcher w1`` pass): it appends the watcher's final
heartbeat, a ``watcher_run`` with ``retired: true``, after which the views no
longer call it late (a pass under that name brings it back).
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any, Literal

import msgspec

from eventlog.appender import AppendError, Conflict
from eventlog.clock import NOW, At
from eventlog.logs import open_log
from eventlog.probe import EXPECTED
from eventlog.replay import Replay
from eventlog.runners.common import (
    BadLines,
    RunnerError,
    Unwritten,
    bad_lines,
    check_bounds,
    check_said,
    folder,
    log_arg,
    require_log,
)
from eventlog.runners.failback import KILL_GRACE_S, probe_events, run_probe
from projections.handoffs import CLAIMED, NEEDS_HUMAN, OPEN, PENDING, REASON_FAILING, REQUESTED, Handoff

Action = Literal["release", "requeue", "skip"]
ACTIONS: tuple[Action, ...] = ("release", "requeue", "skip")


def os_user() -> str:
    """Who runs this (the ``actor`` of what a person appends)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid
        return "unknown"


@dataclass(kw_only=True)
class Act:
    """One person's action on one handoff."""

    log: str
    handoff_id: str
    action: Action
    reason: str
    actor: str = field(default_factory=os_user)
    at: At = NOW
    assume_tz: tzinfo | None = None

    def check(self) -> None:
        """RunnerError when the action cannot be taken with these options (nothing is written then)."""
        if self.action not in ACTIONS:
            raise RunnerError(f"unknown action {self.action!r} (release, requeue or skip)")
        check_said("--reason", self.reason)
        require_log(self.log, self.assume_tz)


class ActReport(msgspec.Struct, kw_only=True):
    """What became of the action: the event appended, or why it was refused (``status`` 3)."""

    log: str
    handoff_id: str
    action: str
    was: str
    state: str
    event: dict[str, Any] | None = None
    refused: str | None = None
    #: The log's bad lines (named in ``problems``; they do not change the status).
    bad_lines: BadLines = msgspec.field(default_factory=BadLines)
    problems: list[str] = msgspec.field(default_factory=list)

    @property
    def status(self) -> int:
        """0 appended, 3 refused (a conflict)."""
        return 3 if self.refused else 0

    def text(self) -> list[str]:
        """For people."""
        if self.event is None:
            return []
        return [f"{self.handoff_id}: {self.event['type']} appended ({self.action} by {self.event['actor']}); "
                f"{self.was} -> {self.state}"]


def planned(action: Action, hid: str, h: Handoff, reason: str, actor: str) -> dict[str, Any] | str:
    """The event a person's ``action`` appends to handoff ``h`` (no ``ts``), or why it is refused."""
    if action == "skip":
        if h.state not in OPEN:
            return f"{hid} is {h.state}: only an open handoff can be skipped"
        return {"type": "skip", "handoff_id": hid, "reason": reason, "actor": actor}
    if h.state == CLAIMED or (h.state == NEEDS_HUMAN and (action == "requeue" or h.reason == REASON_FAILING)):
        return {"type": "released", "handoff_id": hid, "reason": reason, "actor": actor}
    if action == "requeue" and h.state == REQUESTED:
        return {"type": "resume_failed", "handoff_id": hid, "attempt": h.attempt, "effect": "none",
                "error": f"requeued by {actor}: {reason}", "actor": actor}
    if action == "release" and h.state in (REQUESTED, NEEDS_HUMAN):
        why = "a resume request went out" if h.state == REQUESTED else "it is with a person"
        return (f"{hid} is {h.state}: release gives back a claim before any request, and {why}; requeue it once "
                "you checked that nothing happened outside, or skip it")
    if h.state == PENDING:
        return f"{hid} is already pending: nothing to {action}"
    return f"{hid} is {h.state}: it is closed"


def act(opts: Act) -> ActReport:
    """Take a person's action on one handoff (see the module docstring); call ``opts.check()`` first.

    RunnerError when no handoff of that id was ever created; AppendError when the log cannot be written.
    """
    with open_log(opts.log, assume_tz=opts.assume_tz) as log:
        replay = log.state()
        runner = folder(replay)
        h = runner.handoffs.items.get(opts.handoff_id)
        if h is None:
            raise RunnerError(_with_bad_lines(f"{opts.log}: no handoff {opts.handoff_id!r} was ever created",
                                              opts.log, replay))
        report = ActReport(log=opts.log, handoff_id=opts.handoff_id, action=opts.action, was=h.state, state=h.state,
                           bad_lines=bad_lines(replay))
        report.problems += _bad_lines_said(opts.log, replay)
        event = planned(opts.action, opts.handoff_id, h, opts.reason, opts.actor)
        if isinstance(event, str):
            report.refused = event
        else:
            event["ts"] = opts.at.clock(replay.last_at)().isoformat()
            try:
                log.append([event], expect_revision=runner.revisions["handoff_id"].get(opts.handoff_id, 0))
            except Conflict as err:
                report.refused = f"{opts.handoff_id} moved meanwhile: " + "; ".join(err.messages)
            else:
                report.event = event
                report.state = folder(log.state()).handoffs.items[opts.handoff_id].state
    if report.refused:
        report.problems.append(f"{opts.action} of {opts.handoff_id} refused: {report.refused}")
    return report


def _bad_lines_said(log: str, replay: Replay) -> list[str]:
    """The line naming the log's bad lines, if it has any: what a person acts on was read without them."""
    said = bad_lines(replay).problem(log)
    return [said] if said else []


def _with_bad_lines(message: str, log: str, replay: Replay) -> str:
    """``message``, and the log's bad lines when it has any (the line that named the id may be one)."""
    return "; ".join([message, *_bad_lines_said(log, replay)])


# --- a watcher stopped for good --------------------------------------------------------------


@dataclass(kw_only=True)
class Retire:
    """A person's word that failback watcher ``watcher`` stopped for good (a renamed host, a one-off pass)."""

    log: str
    watcher: str
    reason: str
    actor: str = field(default_factory=os_user)
    at: At = NOW
    assume_tz: tzinfo | None = None

    def check(self) -> None:
        """RunnerError when it cannot be done with these options (nothing is written then). Any name is taken, the
        empty one too (the spec's ``watcher`` is any string, and ``explain`` of such a watcher prints
        ``--retire ''``): :func:`retire` refuses one no line of the log gives."""
        check_said("--reason", self.reason)
        require_log(self.log, self.assume_tz)


class RetireReport(msgspec.Struct, kw_only=True):
    """The final heartbeat written (``event``), or the line of the one that already retired the watcher."""

    log: str
    watcher: str
    event: dict[str, Any] | None = None
    already: int | None = None
    bad_lines: BadLines = msgspec.field(default_factory=BadLines)
    problems: list[str] = msgspec.field(default_factory=list)

    @property
    def status(self) -> int:
        """0: retired (now or already)."""
        return 0

    def text(self) -> list[str]:
        """For people."""
        if self.event is None:
            return [f"watcher {self.watcher} was already retired (line {self.already}); nothing written"]
        return [f"watcher {self.watcher} retired ({self.event['detail']}): views no longer judge it late; a pass "
                "under this name brings it back"]


def retire(opts: Retire) -> RetireReport:
    """Append watcher ``opts.watcher``'s final heartbeat: a ``watcher_run`` with ``retired: true`` (at its last
    period, exit ok, with ``actor`` and the reason in ``detail``); call ``opts.check()`` first.

    RunnerError when no line of the log names that watcher; AppendError when the log cannot be written.
    """
    with open_log(opts.log, assume_tz=opts.assume_tz) as log:
        replay = log.state()
        state = folder(replay).handoffs.state
        beat = state.watchers.get(opts.watcher)
        if beat is None and opts.watcher not in state.claims_by:
            raise RunnerError(_with_bad_lines(f"{opts.log}: no watcher_run or claim names watcher {opts.watcher!r}",
                                              opts.log, replay))
        report = RetireReport(log=opts.log, watcher=opts.watcher, bad_lines=bad_lines(replay))
        report.problems += _bad_lines_said(opts.log, replay)
        if beat is not None and beat.retired:
            report.already = beat.line
            return report
        event = {"type": "watcher_run", "ts": opts.at.clock(replay.last_at)().isoformat(), "watcher": opts.watcher,
                 "exit": "ok", "period_s": beat.period_s if beat is not None else 900, "retired": True,
                 "detail": f"retired by {opts.actor}: {opts.reason}", "actor": opts.actor}
        log.append([event])
        report.event = event
    return report


# --- a probe by hand ------------------------------------------------------------------------


@dataclass(kw_only=True)
class ProbeOnce:
    """A person's probe of one account (to record that its broken login is fixed)."""

    log: str
    account: str
    probe_cmd: list[str]
    timeout_s: float = 120
    kill_grace_s: float = KILL_GRACE_S
    expected: str = EXPECTED
    actor: str = field(default_factory=os_user)
    at: At = NOW
    assume_tz: tzinfo | None = None

    def check(self) -> None:
        """RunnerError when the probe cannot run with these options."""
        if not self.probe_cmd:
            raise RunnerError("--probe-cmd is empty")
        if not self.expected:
            raise RunnerError("--expect is empty")
        check_bounds(self.kill_grace_s, timeout_s=self.timeout_s)
        require_log(self.log, self.assume_tz)


class ProbeReport(msgspec.Struct, kw_only=True):
    """What the probe said, and the account's plan before and after it."""

    log: str
    account: str
    before: dict[str, Any]
    outcome: str | None = None
    status_code: int | None = None
    detail: str | None = None
    limit: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    #: What the probe said when the log did not take it: the lines to append by hand (a problem).
    unwritten: Unwritten | None = None
    problems: list[str] = msgspec.field(default_factory=list)

    @property
    def status(self) -> int:
        """0 the probe said ok; 1 anything else (it could not start, its result could not be written, bad lines)."""
        return 1 if self.problems else 0

    def text(self) -> list[str]:
        """For people."""
        if self.outcome is None:
            return []
        if self.unwritten is not None:
            return [f"account {self.account}: probe said {self.outcome}{Unwritten.mark({'written': False})}; plan "
                    f"still {self.before['reason']}"]
        after = self.after or {}
        return [f"account {self.account}: probe said {self.outcome}; plan {self.before['reason']} -> "
                f"{after.get('reason')}"]


def probe_once(opts: ProbeOnce) -> ProbeReport:
    """Probe one account by hand and record the result (see the module docstring); call ``opts.check()`` first.

    RunnerError when no line of the log names the account; AppendError when the log cannot be read or written
    (nothing is run then). A result the log does not take after the probe ran is in the report (``unwritten``).
    """
    with open_log(opts.log, assume_tz=opts.assume_tz) as log:
        replay = log.state()
        clock = opts.at.clock(replay.last_at)
        h = folder(replay).handoffs
        if opts.account not in h.accounts:
            raise RunnerError(_with_bad_lines(f"{opts.log}: no handoff, limit or probe names account {opts.account!r}",
                                              opts.log, replay))
        report = ProbeReport(log=opts.log, account=opts.account, before=h.plan(opts.account, clock()))
        report.problems += _bad_lines_said(opts.log, replay)
        ran, verdict = run_probe(opts.probe_cmd, opts.account, log=opts.log, watcher=f"person:{opts.actor}",
                                 timeout_s=opts.timeout_s, grace_s=opts.kill_grace_s, expected=opts.expected,
                                 now=clock())
        if verdict is None:
            report.problems.append(f"the probe could not be started: {ran.error}; nothing recorded")
            return report
        events = probe_events(h, opts.account, verdict, clock().isoformat())
        events[0]["actor"] = opts.actor
        report.outcome, report.status_code, report.detail = verdict.outcome, verdict.status, verdict.detail
        if len(events) > 1:
            report.limit = {k: events[1][k] for k in ("limited_at", "reset_at", "source", "confidence")}
        try:
            log.append(events)
        except AppendError as err:
            report.problems.append("cannot append the probe's result: " + "; ".join(err.messages))
            report.unwritten = Unwritten.of(log_arg(opts), f"the probe of {opts.account} said {verdict.outcome} "
                                            f"({verdict.detail})", events)
            report.problems.append(report.unwritten.problem(opts.log))
            return report
        report.after = folder(log.state()).handoffs.plan(opts.account, clock())
    if verdict.outcome != "ok":
        report.problems.append(f"account {opts.account}: the probe said {verdict.outcome} ({verdict.detail})")
    return report


__all__ = [
    "ACTIONS", "KILL_GRACE_S", "Act", "ActReport", "Action", "ProbeOnce", "ProbeReport", "Retire", "RetireReport",
    "act", "os_user", "planned", "probe_once", "retire",
]
