"""``eventlog failback``: one pass of the failback watcher, as cron or launchd would call it.

A pass (seed 000: claim one at a time, save the state, then go on):

1. Stale retryable claims (``claimed``, no request, quiet for longer than
   ``--stale-after``) are ``released`` with the reason; they are tried again on
   a later pass, not this one. Stale ``resume_requested`` claims are left for a
   person (something may have happened outside) and only reported.
2. No pending handoff (or no free slot of ``--max-inflight``): no probe at all.
3. Every account the projection's probe plan says is due, and that has a
   pending handoff, is probed with ``--probe-cmd``; :func:`eventlog.probe.classify`
   names the outcome; a ``probe_result`` is appended, and a ``limit_recorded``
   when the probe read a limit: always when it stated a reset time (explicit);
   an estimate only when the account has no estimated or unknown limit since
   its last ``ok`` probe (re-recording it would restart the backoff that is
   meant to widen while the estimate keeps proving wrong).
4. Pending handoffs of accounts whose probe said ``ok`` are claimed in claim
   order, one at a time, each with a checked append (a refused claim means
   another watcher won: it is skipped). For each claim: ``resume_requested`` is
   appended *before* ``--resume-cmd`` runs (intent before the act); the command
   reports the handshake as one JSON object on stdout (the last line that is
   one): ``{"handoff_id", "branch", "head", "dirty", "todos": "taken_over" |
   "already_done"}`` -> ``verified``, or ``{"conflict": "detail"}`` ->
   ``conflict``. A command that could not be started -> ``resume_failed`` with
   ``effect: none`` (pending again). One that started and then exited non-zero,
   timed out (its process group is killed) or printed no valid handshake ->
   ``resume_failed`` with ``effect: unknown``: it goes to a person and is never
   retried automatically.
5. The heartbeat ``watcher_run`` (``exit`` ok or error, ``period_s``) is appended
   at the END of the pass: it says the pass finished and how. A pass that hangs
   or dies midway leaves none, so the watcher shows as late instead of alive.
   ``exit: error`` means the pass could not do all of its own work (a command
   that could not be started, a log write that failed); it then carries a
   ``detail`` (an extra field, ignored by projections).

Commands are split with :func:`shlex.split` and run without a shell, bounded
by ``--timeout``. They get, in the environment, ``FAILBACK_LOG``,
``FAILBACK_WATCHER``, ``FAILBACK_ACCOUNT`` and, for the resume command,
``FAILBACK_HANDOFF_ID``, ``FAILBACK_ATTEMPT``, ``FAILBACK_REPO``,
``FAILBACK_BRANCH``, ``FAILBACK_HEAD`` (empty when unknown). The same names in
lower case in braces (``{account}``, ``{handoff_id}``, ...) are replaced in
the arguments; a resume command without ``{handoff_id}`` gets the handoff id
as its last argument. A probe's HTTP status, when it has one, is read from its
output (``HTTP 429``, ``API Error: 429``, ``"status": 429``).

Exit status: 0 the pass ran (whatever it found); 1 the log could not be
written; 2 bad usage or a log that cannot be read.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import msgspec

from eventlog.appender import AppendError, Conflict
from eventlog.cli.common import UsageError, dumps, error
from eventlog.cli.process import command
from eventlog.logs import Log, LogUnavailable, is_url, open_log
from eventlog.probe import EXPECTED, classify
from projections.base import elapsed_s
from projections.handoffs import GUESSED, Handoff, Handoffs

Clock = Callable[[], datetime]


def register(sub: Any) -> None:
    """Add the ``failback`` subcommand."""
    p = sub.add_parser(
        "failback",
        help="one failback watcher pass: probe, claim, resume, verify",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("log", metavar="LOG")
    p.add_argument("--probe-cmd", required=True, metavar="CMD", help="the small probe (e.g. one that answers PING_OK)")
    p.add_argument("--resume-cmd", required=True, metavar="CMD", help="resumes a handoff and prints the handshake")
    p.add_argument("--watcher", default=f"failback@{socket.gethostname()}", metavar="NAME", help="this watcher's name")
    p.add_argument("--period", type=int, default=900, metavar="SECONDS", help="how often the pass runs (900)")
    p.add_argument("--timeout", type=float, default=120, metavar="SECONDS", help="bound on each command (120)")
    p.add_argument("--stale-after", type=float, default=1800, metavar="SECONDS", help="stale claim age (1800)")
    p.add_argument("--max-inflight", type=int, default=2, metavar="N", help="claims at once (2)")
    p.add_argument("--expect", default=EXPECTED, metavar="TEXT", help=f"a healthy probe's answer ({EXPECTED})")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(run=run)


@dataclass
class Options:
    """What one pass is told."""

    log: str
    probe_cmd: list[str]
    resume_cmd: list[str]
    watcher: str
    period_s: int = 900
    timeout_s: float = 120
    stale_after_s: float = 1800
    max_inflight: int = 2
    expected: str = EXPECTED


def run(args: argparse.Namespace) -> int:
    """Check the usage, run one pass, print its summary."""
    try:
        opts = Options(
            log=args.log,
            probe_cmd=command(args.probe_cmd, "--probe-cmd"),
            resume_cmd=command(args.resume_cmd, "--resume-cmd"),
            watcher=args.watcher,
            period_s=args.period,
            timeout_s=args.timeout,
            stale_after_s=args.stale_after,
            max_inflight=args.max_inflight,
            expected=args.expect,
        )
        _check(opts)
    except (ValueError, UsageError) as err:
        error(str(err))
        return 2
    report = run_pass(opts)
    print(dumps(report.as_dict()) if args.json else report.text())
    sys.stdout.flush()
    return 1 if report.write_failed else 0


def _check(opts: Options) -> None:
    if not opts.watcher:
        raise ValueError("--watcher is empty")
    if opts.period_s < 1:
        raise ValueError("--period must be at least 1 second")
    if opts.timeout_s <= 0:
        raise ValueError("--timeout must be more than 0")
    if opts.stale_after_s < 0:
        raise ValueError("--stale-after must not be negative")
    if opts.max_inflight < 0:
        raise ValueError("--max-inflight must not be negative")
    if not opts.expected:
        raise ValueError("--expect is empty")
    if is_url(opts.log):
        try:
            with open_log(opts.log) as log:
                there = log.exists()
        except LogUnavailable as err:
            raise ValueError(str(err)) from err
        if not there:
            raise ValueError(f"cannot read {opts.log}: no such stream")
        return
    if os.path.isdir(opts.log):
        raise ValueError(f"{opts.log} is a directory, not a log file")
    if not os.path.isfile(opts.log):
        raise ValueError(f"cannot read {opts.log}: no such file")
    if not os.access(opts.log, os.R_OK | os.W_OK):
        raise ValueError(f"cannot read and write {opts.log}")


# --- the report ---------------------------------------------------------------------


@dataclass
class Report:
    """What a pass did, for the summary."""

    watcher: str
    started_at: str
    released: list[dict[str, Any]] = field(default_factory=list)
    left_for_person: list[str] = field(default_factory=list)
    pending: int = 0
    free_slots: int = 0
    probes: list[dict[str, Any]] = field(default_factory=list)
    not_probed: dict[str, dict[str, Any]] = field(default_factory=dict)
    claimed: list[str] = field(default_factory=list)
    lost: list[dict[str, str]] = field(default_factory=list)
    resumed: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    write_failed: bool = False
    heartbeat: str | None = None

    @property
    def exit(self) -> Literal["ok", "error"]:
        """The heartbeat's ``exit``."""
        return "error" if self.errors else "ok"

    def as_dict(self) -> dict[str, Any]:
        """The summary for machines (``--json``)."""
        return {
            "watcher": self.watcher,
            "started_at": self.started_at,
            "released": self.released,
            "left_for_person": self.left_for_person,
            "pending": self.pending,
            "free_slots": self.free_slots,
            "probes": self.probes,
            "not_probed": self.not_probed,
            "claimed": self.claimed,
            "lost": self.lost,
            "resumed": self.resumed,
            "exit": self.exit,
            "errors": self.errors,
            "heartbeat": self.heartbeat,
        }

    def text(self) -> str:
        """The summary for people."""
        out = [f"failback pass by {self.watcher} at {self.started_at}: {self.exit}"]
        out += [f"  released stale claim {r['handoff_id']}: {r['reason']}" for r in self.released]
        out += [f"  left for a person (stale resume_requested): {hid}" for hid in self.left_for_person]
        if self.write_failed:
            pass
        elif not self.pending:
            out.append("  nothing pending: no probe")
        elif not self.free_slots:
            out.append(f"  {self.pending} pending, no free slot: no probe")
        for p in self.probes:
            limit = p.get("limit")
            more = f"; limit recorded, reset {limit['reset_at']} ({limit['confidence']})" if limit else ""
            out.append(f"  probe {p['account']}: {p['outcome']}{more}")
        for account, why in self.not_probed.items():
            when = f" until {why['next_probe_at']}" if why.get("next_probe_at") else ""
            out.append(f"  not probed {account}: {why['reason']}{when}")
        out += [f"  claimed {hid}" for hid in self.claimed]
        out += [f"  not claimed {x['handoff_id']}: {x['reason']}" for x in self.lost]
        for r in self.resumed:
            out.append(f"  {r['handoff_id']} (attempt {r['attempt']}): {r['result']} - {r['detail']}")
        out += [f"  error: {e}" for e in self.errors]
        out.append(f"  heartbeat: {self.heartbeat or 'NOT written'}")
        return "\n".join(out)


# --- the pass -------------------------------------------------------------------------


def _local_now() -> datetime:
    return datetime.now().astimezone()


class _Stop(Exception):
    """The log could not be written: the pass stops."""


def run_pass(opts: Options, clock: Clock = _local_now) -> Report:
    """One watcher pass over ``opts.log`` (see the module docstring); never raises on a refused append."""
    try:
        log = open_log(opts.log)
    except LogUnavailable as err:
        report = Report(opts.watcher, clock().isoformat(timespec="milliseconds"))
        report.errors.append(str(err))
        report.write_failed = True
        return report
    with log:
        return _run_pass(opts, log, clock)


def _run_pass(opts: Options, log: Log, clock: Clock) -> Report:

    def stamp() -> str:
        return clock().isoformat(timespec="milliseconds")

    report = Report(opts.watcher, stamp())

    def append(events: list[dict[str, Any]]) -> bool:
        """Append with the transition check; False when refused (someone else moved first)."""
        try:
            log.append(events)
        except Conflict as err:
            report.lost.append({"handoff_id": str(events[0].get("handoff_id", "")), "reason": "; ".join(err.messages)})
            return False
        except AppendError as err:
            report.errors.append("cannot append to the log: " + "; ".join(err.messages))
            report.write_failed = True
            raise _Stop from err
        return True

    try:
        _pass(opts, log, stamp, clock, append, report)
    except _Stop:
        pass
    heartbeat: dict[str, Any] = {
        "type": "watcher_run", "ts": stamp(), "watcher": opts.watcher, "exit": report.exit, "period_s": opts.period_s
    }
    if report.errors:
        heartbeat["detail"] = "; ".join(report.errors)[:500]
    try:
        log.append([heartbeat])
        report.heartbeat = heartbeat["ts"]
    except AppendError as err:
        report.errors.append("cannot append the heartbeat: " + "; ".join(err.messages))
        report.write_failed = True
    return report


def _pass(
    opts: Options,
    log: Log,
    stamp: Callable[[], str],
    clock: Clock,
    append: Callable[[list[dict[str, Any]]], bool],
    report: Report,
) -> None:
    def state() -> Handoffs:
        try:
            handoffs: Handoffs = log.state().folder.handoffs  # type: ignore[attr-defined]
        except AppendError as err:
            report.errors.append("cannot read the log: " + "; ".join(err.messages))
            report.write_failed = True
            raise _Stop from err
        return handoffs

    # 1. stale claims: release the retryable ones, leave the rest to a person.
    h = state()
    stale = h.stale_claims(clock(), opts.stale_after_s)
    released: set[str] = set()
    for hid in stale["retryable"]:
        item = h.items[hid]
        age = elapsed_s(clock(), item.last_at)
        reason = f"stale claim: {item.watcher} sent no resume_requested in {age:.0f}s (attempt {item.attempt})"
        if append([{"type": "released", "ts": stamp(), "handoff_id": hid, "reason": reason}]):
            released.add(hid)
            report.released.append({"handoff_id": hid, "reason": reason})
    report.left_for_person = stale["unknown_effect"]

    # 2. no pending (that this pass may claim) or no free slot: no probe.
    h = state()
    candidates = [hid for hid in h.claim_order() if hid not in released]
    report.pending = len(candidates)
    report.free_slots = max(0, opts.max_inflight - h.live)
    if not candidates or not report.free_slots:
        return

    # 3. probe the due accounts that have work to bring back.
    wanted = {h.items[hid].account for hid in candidates}
    now = clock()
    ok_accounts: set[str] = set()
    for account in sorted(wanted):
        plan = h.plan(account, now)
        if not plan["probe"]:
            report.not_probed[account] = plan
            continue
        outcome = _probe(opts, h, account, stamp, clock, append, report)
        if outcome == "ok":
            ok_accounts.add(account)

    # 4. claim in claim order, one at a time; resume each right after its claim. The checked
    #    append is the guard: a handoff another watcher moved meanwhile is refused there.
    for hid in candidates:
        h = state()
        item = h.items[hid]
        if item.account not in ok_accounts:
            continue
        if opts.max_inflight - h.live <= 0:
            break
        attempt = item.attempt + 1
        claim = {"type": "claimed", "ts": stamp(), "handoff_id": hid, "watcher": opts.watcher, "attempt": attempt}
        if not append([claim]):
            continue
        report.claimed.append(hid)
        _resume(opts, item, hid, attempt, stamp, append, report)


def _env(opts: Options, values: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env["FAILBACK_LOG"] = opts.log if is_url(opts.log) else os.path.abspath(opts.log)
    env["FAILBACK_WATCHER"] = opts.watcher
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


def _probe(
    opts: Options,
    h: Handoffs,
    account: str,
    stamp: Callable[[], str],
    clock: Clock,
    append: Callable[[list[dict[str, Any]]], bool],
    report: Report,
) -> str | None:
    """Run the probe for one account and record what it said; the outcome (None: not started)."""
    values = {"account": account}
    ran = run_command(_fill(opts.probe_cmd, values), _env(opts, values), opts.timeout_s)
    if not ran.started:
        report.errors.append(f"probe for {account} could not be started: {ran.error}")
        return None
    text = ran.stdout + ("\n" + ran.stderr if ran.stderr else "")
    verdict = classify(ran.exit, None, text, now=clock(), expected=opts.expected)
    ts = stamp()
    probe: dict[str, Any] = {"type": "probe_result", "ts": ts, "account": account, "outcome": verdict.outcome,
                             "detail": verdict.detail}
    if verdict.status is not None:
        probe["status"] = verdict.status
    events = [probe]
    limit = verdict.limit
    record = limit is not None and (
        limit.confidence == "explicit" or not (h.limit_open(account) and h.limit_confidence(account) in GUESSED)
    )
    if limit is not None and record:
        events.append({"type": "limit_recorded", "ts": ts, "account": account, **msgspec.to_builtins(limit)})
    append(events)
    report.probes.append({"account": account, "outcome": verdict.outcome, "status": verdict.status,
                          "detail": verdict.detail, "limit": msgspec.to_builtins(limit) if record else None})
    return verdict.outcome


class Handshake(msgspec.Struct, forbid_unknown_fields=False):
    """What a resume command reports when the work was taken back."""

    handoff_id: str
    branch: str
    head: str
    dirty: bool
    todos: Literal["taken_over", "already_done"]


class ConflictReport(msgspec.Struct):
    """What a resume command reports when the tree was changed by someone else (nothing edited)."""

    conflict: str


def read_handshake(stdout: str) -> Handshake | ConflictReport | str:
    """The handshake in a resume command's stdout (its last line that is a JSON object), or why none."""
    candidates = [*reversed([line for line in stdout.splitlines() if line.strip()]), stdout]
    for raw in candidates:
        try:
            obj = msgspec.json.decode(raw.strip())
        except msgspec.DecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        if "conflict" in obj:
            try:
                found = msgspec.convert(obj, ConflictReport)
            except msgspec.ValidationError as err:
                return f"bad conflict report: {err}"
            return found if found.conflict else "conflict report with an empty detail"
        try:
            return msgspec.convert(obj, Handshake)
        except msgspec.ValidationError as err:
            return f"bad handshake: {err}"
    return "no handshake (no JSON object on stdout)"


def _resume(
    opts: Options,
    item: Handoff,
    hid: str,
    attempt: int,
    stamp: Callable[[], str],
    append: Callable[[list[dict[str, Any]]], bool],
    report: Report,
) -> None:
    """Request the resume (journalled first), run the command, record what the handshake says."""
    if not append([{"type": "resume_requested", "ts": stamp(), "handoff_id": hid, "attempt": attempt}]):
        return
    values = {
        "handoff_id": hid, "account": item.account, "attempt": str(attempt),
        "repo": item.repo or "", "branch": item.branch or "", "head": item.head or "",
    }
    argv = _fill(opts.resume_cmd, values)
    if not any("{handoff_id}" in arg for arg in opts.resume_cmd):
        argv.append(hid)
    ran = run_command(argv, _env(opts, values), opts.timeout_s)
    base = {"handoff_id": hid, "attempt": attempt}
    event: dict[str, Any]
    if not ran.started:
        event = {"type": "resume_failed", **base, "error": f"could not start: {ran.error}", "effect": "none"}
        report.errors.append(f"resume command for {hid} could not be started: {ran.error}")
    elif ran.exit is None:
        event = {"type": "resume_failed", **base, "effect": "unknown",
                 "error": f"timed out after {opts.timeout_s:g}s; killed" + _tail(ran)}
    elif ran.exit != 0:
        event = {"type": "resume_failed", **base, "effect": "unknown", "error": f"exit {ran.exit}" + _tail(ran)}
    else:
        found = read_handshake(ran.stdout)
        if isinstance(found, ConflictReport):
            event = {"type": "conflict", "handoff_id": hid, "detail": found.conflict}
        elif isinstance(found, Handshake) and found.handoff_id != hid:
            event = {"type": "resume_failed", **base, "effect": "unknown",
                     "error": f"handshake names handoff {found.handoff_id!r}, not {hid!r}"}
        elif isinstance(found, Handshake):
            event = {"type": "verified", **base, "branch": found.branch, "head": found.head,
                     "dirty": found.dirty, "todos": found.todos}
        else:
            event = {"type": "resume_failed", **base, "effect": "unknown", "error": found + _tail(ran)}
    event["ts"] = stamp()
    append([event])
    detail = event.get("error") or event.get("detail") or f"{event.get('branch')} {event.get('head')}"
    result = event["type"] + (f" (effect {event['effect']})" if "effect" in event else "")
    report.resumed.append({"handoff_id": hid, "attempt": attempt, "result": result, "detail": detail})


def _tail(ran: Ran) -> str:
    text = " ".join((ran.stderr or ran.stdout).split())
    return f": {text[-300:]}" if text else ""


# --- running commands --------------------------------------------------------------------


@dataclass
class Ran:
    """How a command went: not started (``error``), killed by the timeout (``exit`` None), or exited."""

    started: bool
    exit: int | None = None
    stdout: str = ""
    stderr: str = ""
    error: str | None = None


def run_command(argv: list[str], env: dict[str, str], timeout_s: float) -> Ran:
    """Run ``argv`` without a shell; on timeout kill its whole process group."""
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, start_new_session=True, text=True, encoding="utf-8", errors="replace",
        )
    except OSError as err:
        return Ran(False, error=f"{argv[0]}: {err.strerror or err}")
    try:
        out, err_text = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            out, err_text = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # a grandchild left the group and holds the pipes
            proc.kill()
            out, err_text = "", ""
        return Ran(True, None, out or "", err_text or "")
    return Ran(True, proc.returncode, out or "", err_text or "")
