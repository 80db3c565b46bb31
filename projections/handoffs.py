"""Handoff failback (seed 000, spec section 3): work failed over to a local machine, and its way back.

The seed counted 86 of 98 handoffs started locally and 0 of 98 returned to the
cloud, so the two sides are counted apart (``failover``, ``failback``), and only
a ``verified`` handshake counts as returned. Every transition rule is in
:data:`RULES`; the fold keeps, per handoff, its state and the first time it
reached each state, and per account the limit ledger and the probes since its
latest limit. Everything judged "as of T" (stale claims, the probe plan, the
claim order, watcher lateness) is computed in the queries below the rules.

Decisions where the spec is silent (the lead's):

- open states are ``pending``, ``claimed``, ``resume_requested``, ``needs_human``;
- ``local_started`` / ``local_start_failed`` apply to a created handoff in any
  state and change only the failover count;
- **attempt fencing** (the project's decision; it tightens the spec):
  ``resume_requested``, ``resume_failed``, ``verified`` and ``conflict`` are
  rejected unless their ``attempt`` is the live claim's (the last ``claimed``
  one), so a watcher whose claim was released and taken by another can no
  longer move the handoff. ``conflict`` may leave ``attempt`` out (the spec
  has none): it then answers whatever claim is live, as the spec says;
- a request the runner handed to a person because nothing came back
  (``needs_human`` with reason ``resume_unconfirmed``, straight from
  ``resume_requested``) still takes the answer it was waiting for:
  ``verified``, ``resume_failed`` or ``conflict`` of the same attempt applies
  to it as to ``resume_requested`` (any other ``needs_human`` refuses them, as
  the spec says);
- an event of a handoff never created, and a second ``handoff_created``, are
  rejected; a rejection leaves state and timestamps as they were;
- stale means strictly longer than ``stale_after`` since the handoff was last
  heard of: the latest ``ts`` among its latest ``claimed`` and every *applied*
  event of it after that (a clock running behind never makes a fresh claim
  stale; with times in order it is the last applied event; :func:`_heard`);
  ``stale_after`` is the caller's (``--stale-after``),
  else the ``stale_after_s`` of the last ``watcher_run`` that states one (the
  age the watcher hands silent requests to a person at), else 30 min;
- ``pending.oldest_age_s`` is T minus the earliest ``handoff_created`` time of
  a pending handoff (negative when T is before it);
- claim order ties: deadline (as instants, none last), importance (higher
  first), attempt (fewer first), created time, then log line; ``next_claims``
  is the first ``max_inflight`` minus live claims of that order, whatever the
  probe plan says;
- ``probe_plan`` holds every account named by a ``handoff_created``,
  ``limit_recorded`` or ``probe_result``;
- the watcher is late when T minus the last ``watcher_run`` (log order) is
  strictly more than twice its ``period_s``, or there is none while a handoff
  is pending; each watcher name also keeps its own last ``watcher_run``
  (:class:`Heartbeat`), late by the same age rule alone (in the dump; the
  views leave out a watcher a person retired, ``watcher_run`` ``retired``,
  until it runs again);
- ``needs_human_reasons`` counts handoffs in ``needs_human`` by their reason;
- each handoff counts its resume attempts in a row that ended ``resume_failed``
  with effect none (``Handoff.failing``; views and the runner only): any other
  end of an attempt, any ``needs_human`` and a person's release or requeue
  (a ``released`` or ``resume_failed`` with ``actor``) start it again; the
  runner's own release of a stale claim neither counts nor breaks it; at
  :data:`RESUME_FAILING_AFTER` the failback runner hands the handoff to a
  person (``resume_failing``).

**Backoff** (the spec leaves it to the project). The plan of an account as of T,
first match wins:

1. no pending handoff of the account: ``nothing_pending``, no probe,
   ``next_probe_at`` null;
2. ``needs_person``: the account's latest probe said ``auth_error`` (a broken
   login does not heal by waiting): no probe at all, ``next_probe_at`` null,
   until a person has fixed it and probes once by hand (``eventlog handoff
   probe``): a probe of any other outcome ends it;
3. the latest ``limit_recorded`` of the account (log order) has a ``reset_at``
   after T: ``waiting_reset``, no probe, ``next_probe_at`` = that ``reset_at``
   as written;
4. ``backoff_transient`` / ``backoff_unexpected``: the account's latest probe
   after that limit was passing trouble (``transient``, ``network_timeout``,
   or ``unexpected``: an answer nobody knows how to read is not retried at
   once either); wait 60 s, doubled for each such probe in a row before it
   (60, 120, 240, ... capped at 1 h), from the latest probe's ``ts``; no probe
   while T is before that. The reason names the latest probe:
   ``backoff_unexpected`` when it was ``unexpected``;
5. ``backoff_estimate``: the latest limit is ``estimated`` or ``unknown``, its
   ``reset_at`` (if any) has passed, and the latest probes after it said
   ``quota_limited`` (the estimate proved wrong); wait 30 min, doubled for
   each ``quota_limited`` probe in a row since that limit (30 min, 1 h, 2 h,
   ... capped at 24 h), from the latest one; no probe while T is before that;
6. otherwise ``due``: probe now, ``next_probe_at`` = T.

An ``explicit`` reset that has passed followed by ``quota_limited`` probes does
not back off: the spec says probe now. A probe of any other outcome ends a run
of the kind before it; a new ``limit_recorded`` starts the count again.

How long an account's probes have been failing is counted from the first probe
of such a run, for as long as the run holds the account (its backoff, and the
``due`` moments between two of them; ``Handoffs.failing_since``): the plan's
reason alone reads ``due`` whenever a backoff has run out.
"""

from __future__ import annotations

import heapq
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any, Final, Literal

import msgspec

from eventlog.events import (
    Claimed,
    Conflict,
    Event,
    HandoffCreated,
    LimitRecorded,
    LocalStarted,
    LocalStartFailed,
    NeedsHuman,
    ProbeResult,
    Released,
    ResumeFailed,
    ResumeRequested,
    Skip,
    Verified,
    WatcherRun,
    parse_time,
)
from projections.base import FoldResult, Handler, Rejected, elapsed_s, later, micros, not_before, num, seconds, summary

# --- the rules (spec section 3) ------------------------------------------------------

PENDING: Final = "pending"
CLAIMED: Final = "claimed"
REQUESTED: Final = "resume_requested"
RETURNED: Final = "returned"
NEEDS_HUMAN: Final = "needs_human"
SKIPPED: Final = "skipped"

#: A handoff's state (a snapshot holding any other is refused).
HandoffState = Literal["pending", "claimed", "resume_requested", "returned", "needs_human", "skipped"]
STATES: tuple[HandoffState, ...] = (PENDING, CLAIMED, REQUESTED, RETURNED, NEEDS_HUMAN, SKIPPED)
#: States a handoff can still move on from (lead's decision).
OPEN = frozenset({PENDING, CLAIMED, REQUESTED, NEEDS_HUMAN})
#: Claims that hold a slot of ``max_inflight``.
LIVE = frozenset({CLAIMED, REQUESTED})
#: Still out, waiting to come back: a passed deadline is named for these (``deadline_passed``).
OUT = LIVE | {PENDING}
ANY = frozenset(STATES)

#: event type -> the states it applies to. Where it leads is in the handler.
RULES: dict[str, frozenset[str]] = {
    "local_started": ANY,  # failover side only: the state does not change
    "local_start_failed": ANY,
    "claimed": frozenset({PENDING}),  # -> claimed
    "released": frozenset({CLAIMED, NEEDS_HUMAN}),  # -> pending
    "resume_requested": frozenset({CLAIMED}),  # -> resume_requested
    "verified": frozenset({REQUESTED}),  # -> returned (the only way back)
    "resume_failed": frozenset({REQUESTED}),  # effect none -> pending; unknown -> needs_human
    "conflict": frozenset({CLAIMED, REQUESTED}),  # -> needs_human
    "needs_human": OPEN,  # -> needs_human (again: the reason is updated)
    "skip": ANY - {RETURNED, SKIPPED},  # -> skipped
}

#: Why a handoff is in ``needs_human`` when no ``needs_human`` event said so.
REASON_CONFLICT = "conflict"
REASON_UNKNOWN_EFFECT = "resume_failed_unknown_effect"
#: The reason the failback runner gives a stale ``resume_requested`` it hands to a person.
REASON_UNCONFIRMED = "resume_unconfirmed"
#: The reason the failback runner gives a handoff whose resume failed with effect none
#: :data:`RESUME_FAILING_AFTER` times in a row: retrying alone does not bring it back (seed 000: 人へ知らせた上で).
REASON_FAILING = "resume_failing"
#: How many resume attempts of one handoff in a row may end ``resume_failed`` with effect none before the failback
#: runner hands it to a person (seed 004's analogue stops on the 3rd failure).
RESUME_FAILING_AFTER: Final = 3

#: The answers of the cloud side to a request; they take the claim's attempt (fencing).
ANSWERS = frozenset({"verified", "resume_failed", "conflict"})

#: Stale verdicts by state.
STALE_KIND = {CLAIMED: "retryable", REQUESTED: "unknown_effect"}

#: Every ``reason`` of an account's probe plan (spec: nothing_pending, waiting_reset, due; the rest are the project's).
PLAN_REASONS: tuple[str, ...] = (
    "nothing_pending", "needs_person", "waiting_reset", "backoff_transient", "backoff_unexpected", "backoff_estimate",
    "due",
)

#: Probe outcomes that are backed off as passing trouble, and the wait.
TRANSIENT = frozenset({"transient", "network_timeout", "unexpected"})
TRANSIENT_FIRST_S = 60
TRANSIENT_CAP_S = 3600
#: Backoff after an estimated or unknown reset proved wrong.
ESTIMATE_FIRST_S = 1800
ESTIMATE_CAP_S = 86400
GUESSED = frozenset({"estimated", "unknown"})


def backoff_s(first_s: float, run: int, cap_s: float) -> float:
    """The wait after ``run`` (>= 1) probes in a row: ``first_s`` doubled per probe, at most ``cap_s``."""
    if run > 40:  # 2**40 times anything here is past any cap
        return cap_s
    return min(first_s * float(2 ** (run - 1)), cap_s)


def _backoff(acc: Account) -> str | None:
    """The backoff reason the account's current run of probes calls for, as long as it lasts (None: none)."""
    if acc.run_kind == "transient":
        return "backoff_unexpected" if acc.last_outcome == "unexpected" else "backoff_transient"
    if acc.run_kind == "quota" and acc.confidence in GUESSED:
        return "backoff_estimate"
    return None


# --- state ---------------------------------------------------------------------------


class Handoff(msgspec.Struct, gc=False, array_like=True):
    """One handoff as folded so far (``array_like``: packed as a list in snapshots)."""

    account: str
    #: Its event times are kept as read (the fold converts none; a snapshot gives them back in UTC) and measured
    #: or compared as instants (:func:`~projections.base.elapsed_s`, :func:`~projections.base.micros`).
    created_at: datetime
    #: ... and the created time as written, with its offset: printed (spec section 2), also after a snapshot.
    created_ts: str
    line: int
    #: Its ``deadline`` as an instant (epoch microseconds), converted once: every view orders claims by it.
    deadline_us: int | None
    importance: int
    repo: str | None
    branch: str | None
    head: str | None
    #: When it was last heard of (for stale, :func:`_heard`): the latest time among its latest claim (or its
    #: creation) and every applied event since, the last line in log order when times do not run backwards. Kept
    #: as read, since converting costs more than the fold. Only compared (a snapshot gives it back in UTC) ...
    last_at: datetime
    #: ... and the ``ts`` of the event that set it, as written: printed (a triage item's "since") ...
    last_ts: str
    #: ... and that event's line (a view names it).
    last_line: int
    state: HandoffState = PENDING
    attempt: int = 0
    watcher: str | None = None
    local_started: bool = False
    reason: str | None = None
    first_claimed_at: datetime | None = None
    first_requested_at: datetime | None = None
    #: Handed to a person as ``resume_unconfirmed`` straight from ``resume_requested``: the request's answer is
    #: still taken (cleared by any other move).
    awaiting_answer: bool = False
    #: Its stream's revision: the events applied to it (spec section 2; :class:`projections.runner.EntityRevisions`).
    revision: int = 1
    #: Its resume attempts in a row that ended ``resume_failed`` with effect none, in order (views and the runner
    #: only): any other end of an attempt, a ``needs_human`` and a person's release or requeue (its event carries
    #: ``actor``) start it again; the runner's own release of a stale claim neither counts nor breaks it.
    failed_attempts: tuple[int, ...] = ()
    #: Its ``deadline`` as written (printed with its offset; None: none).
    deadline_ts: str | None = None

    def deadline_before(self, as_of: datetime) -> bool:
        """Whether it has a ``deadline`` and ``as_of`` is after it (as instants): the one past-deadline rule."""
        return self.deadline_us is not None and self.deadline_us < micros(as_of)

    @property
    def failing(self) -> int:
        """How many resume attempts in a row failed with effect none (:attr:`failed_attempts`)."""
        return len(self.failed_attempts)


class Account(msgspec.Struct, gc=False):
    """The limit ledger of one account and the probes since its latest limit."""

    pending: int = 0
    #: The latest limit's ``reset_at``: as written (printed) and as a time (compared).
    reset_text: str | None = None
    reset_at: datetime | None = None
    confidence: str | None = None
    #: The latest limit's ``limited_at``, as written (views only: ``projections.ahead``).
    limited_text: str | None = None
    limit_line: int = 0
    last_ok_line: int = 0
    #: Outcome kind of the current run of probes after the latest limit ("transient", "quota" or None).
    run_kind: str | None = None
    run: int = 0
    #: ``ts`` of the run's latest probe, as the reader left it: the backoff's end is computed from it and printed.
    run_ts: str | None = None
    #: ... and its line (a view names it).
    run_line: int = 0
    #: ``ts`` of the run's first probe, as written: since when its probes fail (:meth:`Handoffs.failing_since`).
    run_since: str | None = None
    #: The outcome (it names the backoff) and ``ts`` (as written) of the account's latest probe (None: never probed).
    last_outcome: str | None = None
    last_probe_ts: str | None = None


class Latency(msgspec.Struct):
    """Durations in seconds, one list per measure (dump order)."""

    created_to_returned: list[float] = []
    claimed_to_requested: list[float] = []
    requested_to_verified: list[float] = []


class Heartbeat(msgspec.Struct, gc=False):
    """One watcher's last ``watcher_run`` (log order)."""

    #: Its time: compared (a snapshot gives it back in UTC) ...
    at: datetime
    #: ... and its ``ts`` as written: printed.
    ts: str
    period_s: int
    exit: Literal["ok", "error"]
    detail: str | None = None
    #: Its line (0: not known, a state saved before lines were kept): a pass's bad lines after it are new.
    line: int = 0
    #: A person retired the watcher with this heartbeat (``watcher_run`` ``retired``): the views leave it out of
    #: "late" and "in error" (the dump's ``watchers`` entry stays as its heartbeats say).
    retired: bool = False

    def late(self, as_of: datetime) -> bool:
        """Older than twice its period as of ``as_of`` (the spec's rule for the last heartbeat, per watcher)."""
        return elapsed_s(as_of, self.at) > 2 * self.period_s

    def item(self, as_of: datetime) -> dict[str, Any]:
        """The dump's ``handoffs.watchers`` entry, judged at ``as_of``."""
        return {"last_run": self.ts, "period_s": self.period_s, "exit": self.exit, "detail": self.detail,
                "late": self.late(as_of)}


class HandoffsState(msgspec.Struct):
    """Everything the handoffs projection folds (see projections/base.py: add a typed field with a default)."""

    items: dict[str, Handoff] = {}
    accounts: dict[str, Account] = {}
    #: Probe outcome -> count.
    probes: dict[str, int] = {}
    latency: Latency = msgspec.field(default_factory=Latency)
    #: Handoffs in a live state (claimed, resume_requested).
    live: int = 0
    #: The last ``watcher_run`` (log order): its time (compared), its ``ts`` as written (printed), its period.
    watcher_at: datetime | None = None
    watcher_text: str | None = None
    watcher_period_s: int = 0
    #: Watcher name -> its last ``watcher_run``.
    watchers: dict[str, Heartbeat] = {}
    #: The ``stale_after_s`` of the last ``watcher_run`` that states one (None: none did).
    watcher_stale_after_s: float | None = None
    #: Watcher name -> how many claims of it were applied (a watcher that claims but writes no heartbeat is known).
    claims_by: dict[str, int] = {}


def _misfit(kind: str, hid: str, h: Handoff) -> Rejected:
    """Why an event of type ``kind`` does not apply to ``h`` in its state (spec: rejected, state unchanged)."""
    if kind == "claimed" and h.state in LIVE:
        return Rejected(f"{hid} already has a live claim ({h.state} by {h.watcher}, attempt {h.attempt})")
    wanted = " or ".join(s for s in STATES if s in RULES[kind])
    return Rejected(f"{kind} applies only to a {wanted} handoff; {hid} is {h.state}")


def _heard(h: Handoff, line: int, at: datetime, ts: str) -> None:
    """An applied event of ``h`` (line ``line``, at ``at``, written ``ts``) moves the time it was last heard of only
    forward: the latest ``ts`` among its latest claim (or its creation) and every event of it since, which is where
    its silence (stale) is measured from. A clock running behind (spec section 2: ``ts`` may run backwards between
    writers) never makes a fresh claim stale; with times in order it is the latest event. A tie goes to the later
    line. A ``claimed`` sets it afresh (:meth:`Handoffs._move`)."""
    if not_before(at, h.last_at):
        h.last_at, h.last_ts, h.last_line = at, ts, line


def _fmt(value: datetime) -> str:
    return value.isoformat()


# --- the projection ------------------------------------------------------------------

#: The spec's default ``stale_after``: 30 minutes.
DEFAULT_STALE_AFTER_S = 1800.0


class Handoffs:
    """Handoffs: failover to local, failback to the cloud (folded state: :class:`HandoffsState`)."""

    name = "handoffs"
    State = HandoffsState

    def __init__(self, stale_after_s: float | None = None, max_inflight: int = 2) -> None:
        #: The stale-claim age given by the caller (``--stale-after``); None: the watcher's (:attr:`stale_after_s`).
        self.configured_stale_after_s = stale_after_s
        self.max_inflight = max_inflight
        self.state = HandoffsState()

    @property
    def stale_after_s(self) -> float:
        """The stale-claim age judged with: the caller's, else the last heartbeat's, else 30 min (the spec's)."""
        if self.configured_stale_after_s is not None:
            return self.configured_stale_after_s
        beat = self.state.watcher_stale_after_s
        return DEFAULT_STALE_AFTER_S if beat is None else beat

    @property
    def items(self) -> dict[str, Handoff]:
        """Handoff id -> its state."""
        return self.state.items

    @property
    def accounts(self) -> dict[str, Account]:
        """Account -> its limit ledger."""
        return self.state.accounts

    @property
    def live(self) -> int:
        """How many claims are live (claimed or resume_requested)."""
        return self.state.live

    # -- queries (pure: the watcher and the view use them) --------------------------------

    def stale(self, hid: str, as_of: datetime, stale_after_s: float | None = None) -> str | None:
        """``retryable``, ``unknown_effect`` or None: is this live claim stale as of ``as_of``?"""
        h = self.state.items.get(hid)
        if h is None or h.state not in LIVE:
            return None
        limit = self.stale_after_s if stale_after_s is None else stale_after_s
        if elapsed_s(as_of, h.last_at) > limit:
            return STALE_KIND[h.state]
        return None

    def stale_claims(self, as_of: datetime, stale_after_s: float | None = None) -> dict[str, list[str]]:
        """Stale live claims by kind, ids sorted."""
        out: dict[str, list[str]] = {"retryable": [], "unknown_effect": []}
        for hid, h in self.state.items.items():
            if h.state in LIVE:
                kind = self.stale(hid, as_of, stale_after_s)
                if kind is not None:
                    out[kind].append(hid)
        for ids in out.values():
            ids.sort()
        return out

    def failing(self, after: int = RESUME_FAILING_AFTER) -> list[str]:
        """Pending handoffs whose last ``after`` resume attempts in a row ended ``resume_failed`` with effect none
        (the failback runner hands them to a person, :data:`REASON_FAILING`), sorted."""
        return sorted(hid for hid, h in self.state.items.items() if h.state == PENDING and h.failing >= after)

    def past_deadline(self, as_of: datetime) -> list[str]:
        """Open handoffs still waiting to come back (pending, claimed, resume_requested) whose ``deadline`` is before
        ``as_of``, sorted. Nothing expires on a timer (spec): a person is told, and skips one that will not be done."""
        return sorted(hid for hid, h in self.state.items.items() if h.state in OUT and h.deadline_before(as_of))

    def claim_order(self) -> list[str]:
        """Every pending handoff in claim order (spec: deadline, importance, attempts, age)."""
        return [hid for _, hid in sorted(self._claim_keys())]

    def next_claims(self, max_inflight: int | None = None) -> list[str]:
        """The pending handoffs that fill the free slots of ``max_inflight``, in claim order."""
        limit = self.max_inflight if max_inflight is None else max_inflight
        free = max(0, limit - self.state.live)
        return [hid for _, hid in heapq.nsmallest(free, self._claim_keys())] if free else []

    def _claim_keys(self) -> list[tuple[tuple[Any, ...], str]]:
        keys = []
        for hid, h in self.state.items.items():
            if h.state == PENDING:
                deadline = (1, 0) if h.deadline_us is None else (0, h.deadline_us)
                keys.append(((deadline, -h.importance, h.attempt, micros(h.created_at), h.line), hid))
        return keys

    def plan(self, account: str, as_of: datetime, as_of_text: str | None = None) -> dict[str, Any]:
        """The probe plan of one account as of ``as_of`` (rules in the module docstring)."""
        acc = self.state.accounts.get(account)
        if acc is None or acc.pending == 0:
            return {"probe": False, "reason": "nothing_pending", "next_probe_at": None}
        if acc.last_outcome == "auth_error":
            return {"probe": False, "reason": "needs_person", "next_probe_at": None}
        if acc.reset_at is not None and acc.reset_at > as_of:
            return {"probe": False, "reason": "waiting_reset", "next_probe_at": acc.reset_text}
        if acc.run and acc.run_ts is not None:
            reason = _backoff(acc)
            if reason is not None:
                first, cap = (ESTIMATE_FIRST_S, ESTIMATE_CAP_S) if reason == "backoff_estimate" \
                    else (TRANSIENT_FIRST_S, TRANSIENT_CAP_S)
                until = later(parse_time(acc.run_ts), timedelta(seconds=backoff_s(first, acc.run, cap)))
                if until is None:  # past what can be written: never (spec section 1)
                    return {"probe": False, "reason": reason, "next_probe_at": None}
                if as_of < until:
                    return {"probe": False, "reason": reason, "next_probe_at": _fmt(until)}
        return {"probe": True, "reason": "due", "next_probe_at": as_of_text or _fmt(as_of)}

    def failing_since(self, account: str, as_of: datetime) -> str | None:
        """The ``ts`` (as written) of the first probe of the account's run of failing probes, while that run holds
        its pending handoffs as of ``as_of``: its plan is the run's backoff, or ``due`` once that backoff has run out
        and until the next probe. None otherwise (nothing pending, ``needs_person``, ``waiting_reset``, or a
        latest probe that does not back off).

        Unlike the plan's reason, which reads ``due`` for the moments between two backoffs, this holds for the
        whole run: an alert on how long probes have failed (``RecoveryAccountBackingOff``) does not start again
        at every probe.
        """
        acc = self.state.accounts.get(account)
        if acc is None or not acc.run or acc.run_since is None or _backoff(acc) is None:
            return None
        reason = self.plan(account, as_of)["reason"]
        return acc.run_since if reason == "due" or reason.startswith("backoff_") else None

    def failing_s(self, as_of: datetime) -> dict[str, float]:
        """By account whose probes are failing as of ``as_of`` (:meth:`failing_since`), for how long in seconds."""
        out = {}
        for account in sorted(self.state.accounts):
            since = self.failing_since(account, as_of)
            if since is not None:
                out[account] = max(0.0, elapsed_s(as_of, parse_time(since)))
        return out

    def probe_plan(self, as_of: datetime, as_of_text: str | None = None) -> dict[str, dict[str, Any]]:
        """The plan of every account, by account name (``as_of_text``: T as written, for ``due``)."""
        return {account: self.plan(account, as_of, as_of_text) for account in sorted(self.state.accounts)}

    def due_accounts(self, as_of: datetime) -> list[str]:
        """Accounts to probe now, sorted."""
        return [account for account, p in self.probe_plan(as_of).items() if p["probe"]]

    def limit_open(self, account: str) -> bool:
        """Whether the account's latest ``limit_recorded`` came after its latest ``ok`` probe."""
        acc = self.state.accounts.get(account)
        return acc is not None and acc.limit_line > acc.last_ok_line

    def limit_confidence(self, account: str) -> str | None:
        """The confidence of the account's latest ``limit_recorded`` (None: none)."""
        acc = self.state.accounts.get(account)
        return None if acc is None else acc.confidence

    def durations(self) -> dict[str, list[float]]:
        """The latency samples in seconds by measure, in dump order (shared, not copied: read them only)."""
        latency = self.state.latency
        return {key: getattr(latency, key) for key in latency.__struct_fields__}

    def watcher_late(self, as_of: datetime) -> bool:
        """Spec: the last ``watcher_run`` is older than twice its period, or none while work is pending."""
        if self.state.watcher_at is None:
            return any(acc.pending for acc in self.state.accounts.values())
        return elapsed_s(as_of, self.state.watcher_at) > 2 * self.state.watcher_period_s

    def unwatched(self) -> bool:
        """Handoffs are pending and no watcher runs: none ever ran, or a person retired every one (the views'
        ``no_watcher``; the dump's ``watcher.late`` reads a retired watcher's final heartbeat as the spec says)."""
        state = self.state
        return (all(beat.retired for beat in state.watchers.values())
                and any(acc.pending for acc in state.accounts.values()))

    # -- the view ---------------------------------------------------------------------------

    def view(self, as_of: datetime, as_of_text: str | None = None) -> dict[str, Any]:
        """The ``handoffs`` part of the dump (``as_of_text``: T as written)."""
        items: dict[str, Any] = {}
        by_state: Counter[str] = Counter()
        not_returned: Counter[str] = Counter()
        skip_reasons: Counter[str] = Counter()
        needs_human: Counter[str] = Counter()
        started = 0
        oldest: int | None = None
        stale: dict[str, list[str]] = {"retryable": [], "unknown_effect": []}
        limit = self.stale_after_s
        handoffs = self.state.items
        for hid in sorted(handoffs):
            h = handoffs[hid]
            state = h.state
            kind = None
            if state in LIVE and elapsed_s(as_of, h.last_at) > limit:  # stale(), inline: this runs per handoff
                kind = STALE_KIND[state]
                stale[kind].append(hid)
            items[hid] = {"state": state, "account": h.account, "attempt": h.attempt, "stale": kind}
            by_state[state] += 1
            started += h.local_started
            if state == RETURNED:
                continue
            if state == SKIPPED:
                skip_reasons[h.reason or ""] += 1
                not_returned[h.reason or ""] += 1
                continue
            not_returned[state] += 1
            if state == NEEDS_HUMAN:
                needs_human[h.reason or ""] += 1
            elif state == PENDING:
                created = micros(h.created_at)
                if oldest is None or created < oldest:
                    oldest = created
        total = len(self.state.items)
        latency = self.state.latency
        return {
            "total": total,
            "items": items,
            "by_state": dict(sorted(by_state.items())),
            "failover": {"started": started, "total": total},
            "failback": {"returned": by_state[RETURNED], "total": total},
            "not_returned": dict(sorted(not_returned.items())),
            "skip_reasons": dict(sorted(skip_reasons.items())),
            "needs_human_reasons": dict(sorted(needs_human.items())),
            "pending": {
                "count": by_state[PENDING],
                "oldest_age_s": None if oldest is None else num(seconds(micros(as_of) - oldest)),
            },
            "stale_claims": stale,
            "latency_s": {key: summary(getattr(latency, key)) for key in latency.__struct_fields__},
            "probes": dict(sorted(self.state.probes.items())),
            "probe_plan": self.probe_plan(as_of, as_of_text),
            "next_claims": self.next_claims(),
            "watcher": {"last_run": self.state.watcher_text, "late": self.watcher_late(as_of)},
            "watchers": {name: beat.item(as_of) for name, beat in sorted(self.state.watchers.items())},
        }

    # -- the fold ---------------------------------------------------------------------------

    def _account(self, name: str) -> Account:
        acc = self.state.accounts.get(name)
        if acc is None:
            acc = self.state.accounts[name] = Account()
        return acc

    def _fits(self, kind: str, hid: str, attempt: int | None = None) -> Handoff | Rejected:
        """The handoff an event of type ``kind`` moves, or why it does not fit (spec: rejected, state unchanged).

        ``attempt``: the event's, fenced against the live claim's (None: not fenced). Every
        handler applies an event that fits, so the handoff's revision counts it here.
        """
        h = self.state.items.get(hid)
        if h is None:
            return Rejected(f"unknown handoff {hid}: never created")
        if h.state not in RULES[kind]:
            # the answer the person was handed the silence for still fits
            if not (h.state == NEEDS_HUMAN and h.awaiting_answer and kind in ANSWERS):
                return _misfit(kind, hid, h)
        if attempt is not None and attempt != h.attempt:
            return Rejected(f"{kind} of attempt {attempt} is fenced off: the live claim of {hid} is attempt "
                            f"{h.attempt} (by {h.watcher})")
        h.revision += 1
        return h

    def _move(self, h: Handoff, state: HandoffState, line: int, at: datetime, ts: str, afresh: bool = False) -> None:
        """Set a handoff's state (keeping the live and per-account pending counts) as of the event of ``line`` at
        ``at`` (written ``ts``: :func:`_heard`, or its silence starts there ``afresh``); no answer is awaited after
        it."""
        if (h.state in LIVE) != (state in LIVE):
            self.state.live += 1 if state in LIVE else -1
        if (h.state == PENDING) != (state == PENDING):
            self._account(h.account).pending += 1 if state == PENDING else -1
        h.state = state
        last = h.last_at
        if afresh or (at >= last if at.tzinfo is not last.tzinfo or at.tzinfo.__class__ is timezone
                      else micros(at) >= micros(last)):  # _heard, inline: this runs for nearly every handoff event
            h.last_at, h.last_ts, h.last_line = at, ts, line
        h.awaiting_answer = False

    def _created(self, ev: HandoffCreated, line: int, at: datetime) -> FoldResult:
        if ev.handoff_id in self.state.items:
            return Rejected(f"handoff {ev.handoff_id} already created (line {self.state.items[ev.handoff_id].line})")
        deadline = None if ev.deadline is None else micros(parse_time(ev.deadline))
        self.state.items[ev.handoff_id] = Handoff(
            ev.account, at, ev.ts, line, deadline, ev.importance, ev.repo, ev.branch, ev.head, at, ev.ts, line,
            deadline_ts=ev.deadline,
        )
        self._account(ev.account).pending += 1
        return None

    def _local_started(self, ev: LocalStarted, line: int, at: datetime) -> FoldResult:
        h = self._fits("local_started", ev.handoff_id)
        if isinstance(h, Rejected):
            return h
        h.local_started = True
        _heard(h, line, at, ev.ts)
        return None

    def _local_start_failed(self, ev: LocalStartFailed, line: int, at: datetime) -> FoldResult:
        h = self._fits("local_start_failed", ev.handoff_id)
        if isinstance(h, Rejected):
            return h
        _heard(h, line, at, ev.ts)
        return None

    def _claimed(self, ev: Claimed, line: int, at: datetime) -> FoldResult:
        h = self._fits("claimed", ev.handoff_id)
        if isinstance(h, Rejected):
            return h
        self._move(h, CLAIMED, line, at, ev.ts, afresh=True)
        h.attempt = ev.attempt
        h.watcher = ev.watcher
        self.state.claims_by[ev.watcher] = self.state.claims_by.get(ev.watcher, 0) + 1
        h.reason = None
        if h.first_claimed_at is None:
            h.first_claimed_at = at
        return None

    def _released(self, ev: Released, line: int, at: datetime) -> FoldResult:
        h = self._fits("released", ev.handoff_id)
        if isinstance(h, Rejected):
            return h
        self._move(h, PENDING, line, at, ev.ts)
        h.watcher = None
        h.reason = None
        if ev.actor is not None:  # a person's: a new run; the runner's own (a stale claim) neither counts nor breaks
            h.failed_attempts = ()
        return None

    def _resume_requested(self, ev: ResumeRequested, line: int, at: datetime) -> FoldResult:
        h = self._fits("resume_requested", ev.handoff_id, ev.attempt)
        if isinstance(h, Rejected):
            return h
        self._move(h, REQUESTED, line, at, ev.ts)
        if h.first_requested_at is None:
            h.first_requested_at = at
            if h.first_claimed_at is not None:
                self.state.latency.claimed_to_requested.append(elapsed_s(at, h.first_claimed_at))
        return None

    def _resume_failed(self, ev: ResumeFailed, line: int, at: datetime) -> FoldResult:
        h = self._fits("resume_failed", ev.handoff_id, ev.attempt)
        if isinstance(h, Rejected):
            return h
        if ev.effect == "none":
            self._move(h, PENDING, line, at, ev.ts)
            h.watcher = None
            # a person's requeue of a request (``actor``) starts the run again
            h.failed_attempts = () if ev.actor is not None else (*h.failed_attempts, ev.attempt)
        else:
            self._move(h, NEEDS_HUMAN, line, at, ev.ts)
            h.reason = REASON_UNKNOWN_EFFECT
            h.failed_attempts = ()
        return None

    def _verified(self, ev: Verified, line: int, at: datetime) -> FoldResult:
        h = self._fits("verified", ev.handoff_id, ev.attempt)
        if isinstance(h, Rejected):
            return h
        self._move(h, RETURNED, line, at, ev.ts)
        h.failed_attempts = ()
        latency = self.state.latency
        latency.created_to_returned.append(elapsed_s(at, h.created_at))
        if h.first_requested_at is not None:
            latency.requested_to_verified.append(elapsed_s(at, h.first_requested_at))
        return None

    def _conflict(self, ev: Conflict, line: int, at: datetime) -> FoldResult:
        h = self._fits("conflict", ev.handoff_id, ev.attempt)
        if isinstance(h, Rejected):
            return h
        self._move(h, NEEDS_HUMAN, line, at, ev.ts)
        h.reason = REASON_CONFLICT
        h.failed_attempts = ()
        return None

    def _needs_human(self, ev: NeedsHuman, line: int, at: datetime) -> FoldResult:
        h = self._fits("needs_human", ev.handoff_id)
        if isinstance(h, Rejected):
            return h
        awaiting = h.state == REQUESTED and ev.reason == REASON_UNCONFIRMED
        self._move(h, NEEDS_HUMAN, line, at, ev.ts)
        h.reason = ev.reason
        h.awaiting_answer = awaiting
        h.failed_attempts = ()  # with a person now: a send-back starts a new run
        return None

    def _skip(self, ev: Skip, line: int, at: datetime) -> FoldResult:
        h = self._fits("skip", ev.handoff_id)
        if isinstance(h, Rejected):
            return h
        self._move(h, SKIPPED, line, at, ev.ts)
        h.reason = ev.reason
        return None

    def _limit_recorded(self, ev: LimitRecorded, line: int, at: datetime) -> FoldResult:
        acc = self._account(ev.account)
        acc.reset_text = ev.reset_at
        acc.reset_at = None if ev.reset_at is None else parse_time(ev.reset_at)
        acc.confidence = ev.confidence
        acc.limited_text = ev.limited_at
        acc.limit_line = line
        acc.run_kind, acc.run, acc.run_ts, acc.run_since = None, 0, None, None
        return None

    def _probe_result(self, ev: ProbeResult, line: int, at: datetime) -> FoldResult:
        acc = self._account(ev.account)
        probes = self.state.probes
        probes[ev.outcome] = probes.get(ev.outcome, 0) + 1
        kind = "transient" if ev.outcome in TRANSIENT else "quota" if ev.outcome == "quota_limited" else None
        if kind is not None and kind == acc.run_kind:
            acc.run += 1
        else:
            acc.run_kind, acc.run, acc.run_since = kind, 1 if kind else 0, ev.ts if kind else None
        acc.run_ts, acc.run_line = ev.ts, line
        acc.last_outcome = ev.outcome
        acc.last_probe_ts = ev.ts
        if ev.outcome == "ok":
            acc.last_ok_line = line
        return None

    def _watcher_run(self, ev: WatcherRun, line: int, at: datetime) -> FoldResult:
        self.state.watcher_at = at
        self.state.watcher_text = ev.ts
        self.state.watcher_period_s = ev.period_s
        self.state.watchers[ev.watcher] = Heartbeat(at, ev.ts, ev.period_s, ev.exit, ev.detail, line, ev.retired)
        if ev.stale_after_s is not None:
            self.state.watcher_stale_after_s = ev.stale_after_s
        return None

    handlers: dict[type[Event], Handler] = {
        HandoffCreated: _created,
        LocalStarted: _local_started,
        LocalStartFailed: _local_start_failed,
        Claimed: _claimed,
        Released: _released,
        ResumeRequested: _resume_requested,
        ResumeFailed: _resume_failed,
        Verified: _verified,
        Conflict: _conflict,
        NeedsHuman: _needs_human,
        Skip: _skip,
        LimitRecorded: _limit_recorded,
        ProbeResult: _probe_result,
        WatcherRun: _watcher_run,
    }
