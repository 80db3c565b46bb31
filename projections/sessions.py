"""Session recovery (seed 004, spec section 6).

A session stops in three ways: its checkpoint does not restore, its worker ends
before asking for input, or a turn ends with ``outcome_unknown``. Transient
storage errors and workers stopped on purpose never count. A stopped session
moves again only by an operator's ``recovery_decision``, which yields a
**receipt**: ``accepted`` or an error code; a refused or repeated decision is
recorded but not applied.

Every rule is in the block "The rules" below; :meth:`Sessions.judge` is the one
place a decision is judged, both when it is folded and when a caller asks
"would this be accepted now?" (``eventlog decide``, ``eventlog sessions``).

Where the spec is silent (the lead's decisions, and this module's):

- A session exists from its first event of any type, in the initial state of
  :class:`Session`.
- ``generation`` is the highest generation any event of the session carried.
- ``worker_ready`` leaves ``reason`` as it was; nothing resets ``resumable``
  but an accepted ``abandon``/``confirm_completed``.
- ``closed`` is final: no later event or decision moves ``admission_state``
  away from it. Every other field still follows the rules (an accepted
  ``close`` changes nothing else).
- Turn order is the order of ``turn_started`` (a repeated start keeps the
  first place; a ``turn_finished`` of a turn never started places it there).
  ``checkpoint_committed`` makes the latest checkpoint cover its turn and every
  turn placed before it; naming a turn never started, every turn so far.
  An accepted ``start_fresh`` drops the checkpoint.
- "``execution_gone`` after that turn": an ``execution_gone`` later in the log
  than the latest ``turn_finished`` ``outcome_unknown`` of that turn. A later
  ``turn_finished`` of an unknown turn with another outcome leaves it unknown:
  only a decision takes it out.
- A counted failure with ``reason: incompatible_checkpoint`` stops at once
  but is counted like any other (1 on a first failure, 2 after one more).
  ``retry_at`` is ``ts`` + 30 s / 60 s, printed by ``isoformat()`` in ``ts``'s
  own offset.
- Idempotency keys are scoped per session. Every first request (accepted or
  not) is remembered under its key with its result; the same request again gets
  that receipt (``replayed``), another one ``IDEMPOTENCY_KEY_REUSED``.
- An empty ``evidence_ref`` counts as none.
- **Admission fencing** (:meth:`Session.fence`): a session waiting for a person
  (``recovery_required``; ``backoff`` before ``retry_at``; ``stopped`` with a
  context gap; ``closed``) rejects a new generation's claim, a ready worker and
  a started turn; a stopped resumable one admits a resume but no turn before it.
- The latest applied ``worker_claimed`` is kept (``claimed_at``, views only): a
  retry due whose claim is at or after ``retry_at`` and less than
  :data:`WORKER_STARTUP_TIMEOUT` old is under way, not overdue (docs/DECISIONS.md).
- Views only, too: what became of that claim (``claim_end``: its worker ready,
  or how it first ended), the latest accepted ``retry_restore``/``start_fresh``
  (``decided``), and when the interrupt that left a turn's outcome unknown said
  so before the log recorded the turn's end (``unknown_since``): a session that
  should have a worker and has none is named (:func:`worker_wait`), and a wait
  keeps its start when the turn's end is recorded later.
- ``interrupt_stage`` and ``control_result`` are the session's events (they
  count in its revision); their timeline is :mod:`projections.controls`.
- A receipt keeps why it got its result (:meth:`Sessions.judge`'s words, the
  ones ``eventlog sessions`` gives for the same rule) and, for a
  ``REQUEST_STALE`` on another revision, what moved the session as it was
  then: its latest applied event (``last_line``, ``last_type``, ``last_ts``)
  and its latest accepted decision of any kind (``last_decision``; not
  ``decided``, the restart alone) made on that revision or later
  (:meth:`Receipt.explained`; views only, the dump's receipt is
  :meth:`Receipt.item`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Literal

import msgspec

from eventlog.events import (
    CheckpointCommitted,
    CheckpointRestoreFailed,
    ControlResult,
    Event,
    ExecutionGone,
    InterruptStage,
    RecoveryDecision,
    StartupFailed,
    StorageUnavailable,
    TurnFinished,
    TurnStarted,
    WorkerClaimed,
    WorkerReady,
    WorkerStopped,
    parse_time,
)
from projections import controls
from projections.base import NOT_APPLIED, FoldResult, Handler, Rejected, later, micros, num, seconds
from projections.controls import Control, timeline

# --- words of the seed -------------------------------------------------------------

ADMITTED: Final = "admitted"
BACKOFF: Final = "backoff"
RECOVERY_REQUIRED_STATE: Final = "recovery_required"
STOPPED: Final = "stopped"
CLOSED: Final = "closed"

RESTORE_FAILED: Final = "RESTORE_FAILED"
STARTUP_FAILED: Final = "STARTUP_FAILED"
RECOVERY_REQUIRED: Final = "RECOVERY_REQUIRED"
CONTEXT_GAP: Final = "CONTEXT_GAP"

ACCEPTED: Final = "accepted"
REQUEST_STALE: Final = "REQUEST_STALE"
CHECKPOINT_UNAVAILABLE: Final = "CHECKPOINT_UNAVAILABLE"
IDEMPOTENCY_KEY_REUSED: Final = "IDEMPOTENCY_KEY_REUSED"

DECISIONS: Final = ("retry_restore", "start_fresh", "close", "abandon", "confirm_completed")
#: Decisions that name an unknown turn.
TURN_DECISIONS: Final = ("abandon", "confirm_completed")

#: Backoff after the 1st and the 2nd counted failure; the 3rd stops the session.
BACKOFF_AFTER: Final = {1: timedelta(seconds=30), 2: timedelta(seconds=60)}
MAX_FAILURES: Final = 3
#: Seed 004's WORKER_STARTUP_TIMEOUT_SEC (fixed at its default in the current deployment): how long a claimed
#: worker retries storage before it is ready or fails. A retry claimed less long ago is under way, not overdue.
WORKER_STARTUP_TIMEOUT: Final = timedelta(seconds=3600)
#: How long an accepted ``retry_restore``/``start_fresh``, or a worker that ended without a counted failure, may wait
#: for the next worker's claim before the views say nothing took the session (docs/DECISIONS.md): ten times the
#: longest backoff (60 s) the scheduler waits before it launches the next generation. Seed 004: acceptance is not a
#: restart ("受理は worker 不在や実際の再開成功とは異なります").
CLAIM_WAIT: Final = timedelta(minutes=10)
#: How a worker's first end after its claim is named (:attr:`Session.claim_end`) when it is a counted failure.
COUNTED: Final = "counted_failure"
#: Worker ends after which the scheduler launches the next worker at once (seed 004): a worker that ``failed``, one
#: drained (``drain``: "セッションは lease 期限を待たずすぐ戻ります"), and one that left without a release
#: (``execution_gone``). A ``pause``, ``terminate``, ``close`` or ``revoked`` ends the work on purpose.
RELAUNCHED_AFTER: Final = frozenset({"failed", "drain", "execution_gone"})
#: Why a session that should have a worker has none, as of T (:func:`worker_wait`), in screen order.
WorkerWaitKind = Literal["worker_not_ready", "worker_gone", "decision_unclaimed"]
WORKER_WAITS: Final[tuple[WorkerWaitKind, ...]] = ("worker_not_ready", "worker_gone", "decision_unclaimed")
#: A deterministic restore failure: retrying with the same runtime cannot succeed.
INCOMPATIBLE_CHECKPOINT: Final = "incompatible_checkpoint"
#: ``reason`` of an unknown outcome without a ``terminal_reason``.
OUTCOME_UNKNOWN: Final = "outcome_unknown"


#: The events of a session's stream that the rules apply (a decision counts itself, in :meth:`Sessions._decision`).
SessionEvent = (WorkerClaimed | WorkerReady | CheckpointRestoreFailed | StartupFailed | StorageUnavailable
                | WorkerStopped | TurnStarted | TurnFinished | CheckpointCommitted | ExecutionGone | InterruptStage
                | ControlResult)

#: A session's ``admission_state`` and ``attention`` (a snapshot holding any other is refused).
Admission = Literal["admitted", "backoff", "recovery_required", "stopped", "closed"]
Attention = Literal["RESTORE_FAILED", "STARTUP_FAILED", "RECOVERY_REQUIRED", "CONTEXT_GAP"]


class FirstUse(msgspec.Struct, array_like=True, gc=False):
    """The first request sent with an idempotency key: its line, what it asked (the spec's four fields), its result."""

    line: int
    decision: str
    expected_revision: int
    target_turn_id: str | None
    evidence_ref: str | None
    result: str
    #: Why it got that result (:attr:`Judgement.why`), so a repeat of a refusal says why again.
    why: str = ""

    def same_request(self, decision: str, expected_revision: int, target_turn_id: str | None,
                     evidence_ref: str | None) -> bool:
        """Whether a request asks exactly what this one asked (an empty ``evidence_ref`` counts as none)."""
        return (self.decision, self.expected_revision, self.target_turn_id, self.evidence_ref) == (
            decision, expected_revision, target_turn_id, evidence_ref or None)

    def describe(self) -> str:
        """The request in words, for people."""
        parts = [self.decision, f"expected revision {self.expected_revision}"]
        if self.target_turn_id is not None:
            parts.append(f"target turn {self.target_turn_id!r}")
        if self.evidence_ref is not None:
            parts.append(f"evidence {self.evidence_ref!r}")
        return ", ".join(parts)


class Mark(msgspec.Struct, array_like=True, gc=False, frozen=True):
    """One event a view judges a session by: what it says, its ``ts`` as written, its line, its time as read (kept, not
    converted: the fold pays nothing for it; a view measures it with :func:`micros`)."""

    what: str
    ts: str
    line: int
    at: datetime


class Change(msgspec.Struct, array_like=True, gc=False):
    """An applied event of a session, as a refusal names it: its line, type and ``ts`` (as written), and for a
    decision what was decided, by whom, why and on which revision."""

    line: int
    type: str
    ts: str | None
    decision: str | None = None
    actor: str | None = None
    reason: str | None = None
    target_turn_id: str | None = None
    #: The revision a decision was made on (its ``expected_revision``); it moved the session to the next one.
    revision: int | None = None

    def item(self) -> dict[str, Any]:
        """``{line, type, ts}``, and for a decision ``decision``, ``actor``, ``reason``, ``target_turn_id``,
        ``revision``."""
        out: dict[str, Any] = {"line": self.line, "type": self.type, "ts": self.ts}
        if self.decision is not None:
            out.update(decision=self.decision, actor=self.actor, reason=self.reason,
                       target_turn_id=self.target_turn_id, revision=self.revision)
        return out


def change_words(change: Mapping[str, Any]) -> str:
    """A change (:meth:`Change.item`) for people: ``line 20: close by bob at TS ('storage fixed'), accepted on
    revision 7``, or ``line 21: worker_claimed at TS``."""
    at = f" at {change['ts']}" if change["ts"] else ""
    if change.get("decision") is None:
        return f"line {change['line']}: {change['type']}{at}"
    turn = f" {change['target_turn_id']}" if change["target_turn_id"] is not None else ""
    return (f"line {change['line']}: {change['decision']}{turn} by {change['actor'] or 'unknown'}{at} "
            f"({change['reason']!r}), accepted on revision {change['revision']}")


class Session(msgspec.Struct, array_like=True, gc=False):
    """One session's state (the dump item, plus what the rules need; ``array_like``: packed as a list).

    ``gc=False``: its dicts hold only strings and integers, never a cycle.
    """

    admission_state: Admission = ADMITTED
    attention: Attention | None = None
    reason: str | None = None
    failures: int = 0
    retry_at: str | None = None
    generation: int = 0
    revision: int = 0
    resumable: bool = False
    #: Unknown turn -> line of its latest ``turn_finished`` ``outcome_unknown``.
    unknown: dict[str, int] = msgspec.field(default_factory=dict)
    #: Turn -> its place in the turn order (0, 1, ...).
    turns: dict[str, int] = msgspec.field(default_factory=dict)
    #: Place of the last turn the checkpoint covers; None: no checkpoint (or dropped).
    covered: int | None = None
    #: Line of the latest ``execution_gone``; 0: none yet.
    gone_line: int = 0
    #: Idempotency key -> the first request sent with it.
    keys: dict[str, FirstUse] = msgspec.field(default_factory=dict)
    #: The ``ts`` (as written) of the event that last set ``admission_state`` or ``attention``: "so since".
    since: str | None = None
    #: ... and its line (a view names it).
    since_line: int = 0
    #: The ``ts`` (as written) of the latest applied ``worker_claimed``: a retry under way (views only).
    claimed_at: str | None = None
    #: ... its line and its generation (0: no claim yet).
    claimed_line: int = 0
    claimed_generation: int = 0
    #: Turns started and not finished yet, in the order they started (a ``turn_finished`` ends one; views only:
    #: :meth:`Sessions.unrecorded`). A list, not a set: a set's order after a snapshot's round trip is not the
    #: order it was saved in, so a state saved again would not be the same bytes.
    running: list[str] = []
    #: The time of ``since`` and of the latest applied claim, as read (views only: measured when judged).
    since_time: datetime | None = None
    claimed_time: datetime | None = None
    #: What became of the latest claim first (views only): ``ready``, or how its worker ended (a ``stop_kind``,
    #: ``execution_gone``, :data:`COUNTED`); a worker of an older generation says nothing of it. None: nothing yet.
    claim_end: Mark | None = None
    #: The latest accepted ``retry_restore`` or ``start_fresh`` (views only).
    decided: Mark | None = None
    #: Turn -> the first interrupt result that said its outcome is unknown before the log recorded the turn's end
    #: (views only: the wait starts there, and keeps that start once the turn's end is recorded).
    unknown_since: dict[str, Mark] = msgspec.field(default_factory=dict)
    #: The line, type and ``ts`` of the latest applied event (what moved the revision last: a refusal names it).
    last_line: int = 0
    last_type: str = ""
    last_ts: str | None = None
    #: The latest accepted decision of any kind (a refusal on an older revision names who moved the session; the
    #: restart a worker should claim is :attr:`decided`).
    last_decision: Change | None = None

    def item(self) -> dict[str, Any]:
        """The dump's item for this session."""
        return {
            "admission_state": self.admission_state,
            "attention": self.attention,
            "reason": self.reason,
            "failures": self.failures,
            "retry_at": self.retry_at,
            "generation": self.generation,
            "revision": self.revision,
            "resumable": self.resumable,
            "unknown_turns": sorted(self.unknown) if self.unknown else [],
        }

    def claim_pending(self) -> bool:
        """Whether the latest applied claim's worker is starting: no worker of its generation was ready since, and
        none ended (stopped, gone, or a counted failure)."""
        return self.claimed_at is not None and self.claim_end is None

    def claim_mark(self) -> Mark | None:
        """The latest applied claim while its worker is starting (:meth:`claim_pending`), as a view judges it; else
        None."""
        if not self.claim_pending() or self.claimed_at is None or self.claimed_time is None:
            return None
        return Mark("claimed", self.claimed_at, self.claimed_line, self.claimed_time)

    def starting(self, at: datetime) -> bool:
        """Whether that starting worker (:meth:`claim_pending`) was claimed less than :data:`WORKER_STARTUP_TIMEOUT`
        ago at ``at``: it may still be retrying storage (seed 004), so it is not late."""
        return (self.claim_pending() and self.claimed_time is not None
                and seconds(micros(at) - micros(self.claimed_time)) < WORKER_STARTUP_TIMEOUT.total_seconds())

    def retry_claimed(self) -> bool:
        """Whether the session is in ``backoff`` and its starting claim (:meth:`claim_pending`) is at or after
        ``retry_at`` (as instants): the retry started (a worker took the session) and no worker is ready yet."""
        return (self.admission_state == BACKOFF and self.retry_at is not None and self.claim_pending()
                and self.claimed_time is not None and micros(self.claimed_time) >= micros(parse_time(self.retry_at)))

    def retry_under_way(self, at: datetime) -> bool:
        """Whether a claimed retry (:meth:`retry_claimed`) is under way at ``at`` (:meth:`starting`), not overdue."""
        return self.retry_claimed() and self.starting(at)

    def mark_since(self, ts: str, line: int, at: datetime) -> None:
        """The event that put the session in its state: ``since`` (as written), its line and instant."""
        self.since, self.since_line, self.since_time = ts, line, at

    def ended(self, what: str, generation: int | None, ts: str, line: int, at: datetime) -> None:
        """A worker ended (``generation`` None: every execution is gone): the claim's first end, unless it came from a
        worker older than the claim or the claim's worker already ended."""
        if generation is not None and generation < self.claimed_generation:
            return
        if self.claim_end is None or self.claim_end.what == "ready":
            self.claim_end = Mark(what, ts, line, at)

    # -- facts the rules ask about -------------------------------------------------

    def admit_as(self, state: Admission) -> None:
        """Move ``admission_state``; a closed session stays closed."""
        if self.admission_state != CLOSED:
            self.admission_state = state

    def place(self, turn_id: str) -> None:
        """Give a turn its place in the turn order (first start wins)."""
        self.turns.setdefault(turn_id, len(self.turns))

    def covers(self, turn_id: str) -> bool:
        """Whether the committed checkpoint covers the turn."""
        return self.covered is not None and self.turns.get(turn_id, len(self.turns)) <= self.covered

    def covers_all(self) -> bool:
        """Whether the committed checkpoint covers every started turn."""
        return self.covered is not None and len(self.turns) - 1 <= self.covered

    def last_change(self) -> Change | None:
        """The latest applied event (the decision itself when it was one), or None before any."""
        if not self.last_line:
            return None
        if self.last_decision is not None and self.last_decision.line == self.last_line:
            return self.last_decision
        return Change(self.last_line, self.last_type, self.last_ts)

    def decided_since(self, revision: int) -> Change | None:
        """The latest accepted decision when it was made on ``revision`` or later (it moved the session past what
        a request on ``revision`` saw), else None."""
        d = self.last_decision
        return d if d is not None and d.revision is not None and d.revision >= revision else None

    def gone_after(self, turn_id: str) -> bool:
        """Whether ``execution_gone`` came after the turn became unknown."""
        return self.gone_line > self.unknown[turn_id]

    def fence(self, at: datetime, *, resume: bool = False) -> str | None:
        """Why the session admits no new work at ``at`` (a new generation, a ready worker, a turn), or None.

        Held: ``recovery_required`` and ``closed``; ``backoff`` before ``retry_at``;
        ``stopped`` with a context gap. A ``stopped`` resumable session admits a
        resume (``resume``: a new generation's claim and its ready) but no turn
        until the resumed worker is ready.
        """
        state = self.admission_state
        if state == RECOVERY_REQUIRED_STATE:
            return f"recovery_required ({self.attention}: {self.reason}) until an operator's decision is accepted"
        if state == CLOSED:
            return "closed"
        if state == BACKOFF and self.retry_at is not None and micros(at) < micros(datetime.fromisoformat(
                self.retry_at)):
            return f"in backoff until {self.retry_at} ({self.attention}: {self.reason})"
        if state == STOPPED and (self.attention == CONTEXT_GAP or not resume):
            if self.attention == CONTEXT_GAP:
                return "stopped with a context gap until start_fresh (or close) is accepted"
            return "stopped until a resumed worker is ready"
        return None


class Receipt(msgspec.Struct, array_like=True, gc=False):
    """The receipt of one ``recovery_decision``: its line and ``seq``, what was decided, the result, by whom, when
    and why, and what moved the session when it was refused for its revision.

    ``first_line``: the line of the first request sent with its idempotency key
    (its own line when it is the first; the earlier one when ``replayed`` or
    ``IDEMPOTENCY_KEY_REUSED``).
    """

    line: int
    seq: int | None
    session_id: str
    decision: str
    result: str
    replayed: bool
    first_line: int
    actor: str | None
    ts: str
    expected_revision: int
    target_turn_id: str | None
    #: The line's ``reason`` (the person's).
    reason: str
    #: Why this result (:attr:`Judgement.why`: the words ``eventlog sessions`` gives for the same rule).
    why: str
    #: For ``REQUEST_STALE`` on another revision: the session's latest applied event when it was judged ...
    last_change: Change | None = None
    #: ... and the latest accepted decision made on the expected revision or later (who moved it).
    decided_since: Change | None = None

    def item(self) -> dict[str, Any]:
        """The dump's receipt (the spec's keys, then ``first_line`` and ``actor``)."""
        return {"line": self.line, "session_id": self.session_id, "decision": self.decision, "result": self.result,
                "replayed": self.replayed, "first_line": self.first_line, "actor": self.actor}

    def explained(self) -> dict[str, Any]:
        """The dump's receipt, then ``ts``, ``expected_revision``, ``target_turn_id``, ``reason``, ``why``,
        ``last_change`` and ``decided_since`` (:meth:`Change.item`, or null): what ``decide``, the API and the
        session views give."""
        return {**self.item(), "ts": self.ts, "expected_revision": self.expected_revision,
                "target_turn_id": self.target_turn_id, "reason": self.reason, "why": self.why,
                "last_change": None if self.last_change is None else self.last_change.item(),
                "decided_since": None if self.decided_since is None else self.decided_since.item()}


class SessionsState(msgspec.Struct):
    """Everything the sessions projection folds (projections/base.py: to add state, add a typed field)."""

    sessions: dict[str, Session] = {}
    #: One per ``recovery_decision``, in log order.
    receipts: list[Receipt] = []
    #: Control id -> its interrupt timeline (``projections.controls``).
    controls: dict[str, Control] = {}


@dataclass(frozen=True, slots=True)
class Judgement:
    """A receipt's result, whether it repeats an earlier one, and why (for people)."""

    result: str
    replayed: bool
    why: str
    #: The line of the first request with the same idempotency key, when there was one.
    first_line: int | None = None

    @property
    def accepted(self) -> bool:
        """Whether the decision is (or was, when replayed) accepted."""
        return self.result == ACCEPTED


class Sessions:
    """Sessions: restore and startup failures, unknown outcomes, decisions (folded state: :class:`SessionsState`)."""

    name = "sessions"
    State = SessionsState

    def __init__(self) -> None:
        self.state = SessionsState()

    @property
    def sessions(self) -> dict[str, Session]:
        """Session id -> its state."""
        return self.state.sessions

    @property
    def receipts(self) -> list[Receipt]:
        """One per ``recovery_decision``, in log order."""
        return self.state.receipts

    def session(self, session_id: str) -> Session:
        """The session's state, created on its first event."""
        sessions = self.state.sessions
        s = sessions.get(session_id)
        if s is None:
            s = sessions[session_id] = Session()
        return s

    # --- The rules (spec section 6) -------------------------------------------------

    def _claimed(self, ev: WorkerClaimed, line: int, at: datetime) -> FoldResult:
        """A worker took the session: only the generation moves. A new generation waits for the fence."""
        s = self.state.sessions.get(ev.session_id)
        if s is not None and ev.generation > s.generation:
            why = s.fence(at, resume=True)
            if why is not None:
                return Rejected(f"session {ev.session_id!r} is {why}: no new generation ({ev.generation}) is admitted")
        s = self._seen(ev, line, ev.generation)
        s.claimed_at, s.claimed_line, s.claimed_generation, s.claimed_time = ev.ts, line, ev.generation, at
        s.claim_end = None
        return None

    def _ready(self, ev: WorkerReady, line: int, at: datetime) -> FoldResult:
        """Ready: failures 0, retry_at and attention null, admitted (reason stays); not while fenced."""
        s = self.state.sessions.get(ev.session_id)
        why = s.fence(at, resume=True) if s is not None else None
        if why is not None:
            return Rejected(f"session {ev.session_id!r} is {why}: a worker cannot admit it by being ready")
        s = self._seen(ev, line, ev.generation)
        s.failures = 0
        s.retry_at = None
        s.attention = None
        s.admit_as(ADMITTED)
        s.mark_since(ev.ts, line, at)
        if ev.generation >= s.claimed_generation and s.claim_end is None:
            s.claim_end = Mark("ready", ev.ts, line, at)
        return None

    def _restore_failed(self, ev: CheckpointRestoreFailed, line: int, at: datetime) -> FoldResult:
        """A counted failure: attention RESTORE_FAILED."""
        self._failed(self._seen(ev, line, ev.generation), RESTORE_FAILED, ev.reason, line, at, ev.ts)
        self.sessions[ev.session_id].ended(COUNTED, ev.generation, ev.ts, line, at)
        return None

    def _startup_failed(self, ev: StartupFailed, line: int, at: datetime) -> FoldResult:
        """A counted failure: attention STARTUP_FAILED."""
        self._failed(self._seen(ev, line, ev.generation), STARTUP_FAILED, ev.reason, line, at, ev.ts)
        self.sessions[ev.session_id].ended(COUNTED, ev.generation, ev.ts, line, at)
        return None

    @staticmethod
    def _failed(s: Session, attention: Attention, reason: str, line: int, at: datetime, ts: str) -> None:
        """failures + 1; 1st: backoff 30 s, 2nd: 60 s, 3rd or incompatible: recovery_required (and it stays so)."""
        s.mark_since(ts, line, at)
        s.failures += 1
        s.attention = attention
        s.reason = reason
        wait = BACKOFF_AFTER.get(s.failures)
        if (reason == INCOMPATIBLE_CHECKPOINT or s.failures >= MAX_FAILURES or wait is None
                or s.admission_state == RECOVERY_REQUIRED_STATE):
            s.admit_as(RECOVERY_REQUIRED_STATE)
            s.retry_at = None
        else:
            s.admit_as(BACKOFF)
            s.retry_at = _later(at, wait)

    def _not_counted(self, ev: StorageUnavailable, line: int, at: datetime) -> FoldResult:
        """Transient storage errors never count."""
        self._seen(ev, line, ev.generation)
        return None

    def _stopped(self, ev: WorkerStopped, line: int, at: datetime) -> FoldResult:
        """A stopped worker never counts; the views keep how it ended (:meth:`Session.ended`)."""
        self._seen(ev, line, ev.generation).ended(ev.stop_kind, ev.generation, ev.ts, line, at)
        return None

    def _turn_started(self, ev: TurnStarted, line: int, at: datetime) -> FoldResult:
        """The turn takes its place in the turn order; no turn starts while the session is fenced."""
        s = self.state.sessions.get(ev.session_id)
        why = s.fence(at) if s is not None else None
        if why is not None:
            return Rejected(f"session {ev.session_id!r} is {why}: turn {ev.turn_id!r} is not dispatched")
        s = self._seen(ev, line)
        if ev.turn_id not in s.turns:  # a repeated start, or a start after its end, starts nothing
            s.running.append(ev.turn_id)  # once: its start puts it in turns
        s.place(ev.turn_id)
        return None

    def _turn_finished(self, ev: TurnFinished, line: int, at: datetime) -> FoldResult:
        """``outcome_unknown``: recovery_required, RECOVERY_REQUIRED; the turn is never re-run on its own."""
        s = self._seen(ev, line)
        s.place(ev.turn_id)
        if ev.turn_id in s.running:
            s.running.remove(ev.turn_id)
        waited = s.unknown_since.pop(ev.turn_id, None) if s.unknown_since else None
        if ev.outcome == OUTCOME_UNKNOWN:
            s.unknown[ev.turn_id] = line
            s.mark_since(ev.ts, line, at)
            if waited is not None:  # an interrupt said so first: the wait started there (views only)
                s.since, s.since_line, s.since_time = waited.ts, waited.line, waited.at
            s.admit_as(RECOVERY_REQUIRED_STATE)
            s.attention = RECOVERY_REQUIRED
            s.retry_at = None
            s.reason = ev.terminal_reason if ev.terminal_reason is not None else OUTCOME_UNKNOWN
        return None

    def _checkpoint(self, ev: CheckpointCommitted, line: int, at: datetime) -> FoldResult:
        """The latest checkpoint covers its turn and every turn before it."""
        s = self._seen(ev, line)
        s.covered = s.turns.get(ev.covers_turn, len(s.turns) - 1)
        return None

    def _gone(self, ev: ExecutionGone, line: int, at: datetime) -> FoldResult:
        """The scheduler confirmed no execution is left."""
        s = self._seen(ev, line)
        s.gone_line = line
        s.ended("execution_gone", None, ev.ts, line, at)
        return None

    def _decision(self, ev: RecoveryDecision, line: int, at: datetime) -> FoldResult:
        """Judge, write the receipt, apply when accepted; NOT_APPLIED when refused or repeated."""
        s = self.session(ev.session_id)
        j = self.judge(
            ev.session_id,
            ev.decision,
            expected_revision=ev.expected_revision,
            idempotency_key=ev.idempotency_key,
            target_turn_id=ev.target_turn_id,
            evidence_ref=ev.evidence_ref,
        )
        first = j.first_line if j.first_line is not None else line
        moved = j.result == REQUEST_STALE and ev.expected_revision != s.revision  # a first refusal or its repeat
        self.state.receipts.append(
            Receipt(line, ev.seq or None, ev.session_id, ev.decision, j.result, j.replayed, first, ev.actor, ev.ts,
                    ev.expected_revision, ev.target_turn_id, ev.reason, j.why,
                    s.last_change() if moved else None, s.decided_since(ev.expected_revision) if moved else None))
        if j.first_line is not None:  # replayed, or the key reused for another request
            return NOT_APPLIED
        s.keys[ev.idempotency_key] = FirstUse(line, ev.decision, ev.expected_revision, ev.target_turn_id,
                                              ev.evidence_ref or None, j.result, j.why)
        if not j.accepted:
            return NOT_APPLIED
        s.mark_since(ev.ts, line, at)
        s.last_line, s.last_type, s.last_ts = line, "recovery_decision", ev.ts
        s.last_decision = Change(line, "recovery_decision", ev.ts, ev.decision, ev.actor, ev.reason,
                                 ev.target_turn_id, ev.expected_revision)
        if ev.decision in ("retry_restore", "start_fresh"):
            s.decided = Mark(ev.decision, ev.ts, line, at)
            s.admit_as(ADMITTED)
            s.failures = 0
            s.attention = None
            s.retry_at = None
            if ev.decision == "start_fresh":
                s.covered = None
        elif ev.decision == "close":
            s.admission_state = CLOSED
            s.retry_at = None  # seed 004: no retry once stopped ("停止後は null")
        else:  # abandon, confirm_completed
            assert ev.target_turn_id is not None  # judged above
            del s.unknown[ev.target_turn_id]
            s.admit_as(STOPPED)
            s.resumable = s.covers_all()
            s.attention = None if s.resumable else CONTEXT_GAP
        s.revision += 1
        return None

    def judge(
        self,
        session_id: str,
        decision: str,
        *,
        expected_revision: int,
        idempotency_key: str | None = None,
        target_turn_id: str | None = None,
        evidence_ref: str | None = None,
    ) -> Judgement:
        """Judge a decision against the current state, changing nothing.

        Checked in the spec's order: a key seen before with the same request
        (replayed: its first receipt) or with another (``IDEMPOTENCY_KEY_REUSED``),
        the revision, then the decision's own conditions. Without
        ``idempotency_key`` the first check is skipped ("would it be accepted now?").
        """
        s = self.state.sessions.get(session_id) or Session()
        first = s.keys.get(idempotency_key) if idempotency_key is not None else None
        if first is not None:
            if first.same_request(decision, expected_revision, target_turn_id, evidence_ref):
                return Judgement(first.result, True, f"the same request was sent with idempotency key "
                                 f"{idempotency_key!r} at line {first.line}: its first receipt again, nothing "
                                 f"changed (line {first.line}: {first.result}"
                                 + (f", {first.why})" if first.why else ")"), first.line)
            return Judgement(IDEMPOTENCY_KEY_REUSED, False, f"idempotency key {idempotency_key!r} was used at line "
                             f"{first.line} for another request ({first.describe()}); nothing changed (send this "
                             "one with a new key)", first.line)
        if expected_revision != s.revision:
            return Judgement(REQUEST_STALE, False, f"it was decided on revision {expected_revision}, and the session "
                             f"is at revision {s.revision} now")
        state, attention = s.admission_state, s.attention
        now = f"it is {state}, attention {attention or 'none'}"
        if decision == "retry_restore":
            if state == RECOVERY_REQUIRED_STATE and attention == RESTORE_FAILED:
                return Judgement(ACCEPTED, False, "restore failed up to the limit: the same checkpoint is tried again")
            return Judgement(REQUEST_STALE, False, f"only a {RESTORE_FAILED} session that stopped at the limit "
                             f"can retry its restore ({now})")
        if decision == "start_fresh":
            if (state == RECOVERY_REQUIRED_STATE and attention in (RESTORE_FAILED, STARTUP_FAILED)) or (
                state == STOPPED and attention == CONTEXT_GAP
            ):
                return Judgement(ACCEPTED, False, "starts again without the earlier context")
            return Judgement(REQUEST_STALE, False, "only a session stopped by restore or startup failures, or "
                             f"stopped with a context gap, can start fresh ({now})")
        if decision == "close":
            if state == CLOSED:
                return Judgement(REQUEST_STALE, False, "the session is already closed")
            return Judgement(ACCEPTED, False, "closes the session (cannot be undone)")
        # abandon, confirm_completed
        if target_turn_id is None:
            return Judgement(REQUEST_STALE, False, "needs target_turn_id naming an unknown turn")
        if target_turn_id not in s.unknown:
            return Judgement(REQUEST_STALE, False, f"turn {target_turn_id!r} is not an unknown turn of the session")
        if not s.gone_after(target_turn_id):
            return Judgement(RECOVERY_REQUIRED, False, "the previous execution has not been confirmed gone")
        if decision == "confirm_completed":
            if not evidence_ref:
                return Judgement(CHECKPOINT_UNAVAILABLE, False, "confirm_completed needs an evidence_ref")
            if not s.covers(target_turn_id):
                return Judgement(CHECKPOINT_UNAVAILABLE, False,
                                 f"no committed checkpoint covers turn {target_turn_id!r}")
            return Judgement(ACCEPTED, False, f"turn {target_turn_id!r} is confirmed completed")
        return Judgement(ACCEPTED, False, f"turn {target_turn_id!r} is abandoned")

    def options(self, session_id: str, evidence_ref: str = "evidence") -> list[tuple[str, str | None, Judgement]]:
        """Each decision judged now with the current revision and no key: (decision, turn, judgement).

        ``abandon``/``confirm_completed`` are tried with each unknown turn (or
        none when there is none); ``confirm_completed`` as if ``evidence_ref``
        were given, since only the operator can supply it.
        """
        s = self.state.sessions.get(session_id) or Session()
        out: list[tuple[str, str | None, Judgement]] = []
        for decision in DECISIONS:
            turns: list[str | None] = list(sorted(s.unknown)) if decision in TURN_DECISIONS else [None]
            for turn in turns or [None]:
                j = self.judge(
                    session_id,
                    decision,
                    expected_revision=s.revision,
                    target_turn_id=turn,
                    evidence_ref=evidence_ref if decision == "confirm_completed" else None,
                )
                out.append((decision, turn, j))
        return out

    # --- bookkeeping -----------------------------------------------------------------

    def _seen(self, ev: SessionEvent, line: int, generation: int | None = None) -> Session:
        """The session of an applied event: revision + 1, the event kept as its last change, the highest
        generation kept."""
        sessions = self.state.sessions
        s = sessions.get(ev.session_id)
        if s is None:
            s = sessions[ev.session_id] = Session()
        s.revision += 1
        s.last_line, s.last_type, s.last_ts = line, ev.wire_type, ev.ts
        if generation is not None and generation > s.generation:
            s.generation = generation
        return s

    def _stage(self, ev: InterruptStage, line: int, at: datetime) -> FoldResult:
        """One stage of an interrupt's timeline (``projections.controls``)."""
        result = controls.fold_stage(self.state.controls, ev, line)
        if result is None:
            self._seen(ev, line)
        return result

    def _control_result(self, ev: ControlResult, line: int, at: datetime) -> FoldResult:
        """A control's result closes its timeline (``projections.controls``)."""
        result = controls.fold_result(self.state.controls, ev, line)
        if result is None:
            s = self._seen(ev, line)
            turn = self.state.controls[ev.control_id].turn_id
            if (turn is not None and ev.outcome.lower() in controls.UNKNOWN_OUTCOMES
                    and (turn not in s.turns or turn in s.running)):
                s.unknown_since.setdefault(turn, Mark("interrupt", ev.ts, line, at))
        return result

    def first_use(self, session_id: str, idempotency_key: str) -> FirstUse | None:
        """The first request the session got with ``idempotency_key``, or None."""
        s = self.state.sessions.get(session_id)
        return s.keys.get(idempotency_key) if s is not None else None

    def receipt_of(self, seq: int) -> dict[str, Any] | None:
        """The receipt of the decision written with ``seq`` (:meth:`Receipt.explained`), or None."""
        for r in reversed(self.state.receipts):
            if r.seq == seq:
                return r.explained()
        return None

    def unrecorded(self) -> dict[str, list[Control]]:
        """Session -> its interrupts whose result says the turn's outcome is unknown, of a turn whose end its log never
        recorded: never started (a worker log imported alone holds such results and no ``turn_started``), or
        started and not finished (a ``deadline_exceeded`` receipt, and no ``turn_finished`` since).

        Interrupts never move a session, so nothing else would say that the turn's effect is unknown: the session
        still takes work (docs/DECISIONS.md, "An interrupt whose outcome is unknown"). A ``turn_finished`` ends it:
        ``outcome_unknown`` stops the session for a decision, another outcome says what the turn did. Closed
        sessions are left out.
        """
        out: dict[str, list[Control]] = {}
        for _cid, c in sorted(self.state.controls.items()):
            s = self.state.sessions.get(c.session_id)
            unknown = c.result_line is not None and (c.outcome or "").lower() in controls.UNKNOWN_OUTCOMES
            if unknown and c.turn_id is not None and s is not None and s.admission_state != CLOSED \
                    and (c.turn_id not in s.turns or c.turn_id in s.running):
                out.setdefault(c.session_id, []).append(c)
        return out

    def retry_due(self, as_of: datetime) -> list[str]:
        """Sessions in ``backoff`` whose ``retry_at`` is at or before ``as_of`` (compared as instants), sorted."""
        return sorted(
            sid for sid, s in self.state.sessions.items()
            if s.admission_state == BACKOFF and s.retry_at is not None and parse_time(s.retry_at) <= as_of
        )

    def retry_under_way(self, as_of: datetime) -> list[str]:
        """The sessions of :meth:`retry_due` whose retry is under way at ``as_of`` (:meth:`Session.retry_under_way`)."""
        return [sid for sid in self.retry_due(as_of) if self.state.sessions[sid].retry_under_way(as_of)]

    def without_worker(self, as_of: datetime) -> dict[str, int]:
        """How many sessions wait overdue for a worker at ``as_of``, by :func:`worker_wait` kind (every kind listed)."""
        out: dict[str, int] = dict.fromkeys(WORKER_WAITS, 0)
        for s in self.state.sessions.values():
            w = worker_wait(s, as_of)
            if w is not None and w["overdue"]:
                out[w["kind"]] += 1
        return out

    def decision_wait_s(self, as_of: datetime) -> float:
        """The longest any session has waited for a decision (:func:`needs_decision`) at ``as_of``: seconds since the
        event that put it there (``since``; an interrupt that said the turn's outcome unknown first, when the turn's
        end was recorded later); 0 when none waits."""
        now = micros(as_of)
        return max([seconds(now - micros(s.since_time)) for s in self.state.sessions.values()
                    if s.since_time is not None and needs_decision(s.item())] + [0.0])

    def view(self, as_of: datetime, as_of_text: str | None = None) -> dict[str, Any]:
        """The ``sessions`` part of the dump (``retry_due``: judged at ``as_of``)."""
        sessions = self.state.sessions
        return {
            "items": {sid: sessions[sid].item() for sid in sorted(sessions)},
            "receipts": [r.item() for r in self.state.receipts],
            "retry_due": self.retry_due(as_of),
            "controls": {cid: controls.timeline(c) for cid, c in sorted(self.state.controls.items())},
        }

    handlers: dict[type[Event], Handler] = {
        WorkerClaimed: _claimed,
        WorkerReady: _ready,
        CheckpointRestoreFailed: _restore_failed,
        StartupFailed: _startup_failed,
        StorageUnavailable: _not_counted,
        WorkerStopped: _stopped,
        TurnStarted: _turn_started,
        TurnFinished: _turn_finished,
        CheckpointCommitted: _checkpoint,
        ExecutionGone: _gone,
        RecoveryDecision: _decision,
        InterruptStage: _stage,
        ControlResult: _control_result,
    }


def _later(at: datetime, wait: timedelta) -> str | None:
    """``at`` + ``wait`` in ``at``'s own offset, as ISO 8601 (elapsed time, also across DST); None: never."""
    when = later(at, wait)
    return None if when is None else when.isoformat()


def describe(sessions: Sessions, session_id: str, as_of: datetime | None) -> dict[str, Any]:
    """The dump item plus ``retry_due``, ``retry_claimed``, ``worker_wait``, ``needs_decision``, ``fenced``,
    ``would_accept``, ``would_refuse``, ``decisions`` (its receipts, :meth:`Receipt.explained`: who decided, when,
    why) and ``controls`` (its interrupts' verdicts)."""
    s = sessions.sessions[session_id]
    out = s.item()
    due = None
    if s.retry_at is not None and as_of is not None:
        due = as_of >= datetime.fromisoformat(s.retry_at)
    out["retry_due"] = due
    #: The claim that started the due retry, and whether it is still under way (None: no such claim).
    out["retry_claimed"] = retry_claimed(s, as_of)
    #: Why a session that should have a worker has none at work, since when, and whether that is late (None: no wait).
    out["worker_wait"] = worker_wait(s, as_of)
    #: Why a new generation or a turn would be refused now (``Session.fence``), or None.
    out["fenced"] = s.fence(as_of) if as_of is not None else None
    out["needs_decision"] = needs_decision(out)
    accept: list[dict[str, Any]] = []
    refuse: list[dict[str, Any]] = []
    for decision, turn, j in sessions.options(session_id):
        entry: dict[str, Any] = {"decision": decision, "expected_revision": s.revision}
        if turn is not None:
            entry["target_turn_id"] = turn
        if decision == "confirm_completed":
            entry["needs"] = "evidence_ref"
        if j.accepted:
            accept.append(entry)
        else:
            refuse.append({**entry, "result": j.result, "why": j.why})
    out["would_accept"] = accept
    out["would_refuse"] = refuse
    out["decisions"] = [r.explained() for r in sessions.receipts if r.session_id == session_id]
    out["controls"] = {
        cid: {k: t[k] for k in ("turn_id", "verdict", "outcome", "reason_code", "effect_ms")}
        for cid, c in sorted(sessions.state.controls.items()) if c.session_id == session_id
        for t in (timeline(c),)
    }
    return out


def pending_claim(s: Session, as_of: datetime | None) -> dict[str, Any] | None:
    """The session's latest claim while its worker is starting (:meth:`Session.claim_pending`): ``at`` (as written),
    ``line``, ``generation`` and ``under_way`` (less than :data:`WORKER_STARTUP_TIMEOUT` old at ``as_of``; None: no
    ``as_of``); None when no worker is starting."""
    if not s.claim_pending():
        return None
    return {"at": s.claimed_at, "line": s.claimed_line, "generation": s.claimed_generation,
            "under_way": s.starting(as_of) if as_of is not None else None}


def retry_claimed(s: Session, as_of: datetime | None) -> dict[str, Any] | None:
    """The claim that started a session's retry (:meth:`Session.retry_claimed`), as :func:`pending_claim` gives it;
    None when the session has no such claim."""
    return pending_claim(s, as_of) if s.retry_claimed() else None


def claim_words(claimed: dict[str, Any], retry: bool = True) -> str:
    """A starting worker's claim (:func:`pending_claim`) in words: under way since its claim (``retry``: a retry's),
    or not ready after the worker's startup timeout (look at the worker's log)."""
    worker = f"a worker (generation {claimed['generation']}, line {claimed['line']})"
    hours = WORKER_STARTUP_TIMEOUT.total_seconds() / 3600
    if claimed["under_way"] is False:
        return (f"{worker} claimed it at {claimed['at']} and is not ready after {hours:g} h "
                "(WORKER_STARTUP_TIMEOUT_SEC): look at the worker's log")
    if retry:
        return f"retry under way since {claimed['at']}: {worker} took it and may still be retrying storage"
    return (f"{worker} claimed it at {claimed['at']} and is not ready yet: it may still be retrying storage "
            f"(named after {hours:g} h, WORKER_STARTUP_TIMEOUT_SEC)")


def waited_from(s: Session, retry: bool = False) -> tuple[WorkerWaitKind, Mark, timedelta] | None:
    """What a session that should have a worker and has none at work waits on, whatever the time (the rules of
    :func:`worker_wait`): its kind, the event it waits from and how long it may wait; None when it waits on none.

    ``retry``: a session in ``backoff`` whose retry was claimed (:meth:`Session.retry_claimed`) waits on that claim's
    worker too (its retry is under way until then: :func:`retry_claimed`)."""
    state = s.admission_state
    if state == ADMITTED and s.decided is not None and s.decided.line > s.claimed_line:
        return "decision_unclaimed", s.decided, CLAIM_WAIT
    claim = s.claim_mark()
    if claim is not None and ((state in (ADMITTED, STOPPED) and s.attention != CONTEXT_GAP)
                              or (retry and s.retry_claimed())):
        return "worker_not_ready", claim, WORKER_STARTUP_TIMEOUT
    if state == ADMITTED and s.claim_end is not None and s.claim_end.what in RELAUNCHED_AFTER:
        return "worker_gone", s.claim_end, CLAIM_WAIT
    return None


def worker_wait(s: Session, as_of: datetime | None) -> dict[str, Any] | None:
    """Why a session that should have a worker has none at work, since when, and whether that is late at ``as_of``.

    Judged for a session ``admitted``, or ``stopped`` and resumable with a resume claimed (the first that holds):
    ``decision_unclaimed``, an accepted ``retry_restore``/``start_fresh`` that no worker claimed since (seed 004:
    acceptance is not a restart); ``worker_not_ready``, its latest claim's worker is starting
    (:meth:`Session.claim_pending`); ``worker_gone``, that worker ended as failed, drained or gone
    (:data:`RELAUNCHED_AFTER`) and no worker claimed the session since. A session in ``backoff`` is its retry's to
    judge (:func:`retry_claimed`); one that waits for a decision or is closed needs no worker.

    The dict: ``kind``, ``since`` (the event waited from, as written), ``line``, ``what`` (the decision, ``claimed``,
    or how the worker ended), ``generation`` (of the latest claim; 0: none), ``after_s`` (the bound:
    :data:`CLAIM_WAIT`, or :data:`WORKER_STARTUP_TIMEOUT` for a starting worker), ``overdue`` (past it at ``as_of``;
    None without ``as_of``). None when the session has a worker (or needs none).
    """
    waits = waited_from(s)
    if waits is None:
        return None
    kind, mark, bound = waits
    overdue = None if as_of is None else seconds(micros(as_of) - micros(mark.at)) >= bound.total_seconds()
    return {"kind": kind, "since": mark.ts, "line": mark.line, "what": mark.what, "generation": s.claimed_generation,
            "after_s": num(bound.total_seconds()), "overdue": overdue}


def worker_wait_words(w: dict[str, Any]) -> str:
    """A :func:`worker_wait` in words: what happened when (with its line), and, once overdue, where to look."""
    late = w["overdue"] is True
    minutes = f"{w['after_s'] / 60:g} min"
    if w["kind"] == "worker_not_ready":
        return claim_words({"at": w["since"], "line": w["line"], "generation": w["generation"],
                            "under_way": None if w["overdue"] is None else not late}, retry=False)
    if w["kind"] == "decision_unclaimed":
        said = f"{w['what']} was accepted at {w['since']} (line {w['line']})"
        if late:
            return (f"{said} and no worker claimed it in the {minutes} since: acceptance is not a restart (seed "
                    "004); look at the scheduler's log")
        return f"{said}; no worker claimed it yet (named after {minutes})"
    how = ("the scheduler confirmed no execution left (execution_gone" if w["what"] == "execution_gone"
           else f"its worker stopped ({w['what']}")
    said = f"{how}, line {w['line']}) at {w['since']}"
    if late:
        return (f"{said} and no worker claimed it in the {minutes} since: nothing runs it; look at the scheduler's "
                "log (a worker that ends before it is ready counts a failure, seed 004)")
    return f"{said}; no worker claimed it yet (named after {minutes})"


def needs_decision(item: dict[str, Any]) -> bool:
    """Whether a session (its dump item) waits for a person's decision: recovery required, a context gap, or a
    turn still of unknown outcome (spec section 6: never re-run on its own; only abandon, confirm_completed or close
    settles it, and a session admitted again by start_fresh after another turn's decision still holds it)."""
    return bool(item["admission_state"] == RECOVERY_REQUIRED_STATE or (
        item["admission_state"] != CLOSED and (item["attention"] == CONTEXT_GAP or item.get("unknown_turns"))
    ))
