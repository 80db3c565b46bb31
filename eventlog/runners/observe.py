"""``eventlog observe lane``: turn what a lane leaves on disk into lane events, appending only what changed.

Seed 001's inputs, each optional (at least one is given):

- the worker log (``worker_log``): every "job finished" line not older than
  the lane's latest ``job_finished`` in the log (not dated ahead of now) becomes
  a ``job_finished`` at that line's time, with its job id (format:
  :mod:`eventlog.observe`); one older than it and not in the log is counted
  (``older``: ``FILE:LINE``), not appended (appended after it, it would become
  the latest by log order); a last line without its newline that may still
  become a "job finished" line is not read yet (``unfinished``;
  :func:`eventlog.observe.finished_tail`): a cut time is an earlier time;
- the product repository (``repo``, ``ref``: ``HEAD``): ``git rev-parse``;
  a head other than the lane's latest ``repo_commit`` becomes a ``repo_commit``
  at the time the ref moved there (its reflog entry; the commit's committer
  date when there is no reflog, e.g. a bare clone);
- the progress file (``progress``): its mtime and ``state:`` line; a newer
  mtime (or another state) than the lane's latest ``status_updated`` becomes a
  ``status_updated`` at the mtime (state ``running`` unless the file says
  ``idle``);
- the stop file (``stop_file``): there while the lane is not stopped in the log
  -> ``lane_stopped`` at its mtime; gone (it does not exist) while it is ->
  ``lane_started`` now. One that cannot be checked (a symlink loop, no
  permission, an I/O error) is a problem, and the stop stays as the log has
  it: a lane stopped on purpose is never resumed on a guess.

New events are appended in time order, in one checked append, under
``LOG.observe.lock``; nothing changed, nothing written: safe every 10 minutes
from cron. A source that cannot be read is a problem (``status`` 1) and the
others are still observed; so are bad lines of the log (named, ``status`` 1).
A worker log line that cannot become an event (its time unreadable, a byte
that is not UTF-8 in its time or job id, an event the appender would refuse)
is named ``FILE:LINE: reason`` on every pass, and the others are observed; so
is a last line left without its newline for a minute.

:func:`observe_dir` observes every lane of a directory of lane env files
(``NAME.env``, the ``KEY=VALUE`` files the ``recovery-ledger-observe-lane@NAME``
units read, :data:`LANE_KEYS`), read as data (:mod:`eventlog.envfile`), each by
:func:`observe_lane`: the lanes pass's first step (``eventlog lanes --observe``).

"Now" is the time ``at`` gives (``--at``, else the clock). A worker log line
or a progress file's mtime dated ahead of it (more than the views' tolerance,
:func:`eventlog.importers.ahead_edge`: 2062 typed for 2026, a clock ahead) is
not appended and is named (``status`` 1, counted in ``dated_ahead``): a check
that waits on it could not fire before the clock passes it. One the log holds
already is never the latest a new line is compared with, so it blocks no
later line with a true time.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any

import msgspec

from eventlog.appender import AppendError
from eventlog.clock import NOW, At
from eventlog.envfile import parse_env
from eventlog.importers import (
    EndedLines,
    appendable,
    bounded_text,
    instant,
    not_ahead,
    not_utf8,
    open_file,
    open_file_text,
)
from eventlog.logs import open_log
from eventlog.observe import (
    FINISHED,
    LaneKnown,
    compile_finished,
    finished_lines,
    finished_tail,
    lane_known,
    progress_state,
)
from eventlog.runners.common import (
    BadLines,
    LockUnavailable,
    RunnerError,
    count_unfinished,
    log_events,
    name_bad_lines,
    not_a_directory,
    runner_lock,
    unfinished_words,
)
from eventlog.runners.process import Interrupted, run
from projections.lanes import DIR_EMPTY, DIR_UNREADABLE

#: Bound on one ``git`` call.
GIT_TIMEOUT_S = 30.0


@dataclass(kw_only=True)
class LaneObservation:
    """Where one lane's signals are (paths as given), and how to read them."""

    log: str
    product: str
    worker_log: str | None = None
    finished_regex: str = FINISHED
    repo: str | None = None
    ref: str = "HEAD"
    progress: str | None = None
    stop_file: str | None = None
    #: The zone of times written without an offset (worker log lines, mtimes); None: the local zone.
    assume_tz: tzinfo | None = None
    #: The time ``lane_started`` is stamped with (now unless pinned).
    at: At = NOW
    #: Whether the log's bad lines are among the problems (False: the caller says them itself, as a lanes pass
    #: does: only those new since its last check); they are counted in ``bad_lines`` either way.
    say_bad_lines: bool = True

    def check(self) -> re.Pattern[str]:
        """RunnerError when it cannot run; the worker log's pattern."""
        if not self.product:
            raise RunnerError("PRODUCT is empty")
        bad = not_utf8(self.product)  # a command line's bytes that are not UTF-8: no event can hold them
        if bad is not None:
            raise RunnerError(f"PRODUCT {self.product!a}: {bad}")
        if not any((self.worker_log, self.repo, self.progress, self.stop_file)):
            raise RunnerError("nothing to observe: give --worker-log, --repo, --progress or --stop-file")
        not_a_directory(self.log)
        try:
            return compile_finished(self.finished_regex)
        except ValueError as err:
            raise RunnerError(str(err)) from None


class ObserveReport(msgspec.Struct, kw_only=True):
    """What was appended (in order), the log's bad lines, the sources that could not be read or used (a line or an
    mtime dated ahead of now included, counted in ``dated_ahead``), and the worker log's lines left for now: older
    than the lane's latest ``job_finished``, or not ended yet (``FILE:LINE``)."""

    log: str
    product: str
    #: The lane's env file, when it was observed from one (:func:`observe_dir`).
    file: str | None = None
    appended: list[dict[str, Any]] = msgspec.field(default_factory=list)
    bad_lines: BadLines = msgspec.field(default_factory=BadLines)
    problems: list[str] = msgspec.field(default_factory=list)
    #: "Job finished" lines older than the lane's latest ``job_finished`` in the log: not appended.
    older: list[str] = msgspec.field(default_factory=list)
    #: A last line without its newline: not read yet, read once it ends.
    unfinished: list[str] = msgspec.field(default_factory=list)
    #: How many lines or mtimes were dated ahead of now (not appended; each named in ``problems``).
    dated_ahead: int = 0

    @property
    def status(self) -> int:
        """1 when a source could not be read or used (a time dated ahead of now included) or the log has bad lines,
        else 0."""
        return 1 if self.problems else 0

    def text(self) -> list[str]:
        """For people."""
        older = (f"{len(self.older)} finished line(s) older than the lane's latest job_finished, not appended: "
                 f"{', '.join(self.older)}") if self.older else ""
        left = "; ".join(filter(None, (older, unfinished_words(self.unfinished))))
        name = self.product or self.file or ""
        if not self.appended:
            done = (f"nothing written; {len(self.problems)} problem(s), on stderr" if self.problems
                    else "nothing changed, nothing written")
            return [f"{name}: {done}" + (f"; {left}" if left else "")]
        return [f"{name}: {e['type']} at {e['ts']}" + (f" ({_what(e)})" if _what(e) else "")
                for e in self.appended] + ([f"{name}: {left}"] if left else [])


def _what(ev: dict[str, Any]) -> str:
    return str(ev.get("job_id") or ev.get("head") or ev.get("state") or "")


def observe_lane(opts: LaneObservation) -> ObserveReport:
    """Observe one lane and append what changed (see the module docstring).

    Raises RunnerError for bad usage, OSError when the log cannot be read, AppendError when it cannot be written.
    """
    pattern = opts.check()
    report = ObserveReport(log=opts.log, product=opts.product)
    with runner_lock(opts.log, "observe", wait=True):
        bad: list[dict[str, Any]] = []
        now = opts.at.clock(None)()
        known = lane_known(log_events(opts.log, opts.assume_tz, bad), opts.product, now)
        if opts.say_bad_lines:
            name_bad_lines(report, opts.log, bad)
        else:
            report.bad_lines = BadLines.of(bad)
        new: list[tuple[datetime, dict[str, Any]]] = []
        ahead: list[str] = []
        if opts.worker_log:
            new += _finished(opts, pattern, known, report, now, ahead)
        if opts.repo:
            new += _commit(opts, known, report)
        if opts.progress:
            new += _status(opts, known, report, now, ahead)
        if opts.stop_file:
            new += _stop(opts, known, report, now)
        report.problems += ahead
        report.dated_ahead = len(ahead)
        new.sort(key=lambda pair: instant(pair[0]))
        events = [ev for _, ev in new]
        if events:
            with open_log(opts.log, assume_tz=opts.assume_tz) as log:
                log.append(events)
        report.appended = events
    return report


def _event(kind: str, product: str, at: datetime, **fields: Any) -> tuple[datetime, dict[str, Any]]:
    return at, {"type": kind, "ts": at.isoformat(), "product": product, **fields}


def _finished(opts: LaneObservation, pattern: re.Pattern[str], known: LaneKnown, report: ObserveReport,
              now: datetime, ahead: list[str]) -> list[tuple[datetime, dict[str, Any]]]:
    assert opts.worker_log is not None
    try:
        with open_file(opts.worker_log) as f:
            lines = EndedLines(bounded_text(f), finished_tail(pattern))
            found, bad = finished_lines(lines, opts.worker_log, pattern, opts.assume_tz)
            count_unfinished(report, opts.worker_log, f, lines.unfinished)
    except OSError as err:
        report.problems.append(f"cannot read the worker log {opts.worker_log}: {err.strerror or err}")
        return []
    report.problems += bad
    out = []
    seen = set(known.finished)
    for item in sorted(found, key=lambda f: instant(f.at)):
        fields = {"job_id": item.job_id} if item.job_id else {}
        event = _event("job_finished", opts.product, item.at, **fields)
        where = f"{opts.worker_log}:{item.line}"
        if not appendable(where, report.problems, event[1]) or not not_ahead(where, ahead, event[1]["ts"], item.at,
                                                                              now):
            continue  # named on every pass while the worker log holds it, as a line whose time is unreadable
        key = (instant(item.at), item.job_id)
        if key in seen:
            continue
        latest = known.latest_finished
        if latest is not None and key[0] < latest[0]:
            report.older.append(where)  # appended now, it would become the latest
            continue
        seen.add(key)
        out.append(event)
    return out


def _git(repo: str, *args: str) -> str:
    ran = run(["git", "-C", repo, *args], timeout_s=GIT_TIMEOUT_S, grace_s=1.0, capture_stdout=True,
              capture_stderr=True)
    if not ran.ok:
        said = ran.said()
        raise OSError(f"git {' '.join(args)}: {ran.failure(GIT_TIMEOUT_S)}" + (f": {said}" if said else ""))
    if ran.stdout_cut:  # one line is asked for: never a part of more read as the answer
        raise OSError(f"git {' '.join(args)}: printed more than can be kept ({ran.stdout_cut} bytes not kept)")
    return ran.stdout.strip()


def _commit(opts: LaneObservation, known: LaneKnown, report: ObserveReport) -> list[tuple[datetime, dict[str, Any]]]:
    assert opts.repo is not None
    try:
        head = _git(opts.repo, "rev-parse", "--verify", opts.ref + "^{commit}")
        if head == known.head:
            return []
        moved = _git(opts.repo, "log", "-g", "-1", "--date=iso-strict", "--format=%H %gd", opts.ref)
        at_text = None
        if moved.startswith(head + " ") and "@{" in moved:
            at_text = moved[moved.index("@{") + 2:].rstrip("}")
        if at_text is None:
            at_text = _git(opts.repo, "show", "-s", "--format=%cI", head)
        at = datetime.fromisoformat(at_text)
    except (OSError, ValueError) as err:
        report.problems.append(f"cannot read the repository {opts.repo}: {err}")
        return []
    return [_event("repo_commit", opts.product, at, head=head)]


def _mtime(path: str, tz: tzinfo | None, st: os.stat_result | None = None) -> datetime:
    """The mtime of ``path`` (of ``st``, its stat when given) in ``tz`` (None: the local zone)."""
    value = datetime.fromtimestamp((st or os.stat(path)).st_mtime, tz)
    return value if tz is not None else value.astimezone()


def _status(opts: LaneObservation, known: LaneKnown, report: ObserveReport, now: datetime,
            ahead: list[str]) -> list[tuple[datetime, dict[str, Any]]]:
    assert opts.progress is not None
    try:
        at = _mtime(opts.progress, opts.assume_tz)
        with open_file_text(opts.progress, "replace") as f:
            state = progress_state(f.read(1 << 20)) or "running"
    except OSError as err:
        report.problems.append(f"cannot read the progress file {opts.progress}: {err.strerror or err}")
        return []
    if not not_ahead(f"the progress file {opts.progress} (its mtime)", ahead, at.isoformat(), at, now):
        return []
    if known.status is not None and (instant(at) < known.status[0] or (instant(at), state) == known.status):
        return []
    return [_event("status_updated", opts.product, at, state=state)]


def _stop(opts: LaneObservation, known: LaneKnown, report: ObserveReport,
          now: datetime) -> list[tuple[datetime, dict[str, Any]]]:
    assert opts.stop_file is not None
    try:
        st: os.stat_result | None = os.stat(opts.stop_file)
    except FileNotFoundError:  # it does not exist (a symlink to nothing neither): not stopped
        st = None
    except OSError as err:  # ELOOP, EACCES, EIO, ENOTDIR: it may be there
        report.problems.append(f"cannot check the stop file {opts.stop_file}: {err.strerror or err} "
                               "(the lane's stop is left as the log has it)")
        return []
    if st is not None and not known.stopped:
        return [_event("lane_stopped", opts.product, _mtime(opts.stop_file, opts.assume_tz, st))]
    if st is None and known.stopped:
        return [_event("lane_started", opts.product, now)]
    return []


# --- a directory of lanes (the lanes pass's --observe) ------------------------------------------

#: A lane env file's keys (ops/systemd/lane.env; what the observe-lane@ unit passes each as).
LANE_KEYS: dict[str, str] = {
    "LANE_PRODUCT": "PRODUCT", "LANE_WORKER_LOG": "--worker-log", "LANE_FINISHED_REGEX": "--finished-regex",
    "LANE_REPO": "--repo", "LANE_REF": "--ref", "LANE_PROGRESS": "--progress", "LANE_STOP_FILE": "--stop-file",
}
#: The keys of the sources: at least one is needed.
SOURCE_KEYS = ("LANE_WORKER_LOG", "LANE_REPO", "LANE_PROGRESS", "LANE_STOP_FILE")


def lane_settings(path: str, log: str, assume_tz: tzinfo | None = None, at: At = NOW,
                  ) -> tuple[LaneObservation | None, list[str]]:
    """The observation of the lane env file ``path`` into ``log``, read as the observe-lane@ unit passes it (an
    empty or unset key is an option not given), or None and why it cannot be used (``FILE:LINE: reason``, one
    each: a line :func:`eventlog.envfile.parse_env` refuses, a key that is no lane setting, no product, no
    source, a regex that does not compile)."""
    try:
        with open_file(path) as f:
            data = f.read()
    except OSError as err:
        return None, [f"{path}: cannot read it: {err.strerror or err}"]
    values, problems = parse_env(data, path, LANE_KEYS)

    def get(key: str) -> str | None:
        return values[key].value if key in values and values[key].value else None

    product = get("LANE_PRODUCT")
    if product is None:
        problems.append(f"{path}: no LANE_PRODUCT: set it to the lane's product (what status and the alerts call "
                        "the lane)")
    if not any(get(key) for key in SOURCE_KEYS):
        problems.append(f"{path}: nothing to observe: set {', '.join(SOURCE_KEYS[:-1])} or {SOURCE_KEYS[-1]}")
    regex = get("LANE_FINISHED_REGEX") or FINISHED
    try:
        compile_finished(regex)
    except ValueError as err:
        problems.append(f"{path}:{values['LANE_FINISHED_REGEX'].line}: LANE_FINISHED_REGEX: {err}")
    if problems or product is None:
        return None, problems
    return LaneObservation(log=log, product=product, worker_log=get("LANE_WORKER_LOG"), finished_regex=regex,
                           repo=get("LANE_REPO"), ref=get("LANE_REF") or "HEAD", progress=get("LANE_PROGRESS"),
                           stop_file=get("LANE_STOP_FILE"), assume_tz=assume_tz, at=at, say_bad_lines=False), []


def no_env_file(directory: str) -> str:
    """The problem of a lanes directory that holds no ``NAME.env`` (the lanes pass lets it pass when every lane the
    log knows is stopped on purpose: the last lane retired)."""
    return (f"{DIR_EMPTY} {directory} holds no *.env file: no lane is observed (one NAME.env per lane: "
            "ops/systemd/lane.env)")


def observe_dir(directory: str, log: str, assume_tz: tzinfo | None = None, at: At = NOW) -> list[ObserveReport]:
    """Observe every lane of ``directory`` into ``log``: each ``*.env`` file (not hidden), in name order, is one
    lane (:func:`lane_settings`), observed as :func:`observe_lane` does; the log's bad lines are counted, not said
    (the caller says them).

    One report per file, with its ``file``, each problem naming the lane (``lane PRODUCT (FILE): ...``) or the
    file (``FILE:LINE: ...``): a file that cannot be used, or two files of one product, is not observed; a lane
    whose log cannot be read or written is said, and the next is still observed. A directory that cannot be read
    or holds no ``*.env`` file is one report with that problem (a pass that observes nothing must not look fine).
    A stop signal (:class:`~eventlog.runners.process.Interrupted`) is raised, saying which lane it cut short.
    """
    try:
        with os.scandir(directory) as entries:
            names = sorted(e.name for e in entries if e.name.endswith(".env") and not e.name.startswith("."))
    except OSError as err:
        return [ObserveReport(log=log, product="", file=directory,
                              problems=[f"{DIR_UNREADABLE} {directory}: {err.strerror or err}"])]
    if not names:
        return [ObserveReport(log=log, product="", file=directory, problems=[no_env_file(directory)])]
    reports: list[ObserveReport] = []
    files: dict[str, str] = {}
    for name in names:
        path = os.path.join(directory, name)
        opts, problems = lane_settings(path, log, assume_tz, at)
        if opts is not None and opts.product in files:
            problems = [f"{path}: LANE_PRODUCT {opts.product} is also {files[opts.product]}'s: one file per lane "
                        "(this one is not observed)"]
            opts = None
        if opts is None:
            reports.append(ObserveReport(log=log, product="", file=path, problems=problems))
            continue
        files[opts.product] = path
        reports.append(_observe_one(opts, path))
    return reports


def _observe_one(opts: LaneObservation, path: str) -> ObserveReport:
    """:func:`observe_lane` of the lane of ``path``, its problems (and a failure) said as the lane's."""
    where = f"lane {opts.product} ({path})"
    try:
        report = observe_lane(opts)
    except Interrupted as stop:
        stop.what = f"while observing {where}: nothing of it appended, nothing judged"
        raise
    except LockUnavailable as err:  # LOG.observe.lock
        report = ObserveReport(log=opts.log, product=opts.product, problems=list(err.messages))
    except AppendError as err:
        report = ObserveReport(log=opts.log, product=opts.product,
                               problems=[f"cannot append to {opts.log}: {'; '.join(err.messages)}"])
    except OSError as err:  # the log could not be read
        report = ObserveReport(log=opts.log, product=opts.product,
                               problems=[f"cannot read {opts.log}: {err.strerror or err}"])
    except ValueError as err:  # RunnerError: settings observe lane refuses
        report = ObserveReport(log=opts.log, product=opts.product, problems=[str(err)])
    report.file = path
    report.problems = [f"{where}: {problem}" for problem in report.problems]
    return report


__all__ = ["GIT_TIMEOUT_S", "LANE_KEYS", "LaneObservation", "ObserveReport", "lane_settings", "observe_dir",
           "observe_lane"]
