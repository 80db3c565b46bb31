"""What a lane observer reads (seed 001), and what the log already knows of a lane: pure functions.

Seed 001 judged a lane from the worker log, the product repository's HEAD and
the progress file's mtime, with the stop file and ``state: idle`` meaning
"stopped on purpose". The observer (``eventlog.runners.observe``) reads those
and appends only what changed; the parsing and the comparison are here:

- :func:`finished_lines`: the worker log's "job finished" lines. The format
  read by default (:data:`FINISHED`) is one marker per line, in the style of
  the quota guard's markers: ``JOB_FINISHED job=ID ts=TIME``, ``job=`` optional,
  ``TIME`` an epoch in seconds or an ISO 8601 time. Any other format is read
  with a regex of the user's that has a named group ``ts`` (and optionally
  ``job_id``): ``(?P<ts>\\S+) .* finished job (?P<job_id>\\S+)``. An epoch is
  written in the zone given (the local zone by default); an ISO time without
  an offset is read in the zone given, and is a problem without one
  (:func:`eventlog.importers.read_time`). A last line without its newline is
  held back only while it may still become such a line (:func:`finished_tail`).
- :func:`progress_state`: ``running`` or ``idle`` as the progress file says
  it, in any case (``Idle``). A file that is one JSON object is read as JSON,
  in any layout: its top-level ``state`` (``{"state": "idle"}`` on one line,
  as a program writes it; a ``state`` nested deeper is not the lane's). Any
  other file is read by its first state line: ``state`` at the start of a
  line, or of a Markdown bullet (``-``, ``*``, ``+``), then ``:`` or ``=``
  and the state; the word ``state`` in any case, and it and the state may be
  quoted (``"``, ``'``, a backtick) or in emphasis (``**State:** idle``).
  So ``state: idle`` (YAML), ``state=idle``, ``"state": "idle",``,
  ``- state: idle``, ``State: Idle``, ``- **State:** idle``. None when the
  file says neither (the observer then writes ``running``: a progress file
  that is being written is a running lane).
- :class:`LaneKnown` / :func:`lane_known`: the product's latest
  ``job_finished`` (and every one's instant and job id), ``repo_commit`` head,
  ``status_updated`` instant and state, and whether it is stopped, by log order;
  a ``job_finished`` or ``status_updated`` dated ahead of now
  (:func:`eventlog.importers.ahead_edge`) is never the latest a new one is
  compared with (the latest not dated ahead is).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo

from eventlog.events import (
    Event,
    JobFinished,
    LaneStarted,
    LaneStopped,
    RepoCommit,
    StatusUpdated,
)
from eventlog.importers import ahead_edge, instant, marker_tail, not_utf8, read_time, too_long

#: The worker log's "job finished" line read by default.
FINISHED = r"JOB_FINISHED(?:\s+job=(?P<job_id>\S+))?\s+ts=(?P<ts>\S+)"
_FINISHED_TAIL = marker_tail(["JOB_FINISHED"])

#: Emphasis, and quotes, around the word ``state`` or the state (Markdown's ``**State:**``, a backtick).
_EMPH, _QUOTE = r"[*_]{0,2}", r"[\"'`]?"
_STATE = re.compile(rf"(?im)^\s*(?:[-*+]\s+)?{_EMPH}{_QUOTE}state{_QUOTE}{_EMPH}\s*[:=]{_EMPH}\s*{_QUOTE}{_EMPH}"
                    r"(running|idle)\b")
#: The states a progress file may say.
_STATES = ("running", "idle")


@dataclass(frozen=True)
class Finished:
    """One "job finished" line of the worker log."""

    at: datetime
    job_id: str | None
    line: int


def finished_lines(lines: Iterable[str], source: str, pattern: re.Pattern[str], tz: tzinfo | None = None
                   ) -> tuple[list[Finished], list[str]]:
    """Every line ``pattern`` finds (its ``ts`` and ``job_id`` groups) in the file ``source``, and the lines whose
    time is unreadable, or whose ``ts`` or ``job_id`` holds a byte that is not UTF-8 (lines read by
    :func:`eventlog.importers.bounded_text`), and the lines too long to read (``too_long``), each named
    ``SOURCE:LINE: reason``."""
    found: list[Finished] = []
    problems: list[str] = []
    for number, line in enumerate(lines, 1):
        long = too_long(line)  # skipped unread (:func:`eventlog.importers.bounded_text`): it may be one
        if long is not None:
            problems.append(f"{source}:{number}: {long}")
            continue
        m = pattern.search(line)
        if m is None:
            continue
        groups = [name for name in ("ts", "job_id") if m.groupdict().get(name) is not None]
        bad = next(filter(None, (not_utf8(line, *m.span(name)) for name in groups)), None)
        if bad is not None:
            problems.append(f"{source}:{number}: {bad}")
            continue
        try:
            at = read_time(m.group("ts"), tz)
        except ValueError as err:
            problems.append(f"{source}:{number}: {err}")
            continue
        job_id = m.groupdict().get("job_id")
        found.append(Finished(at, job_id or None, number))
    return found, problems


def finished_tail(pattern: re.Pattern[str]) -> Callable[[str], bool]:
    """Whether the worker log's last line, without its newline, may still become a "job finished" line, and is held
    back (:class:`eventlog.importers.EndedLines`): with the default format, one that holds ``JOB_FINISHED`` or ends
    with its start (:func:`eventlog.importers.marker_tail`); with a regex of the user's, whose records cannot be
    told from their start, one the regex finds already (what it found may still grow: a cut time). A line it does
    not find yields nothing when read now, and the next pass reads it again."""
    if pattern.pattern == FINISHED:
        return _FINISHED_TAIL
    return lambda line: pattern.search(line) is not None


def compile_finished(regex: str) -> re.Pattern[str]:
    """The worker log's pattern; ValueError unless it compiles and has a ``ts`` group."""
    try:
        pattern = re.compile(regex)
    except re.error as err:
        raise ValueError(f"--finished-regex {regex!r}: {err}") from None
    if "ts" not in pattern.groupindex:
        raise ValueError(f"--finished-regex {regex!r} has no named group ts: (?P<ts>...)")
    return pattern


def progress_state(text: str) -> str | None:
    """``running`` or ``idle`` as the progress file says it, or None when it says neither.

    A JSON object is read as JSON (its top-level ``state`` only); any other text by its first state line (the
    module's docstring says which). The state in any case.
    """
    try:
        doc = json.loads(text.removeprefix("\ufeff"))
    except ValueError:  # not JSON (YAML, key=value, Markdown, or cut short): its lines say it
        m = _STATE.search(text)
        return m.group(1).lower() if m else None
    if not isinstance(doc, dict):
        return None
    state = doc.get("state")
    return state.lower() if isinstance(state, str) and state.lower() in _STATES else None


@dataclass
class LaneKnown:
    """What the log knows of one lane (latest by log order; of ``job_finished`` and ``status_updated``, the latest not
    dated ahead of now)."""

    #: (instant, job id) of every ``job_finished``.
    finished: set[tuple[int, str | None]] = field(default_factory=set)
    #: The instant and time (as written) of the latest ``job_finished`` not dated ahead.
    latest_finished: tuple[int, str] | None = None
    head: str | None = None
    status: tuple[int, str] | None = None
    stopped: bool = False


def lane_known(events: Iterable[tuple[Event, datetime]], product: str, now: datetime) -> LaneKnown:
    """Fold the product's lane events of a log (decoded, with their times) into :class:`LaneKnown`, judging what is
    dated ahead of ``now``."""
    out = LaneKnown()
    edge = ahead_edge(now)
    for ev, at in events:
        if getattr(ev, "product", None) != product:
            continue
        at_i = instant(at)
        if isinstance(ev, JobFinished):
            out.finished.add((at_i, ev.job_id))
            if at_i <= edge:
                out.latest_finished = (at_i, ev.ts)
        elif isinstance(ev, RepoCommit):
            out.head = ev.head
        elif isinstance(ev, StatusUpdated):
            if at_i <= edge:
                out.status = (at_i, ev.state)
        elif isinstance(ev, LaneStopped | LaneStarted):
            out.stopped = isinstance(ev, LaneStopped)
    return out


__all__ = ["FINISHED", "Finished", "LaneKnown", "compile_finished", "finished_lines", "finished_tail", "lane_known",
           "progress_state"]
