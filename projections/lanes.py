"""Lane stall verdicts (seed 001, spec section 4): finished work not picked up, quiet progress.

Every rule is in :func:`evaluate`, a copy of the seed's function with the
product and the thresholds as arguments. The fold only keeps, per product,
the latest ``status_updated`` (time and state), ``job_finished`` and
``repo_commit`` (by log order), whether the lane is stopped, and the latest
``resume_enqueued`` of each (product, kind): its line, time and task branch;
and how the lanes runner's last pass ended (the last ``lane_check`` that
states its ``exit``: :class:`LanePass`); and the lanes pass's heartbeat: the
time of the last ``lane_check`` and the period it states, or before any, the
first lane event (:meth:`Lanes.heartbeat`).

Decisions where the spec is silent (the lead's):

- products are those named by ``status_updated``, ``job_finished``,
  ``repo_commit``, ``lane_stopped`` or ``lane_started`` (a ``resume_enqueued``
  alone does not make a lane);
- a product with no ``status_updated`` yet is never ``status-quiet`` (there is
  no status to be quiet) but can be ``job-unpicked``;
- ``lane_started`` lifts the stop;
- the thresholds are the caller's (``--unpicked``, ``--quiet``), else those the
  last ``lane_check`` that states them judged with (the lanes runner writes its
  own), else the seed's 90 min and 8 h; a ``lane_check``'s own record is judged
  with the thresholds it states (what that check judged with), and with those
  of the line before it for a threshold it does not state.

The **lanes pass is late** (project's rule, mirroring the spec's watcher
late) as of T when the log has a lane not stopped on purpose and its last
``lane_check`` (any: it says a check ran) is older than twice the period it
states (``period_s``; the last that states one, else :data:`PERIOD_S`, the
shipped hourly timer), or there is none and the first lane event is that old.
Every lane stopped on purpose: no pass is due (nothing is sent to a stopped
lane; that is how lanes are retired).

A **stall** is identified by its product, its kind and the event that anchors
it: the ``job_finished`` for ``job-unpicked``, the ``status_updated`` for
``status-quiet``. A ``resume_enqueued`` of that product and kind after the
anchor (log order) covers it: the runner never enqueues twice for one stall.

**A send cut short** (project's rule for unknown effects, as spec section 3's
stale ``resume_requested``): the runner's first ``lane_check`` names the resumes
it is about to send (``sending``: product -> kind, ``exit: sending``). Each stays
open until a ``resume_enqueued`` of it, or a later ``lane_check`` that lists it
in ``unsent`` (its command failed or never started), closes it. An open one
after the stall's anchor (:meth:`Lanes.cut_short`) has an unknown outcome: the
runner does not send it again on its own, and the views ask whether it arrived.
A last pass that says ``sending`` reads as ``error`` while one of its sends is
open (it never finished), and as its ``detail`` says (``ok`` with none) once
all are closed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NamedTuple, NotRequired, TypedDict

import msgspec

from eventlog.events import (
    Event,
    JobFinished,
    LaneCheck,
    LaneStarted,
    LaneStopped,
    RepoCommit,
    ResumeEnqueued,
    StatusUpdated,
)
from projections.base import FoldResult, Handler, elapsed_s, later

#: The schema of a lane-check record.
SCHEMA = "impl-lane-watch/v1"

#: The two kinds of stall, as the seed names them.
JOB_UNPICKED = "job-unpicked"
STATUS_QUIET = "status-quiet"
#: How a lanes pass names a lanes directory it could not read (``... DIR: why``) or that holds no lane file
#: (``the lanes directory DIR holds no ...``): the views give such an item a command that shows the directory.
DIR_UNREADABLE = "cannot read the lanes directory"
DIR_EMPTY = "the lanes directory"
KINDS = (JOB_UNPICKED, STATUS_QUIET)


class Lane(msgspec.Struct, gc=False):
    """What a lane's verdict is judged from (the latest of each, by log order).

    A time a verdict prints is kept twice: as a ``datetime`` to measure from
    (a snapshot gives it back in UTC) and as the ``ts`` the reader left in the
    event, with its offset, to print.
    """

    updated_at: datetime | None = None
    updated_ts: str | None = None
    updated_line: int = 0
    idle: bool = False
    finished_at: datetime | None = None
    finished_ts: str | None = None
    finished_line: int = 0
    commit_at: datetime | None = None
    commit_ts: str | None = None
    commit_line: int = 0
    stopped: bool = False


class Resume(msgspec.Struct, gc=False):
    """The latest ``resume_enqueued`` of a lane's stall kind: its line (what covers a stall), its ``ts`` as
    written and its task branch (what the views print)."""

    line: int
    ts: str
    task_branch: str | None = None


class Sending(msgspec.Struct, gc=False):
    """A resume a lanes pass named in ``sending`` and no line closed yet: its ``lane_check``'s line and ``ts``, and
    until when its pass may still be sending it (``by``: None once a later line of the runner restated it, its pass
    over, or when that line stated no ``timeout_s``)."""

    line: int
    ts: str
    by: datetime | None = None

    def under_way(self, as_of: datetime) -> bool:
        """Whether its pass may still be sending it as of ``as_of`` (not yet cut short)."""
        return self.by is not None and elapsed_s(self.by, as_of) >= 0


class LanePass(msgspec.Struct, gc=False):
    """How the lanes runner's last pass ended: the last ``lane_check`` that states an ``exit`` (log order).

    What its line said (``failed``: ``exit: error``, or ``sending`` with a ``detail``; ``said``: its ``detail``;
    ``general``: the part of it that belongs to no lane), the sends it names that no line closed yet (``open``:
    product -> kind) and those it did not send (``unsent``); the views word them as of T
    (:meth:`Lanes.pass_exit`)."""

    ts: str
    failed: bool = False
    line: int = 0
    #: What that pass could not observe (``lane_check.unobserved``): a product or a file -> why; a pass that did
    #: not observe (no ``--observe``, so no ``unobserved``) keeps the last observing pass's.
    unobserved: dict[str, str] = {}
    #: The sends this pass named (``sending``, ``unsure``) that no line closed yet: product -> kind.
    open: dict[str, str] = {}
    #: The ``detail`` its line wrote (None: none).
    said: str | None = None
    #: The problems of ``said`` that no lane's own item carries (``lane_check.general``; None: its line, an older
    #: runner's, does not say, so all of ``said`` is read as belonging to no lane).
    general: list[str] | None = None
    #: The sends its line says did not go (``unsent``: the command failed or never started): product -> kind.
    unsent: dict[str, str] = {}

    def general_said(self) -> list[str]:
        """What its line said that no lane's own item carries: ``general``, or all of ``said`` from a line that does
        not state it (an older runner's)."""
        return self.general if self.general is not None else [self.said] if self.said else []


def cut_short_said(ts: str) -> str:
    """A send of a resume cut short by the lanes pass at ``ts``, in words (the views' and the runner's)."""
    return f"a lanes pass ({ts}) stopped while sending its resume (or sends it still)"


#: A send's bound past what Python can hold (a ``timeout_s`` of thousands of years): never up.
NEVER = datetime.max.replace(tzinfo=UTC)

#: How long past its sends' time (``timeout_s`` plus ``kill_grace_s`` each) a pass that says ``sending`` is still read
#: as under way: the appends around each send and a slow disk.
SEND_MARGIN_S = 60.0


class Heartbeat(NamedTuple):
    """The lanes pass's heartbeat as of T (:meth:`Lanes.heartbeat`)."""

    #: The last ``lane_check``'s ``ts`` as written; before any, the first lane event's.
    ts: str
    #: Seconds from it to T.
    age_s: float
    #: The runner's period: the last ``lane_check`` that states ``period_s``, else :data:`PERIOD_S`.
    period_s: float
    #: Whether a ``lane_check`` is in the log (False: ``ts`` is the first lane event's).
    checked: bool

    @property
    def late(self) -> bool:
        """Older than :data:`LATE_PERIODS` periods."""
        return self.age_s > LATE_PERIODS * self.period_s


class Verdict(TypedDict):
    """One lane's result in an ``impl-lane-watch/v1`` record (keys in the seed's order)."""

    product: str
    stalled: bool
    reason: NotRequired[str]
    kind: NotRequired[str]
    detail: NotRequired[str]
    finished_at: NotRequired[str]
    updated_at: NotRequired[str]


class CheckRecord(TypedDict):
    """An ``impl-lane-watch/v1`` record, as the seed prints it."""

    schema: str
    #: T as printed (None only in ``lanes.now`` of a log with no event, judged at its last line).
    checked_at: str | None
    results: list[Verdict]


class LanesState(msgspec.Struct):
    """Everything the lanes projection folds (projections/base.py: to add state, add a typed field)."""

    #: The record of every ``lane_check``, in log order.
    checks: list[CheckRecord] = []
    #: Product -> what its verdict is judged from.
    lanes: dict[str, Lane] = {}
    #: Product -> kind -> its latest ``resume_enqueued``.
    resumes: dict[str, dict[str, Resume]] = {}
    #: Product -> kind -> the send a lanes pass named and no line closed (see "A send cut short").
    sending: dict[str, dict[str, Sending]] = {}
    #: The ``unpicked_s`` of the last ``lane_check`` that states one (None: none did).
    checked_unpicked_s: float | None = None
    #: The ``quiet_s`` of the last ``lane_check`` that states one (None: none did).
    checked_quiet_s: float | None = None
    #: The line of the last ``lane_check`` (0: none): the lanes runner's bad lines after it are new.
    check_line: int = 0
    #: The lanes runner's last pass, as the last ``lane_check`` that states its ``exit`` says (None: none did).
    last_pass: LanePass | None = None
    #: The time of the last ``lane_check``, to measure from, and its ``ts`` as written (None: none yet).
    check_at: datetime | None = None
    check_ts: str | None = None
    #: The ``period_s`` of the last ``lane_check`` that states one (None: none did).
    checked_period_s: float | None = None
    #: The first lane event (the one that made the first lane), to measure from, and its ``ts`` as written.
    first_at: datetime | None = None
    first_ts: str | None = None


def _printed(ts: str | None, at: datetime) -> str:
    """``at.isoformat()``, as the seed prints it, taken from the text ``at`` was read from (its offset kept)."""
    return (datetime.fromisoformat(ts) if ts is not None else at).isoformat()


# --- the rules (seed 001's ``evaluate``) -----------------------------------------------


def evaluate(
    product: str,
    lane: Lane,
    now: datetime,
    unpicked_minutes: float = 90,
    quiet_hours: float = 8,
) -> Verdict:
    """The seed's verdict for one lane at ``now``: same order, keys, wording and arithmetic."""
    if lane.stopped:
        return {"product": product, "stalled": False, "reason": "stopped-on-purpose"}
    if lane.idle:
        return {"product": product, "stalled": False, "reason": "lane-idle"}

    finished = lane.finished_at
    if finished is not None:
        idle_minutes = elapsed_s(now, finished) / 60  # the seed's (now - finished), through UTC
        moved_after = lane.commit_at is not None and elapsed_s(lane.commit_at, finished) > 0  # as instants
        if idle_minutes >= unpicked_minutes and not moved_after:
            return {
                "product": product,
                "stalled": True,
                "kind": JOB_UNPICKED,
                "detail": (
                    f"作業は{int(idle_minutes // 60)}時間"
                    f"{int(idle_minutes % 60)}分前に終わっていますが、"
                    "その成果がまだ取り込まれていません"
                ),
                "finished_at": _printed(lane.finished_ts, finished),
            }

    updated = lane.updated_at
    if updated is not None:  # no status yet: nothing to be quiet (lead's decision)
        quiet = elapsed_s(now, updated) / 3600
        if quiet >= quiet_hours:
            return {
                "product": product,
                "stalled": True,
                "kind": STATUS_QUIET,
                "detail": f"進捗の更新が{int(quiet)}時間止まっています",
                "updated_at": _printed(lane.updated_ts, updated),
            }
    return {"product": product, "stalled": False, "reason": "moving"}


def _threshold(configured: float | None, checked_s: float | None, unit_s: int, default: float) -> float:
    """A threshold in its unit (``unit_s`` seconds): the caller's, else the seconds a check stated, else ``default``."""
    if configured is not None:
        return configured
    return default if checked_s is None else checked_s / unit_s


# --- the fold ------------------------------------------------------------------------


#: The seed's thresholds: a finished job not picked up after 90 minutes, progress quiet for 8 hours.
DEFAULT_UNPICKED_MINUTES = 90
DEFAULT_QUIET_HOURS = 8
#: The lanes runner's period when no ``lane_check`` states one: the shipped timer's (seed 001: "毎時の定常点検").
PERIOD_S = 3600.0
#: A lanes pass is late after this many periods with no ``lane_check`` (as the spec's watcher: twice).
LATE_PERIODS = 2


class Lanes:
    """Lanes: finished work not picked up, quiet progress (folded state: :class:`LanesState`).

    ``checks`` holds the record of every ``lane_check``, in log order. The
    caller's thresholds judge the records of checks that state none as they are
    folded, so a snapshot is only used under the same ones
    (:meth:`projections.runner.Runner.state_key`).
    """

    name = "lanes"
    State = LanesState

    def __init__(self, unpicked_minutes: float | None = None, quiet_hours: float | None = None) -> None:
        #: The caller's thresholds (``--unpicked``, ``--quiet``); None: the lanes runner's (:attr:`unpicked_minutes`).
        self.configured_unpicked_minutes = unpicked_minutes
        self.configured_quiet_hours = quiet_hours
        self.state = LanesState()

    @property
    def unpicked_minutes(self) -> float:
        """The ``job-unpicked`` age judged with: the caller's, else the last check's, else 90 (the seed's)."""
        return _threshold(self.configured_unpicked_minutes, self.state.checked_unpicked_s, 60,
                          DEFAULT_UNPICKED_MINUTES)

    @property
    def quiet_hours(self) -> float:
        """The ``status-quiet`` age judged with: the caller's, else the last check's, else 8 (the seed's)."""
        return _threshold(self.configured_quiet_hours, self.state.checked_quiet_s, 3600, DEFAULT_QUIET_HOURS)

    @property
    def checks(self) -> list[CheckRecord]:
        """The record of every ``lane_check``, in log order."""
        return self.state.checks

    @property
    def lanes(self) -> dict[str, Lane]:
        """Product -> what its verdict is judged from."""
        return self.state.lanes

    # -- queries ------------------------------------------------------------------------

    def judge(self, as_of: datetime, checked_at: str | None, unpicked_minutes: float | None = None,
              quiet_hours: float | None = None) -> CheckRecord:
        """The ``impl-lane-watch/v1`` record of every lane judged at ``as_of`` (``checked_at``: T as printed).

        The thresholds are :attr:`unpicked_minutes` and :attr:`quiet_hours` unless given.
        """
        lanes = self.state.lanes
        unpicked = self.unpicked_minutes if unpicked_minutes is None else unpicked_minutes
        quiet = self.quiet_hours if quiet_hours is None else quiet_hours
        return {
            "schema": SCHEMA,
            "checked_at": checked_at,
            "results": [evaluate(product, lanes[product], as_of, unpicked, quiet) for product in sorted(lanes)],
        }

    def anchor(self, product: str, kind: str) -> int | None:
        """The line of the event that anchors a stall of ``kind`` of ``product`` (None: none)."""
        lane = self.state.lanes.get(product)
        if lane is None:
            return None
        if kind == JOB_UNPICKED:
            return lane.finished_line or None
        if kind == STATUS_QUIET:
            return lane.updated_line or None
        return None

    def covered(self, product: str, kind: str) -> bool:
        """Whether a ``resume_enqueued`` of this product and kind came after the stall's anchor."""
        return self.covering(product, kind) is not None

    def covering(self, product: str, kind: str) -> Resume | None:
        """The ``resume_enqueued`` of this product and kind after the stall's anchor (None: the stall is uncovered)."""
        anchor = self.anchor(product, kind)
        resumed = self.state.resumes.get(product, {}).get(kind)
        return resumed if anchor is not None and resumed is not None and resumed.line > anchor else None

    def open_send(self, product: str, kind: str) -> Sending | None:
        """The send of a resume for this stall that a pass named after the stall's anchor and no line closed since
        (None: none): under way, or cut short (:meth:`cut_short`)."""
        anchor = self.anchor(product, kind)
        sent = self.state.sending.get(product, {}).get(kind)
        return sent if anchor is not None and sent is not None and sent.line > anchor else None

    def cut_short(self, product: str, kind: str, as_of: datetime | None = None) -> Sending | None:
        """The open send of a resume for this stall (:meth:`open_send`) whose outcome is unknown: its pass is over,
        or, judged as of ``as_of``, its sends' time is up (None: none; the runner, which holds the lock, gives no
        ``as_of``: every earlier pass is over)."""
        sent = self.open_send(product, kind)
        return None if sent is None or (as_of is not None and sent.under_way(as_of)) else sent

    def cut_short_products(self, as_of: datetime | None = None) -> list[str]:
        """The products with a stall whose resume's send was cut short (:meth:`cut_short`), sorted: those
        ``eventlog lanes --resend`` may name."""
        return sorted(product for product, kinds in self.state.sending.items()
                      if any(self.cut_short(product, kind, as_of) is not None for kind in kinds))

    def pass_exit(self, as_of: datetime) -> Literal["ok", "error", "sending"] | None:
        """How the last pass reads as of ``as_of`` (None: no pass states it): ``error`` when its line said so or a
        send it names was cut short (:meth:`cut_short_sends`), ``sending`` while its sends are under way, else
        ``ok``."""
        last = self.state.last_pass
        if last is None:
            return None
        if last.failed or self.cut_short_sends(as_of):
            return "error"
        return "sending" if last.open else "ok"

    def pass_error(self, as_of: datetime) -> list[str] | None:
        """What the last pass, read as ``error`` as of ``as_of`` (:meth:`pass_exit`), said that belongs to no lane
        (:meth:`LanePass.general_said`; ``[]``: an older runner's ``exit: error`` with no detail); None when the pass
        needs nobody for itself: none is in error, or each of its problems is a lane's own (a lane it could not
        observe, a send cut short). The one rule of ``lanes_error`` and ``recovery_lanes_last_pass_error``."""
        last = self.state.last_pass
        if last is None or self.pass_exit(as_of) != "error":
            return None
        said = last.general_said()
        return said if said or (last.failed and last.general is None) else None

    def cut_short_sends(self, as_of: datetime) -> dict[str, str]:
        """The sends the last pass names whose outcome is unknown as of ``as_of``: product -> kind."""
        last = self.state.last_pass
        sending = self.state.sending
        return {} if last is None else {
            product: kind for product, kind in last.open.items()
            if not (sent := sending.get(product, {}).get(kind)) or not sent.under_way(as_of)}

    @property
    def last_pass(self) -> LanePass | None:
        """How the lanes runner's last pass ended (None: no ``lane_check`` states it)."""
        return self.state.last_pass

    def unobserved(self) -> dict[str, str]:
        """What the lanes runner's last pass could not observe and why (a product or a file -> why), a lane stopped
        on purpose since left out (nothing is judged or sent for it: a retired lane needs no file)."""
        last = self.state.last_pass
        if last is None:
            return {}
        lanes = self.state.lanes
        return {key: why for key, why in last.unobserved.items() if key not in lanes or not lanes[key].stopped}

    def heartbeat(self, as_of: datetime) -> Heartbeat | None:
        """The lanes pass's heartbeat as of ``as_of``; None when no pass is due: no lane, or every lane is stopped
        on purpose (see the module docstring)."""
        state = self.state
        if all(lane.stopped for lane in state.lanes.values()):  # no lane at all included
            return None
        period = PERIOD_S if state.checked_period_s is None else state.checked_period_s
        if state.check_at is not None and state.check_ts is not None:
            return Heartbeat(state.check_ts, elapsed_s(as_of, state.check_at), period, True)
        assert state.first_at is not None and state.first_ts is not None  # a lane was made by an event
        return Heartbeat(state.first_ts, elapsed_s(as_of, state.first_at), period, False)

    def view(self, as_of: datetime, as_of_text: str | None = None) -> dict[str, Any]:
        """The ``lanes`` part of the dump: the logged checks, and ``now``, every lane judged at ``as_of``.

        ``now.checked_at`` is T as the dump's ``as_of`` prints it (``as_of_text``; null only for a log
        with no event judged at its last line, which has no lane).
        """
        return {"checks": list(self.state.checks), "now": self.judge(as_of, as_of_text)}

    # -- handlers -----------------------------------------------------------------------

    def _lane(self, product: str, ts: str, at: datetime) -> Lane:
        """``product``'s lane, made by this event (at ``at``, ``ts`` as written) when it is new."""
        state = self.state
        lane = state.lanes.get(product)
        if lane is None:
            lane = state.lanes[product] = Lane()
            if state.first_at is None:
                state.first_at, state.first_ts = at, ts
        return lane

    def _status_updated(self, ev: StatusUpdated, line: int, at: datetime) -> FoldResult:
        lane = self._lane(ev.product, ev.ts, at)
        lane.updated_at = at
        lane.updated_ts = ev.ts
        lane.updated_line = line
        lane.idle = ev.state == "idle"
        return None

    def _job_finished(self, ev: JobFinished, line: int, at: datetime) -> FoldResult:
        lane = self._lane(ev.product, ev.ts, at)
        lane.finished_at = at
        lane.finished_ts = ev.ts
        lane.finished_line = line
        return None

    def _repo_commit(self, ev: RepoCommit, line: int, at: datetime) -> FoldResult:
        lane = self._lane(ev.product, ev.ts, at)
        lane.commit_at, lane.commit_ts, lane.commit_line = at, ev.ts, line
        return None

    def _lane_stopped(self, ev: LaneStopped, line: int, at: datetime) -> FoldResult:
        self._lane(ev.product, ev.ts, at).stopped = True
        return None

    def _lane_started(self, ev: LaneStarted, line: int, at: datetime) -> FoldResult:
        self._lane(ev.product, ev.ts, at).stopped = False
        return None

    def _lane_check(self, ev: LaneCheck, line: int, at: datetime) -> FoldResult:
        # Judged with the thresholds it states (what the check judged with), before it states them for later lines.
        unpicked = None if ev.unpicked_s is None else ev.unpicked_s / 60
        quiet = None if ev.quiet_s is None else ev.quiet_s / 3600
        state = self.state
        state.checks.append(self.judge(at, ev.ts, unpicked, quiet))
        state.check_line = line
        if ev.unpicked_s is not None:
            state.checked_unpicked_s = ev.unpicked_s
        if ev.quiet_s is not None:
            state.checked_quiet_s = ev.quiet_s
        sends = self._sending(ev, line, at)
        for product, kind in (ev.unsent or {}).items():
            self._close(product, kind)
        if ev.exit is not None:
            unobserved = state.last_pass.unobserved if ev.unobserved is None and state.last_pass is not None else \
                ev.unobserved or {}
            failed = ev.exit == "error" or (ev.exit == "sending" and bool(ev.detail))
            # "general": [] says every problem is a lane's own; on a line that names none (no lane it could not
            # observe, no send) all that it said belongs to no lane, as on a line without "general"
            lanes_own = bool(unobserved or ev.sending or ev.unsure or ev.unsent)
            state.last_pass = LanePass(ev.ts, failed, line, unobserved=unobserved, open=sends, said=ev.detail,
                                       general=ev.general if ev.general or lanes_own else None,
                                       unsent=ev.unsent or {})
        state.check_at, state.check_ts = at, ev.ts
        if ev.period_s is not None:
            state.checked_period_s = ev.period_s
        return None

    def _resume_enqueued(self, ev: ResumeEnqueued, line: int, at: datetime) -> FoldResult:
        self.state.resumes.setdefault(ev.product, {})[ev.kind] = Resume(line, ev.ts, ev.task_branch)
        self._close(ev.product, ev.kind)
        return None

    def _sending(self, ev: LaneCheck, line: int, at: datetime) -> dict[str, str]:
        """Open the sends ``ev`` names (product -> kind, returned): ``sending``, about to go, under way until
        ``timeout_s`` plus ``kill_grace_s`` each (and :data:`SEND_MARGIN_S`) are up; ``unsure``, still open from
        this pass or an earlier one, which is over (their line and ``ts`` kept)."""
        sending = self.state.sending
        fresh = ev.sending or {}
        by = None
        if fresh and ev.timeout_s is not None:
            each = ev.timeout_s + (ev.kill_grace_s or 0.0)
            try:
                by = later(at, timedelta(seconds=len(fresh) * each + SEND_MARGIN_S))
            except OverflowError:  # more seconds than a timedelta holds
                pass
            by = by or NEVER  # past what Python can hold: "never" (spec section 1), so under way for good
        for product, kind in fresh.items():
            sending.setdefault(product, {})[kind] = Sending(line, ev.ts, by)
        for product, kind in (ev.unsure or {}).items():
            kept = sending.setdefault(product, {}).get(kind)
            sending[product][kind] = Sending(line, ev.ts) if kept is None else msgspec.structs.replace(kept, by=None)
        return {**fresh, **(ev.unsure or {})}

    def _close(self, product: str, kind: str) -> None:
        """The send of this resume is no longer open (it was recorded, or not sent)."""
        state = self.state
        state.sending.get(product, {}).pop(kind, None)
        last = state.last_pass
        if last is not None and last.open.get(product) == kind:
            del last.open[product]

    handlers: dict[type[Event], Handler] = {
        StatusUpdated: _status_updated,
        JobFinished: _job_finished,
        RepoCommit: _repo_commit,
        LaneStopped: _lane_stopped,
        LaneStarted: _lane_started,
        LaneCheck: _lane_check,
        ResumeEnqueued: _resume_enqueued,
    }
