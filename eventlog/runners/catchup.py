"""The catch-up runner (seed 002): re-run today's quota-skipped jobs once the quota is back, one at a time.

:func:`run_catchup`:

- first, what feeds it (not in a dry run, and only what the options name): ``import launchd``
  of ``import_launchd``, ``import circuit`` of ``import_circuit``, then ``import quota-log`` of
  the files the ``import_quota_log`` patterns match (globs, ``~`` expanded), under the catch-up's
  lock (:func:`_feed`). What one cannot import (a file it cannot read, a directory that is none,
  a pattern that matches no file) is a problem; the pass goes on with the rest;
- the candidates are those of ``projections.catchup`` as of now (or ``at``);
- no candidates: no probe, nothing kicked;
- a dry run: the candidates, no probe, nothing kicked, and nothing written:
  the log is only read (no lock file, so it works in a read-only directory);
  its note says when the circuit is open (until when: a run now would re-run
  nothing);
- circuit open: no probe, nothing kicked;
- the probe (no shell) is judged by ``eventlog.probe.classify``, as the
  failback probe is: anything but ``ok`` (the expected answer, ``PING_OK``,
  with exit 0: a probe printing "usage limit reached" with exit 0 is
  ``quota_limited``), a timeout or a probe that cannot start: nothing kicked,
  a problem;
- else each candidate in turn, never two at once: re-judged on the log as it
  is then (a job that ran meanwhile, or a circuit that opened again, stops
  it), ``catchup_kicked`` appended, then the re-run, waited for, and
  ``catchup_finished`` appended (``exited`` with ``exit``, or
  ``timeout_killed``) before the next starts. Two ways to re-run:

  * ``scheduler`` (launchd or systemd, :mod:`eventlog.runners.schedulers`):
    the job is started by its label under the scheduler (``launchctl
    kickstart``), waited for by polling the scheduler, and over the timeout
    stopped through it (``launchctl kill SIGTERM``, the grace, ``SIGKILL``),
    as seed 002's ``kick_and_wait``/``terminate_job`` do: the job runs outside
    any process group of ours. A job that even SIGKILL did not end stops the
    catch-up (the next would overlap it);
  * ``kick_cmd`` (other schedulers): the command is run with the label as its
    last argument and in ``CATCHUP_LABEL``; over the timeout its process group
    gets SIGTERM, then SIGKILL after the grace (it must run the job itself,
    in its own process group, to be stopped).

  ``catchup_kicked`` carries the pass's ``timeout_s`` and ``kill_grace_s``
  (the project's fields: by then its end must be written) and how it kicks,
  ``kicked_by`` (``launchd`` with its ``launchd_domain``, ``systemd``,
  ``systemd_user`` or ``kick_cmd``: a name, never the command), so a view
  offers the command that runs the job where it runs. A re-run that
  cannot be started is recorded as ``exited`` with exit 127 (the shell's "not
  found"); a kick call that timed out is first checked with the scheduler
  (it may have started). **No end is recorded that did not happen**: a job
  that even SIGKILL did not end, or whose start cannot be told, keeps its
  ``catchup_kicked`` open (``may_still_run``), and the catch-up kicks nothing
  more. **No job is kicked whose ``catchup_kicked`` was not written**, and a
  pass that could not write a line kicks nothing more: a re-run whose
  ``catchup_finished`` could not be written is still in ``runs`` with its exit
  (``written`` false), that line is in ``unwritten``
  (:class:`~eventlog.runners.common.Unwritten`, as the other runners keep what
  an act gave), and a problem prints it to paste (:func:`_write_end`).
- **An open re-run** (a ``catchup_kicked`` with no ``catchup_finished``) found
  under the lock was left by a catch-up that is gone (it died, was killed, or
  could not stop its job): with ``scheduler`` the scheduler is asked (it runs:
  nothing is kicked; it no longer runs: its end is written, ``exited`` with no
  exit, how it ended being unknown; it cannot tell: nothing is kicked); with
  ``kick_cmd`` nobody can tell, so nothing is kicked (re-runs never overlap,
  seed 002) until a person records its end (the command is said). Each is a
  problem.
- one catch-up at a time per log: a second one finds the log's lock (beside
  the file itself, symbolic links resolved) held, says so in ``notes`` and does
  nothing (``busy``). A lock file that cannot be opened or created is a
  problem naming it and why: nothing is done.
- a stop signal (SIGTERM, SIGINT: :func:`eventlog.runners.process.stop_on_signals`)
  stops the running probe or re-run as a timeout does (through the scheduler
  for a scheduled job) and kicks nothing more: once the re-run no longer runs
  its end is written, ``exited`` with no exit (its run is ``interrupted``; the
  job is not kicked again today); one the scheduler still runs, or cannot tell
  of, keeps its kick open; the rest are ``not_kicked``; ``interrupted`` names
  the signal, and it is a problem.

The report's ``problems`` (one line each) make ``status`` 1: what the feed
could not import, a guarded job nothing feeds
(``projections.catchup.Catchup.unfed``: its slot of today passed 2 h ago and
the log holds no marker of today for it; said on every pass, a dry run's too,
while it lasts: no skip of it can ever make it a candidate), no guarded job in
the log at all (nothing is judged), a probe that failed, a re-run that did not
exit 0, a log that could not be read or written, a file that takes no append
(no event log, or a torn tail no append cuts: nothing is probed or kicked), the
log's bad lines (a catch-up writes no line on
every pass, so it cannot tell a new bad line from an old one, and each counts:
``PassBadLines``), and every re-run that did not end well and an open one
(``projections.catchup.Catchup.bad_reruns``: each pass names them while the
views do, for the same reason, and a catch-up killed mid re-run never said
it), and, judged as of now, a job's line dated ahead of it (``projections.ahead.dated_ahead``: a skip dated a
later day, which is no candidate, and the kick of an open re-run, whose missing end is not named before the clock
passes it), as ``LOG:LINE``. ``notes`` are for a person too but change nothing.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any

import msgspec

from eventlog.appender import AppendError
from eventlog.clock import NOW, At, Clock, local_zone_problem
from eventlog.logs import Log, is_url, no_event_log, open_log
from eventlog.probe import EXPECTED, judge
from eventlog.replay import Replay
from eventlog.runners import imports
from eventlog.runners.common import (
    LockUnavailable,
    PassBadLines,
    RunnerError,
    Unwritten,
    check_bounds,
    folder,
    holder_of,
    lock_held,
    log_arg,
    refuses_appends,
    require_log,
    runner_lock,
)
from eventlog.runners.process import Interrupted, check_stop, run
from eventlog.runners.schedulers import POLL_S, JobRan, Scheduler, SchedulerError, run_job
from projections import catchup as rules
from projections.ahead import dated_ahead
from projections.catchup import Catchup, Rerun, Unfed, today_words
from projections.triage import AHEAD_KIND, ahead_words, explain_cmd, rerun_end_cmd, rerun_words, unfed_words

#: Spec section 5: a re-run over this is stopped.
KICK_TIMEOUT_S = rules.TIMEOUT_S
#: Spec section 5: SIGTERM, then SIGKILL after this.
KILL_GRACE_S = rules.KILL_GRACE_S
#: How long the probe may take.
PROBE_TIMEOUT_S = 300.0


@dataclass(kw_only=True)
class Options:
    """What :func:`run_catchup` is told (commands are needed unless ``dry_run``)."""

    log: str
    probe_cmd: list[str] | None = None
    kick_cmd: list[str] | None = None
    #: Re-run jobs through launchd or systemd instead of ``kick_cmd``.
    scheduler: Scheduler | None = None
    #: How often a job under ``scheduler`` is looked at.
    poll_s: float = POLL_S
    #: The answer of a healthy probe.
    expected: str = EXPECTED
    dry_run: bool = False
    #: When to judge and act: now (the default), a fixed time, or the log's last line.
    at: At = NOW
    timeout_s: float = KICK_TIMEOUT_S
    kill_grace_s: float = KILL_GRACE_S
    probe_timeout_s: float = PROBE_TIMEOUT_S
    assume_tz: tzinfo | None = None
    #: What feeds the pass, imported before it is judged (not in a dry run): the directory of the jobs' plists
    #: (``import launchd``), the guard's circuit state file (``import circuit``), and glob patterns of the files
    #: the guard writes its markers to (``import quota-log``); ``~`` is expanded in each.
    import_launchd: str | None = None
    import_circuit: str | None = None
    import_quota_log: list[str] = field(default_factory=list)

    @property
    def feeds(self) -> bool:
        """Whether the pass imports anything first."""
        return bool(self.import_launchd or self.import_circuit or self.import_quota_log)

    def check(self) -> None:
        """RunnerError when the runner cannot run with these options (nothing is written then)."""
        if self.kick_cmd and self.scheduler:
            raise RunnerError("--kick-cmd and --scheduler: give one of them")
        if not self.dry_run and (not self.probe_cmd or not (self.kick_cmd or self.scheduler)):
            raise RunnerError("--probe-cmd and --kick-cmd are needed (or --scheduler for --kick-cmd; or --dry-run)")
        if not self.expected:
            raise RunnerError("--expect is empty")
        if self.at.live and self.at.zone is None and (problem := local_zone_problem()) is not None:
            raise RunnerError(f"{problem}, and catch-up's today is the machine's: nothing done. Set TZ to a zone "
                              "it knows (timedatectl list-timezones), or give --assume-tz ZONE (--assume-tz UTC: "
                              "today is UTC's)")
        check_bounds(self.kill_grace_s, timeout_s=self.timeout_s, probe_timeout_s=self.probe_timeout_s,
                     poll_s=self.poll_s)
        require_log(self.log, self.assume_tz)


class Report(msgspec.Struct, kw_only=True):
    """What a catch-up did."""

    as_of: str | None = None
    #: What the feed imported before the pass, by source (``launchd``: jobs registered or changed, ``circuit``:
    #: circuit events, ``quota-log``: markers); a source it could not read is not there (a problem, or for a circuit
    #: state file that does not exist yet, a note); what it could not import is among the problems.
    imported: dict[str, int] = msgspec.field(default_factory=dict)
    candidates: list[str] = msgspec.field(default_factory=list)
    #: Guarded jobs nothing feeds: their slot of today passed 2 h ago, and no marker of today (a problem each).
    unfed: list[str] = msgspec.field(default_factory=list)
    circuit: str = "closed"
    #: None: not probed; "ok", "failed" (it did not start or timed out), or the outcome the classifier named.
    probe: str | None = None
    #: Each re-run (``label``, ``outcome``, ``exit``; ``written``: false when the log did not take its end, which
    #: ``unwritten`` then holds).
    runs: list[dict[str, Any]] = msgspec.field(default_factory=list)
    not_kicked: list[str] = msgspec.field(default_factory=list)
    #: Another catch-up held the log's lock: nothing was done.
    busy: bool = False
    #: The signal (SIGTERM, SIGINT) that stopped the catch-up, None when none did.
    interrupted: str | None = None
    #: Re-runs that did not end well, until the job runs again: ``label``, ``kind`` (``rerun_failed``,
    #: ``rerun_no_end``, or ``open``: no end written yet), ``kicked_at``, ``line`` (its kick's, or its end's).
    reruns: list[dict[str, Any]] = msgspec.field(default_factory=list)
    #: Open re-runs the job of which may still run: nothing was kicked (re-runs never overlap).
    waits_for: list[str] = msgspec.field(default_factory=list)
    note: str = ""
    #: The ends of re-runs the log did not take (this pass's, or an open one's it settled): the lines to append by
    #: hand (a problem each); the pass kicked nothing after one.
    unwritten: list[Unwritten] = msgspec.field(default_factory=list)
    bad_lines: PassBadLines = msgspec.field(default_factory=PassBadLines)
    notes: list[str] = msgspec.field(default_factory=list)
    problems: list[str] = msgspec.field(default_factory=list)

    @property
    def status(self) -> int:
        """1 when a problem needs a person, else 0."""
        return 1 if self.problems else 0

    def text(self) -> list[str]:
        """The report for people, one line each."""
        out = [f"{r['label']}: {_ran_words(r)}{Unwritten.mark(r)}" for r in self.runs]
        fed = [f"imported first: {', '.join(f'{source} {n}' for source, n in self.imported.items())}"
               ] if self.imported else []
        return [*fed, *out, self.note]


def run_catchup(opts: Options) -> Report:
    """One catch-up (see the module docstring); call ``opts.check()`` first.

    Never raises for a command or a log that fails, nor for a stop signal: that
    is in the report (see the module docstring).
    """
    report = Report()
    if opts.dry_run:
        with open_log(opts.log) as log:
            try:
                replay = log.replay(assume_tz=opts.assume_tz)
            except OSError as err:
                report.problems.append(f"cannot read {opts.log}: {err.strerror or err}")
                report.note = "the log could not be read: nothing judged"
                return report
        state = folder(replay).catchup
        holder = lock_held(opts.log, "catchup")
        when, takes_no_append = _judge(opts, report, replay.last_at, replay.last_ts, state, replay,
                                       open_left=holder is None)
        if holder is not None:  # the catch-up that holds the lock may be running its open re-runs now
            report.notes.append(f"another catch-up holds the lock of {opts.log} ({holder}): a real pass now would "
                                "do nothing")
            for label, r in state.open_reruns().items():
                if not any(b["label"] == label for b in report.reruns):
                    report.reruns.append(_rerun_fact(label, "open", r))
                    report.notes.append(f"{label}: {_open_words(r)}; it may still run (the catch-up that holds the "
                                        "lock may run it)")
        elif not takes_no_append:
            _waits_for(opts, None, report, state)  # what a real pass would say of each, and do
        if opts.feeds:
            report.notes.append("a dry run imports nothing (--import-*): judged on the log as it is")
        if report.candidates:
            report.note = f"dry run, no probe: candidates of {today_words(when)}: " + " ".join(report.candidates)
            if report.waits_for:
                waited = ", ".join(report.waits_for)
                report.note += f"; a run now would kick nothing: a re-run may still run ({waited}); re-runs never " \
                               "overlap"
            elif report.circuit == "open":
                report.note += f"; {_held(state)}: a run now would re-run nothing (no probe, nothing kicked)"
        return report
    try:
        _locked_pass(opts, report)
    except LockUnavailable as err:
        report.problems += err.messages
        report.note = "nothing done"
    return report


def _locked_pass(opts: Options, report: Report) -> None:
    """A pass under the log's catch-up lock (LockUnavailable when its lock file cannot be opened or created)."""
    with runner_lock(opts.log, "catchup", wait=False) as mine:
        if not mine:
            report.busy = True
            report.note = "nothing done"
            report.notes.append(f"another catch-up holds the lock of {opts.log} ({holder_of(opts.log, 'catchup')}): "
                                "nothing done")
            return
        _feed(opts, report)
        with open_log(opts.log, assume_tz=opts.assume_tz) as log:
            try:
                _catchup(opts, log, report)
            except Interrupted as stop:
                stop.what = stop.what or "before the next re-run"
                report.interrupted = stop.signal
                report.problems.append(f"{opts.log}: catch-up {stop.said()}")
                report.note = f"stopped by {stop.signal}: {report.note}"


def _judge(opts: Options, report: Report, last_at: datetime | None, last_ts: str | None, state: Catchup,
           replay: Replay, *, open_left: bool = True) -> tuple[datetime, bool]:
    """Fill the judgement of ``report``; the time it was judged at, and whether the log takes no append.

    The log's bad lines are problems (exit 1) on every pass while the log has any: a catch-up writes no
    line on every pass, so it cannot tell a new one from one it read before (:class:`PassBadLines`),
    and a bad line may hide a skipped job. A file that takes no append is a problem too, and then
    nothing is kicked.
    """
    when, text = opts.at.resolve(last_at, last_ts)
    if when is None:
        when = opts.at.clock(None)()
        text = when.isoformat()
    report.as_of = text
    report.candidates = [c.label for c in state.candidates(when)]
    report.circuit = "open" if state.circuit_open(when) else "closed"
    report.bad_lines = PassBadLines.seen(replay.bad_lines, None)
    report.bad_lines.tell(opts.log, report.problems, report.notes)
    if not any(job.guarded for job in state.jobs.values()) and no_event_log(opts.log, replay) is None:
        report.problems.append(no_guarded_job(opts.log, len(state.jobs)))
    for u in state.unfed(when):
        report.unfed.append(u.label)
        report.problems.append(_unfed_words(opts, u, when))
    if opts.at.live:  # a line of a job dated ahead of now holds back what a pass would say of it
        report.problems += [f"{opts.log}:{a.line}: {ahead_words(a, '')}; fix the clock of its writer (see "
                            f"{explain_cmd(log_arg(opts), a.id)})"
                            for a in dated_ahead(folder(replay), when) if AHEAD_KIND[a.check] == "catchup"]
    for b in state.bad_reruns(when):
        if b.rerun.ended or not open_left:  # an open one is left to _waits_for: is it still run?
            report.reruns.append(_rerun_fact(b.label, b.kind, b.rerun))
            report.problems.append(f"{b.label}: {rerun_words(b)}; re-run it by hand once you know why "
                                   f"({explain_cmd(log_arg(opts), b.label)} says how)")
    refused = refuses_appends(opts.log, replay)
    if refused is not None:
        report.problems.append(refused)
        report.note = "the log takes no append: nothing kicked"
    elif not report.candidates:
        report.note = f"no candidates {today_words(when)}: no probe, nothing kicked"
        if report.circuit == "open":
            report.note += f"; {_held(state)}"
    return when, refused is not None


def no_guarded_job(log: str, jobs: int) -> str:
    """Why a pass over a log with no guarded job judged nothing, and what feeds the jobs (``jobs``: how many are
    registered, none of them guarded)."""
    which = (f"none of its {jobs} registered job(s) is guarded (ProgramArguments naming claude-quota-guard)"
             if jobs else "no job_registered at all")
    return (f"{log}: no guarded job in the log ({which}): nothing is judged, so no skipped run can ever be re-run; "
            "feed the jobs with `eventlog import launchd LOG DIR` before each pass (eventlog catchup "
            "--import-launchd DIR, docs/OPERATIONS.md); where no quota-guarded job runs (none ever did, or each is "
            "retired), catch-up has nothing to do: stop its timer")


def _unfed_words(opts: Options, u: Unfed, when: datetime) -> str:
    """A guarded job nothing feeds, as a pass says it: its label, the views' words
    (:func:`projections.triage.unfed_words`), whether this pass imports markers, and where to read more."""
    none = "" if opts.import_quota_log else "; this pass imports none (no --import-quota-log)"
    return (f"{u.label}: {unfed_words(u, when)}{none} ({explain_cmd(log_arg(opts), u.label)} says how to import its "
            "markers, or to retire it)")


def _feed(opts: Options, report: Report) -> None:
    """Import what feeds the pass (``import launchd``, ``import circuit``, ``import quota-log``, in that order).

    The count each imported goes in ``imported`` (a source that could not be read is not there: a directory that is
    none, a circuit state file not read); what it could not import, in ``problems`` (the log's bad lines are left
    to the pass, which names them itself); its notes (a directory with no plist, a gone job with the line that
    retires it, a circuit state file that does not exist yet), in ``notes``.
    """
    steps: list[tuple[str, Callable[[], Any]]] = []
    if opts.import_launchd:
        directory = os.path.expanduser(opts.import_launchd)
        steps.append(("launchd", lambda: imports.import_launchd(imports.LaunchdImport(log=opts.log,
                                                                                      directory=directory))))
    if opts.import_circuit:
        state = os.path.expanduser(opts.import_circuit)
        steps.append(("circuit", lambda: imports.import_circuit(imports.CircuitImport(log=opts.log, file=state,
                                                                                     assume_tz=opts.assume_tz))))
    files, globbed = _marker_files(opts.import_quota_log, report.problems)
    if files:
        steps.append(("quota-log", lambda: imports.import_quota_log(imports.QuotaLogImport(
            log=opts.log, files=files, assume_tz=opts.assume_tz, globbed=globbed))))
    for source, step in steps:
        try:
            done = step()
        except RunnerError as err:
            report.problems.append(f"import {source}: {err}: nothing imported")
            continue
        except LockUnavailable as err:
            report.problems += [f"import {source}: {message}" for message in err.messages]
            continue
        except AppendError as err:
            report.problems.append(f"import {source}: cannot append to the log: {'; '.join(err.messages)}")
            continue
        except OSError as err:
            report.problems.append(f"import {source}: cannot read {opts.log}: {err.strerror or err}")
            continue
        if not (isinstance(done, imports.CircuitReport) and done.state is None):  # a state file not read: said
            report.imported[source] = len(done.registered) if source == "launchd" else done.imported
        bad = done.bad_lines.problem(opts.log)
        report.problems.extend(f"import {source}: {p}" for p in done.problems if p != bad)
        report.notes.extend(f"import {source}: {n}" for n in getattr(done, "notes", []))


def _marker_files(patterns: list[str], problems: list[str]) -> tuple[list[str], frozenset[str]]:
    """The files ``patterns`` match (each a glob, ``~`` expanded; one with no wildcard is its own file), in order,
    each once, and those only a wildcard matched (the import does not say one with no marker); a pattern that
    matches no file is a problem (no marker comes from it)."""
    files: list[str] = []
    named: set[str] = set()
    for pattern in patterns:
        path = os.path.expanduser(pattern)
        magic = glob.has_magic(path)
        found = sorted(glob.glob(path)) if magic else [path]
        if not found:
            problems.append(f"import quota-log: no file matches {pattern}: no marker is imported from it")
        if not magic:
            named.add(path)
        for name in found:
            if name not in files:
                files.append(name)
    return files, frozenset(files) - named


def _rerun_fact(label: str, kind: str, r: Rerun) -> dict[str, Any]:
    """One entry of :attr:`Report.reruns`."""
    return {"label": label, "kind": kind, "kicked_at": r.kicked_ts,
            "line": r.finished_line if r.ended else r.kicked_line}


def _open_words(r: Rerun) -> str:
    """An open re-run, in words."""
    return f"its re-run kicked at {r.kicked_ts} (line {r.kicked_line}) has no end written"


def _waits_for(opts: Options, log: Log | None, report: Report, state: Catchup, clock: Clock | None = None) -> bool:
    """Settle the open re-runs a catch-up that is gone left (we hold the lock, or nobody does), or wait for them;
    False when an end could not be written (then nothing is kicked).

    Each is a problem. With a scheduler, one it no longer runs gets its end (``exited``, no exit: how it ended
    is unknown); one it runs, or cannot tell of, is waited for. With a kick command nobody can tell whether it
    runs, so it is waited for until a person records its end. Waited-for labels go in ``waits_for``.
    ``log`` None: a dry run, which writes no end and says that a real pass would (a dry run with no
    ``--scheduler`` is judged as one with ``--kick-cmd``).
    """
    for label, r in state.open_reruns().items():
        report.reruns.append(_rerun_fact(label, "open", r))
        gone = f"{label}: {_open_words(r)} and the catch-up that kicked it is gone (it died, was killed, or could " \
               "not stop it)"
        settle = f"once it no longer runs, record its end: {rerun_end_cmd(log_arg(opts), label)}"
        if opts.scheduler is None:
            report.waits_for.append(label)
            report.problems.append(f"{gone}; with --kick-cmd nobody can tell whether it still runs, so nothing is "
                                   f"kicked (re-runs never overlap): {settle}")
            continue
        name = opts.scheduler.name
        try:
            job = opts.scheduler.state(label)
        except SchedulerError as err:
            report.waits_for.append(label)
            report.problems.append(f"{gone}; whether {name} still runs it cannot be told ({err}), so nothing is "
                                   f"kicked (re-runs never overlap): {settle}")
            continue
        if job.running:
            report.waits_for.append(label)
            report.problems.append(f"{gone}; {name} still runs it, so nothing is kicked until it ends (re-runs "
                                   f"never overlap): wait, or stop it: {opts.scheduler.kill_command(label)}")
            continue
        if log is None or clock is None:
            report.problems.append(f"{gone}; {name} no longer runs it: a real pass now writes its end with no exit "
                                   "status (how it ended is unknown) and goes on; re-run it by hand once you know "
                                   f"why ({explain_cmd(log_arg(opts), label)} says how)")
            continue
        if not _write_end(opts, log, clock, report, label, {"outcome": "exited"},
                          f"the re-run of {label} kicked at {r.kicked_ts} no longer runs ({name} says so; how it "
                          "ended is unknown)"):
            report.problems.append(f"{gone}; {name} no longer runs it, but its end could not be written: nothing is "
                                   "kicked")
            return False
        report.problems.append(f"{gone}; {name} no longer runs it: its end is written with no exit status (how it "
                               f"ended is unknown); re-run it by hand once you know why "
                               f"({explain_cmd(log_arg(opts), label)} says how)")
    return True


def _state_failed(log: str, err: AppendError) -> str:
    """Why the log's state could not be had, for a person: it is opened for writing (:meth:`Log.state`), so a log
    this user may read but not write fails there, and then it is the write that failed."""
    verb = "write the log (it can be read, not written)" if _read_only(log) else "read the log"
    return f"cannot {verb}: " + "; ".join(err.messages)


def _read_only(log: str) -> bool:
    """Whether ``log`` is a file this user may read but not write (a mode, an owner, ``chattr +i``, a read-only
    mount): then opening it to append is what failed, not reading it."""
    return not is_url(log) and os.access(log, os.R_OK) and not os.access(log, os.W_OK)


def _held(state: Catchup) -> str:
    """The open circuit, in words: until when nothing is re-run."""
    return f"circuit open until {state.state.open_until or '?'}"


def _catchup(opts: Options, log: Log, report: Report) -> None:
    try:
        replay = log.state()
    except AppendError as err:
        report.problems.append(_state_failed(opts.log, err))
        report.note = f"the log could not be {'written' if _read_only(opts.log) else 'read'}: nothing kicked"
        return
    clock: Clock = opts.at.clock(replay.last_at)
    state = folder(replay).catchup
    _when, takes_no_append = _judge(opts, report, replay.last_at, replay.last_ts, state, replay)
    if takes_no_append:
        return
    if not _waits_for(opts, log, report, state, clock):
        report.note = "the log could not be written: nothing kicked"
        return
    if report.waits_for:
        report.note = (f"nothing kicked: a re-run may still run ({', '.join(report.waits_for)}); re-runs never "
                       "overlap")
        return
    if not report.candidates:
        return
    if report.circuit == "open":
        report.note = f"{_held(state)}: no probe, nothing kicked"
        return
    assert opts.probe_cmd is not None
    failure = _probe(opts, report, clock())
    if failure is not None:
        report.problems.append(f"probe failed ({failure}): nothing kicked")
        report.note = f"probe failed ({failure}): nothing kicked"
        return
    labels = report.candidates
    stopped = False
    try:
        _rerun_all(opts, log, clock, report, labels)
    except Interrupted:
        stopped = True
        done = {r["label"] for r in report.runs} | set(report.not_kicked)
        report.not_kicked.extend(label for label in labels if label not in done)
        raise
    finally:
        report.note = _kicked_words(report, stopped)
        if report.unwritten:
            report.note += f"; {len(report.unwritten)} end(s) NOT written to the log: nothing more kicked"


def _kicked_words(report: Report, stopped: bool) -> str:
    """What a pass kicked, for its summary: the re-runs done, and those a stop signal cut short (kicked all the
    same); a pass a stop signal cut short (``stopped``) adds what it did not kick (``1 kicked and stopped (com.x);
    not kicked: com.y``, after ``stopped by SIGTERM:``); ``nothing kicked`` when none was."""
    done = [r["label"] for r in report.runs if r["outcome"] != "interrupted"]
    cut = [r["label"] for r in report.runs if r["outcome"] == "interrupted"]
    said = ([f"{len(done)} re-run(s) done"] if done else []) + \
        ([f"{len(cut)} kicked and stopped ({', '.join(cut)})"] if cut else [])
    words = ", ".join(said) or "nothing kicked"
    if stopped and said and report.not_kicked:
        words += f"; not kicked: {', '.join(report.not_kicked)}"
    return words


def _rerun_all(opts: Options, log: Log, clock: Clock, report: Report, labels: list[str]) -> None:
    """Re-run each candidate in turn (see the module docstring).

    No re-run starts whose ``catchup_kicked`` was not written, and a pass that could not write a line kicks
    nothing more; a re-run whose end could not be written is reported all the same (:func:`_write_end`).
    """
    for i, label in enumerate(labels):
        now = clock()
        try:
            fresh = folder(log.state()).catchup
        except AppendError as err:
            report.problems.append(f"{_state_failed(opts.log, err)}: {label} and the rest are not kicked")
            report.not_kicked.extend(labels[i:])
            return
        if fresh.circuit_open(now):
            report.not_kicked.extend(labels[i:])
            report.notes.append("the circuit opened again: no more re-runs")
            return
        if label not in {c.label for c in fresh.candidates(now)}:
            report.not_kicked.append(label)
            report.notes.append(f"{label}: no longer a candidate, not kicked")
            continue
        check_stop()
        try:
            log.append([{"type": "catchup_kicked", "ts": clock().isoformat(), "label": label,
                         "timeout_s": opts.timeout_s, "kill_grace_s": opts.kill_grace_s,
                         **(opts.scheduler.kicked_by() if opts.scheduler else {"kicked_by": "kick_cmd"})}])
        except AppendError as err:
            report.problems.append(f"{label}: its catchup_kicked could not be written ({'; '.join(err.messages)}): "
                                   "it is not kicked, nor is any job after it (no re-run starts unrecorded)")
            report.not_kicked.extend(labels[i:])
            return
        try:
            ran = _rerun(opts, label)
        except Interrupted as stop:
            stopped: dict[str, Any] = {"label": label, "outcome": "interrupted", "exit": None, "written": True}
            report.runs.append(stopped)
            ended = _ended_after_stop(opts, label, stop.started)
            if ended is None:  # a log that does not take its end is said, and the stop goes on
                stopped["written"] = _write_end(opts, log, clock, report, label, {"outcome": "exited"},
                                                f"the re-run of {label} was stopped by {stop.signal}")
                said = ("its end is written with no exit status" if stopped["written"]
                        else "its end could not be written (the line to append is said)")
                stop.what = (f"while {label} re-ran: it was stopped and {said}" if stop.started
                             else f"after catchup_kicked of {label}, before it re-ran ({said})")
            else:
                stop.what = (f"while {label} re-ran, and it may still run ({ended}): no end is written, so no "
                             f"catch-up kicks anything until it is ({rerun_end_cmd(log_arg(opts), label)} once it "
                             "no longer runs)")
            stop.what += (" and it is not kicked again today (re-run it by hand if it must run: "
                          f"{explain_cmd(log_arg(opts), label)} says how)")
            raise
        if ran.may_run:  # no end happened: none is written, and nothing starts after it
            timed_out = f"re-run timed out after {opts.timeout_s:g} s; " if ran.timed_out else ""
            report.runs.append({"label": label, "outcome": "may_still_run", "exit": None, "written": True})
            report.problems.append(f"{label}: {timed_out}{ran.error}: it may still run, so no end is written "
                                   "and nothing more is kicked (re-runs never overlap)")
            report.not_kicked.extend(labels[i + 1:])
            return
        problem = None
        lost_sight = ran.timed_out and ran.error is not None  # the scheduler stopped answering; the job was stopped
        if not ran.started:
            problem = f"{label}: kick command could not start: {ran.error}" if opts.scheduler is None else (
                f"{label}: {opts.scheduler.name} could not start it: {ran.error}")
            ran = JobRan(True, 127)
        end: dict[str, Any]
        if ran.timed_out:
            end = {"outcome": "timeout_killed"}
            problem = f"{label}: re-run timed out after {opts.timeout_s:g} s; {ran.error or 'stopped'}"
        else:
            end = {"outcome": "exited", "exit": ran.exit}
            if ran.exit != 0:
                problem = problem or f"{label}: re-run exit {ran.exit}"
        if problem:
            report.problems.append(problem)
        done: dict[str, Any] = {"label": label, "outcome": end["outcome"], "exit": end.get("exit"), "written": True}
        report.runs.append(done)
        done["written"] = _write_end(opts, log, clock, report, label, end,
                                     f"the re-run of {label} ended: {_ran_words(done)}")
        if lost_sight:
            report.notes.append(f"{label}: the scheduler stopped answering: no more re-runs")
        if not done["written"] or lost_sight:
            report.not_kicked.extend(labels[i + 1:])
            return


def _write_end(opts: Options, log: Log, clock: Clock, report: Report, label: str, end: dict[str, Any],
               act: str) -> bool:
    """Append the ``catchup_finished`` of ``label`` (``end``: its ``outcome`` and ``exit``); whether it was written.

    An end that happened is never lost: when its line cannot be written, a problem says why and that nothing more
    is kicked, and :class:`~eventlog.runners.common.Unwritten` keeps that exact line to paste, saying ``act`` (what
    happened). Until it is appended the log holds the re-run open: it "may still run", and a pass with
    ``kick_cmd`` kicks nothing.
    """
    finished = {"type": "catchup_finished", "ts": clock().isoformat(), "label": label, **end}
    try:
        log.append([finished])
    except AppendError as err:
        lost = Unwritten.of(log_arg(opts), act, [finished])
        report.unwritten.append(lost)
        report.problems += [f"cannot append the end of the re-run of {label} to the log: {'; '.join(err.messages)}; "
                            "nothing more is kicked, and until it is appended the log holds the re-run open (it may "
                            "still run, to the views and the next pass)", lost.problem(opts.log)]
        return False
    return True


def _ran_words(run: dict[str, Any]) -> str:
    """How a re-run ended, for people: ``exited (exit 3)``, ``timeout_killed``."""
    return str(run["outcome"]) + (f" (exit {run['exit']})" if run["exit"] is not None else "")


def _ended_after_stop(opts: Options, label: str, started: bool) -> str | None:
    """None when a re-run a stop signal cut short no longer runs; else why it may still run.

    A kick command's process group was stopped and its leader reaped (:func:`eventlog.runners.process.run`);
    a scheduled job was stopped through the scheduler, which is asked whether it still runs.
    """
    if opts.scheduler is None or not started:
        return None
    try:
        running = opts.scheduler.state(label).running
    except SchedulerError as err:
        return f"whether it still runs cannot be told: {err}"
    return f"{opts.scheduler.name} still runs it" if running else None


def _probe(opts: Options, report: Report, now: datetime) -> str | None:
    """Run the probe and judge it as the failback probe is judged; why it failed (None: it said ok)."""
    assert opts.probe_cmd is not None
    try:
        ran = run(opts.probe_cmd, timeout_s=opts.probe_timeout_s, grace_s=opts.kill_grace_s, capture_stdout=True,
                  capture_stderr=True)
    except Interrupted as stop:
        stop.what = "while the probe ran (its process group was stopped): nothing kicked"
        report.note = "nothing kicked"
        raise
    verdict = judge(ran, opts.probe_timeout_s, now=now, expected=opts.expected)
    if verdict is None or ran.timed_out:
        report.probe = "failed"
        return ran.failure(opts.probe_timeout_s)
    report.probe = verdict.outcome
    if verdict.outcome != "ok":
        if ran.no_answer(opts.probe_timeout_s):  # the detail names the exit or signal
            return f"{verdict.outcome}: {verdict.detail}"
        return f"{verdict.outcome}, {ran.ended()}: {verdict.detail}"
    return None


def _rerun(opts: Options, label: str) -> JobRan:
    """Re-run one job, through the scheduler or the kick command, and wait for it (stopped over the timeout).

    A kick command's process group is always stopped and its leader reaped, so it never ``may_run``.
    """
    if opts.scheduler is not None:
        return run_job(opts.scheduler, label, timeout_s=opts.timeout_s, grace_s=opts.kill_grace_s, poll_s=opts.poll_s)
    assert opts.kick_cmd is not None
    dash = ["--"] if label.startswith("-") else []  # else the kick command reads the label as an option
    ran = run([*opts.kick_cmd, *dash, label], env={"CATCHUP_LABEL": label}, timeout_s=opts.timeout_s,
              grace_s=opts.kill_grace_s, capture_stdout=False)
    return JobRan(ran.started, ran.exit, ran.timed_out, ran.stdout, ran.stderr, ran.error, ran.stdout_cut,
                  ran.stderr_cut)


__all__ = ["KICK_TIMEOUT_S", "KILL_GRACE_S", "PROBE_TIMEOUT_S", "Options", "Report", "no_guarded_job", "run_catchup"]
