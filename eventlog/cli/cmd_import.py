"""``eventlog import``: what users already have into a log (seeds 000, 002, 004).

A thin shell over ``eventlog.runners.imports``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import tzinfo
from typing import Any

from eventlog import importers
from eventlog.cli.common import (
    Deprecated,
    UsageError,
    add_log,
    command_parser,
    error,
    run_appending,
    zone,
)
from eventlog.runners import imports
from eventlog.runners.common import unfinished_words
from projections.ahead import TOLERANCE_S
from projections.triage import duration_words

DESCRIPTION = """\
Append what users already have to LOG (created when absent); importing the same
input again adds nothing. The line readers (quota-log, worker-log, ledger) read a
line once it is ended: a last line without its newline may be half written (a cut
ts=1796100000 is a time in 1970), so when it may still become a record (it holds
a marker's name or ends with its start, or opens a JSON object or list) it is
counted in unfinished (FILE:LINE), not read, and read once it ends (a JSON line
ends with its value); left so for a minute, it is named on stderr too. Any other
last line (a job's "Downloading... 100%") is no record, and is read as it is.
Two at once on one LOG take turns (LOG.import.lock); one that waits for it over
a second says so on stderr, once: the lock file, and the pid and command that
hold it (it goes on when that one ends).

  eventlog import launchd LOG DIR          job_registered from DIR's *.plist files
  eventlog import quota-log LOG FILE...    job_skipped/job_ran from CLAUDE_QUOTA_JOB_* markers
  eventlog import worker-log LOG FILE...   interrupt_stage, control_result, storage_unavailable
                                           from a session worker's JSON log lines
  eventlog import ledger LOG FILE...       limit_recorded from the account limit ledger
  eventlog import handoff-files LOG DIR    handoffs and their .resumed/.skip markers from the
                                           old watcher's files
  eventlog import circuit LOG FILE         circuit_opened/circuit_closed from the quota guard's
                                           circuit state file"""

EXITS = """\
0  done (a DIR with nothing to import at all, a FILE with no line or no record of
   its kind (quota-log, worker-log, ledger: how many lines were read), a guarded
   job LOG registers whose plist is gone (with the line that retires it), a circuit
   FILE not written yet, and each input left because LOG knows better
   ("left: ...") are said on stderr; a last line being written is counted in
   unfinished, and read once it ends)
1  some input could not be read or turned into an event, or (quota-log, ledger) is
   dated more than {ahead} ahead of now (the rest is imported, each named on stderr;
   for handoff-files, also an ID.json that says other than LOG, or a .resumed of
   another time than the one LOG applied to a handoff requeued since), a FILE's last line,
   the start of a record, has had no newline for a minute (not read), lines of LOG are bad (how many and the
   first three named on stderr, counted in bad_lines; the rest is imported), or LOG
   could not be written, nor its lock file LOG.import.lock created or opened beside it
   (named, and why; a symbolic link there is never followed: nothing was done)
2  bad usage, or LOG cannot be read (a directory included)
3  a conflict (an event the log refuses)""".replace("{ahead}", duration_words(TOLERANCE_S))

#: How quota-log and ledger treat a record dated ahead of now (their help texts).
AHEAD = """\
A record more than {ahead} ahead of now (2062 typed for 2026, a clock ahead) is not
appended and is named on stderr (counted in dated_ahead); one LOG holds is never
the latest a new record is compared with, so it keeps no record with a true time
out.""".replace("{ahead}", duration_words(TOLERANCE_S))


class _OldLog(argparse.Action):
    """``--log LOG`` of the old grammar: refused with the new one."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        parser.error(f"LOG is now the first argument: {parser.prog} LOG ... (not --log LOG)")


def register(sub: Any) -> None:
    """Add ``import launchd``, ``quota-log``, ``worker-log``, ``ledger``, ``handoff-files`` and ``circuit``."""
    imp = command_parser(sub, "import", help="import what users already have (jobs, markers, ledgers) into a log",
                         description=DESCRIPTION, exits=EXITS)
    isub = imp.add_subparsers(dest="source", required=True, metavar="SOURCE")
    ld = command_parser(isub, "launchd", help="job_registered from the *.plist files of DIR", exits=EXITS,
                        description="One job_registered per *.plist of DIR, unless the label's current\n"
                        "registration in LOG is the same: guarded when an item of ProgramArguments\n"
                        "holds --guard-pattern (claude-quota-guard, the seed's is_guarded), calendar from\n"
                        "StartCalendarInterval, interval_s from StartInterval. The ledger's own plists\n"
                        "(Label org.recovery-ledger.*) are skipped (\"ours\"): never registered; one LOG\n"
                        "registers as guarded is named with the line that retires it (exit 1).\n"
                        "Named on stderr and not registered (exit 1): a schedule value int() cannot read\n"
                        "(\"Hour\": \"nine\"), an entry that is no dictionary, and a Label several plists\n"
                        "hold (none of them: launchd loads one). A guarded job LOG registers that no\n"
                        "plist holds any more is said (\"gone\", exit 0; nothing is written), with the\n"
                        "command that retires it: its job_registered with guarded false, appended, so\n"
                        "catch-up no longer judges it (its plist imported again registers it anew).")
    add_log(ld, "the log to append to (created if absent)")
    ld.add_argument("directory", metavar="DIR", help="e.g. ~/Library/LaunchAgents")
    ld.add_argument("--guard-pattern", default=importers.GUARD_PATTERN, metavar="TEXT",
                    help="a word of ProgramArguments whose file name holds TEXT makes a job guarded "
                    "(claude-quota-guard)")
    ld.add_argument("--log", dest="old_log", action=_OldLog, help=argparse.SUPPRESS)
    ld.add_argument("--json", action="store_true", help="print one JSON object")
    ld.set_defaults(run=run_import_launchd)

    ql = command_parser(isub, "quota-log", help="job_skipped/job_ran from CLAUDE_QUOTA_JOB_* marker lines",
                        exits=EXITS,
                        description="job_skipped/job_ran from the CLAUDE_QUOTA_JOB_SKIPPED and\n"
                        "CLAUDE_QUOTA_JOB_RAN lines of FILEs, in time order; a marker already in LOG\n"
                        "(the same instant) is not appended, nor one older than its job's latest marker\n"
                        "in LOG (counted in older, named on stderr: left FILE:LINE).\n"
                        "A marker that cannot become an event (a time out of range, a byte that is not\n"
                        "UTF-8, a line too long to write) is named FILE:LINE on stderr; the rest is imported.\n"
                        "A FILE with no line, or no marker, is said on stderr (and in --json's notes) with how\n"
                        "many lines were read; it is no error (exit 0).\n"
                        + AHEAD)
    add_log(ql, "the log to append to (created if absent)")
    ql.add_argument("files", nargs="+", metavar="FILE")
    ql.add_argument("--assume-tz", metavar="ZONE", help="zone of the written ts (default: the local zone)")
    ql.add_argument("--tz", dest="assume_tz", action=Deprecated, new="--assume-tz")
    ql.add_argument("--log", dest="old_log", action=_OldLog, help=argparse.SUPPRESS)
    ql.add_argument("--json", action="store_true", help="print one JSON object")
    ql.set_defaults(run=run_import_quota_log)

    wl = _source(isub, "worker-log", "the interrupt timeline and storage warnings of worker logs", WORKER_LOG,
                 "zone of times written without an offset, and of epoch times (default: local)", run_import_worker_log)
    wl.add_argument("files", nargs="+", metavar="FILE")
    lg = _source(isub, "ledger", "limit_recorded from the account limit ledger (seed 000)", LEDGER,
                 "zone of times written without an offset", run_import_ledger)
    lg.add_argument("files", nargs="+", metavar="FILE")
    hf = _source(isub, "handoff-files", "handoffs and .resumed/.skip markers of the old watcher's files",
                 HANDOFF_FILES, "zone of times written without an offset, and of the markers' mtimes",
                 run_import_handoff_files)
    hf.add_argument("directory", metavar="DIR", help="the directory of the old watcher's handoff files")
    hf.add_argument("--account", metavar="NAME", help="the account of handoff files that name none")
    hf.add_argument("--apply-resumed", action="append", default=[], metavar="ID",
                    help="apply ID.resumed although its time is not the one LOG applied: the old watcher did start "
                    "the cloud session again (ID goes to a person); repeatable")
    ci = _source(isub, "circuit", "circuit_opened/circuit_closed from the quota guard's state file", CIRCUIT,
                 "zone of epochs, of times written without an offset, and of the file's mtime", run_import_circuit)
    ci.add_argument("file", metavar="FILE", help="the guard's circuit state (JSON)")


def _source(isub: Any, name: str, help: str, description: str, tz_help: str,
            run: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
    """One ``import SOURCE LOG ...``: LOG, ``--assume-tz``, ``--json``; the caller adds the inputs after LOG."""
    p = command_parser(isub, name, help=help, exits=EXITS, description=description)
    add_log(p, "the log to append to (created if absent)")
    p.add_argument("--assume-tz", metavar="ZONE", help=tz_help)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)
    return p

LEDGER = """\
The account limit ledger the failover handler writes (seed 000): one JSON object,
a list of them, or one a line, each
  {"account", "limitedAt", "resetAt" (or null), "source", "confidence"}
(snake_case keys too). Each becomes a limit_recorded at its limitedAt, in time
order. An entry the log holds already is not appended again, nor one older than
its account's latest limit in the log (named on stderr: left FILE:LINE); an entry
that cannot be read or become an event (a line that is not JSON, not UTF-8 or
nested deeper than 64 levels; one too long to write) is named on stderr (FILE:LINE,
or FILE: entry N) and the rest imported. A FILE with no entry (empty, blank lines,
[]) is said on stderr (and in --json's notes) with how many lines were read; it is
no error. A limit's time is its limitedAt.
""" + AHEAD

HANDOFF_FILES = """\
The old watcher's files in DIR, per handoff ID (seed 000):
  ID.json      handoff_created (handoffId, account, createdAt or the mtime, deadline,
               importance, repo, branch, head), and local_started when it says the
               local session started (localStartedAt, or localStarted: true; a
               localStarted that is not true or false is named), or
               local_start_failed with its localStartError
  ID.resumed   needs_human, reason legacy_resumed_unverified: the marker was placed
               before the cloud session started, so it proves nothing came back
  ID.skip      skip, its first line the reason (legacy .skip marker when empty)
A marker applies only to a handoff pending (or, for .skip, needs_human) in the log;
one the log moved on is left and said. A .resumed whose needs_human the log holds
(same handoff, dated with its mtime) is applied already, even after a person
requeued the handoff: importing again adds nothing. Once LOG applied a .resumed
of a handoff a person requeued since, a .resumed of another time is not applied
(a copy without -p, a touch, a restore change the time of the same marker): it is
named (changed, exit 1) with both times, and stderr says what to type: --apply-resumed
ID when the old watcher did start the cloud session again, else touch -d back to
the time LOG applied. A second ID.json of one
handoffId (h01 (copy).json) is named and left out with its markers: the file named
after the id is kept, else the first by name. A field of an ID.json the log holds
already that says otherwise (account, deadline, importance, repo, branch, head,
createdAt) is named with both values (exit 1): the log keeps its own, as no event
changes a handoff once created."""

CIRCUIT = """\
The quota guard's circuit state file: one JSON object with open_until (an epoch in
seconds or ISO 8601; null or absent: closed), reason, and optionally state
(open/closed), opened_at, closed_at. Open: circuit_opened (at opened_at, else the
file's mtime) unless the log's latest circuit event is that same opening. Closed:
circuit_closed (at closed_at, else the mtime) when the log's latest circuit event is
an opening. Otherwise nothing: importing again adds nothing. A FILE that does not
exist is said on stderr and imports nothing (exit 0) while LOG holds no circuit
event: the guard need not write it before its circuit first opens; once LOG holds
one, it is a problem (exit 1: moved, or the wrong path). --json's state is what
FILE said (open, closed; null: not read)."""


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
a line of these four that cannot become an event (a byte that is not UTF-8 and
a line too long to write included), or that the timeline refuses (a second
result of a control ...), and a line nested deeper than 64 levels, are named
FILE:LINE on stderr. A FILE with no line, or none of the four messages, is said
on stderr (and in --json's notes) with how many lines were read, of other messages
and not JSON; it is no error (exit 0). What LOG already holds is not appended
again, so importing the same files twice adds nothing."""


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


def run_import_ledger(args: argparse.Namespace) -> int:
    """``eventlog import ledger``: the account limit ledger, unless already in the log."""
    return _run_files(args, imports.import_ledger, imports.LedgerImport)


def run_import_handoff_files(args: argparse.Namespace) -> int:
    """``eventlog import handoff-files``: the old watcher's handoffs and markers, unless already in the log."""
    return _run_zoned(args, lambda tz: imports.import_handoff_files(
        imports.HandoffFilesImport(log=args.log, directory=args.directory, account=args.account, assume_tz=tz,
                                   apply_resumed=args.apply_resumed)))


def run_import_circuit(args: argparse.Namespace) -> int:
    """``eventlog import circuit``: the guard's circuit state, unless the log says the same."""
    return _run_zoned(args, lambda tz: imports.import_circuit(
        imports.CircuitImport(log=args.log, file=args.file, assume_tz=tz)))


def _run_files(args: argparse.Namespace, do: Callable[[Any], Any], options: type[imports.FilesImport]) -> int:
    """An import of FILEs into LOG, read in ``--assume-tz``."""
    return _run_zoned(args, lambda tz: do(options(log=args.log, files=args.files, assume_tz=tz)))


def _run_zoned(args: argparse.Namespace, do: Callable[[tzinfo | None], Any]) -> int:
    """An import given the zone of ``--assume-tz``."""
    try:
        tz = zone(args.assume_tz)
    except UsageError as err:
        error(str(err))
        return 2
    return _run(args, lambda: do(tz))


def _run(args: argparse.Namespace, do: Any) -> int:
    return run_appending(args, do, _lines)


def _lines(done: Any) -> tuple[list[str], list[str]]:
    """An import report's line for people, and its notes."""
    if isinstance(done, imports.ImportReport):
        changed = [*done.changed, *done.changed_markers] if isinstance(done, imports.HandoffFilesReport) else []
        return [done.summary()], [*(f"left: {x}" for x in done.left), *(f"changed: {x}" for x in changed),
                                  *done.notes]
    if isinstance(done, imports.LaunchdReport):
        return [f"{len(done.registered)} job(s) registered, {done.unchanged} unchanged"
                + (f", {len(done.ours)} skipped (ours: {', '.join(done.ours)})" if done.ours else "")
                + (f", {len(done.gone)} guarded job(s) with no plist" if done.gone else "")
                + (f", {len(done.problems)} problem(s)" if done.problems else "")], done.notes
    left = f", {unfinished_words(done.unfinished)}" if done.unfinished else ""
    if isinstance(done, imports.WorkerLogReport):
        return [f"{done.imported} event(s) imported, {done.already} already in the log, "
                f"{len(done.skipped)} line(s) skipped, {done.other} line(s) of other messages, "
                f"{done.not_json} line(s) not JSON"
                + (f" (first: {', '.join(done.not_json_first)})" if done.not_json_first else "") + left], [
            *(f"skipped {s}" for s in done.skipped), *done.notes]
    return [f"{done.imported} marker(s) imported, {done.already} already in the log, "
            f"{done.older} older than their job's latest marker in the log"
            + (f", {done.dated_ahead} dated ahead of now" if done.dated_ahead else "")
            + (f", {len(done.problems)} problem(s)" if done.problems else "") + left], [
        *(f"left: {x}" for x in done.left), *done.notes]
