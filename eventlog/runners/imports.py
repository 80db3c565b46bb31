"""Importing what users already have into a log: launchd jobs, the quota guard's markers and circuit state
(seed 002), the account limit ledger and the legacy handoff files (seed 000), and the interrupt timeline
and storage warnings of worker logs (seed 004).

The parsers are in ``eventlog.importers``; these functions read the inputs,
keep only what the log does not hold yet (so importing the same input again
adds nothing), and append it, under ``LOG.import.lock`` (two imports at once
do not add the same twice). The log is created when absent.

Every report has ``problems`` (inputs that could not be read; the rest is
imported) and ``status``: 1 when there is any, else 0. The line readers
(``quota-log``, ``worker-log``, ``ledger``) read only the lines their writer
has ended (:class:`eventlog.importers.EndedLines`): a last line without its
newline that may still become a record (the start of a marker, of a JSON object)
is counted in ``unfinished`` (``FILE:LINE``) and read once it ends; a problem
too when its file has not changed for a minute. One that can never become a
record is no record, and is not held. Each also counts the
log's own bad lines in ``bad_lines`` and says them among its problems: what
such a line held cannot be skipped, so a person is told (the rest is imported). They raise RunnerError
for bad usage, OSError when the log cannot be read, and AppendError when
nothing could be written.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import msgspec

from eventlog import handoff_importers, importers, worker_log
from eventlog.clock import now
from eventlog.events import (
    ENVELOPE_FIELDS,
    CircuitClosed,
    CircuitOpened,
    ControlResult,
    Event,
    InterruptStage,
    StorageUnavailable,
)
from eventlog.fold import FoldResult, Rejected
from eventlog.logs import open_log
from eventlog.reader import validate_object
from eventlog.runners.common import (
    BadLines,
    RunnerError,
    count_unfinished,
    log_events,
    name_bad_lines,
    not_a_directory,
    runner_lock,
    unfinished_words,
)
from projections.controls import Control, fold_result, fold_stage
from projections.handoffs import OPEN
from projections.triage import command, handoff_cmd, opt, retire_job_cmd


@dataclass(kw_only=True)
class LaunchdImport:
    """``import launchd``: the ``*.plist`` files of ``directory`` into ``log``."""

    log: str
    directory: str
    guard_pattern: str = importers.GUARD_PATTERN


class LaunchdReport(msgspec.Struct, kw_only=True):
    """Labels registered (new or changed), how many were unchanged, the ledger's own plists skipped (``ours``),
    plists that could not be read or settled, and the guarded labels the log registers that no plist holds
    (``gone``).

    ``notes``: what a person should know besides (a directory with no plist at all, each label gone), said on
    stderr.
    """

    registered: list[str]
    unchanged: int
    problems: list[str]
    notes: list[str] = msgspec.field(default_factory=list)
    #: Labels the log registers as guarded that no plist of the directory holds (sorted); said in ``notes``, each
    #: with the line that retires it.
    gone: list[str] = msgspec.field(default_factory=list)
    #: The log's bad lines (said in ``problems`` too).
    bad_lines: BadLines = msgspec.field(default_factory=BadLines)
    #: The Labels of the ledger's own plists in the directory (``org.recovery-ledger.*``: follow, serve, catch-up
    #: itself ...), in file order: skipped, never registered as jobs.
    ours: list[str] = msgspec.field(default_factory=list)

    @property
    def status(self) -> int:
        """1 when a plist could not be read or registered, the log registers one of the ledger's own labels as
        guarded, or the log has bad lines, else 0 (a label gone too)."""
        return 1 if self.problems else 0


def import_launchd(opts: LaunchdImport) -> LaunchdReport:
    """One ``job_registered`` per label one plist holds, unless the label's current registration is the same.

    A label several plists hold is a problem and none of them is registered; a label the log registers as
    guarded that no plist holds is named (``gone``) with the line that retires it (:func:`projections.triage.
    retire_job_cmd`) for a person to append: nothing is written for it, since a directory named by mistake would
    retire every job. The ledger's own plists are skipped (``ours``); one the log registers as guarded (an
    import that did not skip them) is a problem, with the line that retires it.
    """
    not_a_directory(opts.log)
    plists, problems, notes = _read_dir(opts.directory, "*.plist file",
                                        lambda d: importers.read_launchd(d, opts.guard_pattern))
    events, unsettled = importers.registrations(plists)
    bad: list[dict[str, Any]] = []
    with runner_lock(opts.log, "import", wait=True):
        log = importers.known(log_events(opts.log, bad=bad))
        gone = importers.gone(plists, log)
        ours = importers.ours_guarded(log)
        new = importers.new_registrations(events, log)
        _append(opts.log, new)
    problems += [f"{label}: registered in {opts.log} as guarded, but it is one of the ledger's own plists (Label "
                 f"{importers.OURS}*), never a job catch-up re-runs (an earlier import took the guard's state file "
                 "in its arguments for the guard); it keeps the log from ever saying it holds no guarded job. "
                 "Retire it (imports skip the ledger's plists now, so it stays retired): "
                 + retire_job_cmd(opts.log, log.jobs[label]) for label in ours]
    notes += [f"{label}: registered in {opts.log} as guarded, but no plist in {opts.directory} holds this Label "
              "(its plist removed?). Catch-up still judges it by that registration: once its markers stop coming, "
              "every catch-up pass names it, 2 h after its calendar slot, as a job nothing feeds and fails. Put the "
              "plist back if the job should run; if it is retired, record that (its registration with guarded "
              "false, its calendar kept; importing its plist again registers it anew): "
              + retire_job_cmd(opts.log, log.jobs[label]) for label in gone]
    report = LaunchdReport(registered=[ev["label"] for ev in new], unchanged=len(events) - len(new),
                           problems=problems + unsettled, notes=notes, gone=gone,
                           ours=[p.label for p in plists if p.ours])
    name_bad_lines(report, opts.log, bad)
    return report


T = TypeVar("T")


def _read_dir(directory: str, holds: str, read: Callable[[str], tuple[list[T], list[str]]]
              ) -> tuple[list[T], list[str], list[str]]:
    """``read(directory)``: what it found and the files it could not read, and a note when it found no input file
    at all (``holds`` names them); RunnerError when ``directory`` is none or cannot be listed.

    A directory with nothing to import is no error (importing it again and again is harmless), but a
    person who gave the wrong one should notice: the note says so on stderr.
    """
    if not os.path.isdir(directory):
        raise RunnerError(f"{directory} is not a directory")
    try:
        found, problems = read(directory)
    except OSError as err:
        raise RunnerError(f"cannot read {directory}: {err.strerror or err}") from err
    notes = [] if found or problems else [f"{directory} holds no {holds}: nothing to import (is it the right "
                                          "directory?)"]
    return found, problems, notes


@dataclass(kw_only=True)
class FilesImport:
    """An import of the lines of ``files`` into ``log``, with the zone of times written without one."""

    log: str
    files: list[str]
    #: The zone epoch times (and times without an offset) are read and written in (None: the local zone).
    assume_tz: tzinfo | None = None


@dataclass(kw_only=True)
class QuotaLogImport(FilesImport):
    """``import quota-log``: the guard's ``CLAUDE_QUOTA_JOB_*`` markers in ``files`` into ``log``."""

    #: Files a glob matched (a catch-up's ``--import-quota-log``): one with no marker is not said, as such a glob
    #: matches the stderr of every job, unguarded ones too (catch-up names a guarded job whose markers do not come).
    globbed: frozenset[str] = frozenset()


class QuotaLogReport(msgspec.Struct, kw_only=True):
    """Markers imported, already in the log, older than their job's latest (each named in ``left``), dated ahead of
    now (``dated_ahead``, each named in ``problems``); last lines not ended yet; inputs that could not be read or
    used."""

    imported: int = 0
    already: int = 0
    older: int = 0
    problems: list[str] = msgspec.field(default_factory=list)
    #: The last lines not ended yet (``FILE:LINE``): not read, read once they end.
    unfinished: list[str] = msgspec.field(default_factory=list)
    #: The log's bad lines (said in ``problems`` too).
    bad_lines: BadLines = msgspec.field(default_factory=BadLines)
    #: The markers older than their job's latest in the log, each named (``FILE:LINE: why``; said on stderr).
    left: list[str] = msgspec.field(default_factory=list)
    #: How many markers were dated ahead of now (not appended; each named in ``problems``).
    dated_ahead: int = 0
    #: What a person should know besides (a FILE with no line, or no marker: :func:`no_record`), said on stderr.
    notes: list[str] = msgspec.field(default_factory=list)

    @property
    def status(self) -> int:
        """1 when an input could not be read or used (a marker dated ahead of now included), or the log has bad
        lines, else 0 (a FILE with no marker too)."""
        return 1 if self.problems else 0


def import_quota_log(opts: QuotaLogImport) -> QuotaLogReport:
    """The markers not in the log yet, not older than their job's latest not dated ahead, and not dated ahead of now
    themselves, in time order (``eventlog.importers.new_markers``). A FILE with no line, or no marker, is said in
    ``notes`` (:func:`no_record`)."""
    not_a_directory(opts.log)
    events: list[tuple[str, dict[str, Any]]] = []
    report = QuotaLogReport()
    for path in opts.files:
        try:
            with importers.open_text(path) as f:
                lines = importers.EndedLines(f, importers.MARKER_TAIL)
                found, unread = importers.read_markers(lines, path, opts.assume_tz)
                count_unfinished(report, path, f, lines.unfinished)
        except OSError as err:
            report.problems.append(f"cannot read {path}: {err.strerror or err}")
            continue
        if not found and not unread and lines.unfinished is None and path not in opts.globbed:
            report.notes.append(no_record(path, lines.read, "CLAUDE_QUOTA_JOB_SKIPPED or CLAUDE_QUOTA_JOB_RAN marker"))
        events.extend(found)
        report.problems.extend(unread)
    bad: list[dict[str, Any]] = []
    with runner_lock(opts.log, "import", wait=True):
        at = now()
        plan = importers.new_markers(events, importers.known(log_events(opts.log, bad=bad), at), at)
        _append(opts.log, plan.new)
    report.imported, report.already, report.older = len(plan.new), plan.already, plan.older
    report.left, report.dated_ahead = plan.left, len(plan.ahead)
    report.problems += plan.ahead
    name_bad_lines(report, opts.log, bad)
    return report


def no_record(path: str, lines: int, kind: str, detail: str = "") -> str:
    """What an input FILE that gave no record of ``kind`` says: that it holds no line at all, or how many lines were
    read (``lines``, ``detail``: what they were) and that none is such a record. A note, no error (nothing failed:
    a job that has not run yet writes no marker), but a person who named the wrong file (a rotated or truncated
    one) sees it."""
    if not lines:
        return f"{path}: empty (no line): no {kind} to import from it (is it the right file, not a rotated or " \
               "truncated one?)"
    return f"{path}: {lines} line(s) read, no {kind} among them{detail}: nothing to import from it (is it the " \
           "right file?)"


def _append(target: str, events: list[dict[str, Any]]) -> None:
    if events:
        with open_log(target) as log:
            log.append(events)


class WorkerLogImport(FilesImport):
    """``import worker-log``: the interrupt timeline and storage warnings of worker logs ``files`` into ``log``.

    Without ``assume_tz`` a time written without an offset is skipped, and an epoch time is written in the local zone.
    """


class WorkerLogReport(msgspec.Struct, kw_only=True):
    """What an import of worker logs did.

    ``imported``: events appended; ``already``: events the log (or an earlier line
    of this import) already holds; ``skipped``: lines of the four messages that
    could not become an event (one that is not UTF-8, one the appender would
    refuse), or that the timeline's rules refuse, and lines nested too deep to
    read at all, each named;
    ``other``: JSON lines of other messages; ``not_json``: lines that are no JSON
    object (counted, the first three named in ``not_json_first``); ``problems``:
    inputs that could not be read, and the log's bad lines (counted in ``bad_lines``);
    ``unfinished``: last lines not ended yet (``FILE:LINE``: a newline, or the end of
    their JSON value, to come), read once they end.
    """

    imported: int = 0
    already: int = 0
    skipped: list[str] = msgspec.field(default_factory=list)
    other: int = 0
    not_json: int = 0
    not_json_first: list[str] = msgspec.field(default_factory=list)
    problems: list[str] = msgspec.field(default_factory=list)
    bad_lines: BadLines = msgspec.field(default_factory=BadLines)
    unfinished: list[str] = msgspec.field(default_factory=list)
    #: What a person should know besides (a FILE with no line, or no line of the four messages: :func:`no_record`),
    #: said on stderr.
    notes: list[str] = msgspec.field(default_factory=list)

    @property
    def status(self) -> int:
        """1 when an input could not be read, a line of the four messages was skipped, or the log has bad lines (a
        FILE with none of the four messages is 0)."""
        return 1 if self.problems or self.skipped else 0


def import_worker_log(opts: WorkerLogImport) -> WorkerLogReport:
    """Append the events of the worker logs that the log does not hold yet, in the order of the files and lines.

    An event the log already holds (the same fields, the same instant) is not
    appended again, so importing again adds nothing. A
    candidate the timeline's rules would reject (``projections.controls``) is
    skipped and named rather than refusing the whole import. A FILE with no line, or no line of the four messages,
    is said in ``notes`` (:func:`no_record`).
    """
    not_a_directory(opts.log)
    found = worker_log.Read()
    report = WorkerLogReport()
    for path in opts.files:
        before = (len(found.events), len(found.skipped), found.other, len(found.not_json))
        try:
            with importers.open_file(path) as f:
                lines = importers.EndedLines(importers.bounded_lines(f), importers.unended_json)
                worker_log.read(lines, path, opts.assume_tz, into=found)
                count_unfinished(report, path, f, lines.unfinished)
        except OSError as err:
            report.problems.append(f"cannot read {path}: {err.strerror or err}")
            continue
        if (len(found.events), len(found.skipped)) == before[:2] and lines.unfinished is None:
            other, not_json = found.other - before[2], len(found.not_json) - before[3]
            report.notes.append(no_record(path, lines.read, "line of the four messages (worker-log --help)",
                                          f" ({other} of other messages, {not_json} not JSON)"))
    bad: list[dict[str, Any]] = []
    with runner_lock(opts.log, "import", wait=True):
        held = _held(log_events(opts.log, bad=bad))
        new: list[dict[str, Any]] = []
        already = 0
        for where, ev in found.events:
            key = _identity(ev, datetime.fromisoformat(ev["ts"]))
            if key in held.keys:
                already += 1
                continue
            why = held.refusal(ev)
            if why is not None:
                found.skipped.append(f"{where}: {why}")
                continue
            held.keys.add(key)
            new.append(ev)
        _append(opts.log, new)
    report.imported, report.already, report.skipped, report.other = len(new), already, found.skipped, found.other
    report.not_json, report.not_json_first = len(found.not_json), found.not_json[:3]
    name_bad_lines(report, opts.log, bad)
    return report


@dataclass
class _Held:
    """What the log holds of the worker-log events: their identities, and the controls as the projection folds them."""

    keys: set[tuple[Any, ...]] = field(default_factory=set)
    controls: dict[str, Control] = field(default_factory=dict)
    line: int = 0

    def fold(self, ev: Event) -> FoldResult:
        """Fold a stage or a result into the controls (the projection's own rules); other events change nothing."""
        self.line += 1
        if isinstance(ev, InterruptStage):
            return fold_stage(self.controls, ev, self.line)
        if isinstance(ev, ControlResult):
            return fold_result(self.controls, ev, self.line)
        return None

    def refusal(self, obj: dict[str, Any]) -> str | None:
        """Why the timeline would reject this candidate after what is held (None: it fits, and is now held)."""
        decoded = validate_object(obj)
        if isinstance(decoded, str):  # worker_log.event_of checked it already
            return decoded
        result = self.fold(decoded[0])
        return result.reason if isinstance(result, Rejected) else None


def _identity(obj: dict[str, Any], at: datetime) -> tuple[Any, ...]:
    """What makes a worker-log event (``at``: its time) the same one again: every field, the time as an instant.

    A line that differs in anything (another outcome for a result already held)
    is not a repeat: the timeline's rules judge it, and name why it is refused.
    """
    fields = sorted((k, v) for k, v in obj.items() if k not in ENVELOPE_FIELDS and v is not None)
    return (importers.instant(at), *fields)


def _held(events: Iterable[tuple[Event, datetime]]) -> _Held:
    """The worker-log events a log's decoded ``events`` hold."""
    held = _Held()
    for ev, at in events:
        if isinstance(ev, InterruptStage | ControlResult | StorageUnavailable):
            held.keys.add(_identity(msgspec.to_builtins(ev), at))
            held.fold(ev)
    return held


class LedgerImport(FilesImport):
    """``import ledger``: the account limit ledger files ``files`` (seed 000) into ``log``.

    Times without an offset need ``assume_tz`` (else the entry is a problem); epochs are written in it.
    """


class ImportReport(msgspec.Struct, kw_only=True):
    """What an import appended (``imported``), what the log held already, and what it left and why.

    ``left``: what was not appended because the log knows better (a limit older than the account's
    latest, a marker of a handoff the log moved on), each named; ``problems``: inputs that could not be
    read or turned into events, or are dated ahead of now (counted in ``dated_ahead``), each named (the
    rest is imported), and the log's bad lines (``bad_lines``).
    """

    imported: int = 0
    already: int = 0
    left: list[str] = msgspec.field(default_factory=list)
    problems: list[str] = msgspec.field(default_factory=list)
    #: What a person should know besides (a directory with no input file at all), said on stderr.
    notes: list[str] = msgspec.field(default_factory=list)
    #: The events appended, in order.
    events: list[dict[str, Any]] = msgspec.field(default_factory=list)
    bad_lines: BadLines = msgspec.field(default_factory=BadLines)
    #: The last lines of a JSON Lines ledger not ended yet (``FILE:LINE``): not read, read once they end.
    unfinished: list[str] = msgspec.field(default_factory=list)
    #: How many inputs were dated ahead of now (not appended; each named in ``problems``).
    dated_ahead: int = 0

    @property
    def status(self) -> int:
        """1 when an input could not be read or used, or the log has bad lines, else 0."""
        return 1 if self.problems else 0

    def summary(self) -> str:
        """One line for people."""
        left = f", {len(self.left)} left as the log has them" if self.left else ""
        ahead = f", {self.dated_ahead} dated ahead of now" if self.dated_ahead else ""
        return f"{self.imported} event(s) imported, {self.already} already in the log{left}{ahead}" + (
            f", {len(self.problems)} problem(s)" if self.problems else "") + (
            f", {unfinished_words(self.unfinished)}" if self.unfinished else "")


def import_ledger(opts: LedgerImport) -> ImportReport:
    """One ``limit_recorded`` per ledger entry the log does not hold, unless older than its account's latest not dated
    ahead, or dated ahead of now itself (``eventlog.handoff_importers.new_limits``).

    A file with no entry (empty, blank lines, ``[]``) is said in ``notes``: no error, nothing imported from it.
    """
    not_a_directory(opts.log)
    report = ImportReport()
    events: list[tuple[str, dict[str, Any]]] = []
    for path in opts.files:
        try:
            with importers.open_file(path) as f:
                data = f.read()
                entries, unfinished = handoff_importers.ledger_entries(data, path)
                count_unfinished(report, path, f, unfinished)
        except (OSError, ValueError) as err:
            report.problems.append(f"cannot read {path}: {getattr(err, 'strerror', None) or err}")
            continue
        if not entries and unfinished is None:  # nothing failed (a handler with no limit yet), but a wrong or
            # truncated file is noticed
            report.notes.append(no_record(path, len(data.splitlines()), "ledger entry"))
        for where, entry in entries:
            try:
                ev = handoff_importers.limit_event(entry, opts.assume_tz)
            except ValueError as err:
                report.problems.append(f"{where}: {err}")
                continue
            if importers.appendable(where, report.problems, ev):
                events.append((where, ev))
    bad: list[dict[str, Any]] = []
    with runner_lock(opts.log, "import", wait=True):
        at = now()
        plan = handoff_importers.new_limits(
            events, handoff_importers.limits_known(log_events(opts.log, bad=bad), at), at)
        _append(opts.log, plan.new)
    report.imported, report.already, report.events, report.left = len(plan.new), plan.already, plan.new, plan.older
    report.problems += plan.ahead
    report.dated_ahead = len(plan.ahead)
    name_bad_lines(report, opts.log, bad)
    return report


@dataclass(kw_only=True)
class HandoffFilesImport:
    """``import handoff-files``: the old watcher's ``ID.json``, ``ID.resumed``, ``ID.skip`` files of ``directory``."""

    log: str
    directory: str
    #: The account of handoff files that name none.
    account: str | None = None
    #: The zone of times without an offset (and of mtimes); None: such times are problems, mtimes local.
    assume_tz: tzinfo | None = None
    #: The handoffs whose ``.resumed`` of another mtime than the one the log applied is applied all the same: a
    #: person says the old watcher started the cloud session again (``--apply-resumed``).
    apply_resumed: list[str] = field(default_factory=list)


class HandoffFilesReport(ImportReport, kw_only=True):
    """:class:`ImportReport`, and ``changed``: each field of an ``ID.json`` that says other than the log's
    ``handoff_created`` (``FILE: field: the log has X, the file Y``). The log keeps its own: no event changes a
    handoff's fields once created (a second ``handoff_created`` is rejected).

    ``changed_markers``: each ``.resumed`` of a handoff pending again (a person requeued it) whose mtime is not the
    one the log applied (``FILE: the marker's time is X, the log applied one at Y; ...``): not applied, as a copy,
    a ``touch`` or a restore change a marker's mtime too; ``notes`` say what to type either way.
    """

    changed: list[str] = msgspec.field(default_factory=list)
    changed_markers: list[str] = msgspec.field(default_factory=list)

    @property
    def status(self) -> int:
        """1 when an input could not be read or used, a file says other than the log, or the log has bad lines."""
        return 1 if self.problems or self.changed or self.changed_markers else 0

    def summary(self) -> str:
        """One line for people."""
        changed = f", {len(self.changed)} field(s) differing from the log (kept as the log has them)" \
            if self.changed else ""
        markers = (f", {len(self.changed_markers)} .resumed marker(s) of another time than the log applied (not "
                   "applied)") if self.changed_markers else ""
        return super().summary() + changed + markers


def import_handoff_files(opts: HandoffFilesImport) -> HandoffFilesReport:
    """The legacy handoffs and markers the log does not hold yet (mapping: ``eventlog.handoff_importers``)."""
    not_a_directory(opts.log)
    legacy, problems, notes = _read_dir(opts.directory, "handoff file (ID.json, ID.resumed, ID.skip)",
                                        lambda d: handoff_importers.read_handoff_dir(d, opts.account, opts.assume_tz))
    bad: list[dict[str, Any]] = []
    with runner_lock(opts.log, "import", wait=True):
        plan = handoff_importers.handoff_events(
            legacy, handoff_importers.handoffs_known(log_events(opts.log, bad=bad)), opts.apply_resumed)
        _append(opts.log, plan.new)
    notes += [_keeps(opts.log, *h) for h in plan.changed_handoffs]
    notes += [_resumed_again(opts, again) for again in plan.resumed_again]
    notes += [f"--apply-resumed {hid}: {opts.directory} holds no {hid}.resumed of another time than the one {opts.log} "
              f"applied, of a handoff pending again: nothing applied for it"
              for hid in dict.fromkeys(opts.apply_resumed) if hid not in plan.applied_again]
    report = HandoffFilesReport(imported=len(plan.new), already=plan.already, left=plan.superseded,
                                problems=problems + plan.problems, events=plan.new, changed=plan.changed,
                                changed_markers=[again.words() for again in plan.resumed_again], notes=notes)
    name_bad_lines(report, opts.log, bad)
    return report


def _resumed_again(opts: HandoffFilesImport, again: handoff_importers.ResumedAgain) -> str:
    """What a person types about a ``.resumed`` of another mtime (:class:`~eventlog.handoff_importers.ResumedAgain`):
    apply it, or put back the time the log applied (``touch -d``, in UTC: GNU and BSD ``touch`` both read it)."""
    options = [opt("--apply-resumed", again.handoff_id)]
    if opts.account is not None:
        options.append(opt("--account", opts.account))
    if isinstance(opts.assume_tz, ZoneInfo):
        options.append(opt("--assume-tz", opts.assume_tz.key))
    applied = datetime.fromisoformat(again.applied).astimezone(UTC).isoformat().replace("+00:00", "Z")
    return (f"{again.handoff_id}: if the old watcher started the cloud session again (it places {again.handoff_id}"
            f".resumed before each start), hand it to a person: "
            f"{command('eventlog import handoff-files', [opts.log, opts.directory], options)}; if the marker was "
            "only copied, touched, restored from a backup or moved to another machine, put back the time the log "
            f"applied to silence this: {command(f'touch -d {applied}', [again.file])}")


def _keeps(log: str, hid: str, file: str, state: str) -> str:
    """What a person does about a handoff whose ``ID.json`` says other than the log: no command changes its fields."""
    if state not in OPEN:
        return (f"{hid} is {state}: its fields order no claim any more; put the log's values back in {file} to "
                "silence this")
    return (f"{hid}: the log keeps its values (no event changes a handoff's fields once created): to take the "
            f"file's, {handoff_cmd(log, 'skip', hid, '<why it is handed off anew>')} and hand the work off again "
            f"under a new handoffId; else put the log's values back in {file}")


@dataclass(kw_only=True)
class CircuitImport:
    """``import circuit``: the quota guard's circuit state file into ``log``."""

    log: str
    file: str
    #: The zone of times without an offset and of epochs (None: such ISO times are problems, epochs local).
    assume_tz: tzinfo | None = None


class CircuitReport(ImportReport, kw_only=True):
    """What ``import circuit`` did (:class:`ImportReport`), and what the state file said."""

    #: ``open`` or ``closed``, as the file says; None when it was not read (one that cannot be read is among the
    #: ``problems``; one that does not exist yet, in ``notes``).
    state: str | None = None


def import_circuit(opts: CircuitImport) -> CircuitReport:
    """``circuit_opened`` or ``circuit_closed`` when the state file says other than the log's latest circuit event.

    A state file that does not exist is said in ``notes`` (no problem) while the log holds no circuit event: the
    guard need not write it before its circuit first opens. Once the log holds one, it is a problem (the file
    moved, or the path is wrong).
    """
    not_a_directory(opts.log)
    report = CircuitReport()
    circuit: importers.Circuit | None = None
    try:
        with importers.open_file(opts.file) as f:
            obj = importers.json_value(f.read())
        circuit = importers.read_circuit(obj, handoff_importers.mtime(opts.file, opts.assume_tz), opts.assume_tz)
    except FileNotFoundError:
        pass  # judged by what the log holds, below
    except (OSError, ValueError) as err:
        report.problems.append(f"cannot read {opts.file}: {getattr(err, 'strerror', None) or err}")
        return report
    bad: list[dict[str, Any]] = []
    with runner_lock(opts.log, "import", wait=True):
        latest: tuple[str, int | None] | None = None
        for ev, _at in log_events(opts.log, bad=bad):
            if isinstance(ev, CircuitOpened):
                latest = ("opened", importers.instant(datetime.fromisoformat(ev.open_until)))
            elif isinstance(ev, CircuitClosed):
                latest = ("closed", None)
        if circuit is None:
            if latest is None:
                report.notes.append(f"{opts.file} does not exist: nothing imported; the quota guard need not write "
                                    "its state file before its circuit first opens, and the log holds no circuit "
                                    "event yet (if the guard has tripped, this is not the file it writes)")
            else:
                report.problems.append(f"cannot read {opts.file}: it does not exist, yet the log holds circuit "
                                       "events: the guard's state file moved, or this is not its path")
            name_bad_lines(report, opts.log, bad)
            return report
        report.state = circuit[0]
        new = importers.circuit_events(circuit, latest)
        report.already = 0 if new else 1
        if not importers.appendable(opts.file, report.problems, *new):
            new = []
        _append(opts.log, new)
    report.imported, report.events = len(new), new
    name_bad_lines(report, opts.log, bad)
    return report


__all__ = [
    "CircuitImport", "CircuitReport", "FilesImport", "HandoffFilesImport", "HandoffFilesReport", "ImportReport",
    "LaunchdImport", "LaunchdReport", "LedgerImport", "QuotaLogImport", "QuotaLogReport", "WorkerLogImport",
    "WorkerLogReport", "import_circuit", "import_handoff_files", "import_launchd", "import_ledger", "import_quota_log",
    "import_worker_log",
]
