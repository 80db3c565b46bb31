"""Quota catch-up candidates (seed 002, spec section 5): skipped scheduled jobs after the circuit closes.

Every rule is in the section "the rules" below: :func:`is_candidate` (the
seed's three filters), :func:`calendar_slot_passed` (a copy of the seed's
function over a ``job_registered``), :func:`runs_today` (launchd's calendar
semantics, not shown in the seed) and :func:`circuit_open`.

T's zone is the input of every rule: ``as_of`` carries it (its ``tzinfo``: a named zone
such as Europe/Berlin, or a fixed offset), and "today" and "the slot has passed" are days
and hours of that zone. The shell chooses it (``eventlog.clock.At``); nothing here reads
the machine's.

The fold keeps, per label, the latest ``job_registered`` (it replaces earlier
ones), the latest marker (``job_skipped`` or ``job_ran``, by log order) and
whether a ``catchup_kicked`` came after that marker; the latest
``circuit_opened`` with whether a ``circuit_closed`` came after it; and the
latest catch-up re-run of each job that did not end well (:class:`Rerun`).

**A re-run that did not end well** (the section "re-runs" below) stays named
until the job shows it ran again:

- it *ended badly*: its ``catchup_finished`` says ``timeout_killed``, or
  ``exited`` with an exit other than 0 or none;
- it *never reported its end*: a ``catchup_kicked`` with no ``catchup_finished``
  after it, once T is past the kick's time plus its timeout, twice its kill
  grace (SIGTERM, the grace, SIGKILL, the grace) and :data:`END_MARGIN_S` (the
  scheduler calls of the stop); the timeout and grace are the project-added
  ``timeout_s`` and ``kill_grace_s`` the runner writes on the kick, else the
  spec's 2700 s and 30 s. Before that it *may still run*.

**A job nothing feeds** (:func:`unfed_slot`): a guarded job whose calendar slot of today,
one not earlier than its latest registration, passed :data:`UNFED_AFTER_S` ago or more, and
whose latest marker is not of today (nor later): the guard writes a marker on every run,
skipped or ran, so either the job did not run at all or nothing imports its markers into
the log (``eventlog import quota-log``); either way no skip of today can ever make it a
candidate. Any marker of today ends it; a registration with ``guarded`` false retires it
(a removed job). It is no part of the seed's rules for candidates, and not in the dump.

What shows it ran again: a later ``job_skipped`` (the schedule started the
guard again: a skip of today is a candidate again), a later ``catchup_finished``
``exited`` 0, or a later ``job_ran`` unless it is the re-run's own marker: one
with an exit other than 0 dated within the re-run (from the kick to its
``catchup_finished``, or to its deadline when it has none), which the guard
writes for the re-run itself and the importer brings in after it.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any, Literal, NamedTuple

import msgspec

from eventlog.events import (
    CalendarEntry,
    CatchupFinished,
    CatchupKicked,
    CircuitClosed,
    CircuitOpened,
    Event,
    JobRan,
    JobRegistered,
    JobSkipped,
    KickedBy,
    parse_time,
)
from projections.base import FoldResult, Handler, micros


class Marker(msgspec.Struct, gc=False):
    """A job's latest guard marker: skipped or ran, its ``ts`` as the reader left it, whether it was kicked since."""

    skipped: bool
    ts: str
    kicked: bool = False
    #: The ``ts`` of the ``catchup_kicked`` since this marker, as written (None: not kicked).
    kicked_ts: str | None = None
    #: The marker's line (a view names it).
    line: int = 0

    @property
    def at(self) -> datetime:
        """The marker's time, in the offset it was written with."""
        return parse_time(self.ts)


#: How long after a guarded job's slot of today its marker may take to reach the log before the job is named as
#: one nothing feeds (:func:`unfed_slot`): the guard writes ``job_ran`` when the run ends, a run may take catch-up's
#: own timeout (2700 s), and the shipped units import markers every 30 minutes; 2 h leaves room for both.
UNFED_AFTER_S = 7200.0
#: The spec's timeout of a re-run (section 5) when its ``catchup_kicked`` names none.
TIMEOUT_S = 2700.0
#: The spec's kill grace (SIGTERM, then SIGKILL after it) when its ``catchup_kicked`` names none.
KILL_GRACE_S = 30.0
#: Past the timeout and twice the kill grace, how long a re-run may still take to be stopped and written down
#: (the scheduler calls of the stop, each bounded by 30 s) before its missing end is named.
END_MARGIN_S = 300.0


class Rerun(msgspec.Struct, gc=False):
    """A job's latest catch-up re-run that did not end well (yet): its kick, and its end when one was written.

    Times are as written; ``kicked_ts`` is None for a ``catchup_finished`` with no kick before it.
    """

    kicked_ts: str | None
    kicked_line: int = 0
    #: The kick's ``timeout_s`` and ``kill_grace_s`` as written (None: not written; :attr:`timeout`,
    #: :attr:`grace` give the spec's then).
    timeout_s: float | None = None
    kill_grace_s: float | None = None
    #: The kick's ``kicked_by`` and ``launchd_domain`` as written (None: not written, how it was kicked is unknown).
    kicked_by: KickedBy | None = None
    launchd_domain: str | None = None
    finished_ts: str | None = None
    finished_line: int = 0
    outcome: Literal["exited", "timeout_killed"] | None = None
    exit: int | None = None

    @property
    def timeout(self) -> float:
        """The re-run's timeout: the kick's, else the spec's 2700 s."""
        return TIMEOUT_S if self.timeout_s is None else self.timeout_s

    @property
    def grace(self) -> float:
        """The re-run's kill grace: the kick's, else the spec's 30 s."""
        return KILL_GRACE_S if self.kill_grace_s is None else self.kill_grace_s

    @property
    def ended(self) -> bool:
        """Whether a ``catchup_finished`` recorded its end."""
        return self.finished_ts is not None

    def deadline(self) -> datetime | None:
        """When its missing end is named: the kick, its timeout, twice its grace and :data:`END_MARGIN_S`.

        None when it has no kick, or the time is past what can be held (never).
        """
        if self.kicked_ts is None:
            return None
        try:
            return parse_time(self.kicked_ts) + timedelta(
                seconds=self.timeout + 2 * self.grace + END_MARGIN_S)
        except (OverflowError, ValueError):
            return None

    def own_marker(self, at: datetime, exit_: int) -> bool:
        """Whether a ``job_ran`` at ``at`` with ``exit_`` is this re-run's own (the guard's marker of it).

        A failing run dated from the kick to the re-run's end (its ``catchup_finished``, else its deadline).
        """
        if exit_ == 0 or self.kicked_ts is None:
            return False
        end = parse_time(self.finished_ts) if self.finished_ts is not None else self.deadline()
        return parse_time(self.kicked_ts) <= at and (end is None or at <= end)


def systemd_unit(label: str) -> str:
    """The service unit a label names under systemd (``.service`` added unless it ends so)."""
    return label if label.endswith(".service") else f"{label}.service"


RerunKind = Literal["rerun_failed", "rerun_no_end"]


class BadRerun(NamedTuple):
    """A re-run that did not end well, as of T: its label, what it is (a reason code) and its record."""

    label: str
    kind: RerunKind
    rerun: Rerun


class Unfed(NamedTuple):
    """A guarded job nothing feeds as of T: its label, the slot of today it has no marker for, its registration
    and its latest marker (None: none ever)."""

    label: str
    slot: datetime
    job: JobRegistered
    marker: Marker | None


class CatchupState(msgspec.Struct):
    """Everything the catch-up projection folds (projections/base.py: to add state, add a typed field)."""

    #: Label -> its latest ``job_registered``.
    jobs: dict[str, JobRegistered] = {}
    #: Label -> its latest marker.
    markers: dict[str, Marker] = {}
    #: The latest ``circuit_opened``'s ``open_until``, as the reader left it (printed by the runner).
    open_until: str | None = None
    #: Whether a ``circuit_closed`` came after it.
    closed_since: bool = False
    #: That ``circuit_opened``'s ``ts`` and ``reason``, as written (for "open since ..., because ...").
    opened_ts: str | None = None
    open_reason: str | None = None
    #: Label -> its latest re-run, until the job shows it ran again (see the module docstring).
    reruns: dict[str, Rerun] = {}


class Candidate(NamedTuple):
    """A job to re-run, with its registration."""

    label: str
    job: JobRegistered


# --- the rules -------------------------------------------------------------------------


def runs_today(entry: CalendarEntry, now: datetime) -> bool:
    """Whether a ``StartCalendarInterval`` entry fires on ``now``'s calendar day (launchd semantics).

    ``Month`` must match when given. ``Weekday`` (0 and 7 are Sunday) and
    ``Day``: when both are given the entry fires if EITHER matches (launchd.plist(5),
    as cron); when one is given it must match. A value out of its range never matches.
    """
    if entry.month is not None and entry.month != now.month:
        return False
    weekday = None if entry.weekday is None else 0 <= entry.weekday <= 7 and entry.weekday % 7 == now.isoweekday() % 7
    day = None if entry.day is None else entry.day == now.day
    if weekday is None and day is None:
        return True
    return bool(weekday) or bool(day)


def calendar_slot_passed(job: JobRegistered, now: datetime) -> bool:
    """True only for calendar-only jobs with at least one past slot today (seed 002, exactly).

    An ``interval_s`` job never; no calendar never; an entry without ``Hour``
    makes the job not a candidate; an hour or minute that is no time of day
    (``int``/``replace`` fails) makes it not a candidate when the entry fires
    today; every entry is looked at, their order does not matter; a slot
    exactly at ``now`` has passed (:func:`slot_passed`, in ``now``'s zone).
    """
    if job.interval_s is not None:
        return False
    entries = job.calendar
    if entries is None:
        return False

    saw_today_slot = False
    for entry in entries:
        if entry.hour is None:
            return False
        if not runs_today(entry, now):
            continue
        try:
            scheduled = now.replace(
                hour=int(entry.hour),
                minute=int(entry.minute if entry.minute is not None else 0),
                second=0,
                microsecond=0,
                fold=0,
            )
        except (TypeError, ValueError, OverflowError):  # no time of day (an Hour of 3000000000 too)
            return False
        if not slot_passed(scheduled, now):
            continue
        saw_today_slot = True
    return saw_today_slot


def slot_passed(scheduled: datetime, now: datetime) -> bool:
    """Whether the zone's clock has shown ``scheduled`` (today's slot, ``fold=0``) by ``now``.

    In a fixed offset: ``scheduled <= now``. On the day a named zone's clock changes:
    a slot in the hour that comes twice (01:30 in New York when 02:00 goes back to 01:00)
    has passed from its first showing on, the second hour does not take it back; a
    slot in the hour that is skipped (02:30 when 02:00 jumps to 03:00) has passed once
    the clock has jumped past it (from 03:00).
    """
    return now.replace(tzinfo=None) >= scheduled.replace(tzinfo=None) or (
        micros(scheduled) <= micros(now))


def skipped_today(marker: Marker | None, now: datetime) -> bool:
    """The latest marker is a ``job_skipped`` dated ``now``'s day (in ``now``'s zone)."""
    if marker is None or not marker.skipped:
        return False
    return marker_day(marker, now) == now.date()


def marker_day(marker: Marker, now: datetime) -> date | None:
    """The day of the marker's time in ``now``'s zone (the zone's rules at that instant, not ``now``'s offset).

    None for a day Python cannot hold there (never today).
    """
    try:
        return marker.at.astimezone(now.tzinfo).date()
    except (OverflowError, ValueError):
        return None


def is_candidate(job: JobRegistered, marker: Marker | None, now: datetime) -> bool:
    """Seed 002's filters: guarded, skipped today and not kicked since, a slot of today passed."""
    return (
        job.guarded
        and marker is not None
        and skipped_today(marker, now)
        and not marker.kicked
        and calendar_slot_passed(job, now)
    )


def slots_today(job: JobRegistered, now: datetime) -> list[datetime] | None:
    """The calendar slots of today of a calendar-only job, in ``now``'s zone (``fold=0``), as
    :func:`calendar_slot_passed` computes them; None when they cannot be known (an ``interval_s`` job, no
    calendar, an entry without ``Hour``, or one of today that is no time of day)."""
    if job.interval_s is not None or job.calendar is None:
        return None
    out: list[datetime] = []
    for entry in job.calendar:
        if entry.hour is None:
            return None
        if not runs_today(entry, now):
            continue
        try:
            out.append(now.replace(hour=int(entry.hour), minute=int(entry.minute if entry.minute is not None else 0),
                                   second=0, microsecond=0, fold=0))
        except (TypeError, ValueError, OverflowError):
            return None
    return out


def unfed_slot(job: JobRegistered, marker: Marker | None, now: datetime) -> datetime | None:
    """The slot of today a guarded job has no marker for, when nothing seems to feed its markers; else None.

    A guarded job, the earliest of its calendar slots of today (:func:`slots_today`) that is not earlier than
    its latest registration (``job``'s ``ts``: a job registered, or registered anew, after a slot was not
    scheduled so at that slot; a registration dated after ``now`` excuses no slot, as a marker dated ahead
    silences nothing) passed at least :data:`UNFED_AFTER_S` before ``now`` (as instants), and its
    latest marker (skipped or ran, by log order) is dated another day than today in ``now``'s zone, or there
    is none. Any marker of today ends it. A slot less than :data:`UNFED_AFTER_S` before midnight is not
    judged: the next day's slots are.
    """
    if not job.guarded:
        return None
    if marker is not None and marker_day(marker, now) == now.date():
        return None
    registered = micros(parse_time(job.ts))
    ahead = registered > micros(now)  # dated ahead of T (a clock ahead, or T in the past): it excuses no slot
    slots = [slot for slot in slots_today(job, now) or [] if ahead or micros(slot) >= registered]
    if not slots:
        return None
    first = min(slots, key=micros)
    return first if micros(now) - micros(first) >= UNFED_AFTER_S * 1_000_000 else None


def why_not(job: JobRegistered | None, marker: Marker | None, now: datetime) -> list[str]:
    """Which of seed 002's three conditions fail for a label as of ``now``, in words (empty: it is a candidate).

    The conditions are :func:`is_candidate`'s: the job is guarded (``is_guarded``),
    its latest marker is a skip of today not kicked since
    (``latest_marker_is_today_skip``), and a calendar slot of today has passed
    (``calendar_slot_passed``). Every failing one is named, in that order.
    """
    out: list[str] = []
    if job is None:
        out.append("no job_registered names it: it is no scheduled job of this log")
    elif not job.guarded:
        out.append("it is not guarded: the quota guard does not run it, so it never skips for quota")
    if marker is None:
        out.append("the guard left no marker for it yet (neither skipped nor ran)")
    elif not marker.skipped:
        out.append(f"its latest marker is a run ({marker.ts}), not a skip")
    elif not skipped_today(marker, now):
        day = marker_day(marker, now)
        out.append(f"its latest skip ({marker.ts}) is from {'a day out of range' if day is None else day}, "
                   f"not from {today_words(now)}")
    elif marker.kicked:
        out.append(f"catch-up already re-ran it at {marker.kicked_ts} after that skip")
    if job is not None and not calendar_slot_passed(job, now):
        out.append(_no_slot(job, now))
    return out


def _no_slot(job: JobRegistered, now: datetime) -> str:
    """Why no calendar slot of today has passed, in words (``calendar_slot_passed`` said False)."""
    if job.interval_s is not None:
        return f"it runs every {job.interval_s} s (StartInterval): the next run comes by itself"
    if job.calendar is None:
        return "it has no calendar slot (no StartCalendarInterval)"
    if any(entry.hour is None for entry in job.calendar):
        return "a calendar entry has no Hour, so its slots cannot be known"
    today = [entry for entry in job.calendar if runs_today(entry, now)]
    if not today:
        return f"none of its calendar slots falls on {today_words(now)}"
    slots = []
    for entry in today:
        hour, minute = entry.hour, entry.minute if entry.minute is not None else 0
        if hour is None or not (0 <= hour <= 23 and 0 <= minute <= 59):
            return f"a calendar entry of today is no time of day (Hour {hour}, Minute {minute})"
        slots.append(f"{hour:02d}:{minute:02d}")
    return f"its slot(s) of {today_words(now)}, {', '.join(sorted(slots))}, have not come yet"


def today_words(now: datetime) -> str:
    """``today (2026-10-25 in Europe/Berlin)``: ``now``'s day, and the zone it is judged in (whose day and hours
    "today" and a slot are): its name, or its offset when it has none (``today (2026-10-25 in UTC+01:00)``).

    Always named: the machine's zone when ``TZ`` is unset carries the name /etc/localtime gives it
    (:func:`eventlog.clock.local_zone`)."""
    key = getattr(now.tzinfo, "key", None)
    offset = now.utcoffset()
    zone = key if isinstance(key, str) else timezone(offset).tzname(None) if offset is not None else "UTC"
    return f"today ({now.date().isoformat()} in {zone})"


def circuit_open(open_until: datetime | None, closed_since: bool, now: datetime) -> bool:
    """Open: ``now`` is before the latest ``open_until`` (as instants) and no ``circuit_closed`` came after it."""
    return open_until is not None and not closed_since and micros(now) < micros(open_until)  # no overflow at year 1


# --- the fold --------------------------------------------------------------------------


class Catchup:
    """Which of today's skipped scheduled jobs to re-run (folded state: :class:`CatchupState`)."""

    name = "catchup"
    State = CatchupState

    def __init__(self) -> None:
        self.state = CatchupState()

    @property
    def jobs(self) -> dict[str, JobRegistered]:
        """Label -> its latest ``job_registered``."""
        return self.state.jobs

    @property
    def guarded(self) -> bool:
        """Whether a registered job is guarded: its verdicts (candidate, unfed) are judged by the day of T's zone."""
        return any(job.guarded for job in self.state.jobs.values())

    @property
    def markers(self) -> dict[str, Marker]:
        """Label -> its latest guard marker."""
        return self.state.markers

    @property
    def open_until(self) -> datetime | None:
        """The latest ``circuit_opened``'s ``open_until`` (in its own offset), None before any."""
        text = self.state.open_until
        return None if text is None else parse_time(text)

    # -- queries ------------------------------------------------------------------------

    def candidates(self, as_of: datetime) -> list[Candidate]:
        """The jobs to re-run as of ``as_of``, sorted by label."""
        markers = self.state.markers
        return [
            Candidate(label, job)
            for label, job in sorted(self.state.jobs.items())
            if is_candidate(job, markers.get(label), as_of)
        ]

    def unfed(self, as_of: datetime) -> list[Unfed]:
        """The guarded jobs nothing seems to feed as of ``as_of`` (:func:`unfed_slot`), sorted by label."""
        markers = self.state.markers
        return [Unfed(label, slot, job, markers.get(label)) for label, job in sorted(self.state.jobs.items())
                if (slot := unfed_slot(job, markers.get(label), as_of)) is not None]

    def circuit_open(self, as_of: datetime) -> bool:
        """Whether the quota circuit is open as of ``as_of``."""
        return circuit_open(self.open_until, self.state.closed_since, as_of)

    def bad_reruns(self, as_of: datetime) -> list[BadRerun]:
        """The re-runs that ended badly or never reported their end as of ``as_of``, sorted by label."""
        out: list[BadRerun] = []
        for label, r in sorted(self.state.reruns.items()):
            if r.ended:
                out.append(BadRerun(label, "rerun_failed", r))
            elif (deadline := r.deadline()) is not None and micros(as_of) >= micros(deadline):
                out.append(BadRerun(label, "rerun_no_end", r))
        return out

    def open_reruns(self) -> dict[str, Rerun]:
        """The re-runs with a kick and no recorded end (they may still run), by label."""
        return {label: r for label, r in sorted(self.state.reruns.items()) if not r.ended}

    def view(self, as_of: datetime, as_of_text: str | None = None) -> dict[str, Any]:
        """The ``catchup`` part of the dump."""
        labels = [c.label for c in self.candidates(as_of)]
        is_open = self.circuit_open(as_of)
        return {"candidates": labels, "probe": bool(labels) and not is_open, "circuit": "open" if is_open else "closed"}

    # -- handlers -----------------------------------------------------------------------

    def _job_registered(self, ev: JobRegistered, line: int, at: datetime) -> FoldResult:
        self.state.jobs[ev.label] = ev
        return None

    def _job_skipped(self, ev: JobSkipped, line: int, at: datetime) -> FoldResult:
        self.state.markers[ev.label] = Marker(skipped=True, ts=ev.ts, line=line)
        self.state.reruns.pop(ev.label, None)
        return None

    def _job_ran(self, ev: JobRan, line: int, at: datetime) -> FoldResult:
        self.state.markers[ev.label] = Marker(skipped=False, ts=ev.ts, line=line)
        rerun = self.state.reruns.get(ev.label)
        if rerun is not None and not rerun.own_marker(at, ev.exit):
            del self.state.reruns[ev.label]
        return None

    def _catchup_kicked(self, ev: CatchupKicked, line: int, at: datetime) -> FoldResult:
        marker = self.state.markers.get(ev.label)
        if marker is not None:
            marker.kicked = True
            marker.kicked_ts = ev.ts
        self.state.reruns[ev.label] = Rerun(kicked_ts=ev.ts, kicked_line=line, timeout_s=ev.timeout_s,
                                            kill_grace_s=ev.kill_grace_s, kicked_by=ev.kicked_by,
                                            launchd_domain=ev.launchd_domain)
        return None

    def _catchup_finished(self, ev: CatchupFinished, line: int, at: datetime) -> FoldResult:
        reruns = self.state.reruns
        if ev.outcome == "exited" and ev.exit == 0:
            reruns.pop(ev.label, None)
            return None
        rerun = reruns.get(ev.label)
        if rerun is None or rerun.ended:  # an end with no kick before it
            rerun = reruns[ev.label] = Rerun(kicked_ts=None)
        rerun.finished_ts, rerun.finished_line, rerun.outcome, rerun.exit = ev.ts, line, ev.outcome, ev.exit
        return None

    def _circuit_opened(self, ev: CircuitOpened, line: int, at: datetime) -> FoldResult:
        self.state.open_until = ev.open_until
        self.state.closed_since = False
        self.state.opened_ts = ev.ts
        self.state.open_reason = ev.reason
        return None

    def _circuit_closed(self, ev: CircuitClosed, line: int, at: datetime) -> FoldResult:
        self.state.closed_since = True
        return None

    handlers: dict[type[Event], Handler] = {
        JobRegistered: _job_registered,
        JobSkipped: _job_skipped,
        JobRan: _job_ran,
        CatchupKicked: _catchup_kicked,
        CatchupFinished: _catchup_finished,
        CircuitOpened: _circuit_opened,
        CircuitClosed: _circuit_closed,
    }
