"""``eventlog catchup`` and ``eventlog import``: re-run today's skipped jobs once the quota is back (seed 002).

``eventlog catchup LOG --probe-cmd CMD --kick-cmd CMD [--dry-run] [--at TIME]
[--timeout 2700] [--kill-grace 30] [--probe-timeout 300] [--json]``:

- the candidates are those of ``projections.catchup`` as of now (or ``--at``);
- no candidates: no probe, nothing kicked (exit 0);
- ``--dry-run``: prints the candidates, no probe, nothing kicked (exit 0);
- circuit open: no probe, nothing kicked (exit 0);
- the probe (CMD, no shell) fails (non-zero exit, timeout, cannot start):
  nothing kicked (exit 1);
- else each candidate in turn, never two at once: re-judged on the log as it
  is then (a job that ran meanwhile, or a circuit that opened again, stops
  it), ``catchup_kicked`` appended, the kick command run with the label as
  its last argument and in ``CATCHUP_LABEL``, waited for; over ``--timeout``
  its process group gets SIGTERM, then SIGKILL after ``--kill-grace``; then
  ``catchup_finished`` appended (``exited`` with ``exit``, or
  ``timeout_killed``) before the next starts. A kick command that cannot start
  is recorded as ``exited`` with exit 127 (the shell's "not found").
- exit 1 when a re-run did not exit 0; 0 otherwise.
- one catch-up at a time per log: a second one finds ``LOG.catchup.lock``
  held, says so on stderr and exits 0 doing nothing. A catch-up interrupted
  (SIGINT/SIGTERM) kills the running re-run and leaves its ``catchup_kicked``
  without a ``catchup_finished``; the job is not kicked again today.

``eventlog import launchd DIR --log LOG [--guard-pattern claude-quota-guard]``
and ``eventlog import quota-log FILE... --log LOG [--tz ZONE]`` append
``job_registered`` and ``job_skipped``/``job_ran`` events; importing the same
input again adds nothing (see :mod:`eventlog.importers`). Exit 0 done, 1 some
input could not be read (the rest is imported), 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import signal
import types
from datetime import datetime
from typing import Any

from eventlog import importers
from eventlog.appender import AppendError
from eventlog.cli.common import UsageError, append_failed, dumps, error, parse_at, zone
from eventlog.cli.process import Ran, command, run_bounded, runner_lock
from eventlog.logs import Log, LogUnavailable, is_url, open_log
from projections.runner import Runner

#: Spec section 5: a re-run over this is killed.
KICK_TIMEOUT_S = 2700.0
#: Spec section 5: SIGTERM, then SIGKILL after this.
KILL_GRACE_S = 30.0
#: How long the probe may take.
PROBE_TIMEOUT_S = 300.0


def state_of(log: Log) -> Runner:
    """The projections of the whole log."""
    folder = log.state().folder
    assert isinstance(folder, Runner)
    return folder


def now_local() -> datetime:
    """The shell's clock, in the local offset."""
    return datetime.now().astimezone()


# --- eventlog catchup --------------------------------------------------------------------


def register(sub: Any) -> None:
    """Add ``catchup`` and ``import``."""
    parts = (__doc__ or "").split("\n\n")
    p = sub.add_parser(
        "catchup",
        help="re-run today's quota-skipped jobs, one at a time",
        description="\n\n".join(parts[1:3]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("log", metavar="LOG")
    p.add_argument("--probe-cmd", metavar="CMD", help="checks that the quota is back (exit 0); needed unless --dry-run")
    p.add_argument("--kick-cmd", metavar="CMD", help="re-runs one job (its label: last argument, CATCHUP_LABEL)")
    p.add_argument("--dry-run", action="store_true", help="print the candidates; no probe, no kick")
    p.add_argument("--at", metavar="TIME", help="judge as of TIME instead of now")
    p.add_argument("--timeout", type=float, default=KICK_TIMEOUT_S, metavar="SECONDS", help="re-run timeout (2700)")
    p.add_argument("--kill-grace", type=float, default=KILL_GRACE_S, metavar="SECONDS",
                   help="SIGTERM to SIGKILL (30)")
    p.add_argument("--probe-timeout", type=float, default=PROBE_TIMEOUT_S, metavar="SECONDS",
                   help="probe timeout (300)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run_catchup)

    imp = sub.add_parser("import", help="import launchd jobs or quota-guard markers into a log",
                         description="\n\n".join(parts[3:4]), formatter_class=argparse.RawDescriptionHelpFormatter)
    isub = imp.add_subparsers(dest="source", required=True, metavar="SOURCE")
    ld = isub.add_parser("launchd", help="job_registered from the *.plist files of DIR")
    ld.add_argument("directory", metavar="DIR")
    ld.add_argument("--log", required=True, metavar="LOG", help="the log to append to (created if absent)")
    ld.add_argument("--guard-pattern", default=importers.GUARD_PATTERN, metavar="TEXT",
                    help="ProgramArguments holding TEXT make a job guarded (claude-quota-guard)")
    ld.add_argument("--json", action="store_true", help="print one JSON object")
    ld.set_defaults(run=run_import_launchd)
    ql = isub.add_parser("quota-log", help="job_skipped/job_ran from CLAUDE_QUOTA_JOB_* marker lines")
    ql.add_argument("files", nargs="+", metavar="FILE")
    ql.add_argument("--log", required=True, metavar="LOG", help="the log to append to (created if absent)")
    ql.add_argument("--tz", metavar="ZONE", help="zone of the written ts (default: the local zone)")
    ql.add_argument("--json", action="store_true", help="print one JSON object")
    ql.set_defaults(run=run_import_quota_log)


def run_catchup(args: argparse.Namespace) -> int:
    """``eventlog catchup``: see the module's docstring."""
    try:
        at = parse_at(args.at)
        probe_argv = kick_argv = None
        if not args.dry_run:
            if not args.probe_cmd or not args.kick_cmd:
                raise UsageError("--probe-cmd and --kick-cmd are needed (or --dry-run)")
            probe_argv = command(args.probe_cmd, "--probe-cmd")
            kick_argv = command(args.kick_cmd, "--kick-cmd")
        if not log_exists(args.log):
            raise UsageError(f"cannot read {args.log}: no such log file")
    except UsageError as err:
        error(str(err))
        return 2
    except LogUnavailable as err:
        error(str(err))
        return 2
    try:
        with runner_lock(args.log, "catchup", wait=False) as mine:
            if not mine:
                error(f"another catch-up holds {args.log}.catchup.lock: nothing done")
                return 0
            previous = signal.signal(signal.SIGTERM, _interrupt)
            try:
                return _catchup(args, at, probe_argv, kick_argv)
            finally:
                signal.signal(signal.SIGTERM, previous)
    except AppendError as err:
        return append_failed(err)
    except OSError as err:
        error(f"{args.log}: {err.strerror or err}")
        return 2


def _interrupt(signum: int, frame: types.FrameType | None) -> None:
    raise KeyboardInterrupt


def _catchup(
    args: argparse.Namespace,
    at: tuple[datetime, str] | None,
    probe_argv: list[str] | None,
    kick_argv: list[str] | None,
) -> int:
    with open_log(args.log) as log:
        return _catchup_on(log, args, at, probe_argv, kick_argv)


def _catchup_on(
    log: Log,
    args: argparse.Namespace,
    at: tuple[datetime, str] | None,
    probe_argv: list[str] | None,
    kick_argv: list[str] | None,
) -> int:
    when, when_text = at or _now_pair()
    state = state_of(log).catchup
    labels = [c.label for c in state.candidates(when)]
    is_open = state.circuit_open(when)
    report: dict[str, Any] = {
        "as_of": when_text,
        "candidates": labels,
        "circuit": "open" if is_open else "closed",
        "probe": None,
        "runs": [],
        "not_kicked": [],
    }

    def done(status: int, note: str) -> int:
        report["note"] = note
        if args.json:
            print(dumps(report))
        else:
            print(note)
        return status

    if not labels:
        return done(0, "no candidates: no probe, nothing kicked")
    if args.dry_run:
        return done(0, "dry run, no probe: candidates " + " ".join(labels))
    if is_open:
        return done(0, f"circuit open until {state.open_until.isoformat() if state.open_until else '?'}: "
                       "no probe, nothing kicked")
    assert probe_argv is not None and kick_argv is not None
    try:
        probe = run_bounded(probe_argv, env={}, timeout=args.probe_timeout, grace=args.kill_grace)
    except OSError as err:
        report["probe"] = "failed"
        error(f"probe could not start: {err}")
        return done(1, "probe failed: nothing kicked")
    if probe.timed_out or probe.exit != 0:
        report["probe"] = "failed"
        why = f"timed out after {args.probe_timeout:g} s" if probe.timed_out else f"exit {probe.exit}"
        error(f"probe failed ({why}): nothing kicked")
        return done(1, f"probe failed ({why}): nothing kicked")
    report["probe"] = "ok"

    status = 0
    for i, label in enumerate(labels):
        now, _ = at or _now_pair()
        fresh = state_of(log).catchup
        if fresh.circuit_open(now):
            report["not_kicked"].extend(labels[i:])
            error("the circuit opened again: no more re-runs")
            break
        if label not in {c.label for c in fresh.candidates(now)}:
            report["not_kicked"].append(label)
            error(f"{label}: no longer a candidate, not kicked")
            continue
        log.append([{"type": "catchup_kicked", "label": label}])
        try:
            ran = run_bounded([*kick_argv, label], env={"CATCHUP_LABEL": label},
                              timeout=args.timeout, grace=args.kill_grace)
        except OSError as err:
            error(f"{label}: kick command could not start: {err}")
            ran = Ran(127, False)
        finished: dict[str, Any] = {"type": "catchup_finished", "label": label}
        run: dict[str, Any]
        if ran.timed_out:
            finished["outcome"] = "timeout_killed"
            run = {"label": label, "outcome": "timeout_killed", "exit": None}
        else:
            finished.update(outcome="exited", exit=ran.exit)
            run = {"label": label, "outcome": "exited", "exit": ran.exit}
        log.append([finished])
        report["runs"].append(run)
        if ran.timed_out or ran.exit != 0:
            status = 1
        if not args.json:
            print(f"{label}: {run['outcome']}" + (f" (exit {ran.exit})" if not ran.timed_out else ""))
    kicked = len(report["runs"])
    return done(status, f"{kicked} re-run(s) done" if kicked else "nothing kicked")


def _now_pair() -> tuple[datetime, str]:
    now = now_local()
    return now, now.isoformat()


# --- eventlog import -----------------------------------------------------------------------


def run_import_launchd(args: argparse.Namespace) -> int:
    """``eventlog import launchd``: one ``job_registered`` per plist, unless unchanged."""
    if not os.path.isdir(args.directory):
        error(f"{args.directory} is not a directory")
        return 2
    try:
        events, problems = importers.read_launchd(args.directory, args.guard_pattern)
    except OSError as err:
        error(f"cannot read {args.directory}: {err.strerror or err}")
        return 2
    for problem in problems:
        error(problem)
    try:
        with runner_lock(args.log, "import", wait=True):  # two imports at once do not add the same twice
            new = importers.new_registrations(events, known(args.log))
            status = _append(args.log, new)
    except OSError as err:
        error(f"cannot read {args.log}: {err.strerror or err}")
        return 2
    if status:
        return status
    report = {"registered": [ev["label"] for ev in new], "unchanged": len(events) - len(new), "problems": problems}
    if args.json:
        print(dumps(report))
    else:
        print(f"{len(new)} job(s) registered, {report['unchanged']} unchanged"
              + (f", {len(problems)} plist(s) not read" if problems else ""))
    return 1 if problems else 0


def run_import_quota_log(args: argparse.Namespace) -> int:
    """``eventlog import quota-log``: the guard's markers, unless already in the log."""
    try:
        tz = zone(args.tz)
    except UsageError as err:
        error(str(err))
        return 2
    events: list[dict[str, Any]] = []
    problems: list[str] = []
    for path in args.files:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                found, bad = importers.read_markers(f, tz)
        except OSError as err:
            problems.append(f"cannot read {path}: {err.strerror or err}")
            continue
        events.extend(found)
        problems.extend(f"{path}: {p}" for p in bad)
    for problem in problems:
        error(problem)
    try:
        with runner_lock(args.log, "import", wait=True):
            plan = importers.new_markers(events, known(args.log))
            status = _append(args.log, plan.new)
    except OSError as err:
        error(f"cannot read {args.log}: {err.strerror or err}")
        return 2
    if status:
        return status
    report = {"imported": len(plan.new), "already": plan.already, "older": plan.older, "problems": problems}
    if args.json:
        print(dumps(report))
    else:
        print(f"{len(plan.new)} marker(s) imported, {plan.already} already in the log, "
              f"{plan.older} older than their job's latest marker in the log"
              + (f", {len(problems)} problem(s)" if problems else ""))
    return 1 if problems else 0


def known(target: str) -> importers.Known:
    """What the log (a file or a stream; absent: nothing) already holds, for an import."""
    if not is_url(target):
        return importers.known(target)
    with open_log(target) as log:
        if not log.exists():
            return importers.Known()
        return importers.known_lines(log.lines())


def log_exists(target: str) -> bool:
    """Whether the log a LOG argument names is there (raises LogUnavailable when that cannot be told)."""
    with open_log(target) as log:
        return log.exists()


def _append(path: str, events: list[dict[str, Any]]) -> int:
    if not events:
        return 0
    try:
        with open_log(path) as log:
            log.append(events)
    except AppendError as err:
        return append_failed(err)
    return 0


__all__ = ["known", "log_exists", "now_local", "register", "state_of"]
