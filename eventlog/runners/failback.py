"""One pass of the failback watcher (seed 000), as cron or launchd would run it every 15 minutes.

A pass (claim one at a time, save the state, then go on):

1. Stale retryable claims (``claimed``, no request, quiet for longer than
   ``stale_after_s``) are ``released`` with the reason; they are tried again on
   a later pass, not this one. A stale ``resume_requested`` (nothing came back
   from the cloud side: something may have happened outside) is handed to a
   person: ``needs_human`` with reason ``resume_unconfirmed``, which frees its
   ``max_inflight`` slot; the answer it waited for is still taken if it comes
   (projections/handoffs.py). A pending handoff whose resume failed with effect
   none ``RESUME_FAILING_AFTER`` (3) times in a row (the cloud side reported
   them, say) is handed to a person too: ``needs_human`` with reason
   ``resume_failing``. All are appended with the handoff's revision as read
   (``expect_revision``): a handoff that moved meanwhile is left alone.
2. No pending handoff (or no free slot of ``max_inflight``): no probe at all.
   The claims released in 1. are pending again but not this pass's to claim:
   its report counts the other pending handoffs ("nothing else pending").
3. Every account the projection's probe plan says is due, and that has a
   pending handoff, is probed with the probe command;
   ``eventlog.probe.classify`` names the outcome; a ``probe_result`` is
   appended, and a ``limit_recorded`` when the probe read a limit: always when
   it stated a reset time (explicit); an estimate only when the account has no
   estimated or unknown limit since its last ``ok`` probe (re-recording it
   would restart the backoff that is meant to widen while the estimate keeps
   proving wrong). A probe that says ``auth_error`` hands the account to a
   person: its plan is ``needs_person`` (no probe) until a person probes it by
   hand (``eventlog handoff probe``, :func:`probe_once`). A probe that gave no
   answer (over its timeout, killed by a signal, exit 126 or 127:
   :meth:`~eventlog.runners.process.Ran.no_answer`) is recorded all the same,
   its detail naming the exit or signal, and is an error of the pass (5.).
4. Pending handoffs of accounts whose probe said ``ok`` are claimed in claim
   order, one at a time, each with a checked append (a refused claim means
   another watcher won: it is skipped). For each claim, ``resume_requested`` is
   appended before the resume command runs (intent before the act); the
   command answers with one JSON object on stdout (the last line that is one;
   :func:`read_handshake`, README "The resume handshake"):

   - ``{"handoff_id", "branch", "head", "dirty", "todos": "taken_over" |
     "already_done"}``: ``verified`` (returned);
   - ``{"conflict": "detail"}``: ``conflict`` (to a person, nothing edited);
   - ``{"started": "what started"}``: the cloud session started and reports
     later itself (``eventlog append`` of ``verified``, ``conflict`` or
     ``resume_failed`` with the attempt it was given): nothing is appended,
     the handoff stays ``resume_requested`` and goes stale by the usual rule;
   - ``{"failed": "why", "effect": "none"}``: ``resume_failed`` effect none,
     pending again (claimed on a later pass), unless it was the handoff's 3rd
     such attempt in a row: then ``needs_human`` ``resume_failing`` (to a
     person; retrying alone does not mend the cause); with ``"effect":
     "unknown"`` or no effect: effect unknown (to a person).

   A command that could not be started gives ``resume_failed`` with ``effect:
   none``. One that started and then timed out (its process group is
   stopped), exited non-zero without a ``failed`` or ``conflict`` answer, or
   gave no valid answer gives ``resume_failed`` with ``effect: unknown``: it
   goes to a person and is never retried automatically. The cloud side's
   answers carry the attempt (``FAILBACK_ATTEMPT``, ``{attempt}``): an answer
   of an older claim is refused (attempt fencing).
5. The heartbeat ``watcher_run`` (``exit`` ok or error, ``period_s``, and
   ``stale_after_s``, so every view judges stale claims as this pass did) is
   appended at the END of the pass: a pass that hangs or dies midway leaves
   none, so the watcher shows as late instead of alive. ``exit: error`` means
   the pass could not do all of its own work (a command that could not be
   started, a probe that gave no answer, a log that could not be read or
   written, bad lines in the log that are new since this watcher's previous
   ``watcher_run``); it then carries a
   ``detail`` (an extra field, ignored by projections). Bad lines an earlier
   pass of this watcher already read are named in ``notes`` (stderr) only:
   a bad line stays in the log for ever (``PassBadLines``). A probe's result or a resume's answer the
   log did not take (a full disk: the pass stops there) is in the report all the same (``written``
   false) and in ``unwritten`` (:class:`~eventlog.runners.common.Unwritten`): the lines to append by
   hand, since the act happened and no line says so.
6. A stop signal (SIGTERM, SIGINT: :func:`eventlog.runners.process.stop_on_signals`)
   stops the running command's process group as a timeout does and starts no
   other: a stopped probe records nothing; a stopped resume command records
   ``resume_failed`` effect ``unknown`` (to a person), one not yet started
   effect ``none`` (pending again); then the heartbeat is written with ``exit:
   error`` and a ``detail`` that says the pass was stopped, and ``interrupted``
   names the signal.

The pass has a budget (``budget_s``, ``--budget``, 5m): once it has run that
long, it starts no more commands (no probe, no claim and so no resume), so it
ends within the budget plus one command (``timeout_s`` and ``kill_grace_s``).
The accounts and handoffs it did not reach are named in the report
(``not_reached``) and as one error (``exit: error``, status 1): a later pass
takes them.

Commands run through ``eventlog.runners.process.run`` (no shell, own process
group, timeout, SIGTERM, grace, SIGKILL). They get, in the environment,
``FAILBACK_LOG``, ``FAILBACK_WATCHER``, ``FAILBACK_ACCOUNT`` and, for the
resume command, ``FAILBACK_HANDOFF_ID``, ``FAILBACK_ATTEMPT``,
``FAILBACK_REPO``, ``FAILBACK_BRANCH``, ``FAILBACK_HEAD`` (empty when
unknown). The same names in lower case in braces (``{account}``,
``{handoff_id}``, ...) are replaced in the arguments; a resume command without
``{handoff_id}`` gets the handoff id as its last argument. A command's result
is its own exit: a session it started in the background is not waited for.
Every text copied from a command's output into a line is cut
(:func:`~eventlog.runners.process.excerpt`), so an answer is never too long
to be recorded. A probe's HTTP status, when it has one, is read from its
output (``HTTP 429``, ``API Error: 429``, ``"status": 429``).

The report's ``status`` is 0 when nothing new needs a person, 1 when the pass
could not do its own work or sent work to a person; ``problems`` says why, one
line each.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any, Literal

import msgspec

from eventlog.appender import AppendError, Conflict
from eventlog.clock import NOW, At, Clock
from eventlog.logs import Log, LogUnavailable, is_url, open_log, printed
from eventlog.probe import EXPECTED, Verdict, judge
from eventlog.reader import NESTED_TOO_DEEP, deeper_at
from eventlog.runners.common import (
    PassBadLines,
    RunnerError,
    Unwritten,
    check_bounds,
    check_filled,
    folder,
    log_arg,
    require_log,
)
from eventlog.runners.process import DETAIL_CHARS, Interrupted, Ran, excerpt, run
from projections.base import elapsed_s
from projections.handoffs import (
    GUESSED,
    PENDING,
    REASON_FAILING,
    REASON_UNCONFIRMED,
    RESUME_FAILING_AFTER,
    Handoff,
    Handoffs,
)
from projections.runner import Runner
from projections.triage import handoff_cmd

#: SIGTERM to SIGKILL for a command over its timeout.
KILL_GRACE_S = 5.0
#: How long a pass starts commands (``--budget``): with the default ``--timeout`` (2m) a pass ends within ~7m.
BUDGET_S = 300.0


@dataclass(kw_only=True)
class Options:
    """What one pass is told."""

    log: str
    probe_cmd: list[str]
    resume_cmd: list[str]
    watcher: str
    period_s: int = 900
    timeout_s: float = 120
    kill_grace_s: float = KILL_GRACE_S
    #: Past this many seconds of the pass, no command is started (see the module docstring).
    budget_s: float = BUDGET_S
    stale_after_s: float = 1800
    max_inflight: int = 2
    expected: str = EXPECTED
    #: When the pass acts: now (the default), a fixed time, or the log's last line.
    at: At = NOW
    #: The zone the log's lines without an offset are read in (None: they are bad lines).
    assume_tz: tzinfo | None = None

    def check(self) -> None:
        """RunnerError when the pass cannot run with these options (nothing is written then). Its name is refused
        when it is a ``<...>`` placeholder pasted as it is (:func:`check_filled`; the CLI checks its commands so:
        :func:`~eventlog.runners.common.command_words`), and when empty unless the log already names a watcher so
        (the spec takes any string, and ``explain`` of that watcher prints ``--watcher ''``): never a new one."""
        check_filled("--watcher", self.watcher)
        if not self.probe_cmd or not self.resume_cmd:
            raise RunnerError("the probe and resume commands must not be empty")
        if self.period_s < 1:
            raise RunnerError("--period must be at least 1 second")
        check_bounds(self.kill_grace_s, timeout_s=self.timeout_s, budget_s=self.budget_s)
        if self.stale_after_s < 0:
            raise RunnerError("--stale-after must not be negative")
        if self.max_inflight < 0:
            raise RunnerError("--max-inflight must not be negative")
        if not self.expected:
            raise RunnerError("--expect is empty")
        require_log(self.log, self.assume_tz)
        if not self.watcher and not names_watcher(self.log, self.watcher, self.assume_tz):
            raise RunnerError("--watcher is empty: a pass takes no name but one the log's watcher_run or claimed "
                              "lines already give")


def names_watcher(target: str, name: str, assume_tz: tzinfo | None = None) -> bool:
    """Whether a ``watcher_run`` or ``claimed`` line of the log names watcher ``name``.

    The log is only read (no sidecar): one this user may not write is the pass's to say, with the reason.
    """
    with open_log(target) as log:
        state = folder(log.replay(assume_tz=assume_tz)).handoffs.state
    return name in state.watchers or name in state.claims_by


class NotReached(msgspec.Struct, kw_only=True):
    """What a pass left for a later one when its budget was spent: after ``after_s`` of ``budget_s``."""

    budget_s: float
    after_s: float
    accounts: list[str] = msgspec.field(default_factory=list)
    handoffs: list[str] = msgspec.field(default_factory=list)

    def problem(self) -> str:
        """One line for a person."""
        left = [f"{what} {', '.join(names)}" for what, names in
                (("accounts not probed:", self.accounts), ("handoffs not claimed:", self.handoffs)) if names]
        return (f"the pass ran past its --budget of {self.budget_s:g} s (after {self.after_s:.0f} s) and started no "
                f"more commands; {'; '.join(left)}; a later pass takes them")


class Report(msgspec.Struct, kw_only=True):
    """What a pass did. ``status`` 0: nothing new needs a person; 1: see ``problems`` (one line each)."""

    watcher: str
    started_at: str
    released: list[dict[str, Any]] = msgspec.field(default_factory=list)
    #: Stale ``resume_requested`` handoffs this pass handed to a person (``resume_unconfirmed``).
    unconfirmed: list[dict[str, Any]] = msgspec.field(default_factory=list)
    #: Handoffs whose resume failed with effect none ``RESUME_FAILING_AFTER`` times in a row, which this pass
    #: handed to a person (``resume_failing``): ``handoff_id``, ``attempt``, ``failures``, ``detail``.
    failing: list[dict[str, Any]] = msgspec.field(default_factory=list)
    #: Pending handoffs this pass could claim: not those it released (pending again, a later pass claims them).
    pending: int = 0
    free_slots: int = 0
    #: What each probe said (``account``, ``outcome``, ``status``, ``detail``, ``limit``; ``written`` as in
    #: ``resumed``).
    probes: list[dict[str, Any]] = msgspec.field(default_factory=list)
    not_probed: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    claimed: list[str] = msgspec.field(default_factory=list)
    lost: list[dict[str, str]] = msgspec.field(default_factory=list)
    #: What each resume command answered (``handoff_id``, ``attempt``, ``result``, ``detail``; ``written``: false
    #: when the log did not take the line that says it, which ``unwritten`` then holds).
    resumed: list[dict[str, Any]] = msgspec.field(default_factory=list)
    #: Handoffs this pass handed to a person (a resume that failed with effect unknown, a conflict).
    to_person: list[str] = msgspec.field(default_factory=list)
    #: What the pass did not reach once its budget was spent (``accounts`` not probed, ``handoffs`` not claimed).
    not_reached: NotReached | None = None
    #: Accounts whose probe said ``auth_error`` in this pass (their plan is now ``needs_person``).
    auth_errors: list[dict[str, Any]] = msgspec.field(default_factory=list)
    exit: Literal["ok", "error"] = "ok"
    errors: list[str] = msgspec.field(default_factory=list)
    bad_lines: PassBadLines = msgspec.field(default_factory=PassBadLines)
    #: For a person too, but they change nothing (bad lines the previous pass already read).
    notes: list[str] = msgspec.field(default_factory=list)
    write_failed: bool = False
    #: What a probe or a resume gave that the log did not take: the lines to append by hand (a problem each).
    unwritten: list[Unwritten] = msgspec.field(default_factory=list)
    #: The signal (SIGTERM, SIGINT) that stopped the pass, None when none did.
    interrupted: str | None = None
    heartbeat: str | None = None
    problems: list[str] = msgspec.field(default_factory=list)

    @property
    def status(self) -> int:
        """The exit status: 1 when a problem needs a person, else 0."""
        return 1 if self.problems else 0

    def as_dict(self) -> dict[str, Any]:
        """The report for machines (``--json``)."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out

    def text(self) -> list[str]:
        """The report for people, one line each."""
        verdict = "ok, but it sent work to a person" if self.exit == "ok" and self.problems else self.exit
        out = [f"failback pass by {self.watcher} at {self.started_at}: {verdict}"]
        out += [f"  released stale claim {r['handoff_id']}: {r['reason']}; pending again, claimed on a later pass "
                "(not this one)" for r in self.released]
        out += [f"  handed to a person (resume_unconfirmed): {u['handoff_id']} (attempt {u['attempt']})"
                for u in self.unconfirmed]
        again = bool(self.released)  # those released are pending too, for a later pass
        if self.write_failed:
            pass
        elif not self.pending:
            out.append(f"  nothing {'else ' if again else ''}pending: no probe")
        elif not self.free_slots:
            out.append(f"  {self.pending} {'other ' if again else ''}pending, no free slot: no probe")
        for p in self.probes:
            limit = p.get("limit")
            more = ""
            if limit:
                more = "; limit recorded, " + (f"reset {limit['reset_at']} ({limit['confidence']})"
                                               if limit["reset_at"] else "no reset time stated (unknown)")
            out.append(f"  probe {p['account']}: {p['outcome']}{more}{Unwritten.mark(p)}")
        for account, why in self.not_probed.items():
            when = f" until {why['next_probe_at']}" if why.get("next_probe_at") else ""
            out.append(f"  not probed {account}: {why['reason']}{when}")
        out += [f"  claimed {hid}" for hid in self.claimed]
        out += [f"  not claimed {x['handoff_id']}: {x['reason']}" for x in self.lost]
        for r in self.resumed:
            out.append(f"  {r['handoff_id']} (attempt {r['attempt']}): {r['result']} - {r['detail']}"
                       f"{Unwritten.mark(r)}")
        out += [f"  handed to a person (resume_failing): {f['handoff_id']} (attempt {f['attempt']}, "
                f"{f['failures']} resume failures in a row with effect none)" for f in self.failing]
        out += [f"  error: {e}" for e in self.errors]
        out.append(f"  heartbeat: {self.heartbeat or 'NOT written'}")
        return out

    def finish(self, opts: Options) -> Report:
        """Set ``exit`` and ``problems`` from what the pass found."""
        self.exit = "error" if self.errors else "ok"
        self.problems = list(self.errors)
        self.problems += [f"{r['handoff_id']}: {r['result']} ({r['detail']}): handed to a person"
                          for r in self.resumed if r["handoff_id"] in self.to_person]
        self.problems += [f"{u['handoff_id']}: resume requested (attempt {u['attempt']}) and nothing came back in "
                          f"more than {opts.stale_after_s:g} s: effect unknown, handed to a person "
                          "(resume_unconfirmed); its slot is free" for u in self.unconfirmed]
        self.problems += [f"{f['handoff_id']}: {f['detail']}: handed to a person (resume_failing), not retried again; "
                          "once the cause is fixed, "
                          f"{handoff_cmd(log_arg(opts), 'release', f['handoff_id'], '<what was fixed>')} sends it back"
                          for f in self.failing]
        self.problems += [f"account {a['account']}: the probe said auth_error ({a['detail']}): no probe until a "
                          "person fixes it and probes by hand (eventlog handoff probe)" for a in self.auth_errors]
        self.problems += [u.problem(opts.log) for u in self.unwritten]
        return self


# --- the pass -------------------------------------------------------------------------


class _Stop(Exception):
    """The log could not be read or written: the pass stops."""


def run_pass(opts: Options) -> Report:
    """One watcher pass over ``opts.log`` (see the module docstring); never raises on a refused append.

    Call ``opts.check()`` first: a pass over a log that is not there fails in its report.
    """
    started = time.monotonic()
    try:
        log = open_log(opts.log, assume_tz=opts.assume_tz)
    except LogUnavailable as err:
        report = Report(watcher=opts.watcher, started_at=_stamp(opts.at.clock(None)))
        report.errors.append(str(err))
        report.write_failed = True
        return report.finish(opts)
    with log:
        return _run_pass(opts, log, started)


def _stamp(clock: Clock) -> str:
    return clock().isoformat(timespec="milliseconds")


def _run_pass(opts: Options, log: Log, started: float) -> Report:
    clock: Clock = opts.at.clock(None)
    report = Report(watcher=opts.watcher, started_at="")

    def stamp() -> str:
        return _stamp(clock)

    def append(events: list[dict[str, Any]], revision: int | None = None, *, act: str | None = None) -> bool:
        """Append with the transition check (and the stream's ``revision``); False when refused (someone moved).

        ``act``: what the events say happened outside (a probe, a resume): when the log does not take them, they
        are kept in ``unwritten`` to append by hand.
        """
        try:
            log.append(events, expect_revision=revision)
        except Conflict as err:
            report.lost.append({"handoff_id": str(events[0].get("handoff_id", "")), "reason": "; ".join(err.messages)})
            return False
        except AppendError as err:
            report.errors.append(f"cannot append {_named(events)} to the log: " + "; ".join(err.messages))
            report.write_failed = True
            if act is not None:
                report.unwritten.append(Unwritten.of(log_arg(opts), act, events))
            raise _Stop from err
        return True

    def unread(err: AppendError) -> None:
        """The log could not be read (nor so written): said, and the pass stops."""
        report.errors.append("; ".join(err.messages) if err.names_log else "cannot read the log: " +
                             "; ".join(err.messages))
        report.write_failed = True

    def state() -> Runner:
        try:
            replay = log.state()
        except AppendError as err:
            unread(err)
            raise _Stop from err
        return folder(replay)

    try:
        first = log.state()
    except AppendError as err:
        first = None
        unread(err)
    if first is not None:
        clock = opts.at.clock(first.last_at)
        previous = folder(first).handoffs.state.watchers.get(opts.watcher)
        report.bad_lines = PassBadLines.seen(first.bad_lines, previous.line if previous else 0)
        report.bad_lines.tell(opts.log, report.errors, report.notes)
    report.started_at = stamp()
    if first is not None:
        try:
            _pass(opts, stamp, clock, state, append, report, _budget(opts, started, report))
        except _Stop:
            pass
        except Interrupted as stop:
            report.interrupted = stop.signal
            report.errors.append(f"failback pass {stop.said()}; no command started after it")
    if report.not_reached:
        report.errors.append(report.not_reached.problem())
    heartbeat: dict[str, Any] = {
        "type": "watcher_run", "ts": stamp(), "watcher": opts.watcher,
        "exit": "error" if report.errors else "ok", "period_s": opts.period_s,
        "stale_after_s": opts.stale_after_s,
    }
    if report.errors:
        heartbeat["detail"] = excerpt("; ".join(report.errors), DETAIL_CHARS)
    try:
        log.append([heartbeat])
        report.heartbeat = heartbeat["ts"]
    except AppendError as err:
        report.errors.append("cannot append the heartbeat: " + "; ".join(err.messages))
        report.write_failed = True
    return report.finish(opts)


Append = Callable[..., bool]


def _named(events: list[dict[str, Any]]) -> str:
    """What an append was to write, for a person: ``resume_failed of h1 (attempt 2)``."""
    first = events[0]
    of = first.get("handoff_id") or first.get("account")
    attempt = first.get("attempt")
    return str(first["type"]) + (f" of {of}" if of else "") + (f" (attempt {attempt})" if attempt is not None else "")


def _budget(opts: Options, started: float, report: Report) -> Callable[[], NotReached | None]:
    """The check before each command: None while the pass (begun at monotonic ``started``) is within its budget;
    after that, the report's :class:`NotReached` (made the first time), where the caller names what it leaves."""

    def spent() -> NotReached | None:
        elapsed = time.monotonic() - started
        if report.not_reached is None and elapsed >= opts.budget_s:
            report.not_reached = NotReached(budget_s=opts.budget_s, after_s=elapsed)
        return report.not_reached

    return spent


def _pass(
    opts: Options,
    stamp: Callable[[], str],
    clock: Clock,
    state: Callable[[], Runner],
    append: Append,
    report: Report,
    spent: Callable[[], NotReached | None],
) -> None:
    # 1. stale claims: release the retryable ones; hand the unconfirmed requests to a person (frees their slots).
    runner = state()
    h = runner.handoffs
    revisions = runner.revisions["handoff_id"]
    stale = h.stale_claims(clock(), opts.stale_after_s)
    released: set[str] = set()
    for hid in stale["retryable"]:
        item = h.items[hid]
        age = elapsed_s(clock(), item.last_at)
        reason = f"stale claim: {item.watcher} sent no resume_requested in {age:.0f}s (attempt {item.attempt})"
        if append([{"type": "released", "ts": stamp(), "handoff_id": hid, "reason": reason}], revisions.get(hid, 0)):
            released.add(hid)
            report.released.append({"handoff_id": hid, "reason": reason})
    for hid in stale["unknown_effect"]:
        item = h.items[hid]
        age = elapsed_s(clock(), item.last_at)
        detail = (f"{item.watcher} requested the resume (attempt {item.attempt}); no verified, conflict or "
                  f"resume_failed came back in {age:.0f}s: effect unknown")
        event = {"type": "needs_human", "ts": stamp(), "handoff_id": hid, "reason": REASON_UNCONFIRMED,
                 "attempt": item.attempt, "detail": detail}
        if append([event], revisions.get(hid, 0)):
            report.unconfirmed.append({"handoff_id": hid, "attempt": item.attempt, "detail": detail})
    # ... and a pending handoff whose resume kept failing with effect none (the cloud side reported it, say).
    for hid in h.failing():
        _hand_over_failing(hid, h.items[hid], None, revisions.get(hid, 0), stamp, append, report)

    # 2. no pending (that this pass may claim) or no free slot: no probe.
    h = state().handoffs
    candidates = [hid for hid in h.claim_order() if hid not in released]
    report.pending = len(candidates)
    report.free_slots = max(0, opts.max_inflight - h.live)
    if not candidates or not report.free_slots:
        return

    # 3. probe the due accounts that have work to bring back (while the budget lasts).
    wanted = {h.items[hid].account for hid in candidates}
    now = clock()
    ok_accounts: set[str] = set()
    for account in sorted(wanted):
        plan = h.plan(account, now)
        if not plan["probe"]:
            report.not_probed[account] = plan
            continue
        left = spent()
        if left:
            left.accounts.append(account)
            continue
        outcome = _probe(opts, h, account, stamp, clock, append, report)
        if outcome == "ok":
            ok_accounts.add(account)

    # 4. claim in claim order, one at a time; resume each right after its claim. The checked
    #    append is the guard: a handoff another watcher moved meanwhile is refused there.
    if report.not_reached:
        unprobed = set(report.not_reached.accounts)
        report.not_reached.handoffs += [hid for hid in candidates if h.items[hid].account in unprobed]
    for hid in candidates:
        h = state().handoffs
        item = h.items[hid]
        if item.account not in ok_accounts:
            continue
        if opts.max_inflight - h.live <= 0:
            break
        left = spent()
        if left:
            left.handoffs.append(hid)
            continue
        attempt = item.attempt + 1
        claim = {"type": "claimed", "ts": stamp(), "handoff_id": hid, "watcher": opts.watcher, "attempt": attempt}
        if not append([claim]):
            continue
        report.claimed.append(hid)
        failed = _resume(opts, item, hid, attempt, stamp, append, report)
        if failed is not None:  # effect none: handed to a person once it failed so often in a row
            runner = state()
            after = runner.handoffs.items[hid]
            if after.failing >= RESUME_FAILING_AFTER and after.state == PENDING:
                _hand_over_failing(hid, after, failed, runner.revisions["handoff_id"].get(hid, 0), stamp, append,
                                   report)


def _hand_over_failing(hid: str, item: Handoff, error: str | None, revision: int, stamp: Callable[[], str],
                       append: Append, report: Report) -> None:
    """Hand a pending handoff whose resume failed with effect none too often in a row to a person
    (``needs_human``, ``resume_failing``), at the revision read: one that moved meanwhile is left alone."""
    detail = excerpt(f"its resume failed with effect none {item.failing} times in a row "
                     f"({attempts_words(item.failed_attempts)})" + (f"; the last: {error}" if error else ""),
                     DETAIL_CHARS)
    event = {"type": "needs_human", "ts": stamp(), "handoff_id": hid, "reason": REASON_FAILING,
             "attempt": item.attempt, "detail": detail}
    if append([event], revision):
        report.failing.append({"handoff_id": hid, "attempt": item.attempt, "failures": item.failing,
                               "detail": detail})


def attempts_words(attempts: Sequence[int]) -> str:
    """The attempts that failed, as a person reads them: ``attempts 1-3``, or ``attempts 1, 2 and 4`` when another
    (a stale claim the runner released) came between."""
    first, last = attempts[0], attempts[-1]
    if len(attempts) == 1:
        return f"attempt {first}"
    if list(attempts) == list(range(first, last + 1)):
        return f"attempts {first}-{last}"
    return "attempts " + ", ".join(map(str, attempts[:-1])) + f" and {last}"


def _env(log: str, watcher: str, values: dict[str, str]) -> dict[str, str]:
    env = {"FAILBACK_LOG": printed(log) if is_url(log) else os.path.abspath(log), "FAILBACK_WATCHER": watcher}
    for name, value in values.items():
        env["FAILBACK_" + name.upper()] = value
    return env


def _fill(argv: Sequence[str], values: dict[str, str]) -> list[str]:
    out = []
    for arg in argv:
        for name, value in values.items():
            arg = arg.replace("{" + name + "}", value)
        out.append(arg)
    return out


def _run(opts: Options, argv: list[str], values: dict[str, str]) -> Ran:
    return run(argv, env=_env(opts.log, opts.watcher, values), timeout_s=opts.timeout_s, grace_s=opts.kill_grace_s,
               capture_stdout=True, capture_stderr=True)


def run_probe(
    probe_cmd: Sequence[str],
    account: str,
    *,
    log: str,
    watcher: str,
    timeout_s: float,
    grace_s: float,
    expected: str,
    now: datetime,
) -> tuple[Ran, Verdict | None]:
    """Run the probe command for ``account`` and classify what it said (None: it could not be started).

    The command gets ``FAILBACK_LOG``, ``FAILBACK_WATCHER`` and ``FAILBACK_ACCOUNT``, and ``{account}`` filled.
    """
    values = {"account": account}
    ran = run(_fill(probe_cmd, values), env=_env(log, watcher, values), timeout_s=timeout_s, grace_s=grace_s,
              capture_stdout=True, capture_stderr=True)
    return ran, judge(ran, timeout_s, now=now, expected=expected)


def probe_events(h: Handoffs, account: str, verdict: Verdict, ts: str) -> list[dict[str, Any]]:
    """What a probe's verdict appends: ``probe_result``, and ``limit_recorded`` when its limit is to be recorded.

    A limit is recorded when the probe read one: always when it stated a reset (explicit); an estimate only
    when the account has no estimated or unknown limit open (re-recording it would restart the backoff).
    """
    probe: dict[str, Any] = {"type": "probe_result", "ts": ts, "account": account, "outcome": verdict.outcome,
                             "detail": verdict.detail}
    if verdict.status is not None:
        probe["status"] = verdict.status
    events = [probe]
    limit = verdict.limit
    if limit is not None and (
        limit.confidence == "explicit" or not (h.limit_open(account) and h.limit_confidence(account) in GUESSED)
    ):
        events.append({"type": "limit_recorded", "ts": ts, "account": account, **msgspec.to_builtins(limit)})
    return events


def _probe(
    opts: Options,
    h: Handoffs,
    account: str,
    stamp: Callable[[], str],
    clock: Callable[[], datetime],
    append: Append,
    report: Report,
) -> str | None:
    """Run the probe for one account and record what it said; the outcome (None: not started)."""
    try:
        ran, verdict = run_probe(opts.probe_cmd, account, log=opts.log, watcher=opts.watcher,
                                 timeout_s=opts.timeout_s, grace_s=opts.kill_grace_s, expected=opts.expected,
                                 now=clock())
    except Interrupted as stop:
        stop.what = (f"while the probe for {account} ran (its process group was stopped)" if stop.started
                     else f"before the probe for {account}") + ": no probe_result"
        raise
    if verdict is None:
        report.errors.append(f"probe for {account} could not be started: {ran.error}")
        return None
    events = probe_events(h, account, verdict, stamp())
    limit = events[1] if len(events) > 1 else None
    done = {"account": account, "outcome": verdict.outcome, "status": verdict.status, "detail": verdict.detail,
            "limit": {k: limit[k] for k in ("limited_at", "reset_at", "source", "confidence")} if limit else None,
            "written": False}
    report.probes.append(done)
    applied = append(events, act=f"the probe of {account} said {verdict.outcome} ({verdict.detail})")
    done["written"] = True
    if applied and verdict.outcome == "auth_error":
        report.auth_errors.append({"account": account, "detail": verdict.detail})
    silent = ran.no_answer(opts.timeout_s)
    if silent is not None:
        report.errors.append(f"probe for {account} gave no answer ({silent}): recorded as {verdict.outcome}")
    return verdict.outcome


# --- the resume command's answer ----------------------------------------------------------


class Handshake(msgspec.Struct, forbid_unknown_fields=False):
    """What a resume command reports when the work was taken back (``verified``)."""

    handoff_id: str
    branch: str
    head: str
    dirty: bool
    todos: Literal["taken_over", "already_done"]


class ConflictReport(msgspec.Struct, forbid_unknown_fields=False):
    """What a resume command reports when the tree was changed by someone else (nothing edited)."""

    conflict: str


class Started(msgspec.Struct, forbid_unknown_fields=False):
    """The cloud session started and will report ``verified``/``conflict``/``resume_failed`` itself, later.

    ``started`` says what started (a session id, a URL; ``true`` when there is nothing to say).
    """

    started: str | bool
    handoff_id: str | None = None


class Failed(msgspec.Struct, forbid_unknown_fields=False):
    """It did not resume: ``effect`` ``none`` when nothing happened outside (pending again), else ``unknown``."""

    failed: str
    effect: Literal["none", "unknown"] = "unknown"


Answer = Handshake | ConflictReport | Started | Failed

#: The key that names each answer but ``verified``'s, checked in this order.
_ANSWER_KEYS: tuple[tuple[str, type[Answer]], ...] = (
    ("conflict", ConflictReport), ("failed", Failed), ("started", Started),
)


def read_handshake(stdout: str) -> Answer | str:
    """The answer in a resume command's stdout (its last line that is a JSON object), or why there is none."""
    candidates = [*reversed([line for line in stdout.splitlines() if line.strip()]), stdout]
    for raw in candidates:
        text = raw.strip().encode()
        if deeper_at(text) is not None:  # never decoded: whether a decoder gets through it depends on the stack
            if text.startswith(b"{"):
                return f"bad handshake: {NESTED_TOO_DEEP}"
            continue
        try:
            obj = msgspec.json.decode(text)
        except msgspec.DecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        return _answer(obj)
    return "no handshake (no JSON object on stdout)"


def _answer(obj: dict[str, Any]) -> Answer | str:
    kind: type[Answer] = Handshake
    for key, cls in _ANSWER_KEYS:
        if key in obj:
            kind = cls
            break
    try:
        found = msgspec.convert(obj, kind)
    except msgspec.ValidationError as err:
        return f"bad {kind.__name__} answer: {err}" if kind is not Handshake else f"bad handshake: {err}"
    if isinstance(found, ConflictReport) and not found.conflict:
        return "conflict report with an empty detail"
    if isinstance(found, Failed) and not found.failed:
        return "failed answer with an empty reason"
    if isinstance(found, Started) and found.started in ("", False):
        return "started answer that says nothing started"
    return found


def answer_event(hid: str, attempt: int, ran: Ran, timeout_s: float) -> tuple[dict[str, Any] | None, str]:
    """The event a resume command's run gives (None: it started the session, which reports later) and a detail."""
    base = {"handoff_id": hid, "attempt": attempt}
    if not ran.started:
        return {"type": "resume_failed", **base, "error": f"could not start: {ran.error}", "effect": "none"}, ""
    if ran.timed_out:
        return {"type": "resume_failed", **base, "effect": "unknown",
                "error": f"timed out after {timeout_s:g}s; stopped" + _tail(ran)}, ""
    found = read_handshake(ran.stdout)
    if ran.exit != 0 and not isinstance(found, Failed | ConflictReport):
        return {"type": "resume_failed", **base, "effect": "unknown", "error": ran.ended() + _tail(ran)}, ""
    if isinstance(found, str):
        return {"type": "resume_failed", **base, "effect": "unknown", "error": excerpt(found) + _tail(ran)}, ""
    named = getattr(found, "handoff_id", None)
    if named is not None and named != hid:
        return {"type": "resume_failed", **base, "effect": "unknown",
                "error": f"handshake names handoff {excerpt(repr(named))}, not {hid!r}"}, ""
    if isinstance(found, ConflictReport):
        return {"type": "conflict", **base, "detail": excerpt(found.conflict)}, ""
    if isinstance(found, Failed):
        return {"type": "resume_failed", **base, "error": excerpt(found.failed), "effect": found.effect}, ""
    if isinstance(found, Started):
        said = excerpt(found.started) if isinstance(found.started, str) else "the session started"
        return None, f"{said}; waiting for the cloud side to report attempt {attempt}"
    return {"type": "verified", **base, "branch": excerpt(found.branch), "head": excerpt(found.head),
            "dirty": found.dirty, "todos": found.todos}, ""


def _resume(
    opts: Options,
    item: Handoff,
    hid: str,
    attempt: int,
    stamp: Callable[[], str],
    append: Append,
    report: Report,
) -> str | None:
    """Request the resume (journalled first), run the command, record what its answer says; the error of a
    ``resume_failed`` with effect none it recorded (None: anything else)."""
    if not append([{"type": "resume_requested", "ts": stamp(), "handoff_id": hid, "attempt": attempt}]):
        return None
    values = {
        "handoff_id": hid, "account": item.account, "attempt": str(attempt),
        "repo": item.repo or "", "branch": item.branch or "", "head": item.head or "",
    }
    argv = _fill(opts.resume_cmd, values)
    if not any("{handoff_id}" in arg for arg in opts.resume_cmd):
        argv.append(hid)
    try:
        ran = _run(opts, argv, values)
    except Interrupted as stop:
        _stopped(hid, attempt, stop, stamp, append, report)
        raise
    if not ran.started:
        report.errors.append(f"resume command for {hid} could not be started: {ran.error}")
    event, waiting = answer_event(hid, attempt, ran, opts.timeout_s)
    if event is None:
        report.resumed.append({"handoff_id": hid, "attempt": attempt, "result": "started", "detail": waiting,
                               "written": True})
        return None
    event["ts"] = stamp()
    detail = event.get("error") or event.get("detail") or f"{event.get('branch')} {event.get('head')}"
    result = event["type"] + (f" (effect {event['effect']})" if "effect" in event else "")
    done = {"handoff_id": hid, "attempt": attempt, "result": result, "detail": detail, "written": False}
    report.resumed.append(done)
    applied = append([event], act=f"the resume of {hid} (attempt {attempt}) answered {result} ({detail})")
    done["written"] = True
    if applied and (event["type"] == "conflict" or event.get("effect") == "unknown"):
        report.to_person.append(hid)
    return str(event["error"]) if applied and event.get("effect") == "none" else None


def _stopped(hid: str, attempt: int, stop: Interrupted, stamp: Callable[[], str], append: Append,
             report: Report) -> None:
    """Record a resume a stop signal cut short: resume_failed, effect unknown once the command ran, else none."""
    effect = "unknown" if stop.started else "none"
    error = (f"stopped by {stop.signal} while it ran; its process group was stopped" if stop.started
             else f"not started: the pass was stopped by {stop.signal}")
    event = {"type": "resume_failed", "ts": stamp(), "handoff_id": hid, "attempt": attempt, "error": error,
             "effect": effect}
    then = "handed to a person" if stop.started else "pending again"
    stop.what = (f"while the resume command for {hid} (attempt {attempt}) ran" if stop.started
                 else f"before the resume command for {hid} (attempt {attempt}) started")
    result = f"resume_failed (effect {effect})"
    try:
        applied = append([event], act=f"the resume of {hid} (attempt {attempt}) was cut short: {result} ({error})")
    except _Stop:
        stop.what += ": resume_failed could not be appended"
        return
    if applied:
        report.resumed.append({"handoff_id": hid, "attempt": attempt, "result": result, "detail": error,
                               "written": True})
        if stop.started:
            report.to_person.append(hid)
        stop.what += f": resume_failed (effect {effect}) recorded, {then}"


def _tail(ran: Ran) -> str:
    said = ran.said()
    return f": {said}" if said else ""


__all__ = [
    "BUDGET_S", "KILL_GRACE_S", "Answer", "ConflictReport", "Failed", "Handshake", "NotReached", "Options", "Report",
    "Started", "answer_event",
    "probe_events", "read_handshake", "run_pass", "run_probe",
]
