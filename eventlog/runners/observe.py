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

from eventlog.clock import NOW, At
from eventlog.importers import EndedLines, appendable, instant, not_ahead, not_utf8, open_text
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
    RunnerError,
    count_unfinished,
    log_events,
    name_bad_lines,
    not_a_directory,
    runner_lock,
    unfinished_words,
)
from eventlog.runners.process import run

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
        if not self.appended:
            done = (f"nothing written; {len(self.problems)} problem(s), on stderr" if self.problems
                    else "nothing changed, nothing written")
            return [f"{self.product}: {done}" + (f"; {left}" if left else "")]
        return [f"{self.product}: {e['type']} at {e['ts']}" + (f" ({_what(e)})" if _what(e) else "")
                for e in self.appended] + ([f"{self.product}: {left}"] if left else [])


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
        name_bad_lines(report, opts.log, bad)
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
        with open_text(opts.worker_log) as f:
            lines = EndedLines(f, finished_tail(pattern))
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
        with open(opts.progress, encoding="utf-8", errors="replace") as f:
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


__all__ = ["GIT_TIMEOUT_S", "LaneObservation", "ObserveReport", "observe_lane"]
