"""``eventlog import``: launchd jobs and the quota guard's markers into a log (seed 002).

A thin shell over ``eventlog.runners.imports``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from eventlog import importers
from eventlog.appender import AppendError
from eventlog.cli.common import (
    Deprecated,
    UsageError,
    add_log,
    append_failed,
    command_parser,
    error,
    report,
    zone,
)
from eventlog.runners import imports

DESCRIPTION = """\
Append what users already have to LOG (created when absent); importing the same
input again adds nothing.

  eventlog import launchd LOG DIR          job_registered from DIR's *.plist files
  eventlog import quota-log LOG FILE...    job_skipped/job_ran from CLAUDE_QUOTA_JOB_* markers
  eventlog import worker-log LOG FILE...   interrupt_stage, control_result, storage_unavailable
                                           from a session worker's JSON log lines"""

EXITS = """\
0  done
1  some input could not be read or turned into an event (the rest is imported, each
   named on stderr), or LOG could not be written
2  bad usage, or LOG cannot be read
3  a conflict (an event the log refuses)"""


class _OldLog(argparse.Action):
    """``--log LOG`` of the old grammar: refused with the new one."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        parser.error(f"LOG is now the first argument: {parser.prog} LOG ... (not --log LOG)")


def register(sub: Any) -> None:
    """Add ``import launchd`` and ``import quota-log``."""
    imp = command_parser(sub, "import", help="import launchd jobs or quota-guard markers into a log",
                         description=DESCRIPTION, exits=EXITS)
    isub = imp.add_subparsers(dest="source", required=True, metavar="SOURCE")
    ld = command_parser(isub, "launchd", help="job_registered from the *.plist files of DIR", exits=EXITS,
                        description="One job_registered per *.plist of DIR, unless the label's current\n"
                        "registration in LOG is the same: guarded when ProgramArguments holds the\n"
                        "guard's name, calendar from StartCalendarInterval, interval_s from StartInterval.")
    add_log(ld, "the log to append to (created if absent)")
    ld.add_argument("directory", metavar="DIR", help="e.g. ~/Library/LaunchAgents")
    ld.add_argument("--guard-pattern", default=importers.GUARD_PATTERN, metavar="TEXT",
                    help="ProgramArguments holding TEXT make a job guarded (claude-quota-guard)")
    ld.add_argument("--log", dest="old_log", action=_OldLog, help=argparse.SUPPRESS)
    ld.add_argument("--json", action="store_true", help="print one JSON object")
    ld.set_defaults(run=run_import_launchd)

    ql = command_parser(isub, "quota-log", help="job_skipped/job_ran from CLAUDE_QUOTA_JOB_* marker lines",
                        exits=EXITS,
                        description="job_skipped/job_ran from the CLAUDE_QUOTA_JOB_SKIPPED and\n"
                        "CLAUDE_QUOTA_JOB_RAN lines of FILEs, in time order; a marker already in LOG\n"
                        "(the same instant), or older than its job's latest marker in LOG, is not appended.")
    add_log(ql, "the log to append to (created if absent)")
    ql.add_argument("files", nargs="+", metavar="FILE")
    ql.add_argument("--assume-tz", metavar="ZONE", help="zone of the written ts (default: the local zone)")
    ql.add_argument("--tz", dest="assume_tz", action=Deprecated, new="--assume-tz")
    ql.add_argument("--log", dest="old_log", action=_OldLog, help=argparse.SUPPRESS)
    ql.add_argument("--json", action="store_true", help="print one JSON object")
    ql.set_defaults(run=run_import_quota_log)

    wl = command_parser(isub, "worker-log", help="the interrupt timeline and storage warnings of worker logs",
                        exits=EXITS, description=WORKER_LOG)
    add_log(wl, "the log to append to (created if absent)")
    wl.add_argument("files", nargs="+", metavar="FILE")
    wl.add_argument("--assume-tz", metavar="ZONE",
                    help="zone of times written without an offset, and of epoch times (default: local)")
    wl.add_argument("--json", action="store_true", help="print one JSON object")
    wl.set_defaults(run=run_import_worker_log)


WORKER_LOG = """\
One JSON object a line (FILEs in the order given, lines in file order). The
message is the first of msg, message, event, name, type naming one of:
  worker.turn.interrupt.stage              -> interrupt_stage
  control.result                           -> control_result
  worker.checkpoint.restore_unavailable    -> storage_unavailable
  worker.checkpoint.store_unavailable      -> storage_unavailable
Fields are read at the top level or under fields/attrs/data/context, in
snake_case or camelCase (session_id, turn_id, control_id, stage, elapsed_ms,
outcome, reason_code or code or reason, budget_ms, operation, effect_ms or
duration_ms, generation, cause or an HTTP status or error words). The time is
ts, time, timestamp or @timestamp: ISO 8601, or epoch seconds (milliseconds
above 1e11). Lines of other messages and lines that are not JSON are counted;
a line of these four that cannot become an event, or that the timeline refuses
(a second result of a control ...), is named on stderr. What LOG already holds
is not appended again, so importing the same files twice adds nothing."""


def run_import_launchd(args: argparse.Namespace) -> int:
    """``eventlog import launchd``: one ``job_registered`` per plist, unless unchanged."""
    return _run(args, lambda: imports.import_launchd(
        imports.LaunchdImport(log=args.log, directory=args.directory, guard_pattern=args.guard_pattern)))


def run_import_quota_log(args: argparse.Namespace) -> int:
    """``eventlog import quota-log``: the guard's markers, unless already in the log."""
    return _run_files(args, imports.import_quota_log, imports.QuotaLogImport)


def run_import_worker_log(args: argparse.Namespace) -> int:
    """``eventlog import worker-log``: the four messages of seed 004, unless already in the log."""
    return _run_files(args, imports.import_worker_log, imports.WorkerLogImport)


def _run_files(args: argparse.Namespace, do: Callable[[Any], Any], options: type[imports.FilesImport]) -> int:
    """An import of FILEs into LOG, read in ``--assume-tz``."""
    try:
        tz = zone(args.assume_tz)
    except UsageError as err:
        error(str(err))
        return 2
    return _run(args, lambda: do(options(log=args.log, files=args.files, assume_tz=tz)))


def _run(args: argparse.Namespace, do: Any) -> int:
    try:
        done = do()
    except ValueError as err:
        error(str(err))
        return 2
    except AppendError as err:
        return append_failed(err)
    except OSError as err:
        error(f"cannot read {args.log}: {err.strerror or err}")
        return 2
    if isinstance(done, imports.LaunchdReport):
        line = (f"{len(done.registered)} job(s) registered, {done.unchanged} unchanged"
                + (f", {len(done.problems)} plist(s) not read" if done.problems else ""))
    elif isinstance(done, imports.WorkerLogReport):
        line = (f"{done.imported} event(s) imported, {done.already} already in the log, "
                f"{len(done.skipped)} line(s) skipped, {done.other} line(s) of other messages, "
                f"{done.not_json} line(s) not JSON"
                + (f" (first: {', '.join(done.not_json_first)})" if done.not_json_first else ""))
        return report(done, args.json, [line], notes=[f"skipped {s}" for s in done.skipped])
    else:
        line = (f"{done.imported} marker(s) imported, {done.already} already in the log, "
                f"{done.older} older than their job's latest marker in the log"
                + (f", {len(done.problems)} problem(s)" if done.problems else ""))
    return report(done, args.json, [line])
