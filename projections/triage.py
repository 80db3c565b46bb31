"""What needs a person now: the triage of every domain, and a verdict for any id (pure).

:func:`triage` turns the folded state of a log (a :class:`~projections.runner.Runner`),
what the log itself says (:class:`LogFacts`: its name, bad lines, a torn tail,
whether it is missing) and a time T into a :class:`Triage`: every item that
needs a person as of T, grouped by reason (:data:`REASONS`, in screen order),
each with its reason in plain words, since when it has been so, and the exact
command to copy for the next step; plus the totals of each domain present in
the log. :func:`explain` gives the verdict of one id in every domain that knows
it. ``eventlog status`` and ``eventlog explain`` render them; any other front
end (an HTTP console) calls the same two functions and shows the same triage.

Pure: no clock, no disk, no network. T and the log's name are given.

What needs a person (each reason code is in :data:`REASONS`):

- **handoffs**: handed to a person (``needs_human``, with the reason); a stale
  ``resume_requested`` (``stale_unknown_effect``: never retried on its own); a
  stale ``claimed`` (``stale_retryable``); a handoff still pending or claimed
  after its ``deadline`` (``deadline_passed``: nothing expires on a timer, a
  person decides whether to skip it); an account whose probe said
  ``auth_error`` (``auth_error``: not probed until a person probes it by hand);
  an account whose probes back off (``backoff_transient``,
  ``backoff_unexpected``, ``backoff_estimate``).
- **watchers**: a watcher whose last pass ended in ``error`` (with its detail);
  one late (no ``watcher_run`` for more than twice its period); pending
  handoffs and no watcher ever ran (``no_watcher``).
- **lanes**: the lanes runner's last pass ended in ``error`` for what belongs to no lane (``lanes_error``,
  with its words: a resume it could not send, a log with no lane, ...); each lane or lane file that pass
  could not observe (``lane_unobserved``, until a later pass or the lane's stop); a lane stalled now
  (``job_unpicked``, ``status_quiet``; judged at T), with whether a resume covers it (when it was enqueued,
  its task branch) and, when none does, why (a send cut short: did it arrive?). Each problem is one item.
- **catchup**: a guarded job whose calendar slot of today passed 2 h ago or more with no marker of
  today (``unfed``: nothing feeds its markers, :func:`projections.catchup.unfed_slot`); a catch-up
  re-run that ended badly (``rerun_failed``: killed at its timeout, an exit other than 0 or none) or
  never reported its end (``rerun_no_end``: past its timeout, twice its kill grace and a margin),
  until the job shows it ran again (:mod:`projections.catchup`); the quota circuit open
  (``circuit_open``); a job to re-run (``candidate``).
- **sessions**: waiting for a decision (``restore_failed``, ``startup_failed``,
  ``outcome_unknown``, ``context_gap``); in backoff with its retry due and no
  worker ready since (``retry_due``), unless a worker claimed it at or after
  its ``retry_at`` less than ``WORKER_STARTUP_TIMEOUT_SEC`` (1 h) ago: that
  retry is under way (its worker may still be retrying storage, seed 004);
  one that should have a worker and has none at work
  (:func:`projections.sessions.worker_wait`): a claimed worker not ready after
  ``WORKER_STARTUP_TIMEOUT_SEC`` (``worker_not_ready``), a worker that ended
  (failed, drained, gone) with no claim 10 min since (``worker_gone``), an
  accepted ``retry_restore``/``start_fresh`` with no claim 10 min since
  (``decision_unclaimed``); an interrupt that left a turn's outcome unknown
  and the log never recorded the turn's end (``interrupt_unrecorded``).
- **log**: the log missing; a file that is no event log (``not_a_log``: every append is refused);
  an unfinished last line no append will cut (``torn_tail_stuck``: every append is refused);
  committed lines that vanished while a server followed the log, or a stream's sequences that hold no
  message any more (``lines_vanished``); a
  line dated ahead of now that a verdict is judged from (``dated_ahead``, judged only as of now:
  :mod:`projections.ahead`); bad lines; rejected events; the complete lines of an unfinished batch
  (``unfinished_batch``: held, never applied, neither events nor bad lines; the next append cuts
  them); an unfinished last line (the next append cuts it).

"Since" is the time it has been so: the handoff's last applied event, the
latest probe of a backing-off account, the watcher's last run, the finished
job or the last progress of a lane, the end of a re-run that ended badly, the kick of one
that never reported its end, the skip of a candidate, the latest marker of a job nothing feeds (its
registration when it has none), the circuit's
opening, the event that put a session in its state (for a turn of unknown outcome, the interrupt result that
said so first, when the turn's end was recorded after it), a retry's due time, the claim, the worker's end or
the decision a session waits for a worker since, the interrupt result of a turn whose end the log never
recorded.
Every "since" is a time the log wrote, printed as written (with the offset it
was written with, spec section 2); T itself is printed as given. Bad and
rejected lines have no "since"; lines that vanished have the time a server
first noticed it (no line can say it).
"""

from __future__ import annotations

import functools
import json
import posixpath
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Concatenate, Literal, NamedTuple, ParamSpec

import msgspec

from eventlog.events import FIRST_YEAR, ID_FIELDS, LAST_YEAR, NUL_WORDS, JobRegistered, id_problem, parse_time
from projections.ahead import RESET_AHEAD_MAX_S, Ahead, Check, dated_ahead
from projections.base import elapsed_s, micros, num, summary
from projections.catchup import (
    END_MARGIN_S,
    UNFED_AFTER_S,
    BadRerun,
    Rerun,
    Unfed,
    skipped_today,
    systemd_unit,
    today_words,
    why_not,
)
from projections.controls import Control, timeline
from projections.handoffs import (
    CLAIMED,
    LIVE,
    NEEDS_HUMAN,
    OPEN,
    OUT,
    PENDING,
    REASON_CONFLICT,
    REASON_FAILING,
    REASON_UNCONFIRMED,
    REASON_UNKNOWN_EFFECT,
    REQUESTED,
    RESUME_FAILING_AFTER,
    RETURNED,
    SKIPPED,
    Handoff,
)
from projections.lanes import (
    DIR_EMPTY,
    DIR_UNREADABLE,
    JOB_UNPICKED,
    LATE_PERIODS,
    STATUS_QUIET,
    Heartbeat,
    Sending,
    cut_short_said,
)
from projections.runner import Runner
from projections.sessions import (
    BACKOFF,
    CLOSED,
    CONTEXT_GAP,
    RECOVERY_REQUIRED,
    RECOVERY_REQUIRED_STATE,
    RESTORE_FAILED,
    STARTUP_FAILED,
    STOPPED,
    WORKER_WAITS,
    Session,
    Sessions,
    claim_words,
    describe,
    retry_claimed,
    worker_wait,
    worker_wait_words,
)
from projections.turns import turn_words

#: The domains of the triage, in screen order.
Domain = Literal["handoffs", "watchers", "lanes", "catchup", "sessions", "log"]
DOMAINS: tuple[Domain, ...] = ("handoffs", "watchers", "lanes", "catchup", "sessions", "log")

#: The kinds of id :func:`explain` knows, in the order its verdicts come.
Kind = Literal["handoff", "account", "watcher", "lane", "catchup", "session", "turn", "interrupt"]

#: How many items of each group a screen shows unless every item is asked for.
SHOWN = 3


class Reason(NamedTuple):
    """One reason something needs a person: its domain, its code, the group's title, whether a person decides, and
    whether a runner or the clock clears it with no person (``by_itself``: :func:`urgency`)."""

    domain: Domain
    code: str
    title: str
    decision: bool
    by_itself: bool = False


#: Every reason, in the order the groups are shown.
REASONS: tuple[Reason, ...] = (
    Reason("log", "missing", "The log is missing", False),
    Reason("log", "not_a_log", "A file that is no event log: every append is refused", True),
    Reason("log", "torn_tail_stuck", "An unfinished last line no append will cut: every append is refused", True),
    Reason("log", "lines_vanished", "Committed lines vanished from the log", True),
    Reason("log", "dated_ahead", "Lines dated ahead of now: the checks judged from them cannot fire", False),
    Reason("handoffs", "needs_human", "Handoffs handed to a person", True),
    Reason("handoffs", "stale_unknown_effect", "Resume requested, then silence: effect unknown", True),
    Reason("handoffs", "stale_retryable", "Claims gone quiet before any resume request", False, by_itself=True),
    Reason("handoffs", "deadline_passed", "Handoffs not back by their deadline (nothing expires on a timer)", True),
    Reason("handoffs", "auth_error", "Accounts whose probe was refused (auth_error): the login needs a person", True),
    Reason("handoffs", "backoff_transient", "Accounts backing off after transient probe errors", False,
           by_itself=True),
    Reason("handoffs", "backoff_unexpected", "Accounts backing off after probe answers nobody could read", False,
           by_itself=True),
    Reason("handoffs", "backoff_estimate", "Accounts whose estimated reset proved wrong", False, by_itself=True),
    Reason("watchers", "watcher_error", "Watchers whose last pass ended in error", False),
    Reason("watchers", "watcher_late", "Watchers that stopped reporting", False),
    Reason("watchers", "no_watcher", "Pending handoffs, and no watcher runs (none ever ran, or all are retired)",
           False),
    Reason("lanes", "lanes_late", "No lanes pass lately: nothing checks the lanes (nor observes them, with --observe)",
           False),
    Reason("lanes", "lanes_error", "The lanes runner's last pass ended in error", False),
    Reason("lanes", "lane_unobserved", "Lanes the last lanes pass could not observe: judged from what was last read",
           False),
    Reason("lanes", "job_unpicked", "Finished jobs nobody picked up", False, by_itself=True),
    Reason("lanes", "status_quiet", "Lanes whose progress went quiet", False, by_itself=True),
    Reason("catchup", "zone_unknown", "The machine's TZ names no time zone: catch-up's today and slots are judged in "
           "UTC", False),
    Reason("catchup", "rerun_no_end", "Catch-up re-runs that never reported their end: they may still run", True),
    Reason("catchup", "rerun_failed", "Catch-up re-runs that ended badly: the skipped run is still lost", True),
    Reason("catchup", "unfed", "Guarded jobs with no marker of today though their slot passed: nothing feeds them?",
           False),
    Reason("catchup", "circuit_open", "The quota circuit is open", False, by_itself=True),
    Reason("catchup", "candidate", "Jobs skipped today, waiting for a catch-up re-run", False, by_itself=True),
    Reason("sessions", "restore_failed", "Sessions stopped: checkpoint restore failed", True),
    Reason("sessions", "startup_failed", "Sessions stopped: the worker never became ready", True),
    Reason("sessions", "outcome_unknown", "Sessions holding a turn of unknown outcome", True),
    Reason("sessions", "context_gap", "Sessions stopped with a context gap", True),
    Reason("sessions", "retry_due", "Sessions whose retry is due, and nothing moved", False),
    Reason("sessions", "worker_not_ready",
           "Sessions whose claimed worker is not ready after WORKER_STARTUP_TIMEOUT_SEC (1 h)", False),
    Reason("sessions", "worker_gone", "Sessions whose worker ended, and no worker took them since", False),
    Reason("sessions", "decision_unclaimed",
           "Sessions admitted by a decision, and no worker took them since (acceptance is not a restart)", False),
    Reason("sessions", "interrupt_unrecorded",
           "Interrupts that ended with the turn's outcome unknown, a turn whose end the log never recorded", False),
    Reason("log", "bad_line", "Bad lines (skipped, counted)", False),
    Reason("log", "rejected", "Rejected events (not applied)", False),
    Reason("log", "unfinished_batch", "An unfinished batch: complete lines held, not committed", False,
           by_itself=True),
    Reason("log", "torn_tail", "An unfinished last line", False, by_itself=True),
)
_BY_CODE = {r.code: r for r in REASONS}
#: The reasons every view shows, however narrowed (``--domain``, ``--needs-decision``): lines no domain could read (a
#: missing log, a file that is no log, bad lines, committed lines gone, a last line no append cuts) belong to none
#: until they are read, so no narrowed view can say its domain is clear while they last.
UNREAD: frozenset[str] = frozenset({"missing", "not_a_log", "torn_tail_stuck", "lines_vanished", "bad_line"})
_ORDER = {r.code: i for i, r in enumerate(REASONS)}

#: :func:`urgency`'s ranks in words, most urgent first.
URGENCY = ("to decide", "to act on", "the runners or the clock clear by themselves")


def urgency(code: str) -> int:
    """How urgent a reason is, an index of :data:`URGENCY`: 0 a person must decide (nothing moves until one does);
    1 a person must act (fix a clock, a watcher, a login, a line: no runner clears it); 2 a runner's next pass or
    the clock clears it with no person (a stale claim the watcher releases, a backoff or circuit that ends, a
    candidate the next catch-up pass re-runs, a stalled lane the lanes pass resumes, a tail the next append cuts)."""
    r = _BY_CODE[code]
    return 0 if r.decision else 2 if r.by_itself else 1


def urgent_first(groups: Iterable[Group]) -> list[Group]:
    """The groups by :func:`urgency` (``Group.urgency``), most urgent first, each rank in the order of
    :data:`REASONS`: what the text screen shows, and the console too (it sorts ``status --json``'s groups, which
    come in the order of :data:`REASONS`, by their ``urgency``, stably)."""
    return sorted(groups, key=lambda g: (g.urgency, _ORDER[g.reason_code]))

#: A session's attention -> its reason code while it is ``recovery_required``.
_ATTENTION_CODE = {RESTORE_FAILED: "restore_failed", STARTUP_FAILED: "startup_failed",
                   RECOVERY_REQUIRED: "outcome_unknown", CONTEXT_GAP: "context_gap"}


# --- the result ---------------------------------------------------------------------------------


class BadLineFact(msgspec.Struct, frozen=True):
    """A bad line of the log: its number and the reader's reason (its code first)."""

    line: int
    reason: str


class StuckTail(msgspec.Struct, frozen=True):
    """A torn tail no append cuts: why (words that follow the log's name), the offset where the committed
    lines end, and the log's size when it was read."""

    why: str
    start: int
    size: int


class LinesVanished(msgspec.Struct, kw_only=True, frozen=True):
    """Committed lines that vanished from a followed log: it was truncated, or a file with fewer lines took its place
    (``serve`` and ``follow`` count them from their start; the state is replayed from what is left).

    ``lines``: how many in all; ``times``: how often; ``first_at``, ``last_at``: when it was first and last
    noticed (the wall clock, in the local offset); ``before``, ``after``: the committed lines (events) the log
    held the last time, before and after.
    """

    lines: int
    times: int
    first_at: str
    last_at: str
    before: int
    after: int


class StreamGaps(msgspec.Struct, kw_only=True, frozen=True):
    """A stream's sequences below its last that hold no message any more: deleted, purged, or dropped by the
    stream's limits (``eventlog.replay.Vanished``). Every read of the stream sees them, unlike a file's vanished
    lines. ``lines``: how many; ``runs``: in how many runs; ``words``: which (``seq 1..2, 4``)."""

    lines: int
    runs: int
    words: str


class UnfinishedBatch(msgspec.Struct, frozen=True):
    """The unfinished batch at the end of the log (``eventlog.tail.Uncommitted``): its complete lines are held,
    never applied, and neither events nor bad lines. ``words``: what it is (the appender's own words), ``line``
    its first line, ``lines`` how many, ``torn_after``: a torn last line follows it."""

    words: str
    line: int
    lines: int
    torn_after: bool = False


class LogFacts(msgspec.Struct, kw_only=True, frozen=True):
    """What the log says besides the folded state (the shell reads it from its replay).

    ``name``: the LOG as given (it goes into every command); ``events``: lines
    applied or rejected; ``torn_tail``: it ends in what is not committed (the
    dump's: a torn last line, an unfinished batch, or both); ``unfinished``: the
    unfinished batch there is (``torn_tail`` without it: a torn last line only);
    ``stuck_tail``: that tail is one no append cuts (the appender's own rule,
    ``eventlog.tail``), so every append is refused until a person cuts it;
    ``not_a_log``: why the file is no event log (words that follow its name; the
    appender's own rule, ``Replay.not_a_log``), so every append is refused;
    ``missing``: no log at that path (nothing was folded); ``not_file``: with it, what is at the path
    instead (a directory, a FIFO, a device: the appender's words, only a live process judges it);
    ``vanished``: committed lines that vanished while a live process followed the log (only such a process
    knows); ``gaps``: a stream's sequences that hold no message any more (every read sees them);
    ``assume_tz``: the zone it was read in (``--assume-tz``), which every ``eventlog`` command on it carries;
    ``zone_unknown``: ``TZ`` as set when T is now judged in the machine's zone (no ``--assume-tz``) and it names
    no zone (``eventlog.clock.unknown_tz``: UTC is taken, silently), with ``zone_like``, the zone it likely misspells.
    """

    name: str
    assume_tz: str | None = None
    events: int = 0
    bad_lines: list[BadLineFact] = []
    torn_tail: bool = False
    unfinished: UnfinishedBatch | None = None
    stuck_tail: StuckTail | None = None
    not_a_log: str | None = None
    missing: bool = False
    not_file: str | None = None
    vanished: LinesVanished | None = None
    gaps: StreamGaps | None = None
    zone_unknown: str | None = None
    zone_like: str | None = None

    @property
    def torn_line(self) -> bool:
        """Whether the log ends in a torn last line (bytes past its last line end)."""
        return self.torn_tail and (self.unfinished is None or self.unfinished.torn_after)

    @property
    def lines_vanished(self) -> int:
        """How many committed lines vanished (a stream's sequences without a message; a followed file's lines)."""
        return (0 if self.vanished is None else self.vanished.lines) + (0 if self.gaps is None else self.gaps.lines)

    @property
    def is_stream(self) -> bool:
        """Whether the log is a JetStream stream (``nats://``), not a file."""
        return self.name.startswith("nats://")


class Silenced(msgspec.Struct, frozen=True, kw_only=True):
    """What the time of a ``dated_ahead`` item keeps from firing: the check (:data:`projections.ahead.Check`), its
    domain, the id it judges, and whether what it holds back is a person's decision (:meth:`_Judge.silences`)."""

    check: Check
    domain: Domain
    id: str
    decision: bool


class Item(msgspec.Struct, kw_only=True):
    """One thing that needs a person: where, what, why (plain words), since when, and the command to copy.

    ``since`` is ISO 8601 (null when no time applies, as for a bad line),
    ``for_s`` the seconds from ``since`` to T, ``until`` when it ends by itself
    (a backoff, an open circuit), ``needs_decision`` whether a person must decide
    (not only look). ``next`` is one shell command, LOG and ids quoted, that works pasted (:func:`command`).
    ``silences``: of a ``dated_ahead`` item, the check its line keeps from firing (null for every other item);
    a view narrowed to that check's domain keeps it (:meth:`Triage.only`).
    """

    domain: Domain
    id: str
    reason_code: str
    reason: str
    since: str | None = None
    for_s: int | float | None = None
    until: str | None = None
    next: str
    needs_decision: bool = False
    silences: Silenced | None = None

    def about(self) -> tuple[Domain, str]:
        """The domain and id whose verdict this item speaks of: its own; of a line dated ahead, the check's."""
        s = self.silences
        return (self.domain, self.id) if s is None else (s.domain, s.id)

    def concerns(self, domains: set[str] | None, needs_decision: bool) -> bool:
        """Whether a view of ``domains`` (None: all), or of what a person decides, keeps this item: one of its
        domain (or of the domain its line dated ahead silences) that is a decision (or holds one back)."""
        s = self.silences
        return ((domains is None or self.domain in domains or self.about()[0] in domains)
                and (not needs_decision or self.needs_decision or (s is not None and s.decision)))


class Group(msgspec.Struct, kw_only=True):
    """The items of one reason: ``count`` of them in all, ``items`` those shown (natural order of ids), and how
    urgent the reason is (:func:`urgency`: the screen's and the console's order, :func:`urgent_first`)."""

    domain: Domain
    reason_code: str
    title: str
    needs_decision: bool
    count: int
    items: list[Item]
    urgency: int


class HandoffTotals(msgspec.Struct, kw_only=True):
    """The headline numbers of the handoffs (seed 000: failover and failback counted apart)."""

    total: int
    failover_started: int
    returned: int
    pending: int
    oldest_pending_age_s: int | float | None
    live_claims: int
    needs_human: int
    skipped: int
    #: The skipped ones by their reason (seed 000: skipした件数と理由), most first, then by reason.
    skip_reasons: dict[str, int]
    stale: int
    #: Handoffs still out (pending, claimed) whose deadline passed as of T (the ``deadline_passed`` items).
    deadline_passed: int
    return_p50_s: int | float | None
    return_p95_s: int | float | None
    accounts: int


class WatcherTotals(msgspec.Struct, kw_only=True):
    """How many watchers wrote a heartbeat, how many are late or ended their last pass in error, how many a person
    retired (they are neither late nor in error)."""

    watchers: int
    late: int
    error: int
    last_run: str | None
    retired: int = 0


class LaneTotals(msgspec.Struct, kw_only=True):
    """Every lane judged at T, by verdict; and when the lanes runner's last pass ran and how it ended (None: no
    ``lane_check`` says)."""

    products: int
    stalled: int
    moving: int
    stopped: int
    idle: int
    last_pass: str | None = None
    last_pass_exit: Literal["ok", "error", "sending"] | None = None
    #: Whether the lanes pass is late (``lanes_late``).
    late: bool = False


class CatchupTotals(msgspec.Struct, kw_only=True):
    """Registered jobs, guarded ones, candidates, the circuit, the re-runs that ended badly or never reported
    their end, and the jobs nothing feeds."""

    jobs: int
    guarded: int
    candidates: int
    circuit: Literal["open", "closed"]
    open_until: str | None
    reruns_failed: int = 0
    reruns_no_end: int = 0
    #: Guarded jobs with no marker of today though their slot passed (``unfed``).
    unfed: int = 0


class SessionTotals(msgspec.Struct, kw_only=True):
    """Sessions by admission state, those waiting for a decision, those whose retry is due, those without a worker."""

    sessions: int
    admitted: int
    backoff: int
    recovery_required: int
    stopped: int
    closed: int
    waiting_decision: int
    retry_due: int
    decisions: int
    #: Sessions that should have a worker and have none at work (``worker_not_ready``, ``worker_gone``,
    #: ``decision_unclaimed``).
    without_worker: int = 0


class LogTotals(msgspec.Struct, kw_only=True):
    """The log itself: events read, bad lines, rejected events, whether it ends in what is not committed (the
    dump's ``torn_tail``): the complete lines of an unfinished batch (``unfinished_batch``, 0 when none), a torn
    last line (``torn_line``), and whether no append will cut that end; whether the file is no event log (no
    append is taken on it at all); how many times a verdict is judged from lie ahead of now (None: not
    judged, as with ``--at``); and how many committed lines vanished (a stream's sequences that hold no message
    any more; a file's while a server followed it)."""

    events: int
    bad_lines: int
    rejected: int
    torn_tail: bool
    unfinished_batch: int
    torn_line: bool
    torn_tail_stuck: bool
    not_a_log: bool
    dated_ahead: int | None = None
    lines_vanished: int = 0


class Totals(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The totals of each domain present in the log (a domain the log never names is left out)."""

    log: LogTotals
    handoffs: HandoffTotals | None = None
    watchers: WatcherTotals | None = None
    lanes: LaneTotals | None = None
    catchup: CatchupTotals | None = None
    sessions: SessionTotals | None = None


class Triage(msgspec.Struct, kw_only=True):
    """Everything that needs a person as of T, grouped by reason, and the totals.

    ``as_of`` is T as written (null only for a log with no event judged at its
    last line); ``empty``: the log has no line at all; ``needs_person``: how
    many items in all (``status`` exits 1 when it is not 0).
    """

    log: str
    as_of: str | None
    empty: bool
    log_missing: bool
    needs_person: int
    groups: list[Group]
    totals: Totals

    def only(self, domains: Iterable[str] | None = None, needs_decision: bool = False) -> Triage:
        """The same triage with only the items of ``domains`` (None: all), or only those a person decides
        (:meth:`Item.concerns`: a line dated ahead goes with the check it silences); and always those of
        :data:`UNREAD` (lines no domain could read). Of a triage whose groups hold every item (before
        :meth:`shown`): a group's count is what it keeps."""
        wanted = set(domains) if domains is not None else None
        groups = []
        for g in self.groups:
            items = g.items if g.reason_code in UNREAD else [i for i in g.items if i.concerns(wanted, needs_decision)]
            if len(items) == len(g.items):
                groups.append(g)
            elif items:
                groups.append(msgspec.structs.replace(g, items=items, count=len(items)))
        totals = self.totals
        if wanted is not None:
            totals = msgspec.structs.replace(totals, **{d: None for d in DOMAINS if d != "log" and d not in wanted})
        return msgspec.structs.replace(self, groups=groups, needs_person=sum(g.count for g in groups),
                                       totals=totals)

    def shown(self, limit: int | None = SHOWN) -> Triage:
        """The same triage with at most ``limit`` items per group (None: every item); the counts stay."""
        if limit is None:
            return self
        groups = [msgspec.structs.replace(g, items=g.items[:limit]) for g in self.groups]
        return msgspec.structs.replace(self, groups=groups)


# --- words and commands ---------------------------------------------------------------------------

_UNITS = (("d", 86400), ("h", 3600), ("min", 60), ("s", 1))
#: The longest time between two times a log can hold (spec: the years 1900 to 9000).
_SPAN_S = (LAST_YEAR - FIRST_YEAR + 1) * 366 * 86400


def duration_words(seconds: float) -> str:
    """A duration for people: its largest unit and the next one when not 0: ``2 h 5 min``, ``3 d``, ``40 s``.

    Ahead of T (negative) it reads ``in 5 min``.
    """
    if seconds < 0:
        return "in " + duration_words(-seconds)
    if seconds > _SPAN_S:  # a threshold no log can reach (--stale-after 1e308)
        return f"more than {LAST_YEAR - FIRST_YEAR} years (never)"
    left = int(seconds)
    values = []
    for unit, size in _UNITS:
        value, left = divmod(left, size)
        values.append((value, unit))
    first = next((i for i, (value, _) in enumerate(values) if value), len(values) - 1)
    words = [f"{values[first][0]} {values[first][1]}"]
    if first + 1 < len(values) and values[first + 1][0]:
        words.append(f"{values[first + 1][0]} {values[first + 1][1]}")
    return " ".join(words)


def for_words(seconds: float) -> str:
    """How long something has been so: ``for 2 h 5 min`` (``in 5 min`` when T is before it)."""
    words = duration_words(seconds)
    return words if words.startswith("in ") else f"for {words}"


_OPTION_UNITS = (("d", 86400), ("h", 3600), ("m", 60))


def duration_option(seconds: float) -> str:
    """A duration as a command's option takes it back exactly (``eventlog.cli.common.parse_duration``): ``90m``,
    ``8h``, ``2d`` when a whole number of that unit, else its seconds written out (``0.00001s``, never ``1e-05s``)."""
    value = float(seconds)
    if value.is_integer():
        for unit, size in _OPTION_UNITS:
            if value and value % size == 0:
                return f"{int(value) // size}{unit}"
        return f"{int(value)}s"
    return f"{Decimal(repr(value)):f}s"


_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort ids as people count: ``h-2``, ``h-1010``, ``h-10004`` (digit runs compared as numbers)."""
    parts = _DIGITS.split(text)
    key = tuple((1, int(p)) if i % 2 else (0, p) for i, p in enumerate(parts))
    return (key, text)


#: The longest argument a command may be given, in bytes: Linux's MAX_ARG_STRLEN (32 pages of 4 KiB) less its NUL.
MAX_ARG_BYTES = 32 * 4096 - 1


class Unnamable(ValueError):
    """A text no command to copy can carry as an argument (:func:`q`) or that the command would write as an id the
    appender refuses (:func:`_writable`); ``why`` says so (words that follow "it")."""

    def __init__(self, text: str, why: str) -> None:
        super().__init__(f"{text[:40]!r}: {why}")
        self.text = text
        self.why = why


def q(text: str) -> str:
    """One shell word for a command to copy: pasted in sh or bash it is ``text``, and it shows no control character.

    :class:`Unnamable` when no argument can be ``text``: it holds a NUL (a shell drops it: the command would name
    another id), or it is longer than :data:`MAX_ARG_BYTES` in UTF-8 (the command fails "Argument list too
    long"). The builders of commands that name an id print words instead (:func:`_or_words`).

    Quoted when needed (``shlex.quote``). A text with a character a terminal acts on or nobody sees (not
    ``str.isprintable``: C0 and C1 controls, line and paragraph separators, bidi and other format characters)
    is written ``"$(printf '...')"``, those characters, ``\\ ' % !`` and a leading ``-`` as octal escapes of
    their bytes (``!`` is bash's history in double quotes). Trailing newlines, which ``$(...)`` drops, follow
    as ``${IFS#??}`` each: the newline of the shell's IFS (space, tab, newline).
    """
    if "\0" in text:
        raise Unnamable(text, NUL_WORDS)
    if (size := len(text.encode("utf-8", "surrogatepass"))) > MAX_ARG_BYTES:
        raise Unnamable(text, f"is {size:,} bytes long, more than a command's argument may be ({MAX_ARG_BYTES:,})")
    if text.isprintable():
        return shlex.quote(text)
    body = text.rstrip("\n")
    escaped = "".join(_printf_char(c, first=not i) for i, c in enumerate(body))
    substituted = f"$(printf '{escaped}')" if body else ""
    return f'"{substituted}{"${IFS#??}" * (len(text) - len(body))}"'


def _printf_char(char: str, first: bool) -> str:
    """``char`` in a ``printf`` format: as it is when printable and plain, else ``\\ooo`` per byte (UTF-8; the
    bytes a surrogate escape stands for)."""
    if char.isprintable() and char not in "\\'%!" and not (first and char == "-"):
        return char
    data = char.encode("utf-8", "surrogateescape" if "\udc80" <= char <= "\udcff" else "surrogatepass")
    return "".join(f"\\{b:03o}" for b in data)


class LogArg(NamedTuple):
    """LOG in an ``eventlog`` command, with the zone of ``--assume-tz`` it was read in (None: none).

    :func:`command` puts it in as LOG and adds ``--assume-tz ZONE``, so that the command, pasted, reads the
    times written without an offset as the view that printed it did (without it, they are bad lines). A
    command of a tool that does not read events (``sed``, ``tail``, ``ls``; ``eventlog export``) is given
    the bare name.
    """

    name: str
    assume_tz: str | None = None


def command(program: str, args: Sequence[str | LogArg], options: Sequence[str] = ()) -> str:
    """One shell command to copy: ``PROGRAM ARGS... OPTIONS...``, each of ``args`` (a LOG, an id, a path) quoted.

    When one of ``args`` starts with ``-``, the command would read it as an option (``eventlog decide
    LOG -dash`` is a usage error), so it becomes ``PROGRAM OPTIONS... -- ARGS...``: after ``--`` every word
    is an argument (argparse, sed, tail, head, ls, mv, truncate alike). ``options`` are shell text already
    (see :func:`opt`); ``program`` may carry options of its own (``sed -n '5p'``). A :class:`LogArg` read
    with ``--assume-tz`` adds that option last.
    """
    words = [a.name if isinstance(a, LogArg) else a for a in args]
    zones = [opt("--assume-tz", a.assume_tz) for a in args if isinstance(a, LogArg) and a.assume_tz]
    options = [*options, *zones[:1]]
    quoted = [q(a) for a in words]
    if any(a.startswith("-") for a in words):
        return " ".join([program, *options, "--", *quoted])
    return " ".join([program, *quoted, *options])


def opt(name: str, value: str) -> str:
    """``--name VALUE`` to copy, quoted; ``--name=VALUE`` when VALUE starts with ``-`` (else read as an option)."""
    return f"{name}={q(value)}" if value.startswith("-") else f"{name} {q(value)}"


def kept_tail(log: str, start: int) -> str:
    """The file :func:`cut_tail_cmd` keeps a stuck tail in: ``LOG.tail-OFFSET``."""
    return f"{log}.tail-{start}"


def cut_tail_cmd(log: str, s: StuckTail) -> str:
    """Keep the bytes past the committed lines in :func:`kept_tail`, then cut them; only while LOG is the size judged.

    (``cat LOG.tail-OFFSET >> LOG`` puts them back.)
    """
    return (f"test \"$(wc -c < {q(log)})\" -eq {s.size} && {command(f'tail -c +{s.start + 1}', [log])} > "
            f"{q(kept_tail(log, s.start))} && {command(f'truncate -s {s.start}', [log])}")


def status_cmd(log: str | LogArg, every: bool = False, domain: str | None = None, needs_decision: bool = False) -> str:
    """``eventlog status LOG`` (``--all``: every item of every group; ``--domain D``: only that domain's;
    ``--needs-decision``: only what a person decides); ``-- LOG`` when LOG starts with ``-``."""
    options = [f"--domain {domain}"] if domain else []
    return command("eventlog status", [log], [*options, *(["--needs-decision"] if needs_decision else []),
                                              *(["--all"] if every else [])])


def dir_cmd(log: str) -> str:
    """``ls -la DIR``: what the directory of LOG holds now (a log missing, moved, or cut short); ``/`` for a LOG
    directly under it, ``.`` for one with no directory."""
    return command("ls -la", [posixpath.dirname(log) or "."])


_P = ParamSpec("_P")


def _or_words(build: Callable[Concatenate[str | LogArg, _P], str]) -> Callable[Concatenate[str | LogArg, _P], str]:
    """``build`` (a command to copy that names an id), or, when no command can name it (:class:`Unnamable`), words
    that say why and how to look at its lines with no id (:func:`unnamable_words`)."""

    def built(log: str | LogArg, /, *args: _P.args, **kwargs: _P.kwargs) -> str:
        try:
            return build(log, *args, **kwargs)
        except Unnamable as err:
            return unnamable_words(log, err)

    functools.update_wrapper(built, build)
    return built


#: How many characters of an id :func:`unnamable_words` searches for.
_SEARCHED = 40


def unnamable_words(log: str | LogArg, err: Unnamable) -> str:
    """Why no command can name an id, and the search that lists the lines of LOG holding it (its JSON text, the
    first :data:`_SEARCHED` characters): ``grep -n -F`` needs no id as an argument, only a part of how it is
    written (for a stream, its export piped to ``grep``)."""
    text = err.text[:_SEARCHED]
    written = json.dumps(text, ensure_ascii=False)[:None if text == err.text else -1]
    name = log.name if isinstance(log, LogArg) else log
    search = f"grep -n -F -e {q(written)}"
    grep = f"{command('eventlog export', [name])} | {search}" if name.startswith("nats://") else command(search, [name])
    return f"no command can name this id: it {err.why}; its lines hold it as JSON text: {grep} lists them"


def _writable(*ids: str | None) -> None:
    """:class:`Unnamable` when a command would write one of ``ids`` and the appender refuses it (an id no command
    can name: :func:`~eventlog.events.id_problem`): pasted, it would fail."""
    for ident in ids:
        if ident is not None and (why := id_problem(ident)) is not None:
            raise Unnamable(ident, why)


@_or_words
def explain_cmd(log: str | LogArg, ident: str) -> str:
    """``eventlog explain LOG ID``."""
    return command("eventlog explain", [log, ident])


@_or_words
def sessions_cmd(log: str | LogArg, sid: str) -> str:
    """``eventlog sessions LOG SESSION``: the session's state, its retry, the decisions it would accept."""
    return command("eventlog sessions", [log, sid])


@_or_words
def handoff_cmd(log: str | LogArg, action: str, hid: str, reason: str) -> str:
    """``eventlog handoff ACTION LOG ID --reason R``: a person's checked move of one handoff."""
    _writable(hid)
    return command(f"eventlog handoff {action}", [log, hid], [opt("--reason", reason)])


#: What a person fills in: a command is never taken from the log (docs/DECISIONS.md, "A next command").
YOUR_PROBE = "'<your probe command>'"
YOUR_RESUME = "'<your resume command>'"


@_or_words
def probe_cmd(log: str | LogArg, account: str) -> str:
    """``eventlog handoff probe LOG ACCOUNT``: probe one account by hand (how a fixed login is recorded)."""
    _writable(account)
    return command("eventlog handoff probe", [log, account], [f"--probe-cmd {YOUR_PROBE}"])


@_or_words
def failback_cmd(log: str | LogArg, name: str, period_s: int, stale_after_s: float) -> str:
    """One failback pass of watcher NAME at its period and stale age; the person fills in its commands."""
    _writable(name)
    return command("eventlog failback", [log], [opt("--watcher", name), f"--period {period_s}s",
                                                f"--stale-after {duration_option(stale_after_s)}",
                                                f"--probe-cmd {YOUR_PROBE}",
                                                f"--resume-cmd {YOUR_RESUME}"])


@_or_words
def retire_cmd(log: str | LogArg, name: str) -> str:
    """``eventlog failback LOG --retire NAME --reason ...``: a person says watcher NAME stopped for good."""
    _writable(name)
    return command("eventlog failback", [log], [opt("--retire", name), "--reason '<why it stopped for good>'"])


#: How to run the lanes runner (its enqueue command is the person's: no command in a view has a blank to fill in).
LANES_HELP = "eventlog lanes --help"
#: How to feed a lane's state (its files are the person's).
OBSERVE_HELP = "eventlog observe lane --help"
#: The mark :func:`eventlog.runners.process.excerpt` ends a cut text with (how long it was).
_CUT = re.compile(r"\[cut: (\d+) characters in all\]$")
#: Where the lanes pass's whole output is: the journal (systemd) or its job's log (launchd; docs/OPERATIONS.md).
LANES_OUTPUT = ("systemd: `journalctl -u recovery-ledger-lanes.service -n 50`; launchd: "
                "/opt/recovery-ledger/var/log/lanes.log")
#: Where to look when the lanes pass is late: its timer (systemd) or its job (launchd).
LANES_TIMER = ("(systemd: `systemctl status recovery-ledger-lanes.timer`; launchd: "
               "`launchctl print gui/$(id -u)/org.recovery-ledger.lanes`)")


def lane_stop_cmd(log: str | LogArg, product: str, ts: str) -> str:
    """The ``lane_stopped`` of ``product`` at ``ts``, piped to ``eventlog append LOG``: a person retires a lane whose
    stop file no pass can observe any more (docs/OPERATIONS.md, retiring a lane)."""
    return append_cmd(log, {"type": "lane_stopped", "ts": ts, "product": product})


@_or_words
def resend_cmd(log: str | LogArg, product: str, enqueue: str) -> str:
    """``eventlog lanes LOG --enqueue-cmd CMD --resend PRODUCT``: send a resume whose send was cut short, once a
    person knows it did not arrive."""
    return command("eventlog lanes", [log], [opt("--enqueue-cmd", enqueue), opt("--resend", product)])


#: The enqueue command a view puts in :func:`resend_cmd`: the person's (``lanes`` refuses it until it is filled in).
YOUR_ENQUEUE = "<your enqueue command>"


def cut_short_cmds(log: str | LogArg, product: str, kind: str, enqueue: str = YOUR_ENQUEUE) -> list[str]:
    """What a person chooses from for a resume whose send was cut short: the ``resume_enqueued`` to append (it
    arrived) and :func:`resend_cmd` (it did not); for a product no command can name, one text that says why."""
    cmds = [append_cmd(log, {"type": "resume_enqueued", "product": product, "kind": kind}),
            resend_cmd(log, product, enqueue)]
    return cmds[:1] if cmds[0] == cmds[1] else cmds


def sending_words(sent: Sending) -> str:
    """A resume a lanes pass is sending now (its time not up), in words."""
    until = ("" if sent.by is None else " (no bound: under way until a line closes it)" if sent.by.year > LAST_YEAR
             else f" (cut short if not recorded by {sent.by.isoformat()})")  # past the years a log can write
    return f"a lanes pass ({sent.ts}) is sending its resume now{until}"


def lanes_late_words(beat: Heartbeat) -> str:
    """Why the lanes pass is late: since when, its period, where to look, and what is not done meanwhile."""
    every = (f"it runs every {duration_words(beat.period_s)} and is late after "
             f"{duration_words(LATE_PERIODS * beat.period_s)}")
    if not beat.checked:
        return (f"no lanes pass in the log, and lanes have been fed since {beat.ts} ({every}): no stall is ever "
                f"resumed; is its timer enabled? {LANES_TIMER}")
    return (f"no lanes pass since {beat.ts}; {every}: is its timer running? {LANES_TIMER}; until one runs no "
            "stall is resumed, and the lanes it observes (--observe) are judged from what it last read: a finished "
            "job may look moving")


def lanes_words(unpicked_s: float, quiet_s: float) -> str:
    """How to send a lane's resume now, in words: the person's enqueue command goes where no view can put it."""
    return (f"to send one now, run eventlog lanes on this log with your enqueue command as --enqueue-cmd, and "
            f"--unpicked {duration_option(unpicked_s)} --quiet {duration_option(quiet_s)} "
            "(the thresholds the views judge by)")


def catchup_cmd(log: str | LogArg, at: str | None = None) -> str:
    """``eventlog catchup LOG --dry-run`` (``--at AT``: what would be re-run then)."""
    return command("eventlog catchup", [log], ["--dry-run", *([opt("--at", at)] if at is not None else [])])


class ByHand(NamedTuple):
    """The commands that run a re-run's job by hand now and show whether it runs, where its catch-up kicked it."""

    run: str
    check: str


def by_hand_cmds(label: str, r: Rerun) -> ByHand | None:
    """For how the catch-up kicked it (``catchup_kicked.kicked_by``): ``launchctl kickstart DOMAIN/LABEL`` and
    ``launchctl list LABEL`` (no domain written: ``gui/$(id -u)``, the shell fills in the uid), or ``systemctl
    [--user] start UNIT`` and ``systemctl [--user] is-active UNIT`` (:func:`command`: ``-- UNIT`` when it starts
    with ``-``). A label that starts with ``-`` could be read as an option of ``launchctl list``: its check is
    ``launchctl print DOMAIN/LABEL``, which names the job by its target. None for a kick command, or when it is
    not written (an older line): no OS command fits, and a view prints no command taken from the log. None too for
    a label no command can name (:class:`Unnamable`): the view's other next steps say why."""
    try:
        return _by_hand(label, r)
    except Unnamable:
        return None


def _by_hand(label: str, r: Rerun) -> ByHand | None:
    if r.kicked_by == "launchd":
        target = q(f"{r.launchd_domain}/{label}") if r.launchd_domain else f"gui/$(id -u)/{q(label)}"
        check = f"launchctl print {target}" if label.startswith("-") else f"launchctl list {q(label)}"
        return ByHand(f"launchctl kickstart {target}", check)
    if r.kicked_by in ("systemd", "systemd_user"):
        ctl, unit = "systemctl" + (" --user" if r.kicked_by == "systemd_user" else ""), systemd_unit(label)
        return ByHand(command(f"{ctl} start", [unit]), command(f"{ctl} is-active", [unit]))
    return None


def rerun_end_cmd(log: str | LogArg, label: str) -> str:
    """Record that a re-run with no end ended, how unknown (``catchup_finished`` ``exited``, no exit): once a
    person knows it no longer runs, catch-up may kick again (the item stays until the job runs again)."""
    return append_cmd(log, {"type": "catchup_finished", "label": label, "outcome": "exited"})


@_or_words
def append_cmd(log: str | LogArg, event: Mapping[str, Any] | Sequence[Mapping[str, Any]],
               revision: int | None = None) -> str:
    """One event, or several (one line each, all or none), piped to ``eventlog append LOG`` (with
    ``--expect-revision`` when given)."""
    events = [event] if isinstance(event, Mapping) else event
    _writable(*(e.get(name) for e in events for name in ID_FIELDS if isinstance(e.get(name), str)))
    expect = [f"--expect-revision {revision}"] if revision is not None else []
    lines = " ".join(q(json.dumps(e, ensure_ascii=False)) for e in events)
    return f"printf '%s\\n' {lines} | {command('eventlog append', [log], expect)}"


@_or_words
def decide_cmd(log: str | LogArg, session_id: str, decision: str, revision: int, turn: str | None = None) -> str:
    """``eventlog decide`` for one decision on one revision.

    The idempotency key is the decision, its turn and the revision: sending the
    same command twice returns the first receipt instead of deciding twice.
    """
    _writable(session_id, turn)
    key = "-".join([decision, *([turn] if turn is not None else []), f"r{revision}"])
    options = [f"--decision {decision}", f"--expected-revision {revision}",
               *([opt("--target-turn", turn)] if turn is not None else []),
               *(["--evidence-ref '<evidence>'"] if decision == "confirm_completed" else []),
               opt("--idempotency-key", key), "--reason '<why>'"]
    return command("eventlog decide", [log, session_id], options)


def accept_cmds(log: str | LogArg, session_id: str, would_accept: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ``eventlog decide`` command of each decision a session would accept now (its ``would_accept``), ``close``
    (final) last: what ``explain`` and ``sessions`` print to copy."""
    return [decide_cmd(log, session_id, e["decision"], e["expected_revision"], e.get("target_turn_id"))
            for e in sorted(would_accept, key=lambda e: e["decision"] == "close")]


def line_cmd(facts: LogFacts, line: int) -> str:
    """The command that prints line ``line`` of the log."""
    if facts.is_stream:
        return f"{command('eventlog export', [facts.name])} | sed -n '{line}p'"
    return command(f"sed -n '{line}p'", [facts.name])


#: The domain of each kind of id.
KIND_DOMAIN: dict[Kind, Domain] = {
    "handoff": "handoffs", "account": "handoffs", "watcher": "watchers", "lane": "lanes", "catchup": "catchup",
    "session": "sessions", "turn": "sessions", "interrupt": "sessions",
}

#: The kind of id each check of :mod:`projections.ahead` is about (what ``explain`` calls it).
AHEAD_KIND: dict[Check, Kind] = {
    "watcher_late": "watcher", "claim_stale": "handoff", "pending_age": "handoff", "probe_backoff": "account",
    "job_unpicked": "lane", "status_quiet": "lane", "job_picked": "lane", "retry_due": "session",
    "catchup_skip": "catchup", "rerun_no_end": "catchup", "limited_at": "account", "limit_reset": "account",
    "worker_not_ready": "session", "decision_unclaimed": "session", "worker_gone": "session",
}

#: Each check of :mod:`projections.ahead`: what the line is, what its time silences, and what ends it.
_AHEAD_WORDS: dict[Check, tuple[str, str, str]] = {
    "watcher_late": ("the last run (watcher_run) of watcher {id}",
                     "it cannot be judged late before {until}, so if it stopped, nothing says so",
                     "its next run with a true time ends this"),
    "claim_stale": ("the last event of the live claim of handoff {id}", "the claim cannot go stale before {until}",
                    "its next event with a true time ends this"),
    "pending_age": ("the creation of pending handoff {id}",
                    "its age counts from then (below 0 until it comes), so it never looks old while it waits",
                    "this lasts while it is pending"),
    "probe_backoff": ("the latest probe of account {id}", "its backoff counts from then: no probe before {until}",
                      "its next probe with a true time ends this"),
    "job_unpicked": ("the last finished job of lane {id}", "it cannot be judged unpicked before {until}",
                     "its next job_finished with a true time ends this"),
    "status_quiet": ("the last status of lane {id}", "it cannot be judged quiet before {until}",
                     "its next status_updated with a true time ends this"),
    "job_picked": ("the last commit of lane {id}",
                   "it counts as picking up the job finished before it, so that job is never judged unpicked",
                   "its next repo_commit with a true time ends this"),
    "retry_due": ("the failure that put session {id} in backoff",
                  "its retry is not due, and no new work is admitted, before {until}",
                  "its next failure or ready worker with a true time ends this"),
    "worker_not_ready": ("the claim (worker_claimed) of session {id}",
                         "its worker, still starting, cannot be judged not ready (nor the retry it took overdue) "
                         "before {until}, so if it never starts, nothing says so",
                         "its worker's ready or end, or a new claim with a true time, ends this"),
    "decision_unclaimed": ("the accepted retry_restore/start_fresh (recovery_decision) of session {id}",
                           "no worker can be judged missing before {until}, so if none ever claims it, nothing says "
                           "so", "a worker's claim of the session ends this"),
    "worker_gone": ("the end of the worker of session {id} (worker_stopped or execution_gone)",
                    "no next worker can be judged missing before {until}, so if none is launched, nothing says so",
                    "a worker's claim of the session ends this"),
    "catchup_skip": ("the latest skip of job {id}", "it is no skip of today, so it is no catch-up candidate today",
                     "its next marker with a true time ends this"),
    "rerun_no_end": ("the open catch-up re-run (a catchup_kicked, no catchup_finished since) of job {id}",
                     "its missing end cannot be named before {until}, so if the catch-up that ran it died, nothing "
                     "says so; and while it is open no catch-up of a --kick-cmd kicks anything",
                     "its end ends this: once you know the job no longer runs, record it (explain prints the "
                     "command)"),
    "limited_at": ("the limited_at of the latest limit (limit_recorded) of account {id}",
                   "no limit is hit ahead of now, yet as the account's latest limit (by log order) its reset_at "
                   "decides when the account is probed, over any true limit before it (an import of the ledger "
                   "sorted by time put such a limit last)",
                   "a limit_recorded of the account with a true limited_at ends this (the next limit recorded, or "
                   "the true latest one appended again; explain shows the account's lines)"),
    "limit_reset": ("the reset_at of the latest limit (limit_recorded) of account {id}",
                    f"no quota window is longer than a week, so a reset more than "
                    f"{duration_words(RESET_AHEAD_MAX_S)} ahead is a mistake; the account is not probed, and none "
                    "of its handoffs comes back, before {until}",
                    "a limit_recorded of the account with the true reset_at ends this (explain prints one that "
                    "probes now)"),
}

#: What is wrong with a time ahead, when it is not the clock of the line's writer.
_AHEAD_WRONG: dict[Check, str] = {"limited_at": "The limit's time is wrong (a typo of the year?)",
                                  "limit_reset": "The reset time is wrong (a typo of the year?)"}


def ahead_words(a: Ahead, where: str | None = None) -> str:
    """What the line is and where (``where``: how to name it, ``line N`` by default; "": named before the words
    already), its time, how far ahead of now, and what it silences."""
    what, silenced, _ends = _AHEAD_WORDS[a.check]
    where = f" ({where or f'line {a.line}'})" if a.line and where != "" else ""
    return (f"{what.format(id=a.id)}{where} is dated {a.ts}, {duration_words(a.ahead_s)} ahead of now: "
            + silenced.format(until=a.until or "the end of what can be written (never)"))


# --- judging ------------------------------------------------------------------------------------


class _Judge:
    """The state, T and the log's facts: everything an item is judged from."""

    def __init__(self, runner: Runner, as_of: datetime | None, as_of_text: str | None, facts: LogFacts,
                 live: bool = False) -> None:
        self.runner = runner
        self.known = as_of is not None
        self.at = as_of if as_of is not None else datetime(1970, 1, 1, tzinfo=UTC)
        self.text = as_of_text
        self.facts = facts
        #: LOG in the ``eventlog`` commands of the items (with the zone it was read in).
        self.log = LogArg(facts.name, facts.assume_tz)
        #: T is the wall clock now: only then is a time ahead of T a writer's clock ahead.
        self.live = live and self.known
        self._unrecorded: dict[str, list[Control]] | None = None
        self._ahead: list[Ahead] | None = None
        self._late: list[Item] | None = None

    def item(self, code: str, ident: str, reason: str, next_cmd: str, since: str | None = None,
             until: str | None = None) -> Item:
        """One item of reason ``code`` (its domain and whether a person decides come from :data:`REASONS`)."""
        r = _BY_CODE[code]
        since_text, for_s = self.since(since)
        return Item(domain=r.domain, id=ident, reason_code=code, reason=reason, since=since_text, for_s=for_s,
                    until=until, next=next_cmd, needs_decision=r.decision)

    def since(self, since: str | None) -> tuple[str | None, int | float | None]:
        """A "since" as printed (a time the log wrote, as written) and its seconds to T."""
        when = _time(since)
        if when is None or not self.known:
            return since, None
        return since, num(round(elapsed_s(self.at, when), 3))

    def ago(self, since: str | None) -> str:
        """``for 2 h 5 min`` from ``since`` to T (empty when either is unknown)."""
        when = _time(since)
        if when is None or not self.known:
            return ""
        return duration_words(elapsed_s(self.at, when))

    # -- handoffs ---------------------------------------------------------------------------------

    def handoff(self, hid: str) -> list[Item]:
        """What needs a person about one handoff."""
        h = self.runner.handoffs.items[hid]
        if h.state == NEEDS_HUMAN:
            return [self.item("needs_human", hid, f"handed to a person: {needs_human_words(h.reason)} "
                              f"(account {h.account})", explain_cmd(self.log, hid), h.last_ts)]
        if h.state != PENDING and h.state not in LIVE:
            return []
        out = self.deadline(hid, h)
        kind = self.runner.handoffs.stale(hid, self.at)
        if kind == "unknown_effect":
            out.append(self.item("stale_unknown_effect", hid,
                                 f"resume requested (attempt {h.attempt} by {h.watcher}), then silence: it may "
                                 "have taken effect; never retried on its own",
                                 explain_cmd(self.log, hid), h.last_ts))
        elif kind == "retryable":
            release = handoff_cmd(self.log, "release", hid, "stale claim released by hand")
            out.append(self.item("stale_retryable", hid,
                                 f"claimed by {h.watcher} (attempt {h.attempt}), no resume request since: safe to "
                                 "release and retry", release, h.last_ts))
        return out

    def past_deadline(self, h: Handoff) -> bool:
        """Whether ``h`` has a deadline and T is after it (as instants)."""
        return self.known and h.deadline_before(self.at)

    def deadline(self, hid: str, h: Handoff) -> list[Item]:
        """A handoff still out (pending or claimed) whose deadline passed as of T: a person is told (seed 000:
        nothing ends by the deadline alone), and skips it with the reason if it will not be done."""
        if h.state not in OUT or not self.past_deadline(h):
            return []
        where = {PENDING: "pending", CLAIMED: f"claimed by {h.watcher} (attempt {h.attempt})",
                 REQUESTED: f"resume requested (attempt {h.attempt} by {h.watcher})"}[h.state]
        return [self.item("deadline_passed", hid, f"{where}, created {self.ago(h.created_ts)} ago; its deadline "
                          f"{h.deadline_ts} passed {self.ago(h.deadline_ts)} ago and nothing ends it on a timer: "
                          "will it still be done? If not, skip it with the reason (explain prints the command)",
                          explain_cmd(self.log, hid), h.deadline_ts)]

    def account(self, name: str) -> list[Item]:
        """An account whose probes back off (its plan as of T)."""
        handoffs = self.runner.handoffs
        acc = handoffs.accounts[name]
        plan = handoffs.plan(name, self.at, self.text)
        if plan["reason"] == "needs_person":
            return [self.item("auth_error", name,
                              f"its latest probe ({acc.last_probe_ts}) was refused (auth_error): not probed again "
                              f"until a person fixes the login and probes it by hand; {acc.pending} handoff(s) wait",
                              probe_cmd(self.log, name), acc.last_probe_ts)]
        if plan["reason"] in ("backoff_transient", "backoff_unexpected"):
            why = (f"{acc.run} transient probe error(s) in a row (latest {acc.last_outcome}); "
                   f"{acc.pending} handoff(s) wait")
        elif plan["reason"] == "backoff_estimate":
            why = (f"its {acc.confidence} reset ({acc.reset_text or 'none given'}) passed and {acc.run} "
                   f"probe(s) since still said quota_limited; {acc.pending} handoff(s) wait")
        else:
            return []
        until = plan["next_probe_at"]
        why += f"; next probe at {until}" if until is not None else "; no probe planned (past any time)"
        # Since the run's first failing probe, as explain and RecoveryAccountBackingOff count: not its latest.
        since = handoffs.failing_since(name, self.at) or acc.run_ts
        return [self.item(plan["reason"], name, why, explain_cmd(self.log, name), since, until)]

    # -- watchers ---------------------------------------------------------------------------------

    def watcher(self, name: str) -> list[Item]:
        """A watcher whose last pass ended in error, or that is late (none for a watcher a person retired)."""
        beat = self.runner.handoffs.state.watchers[name]
        out: list[Item] = []
        if beat.retired:
            return out
        if beat.exit == "error":
            out.append(self.item("watcher_error", name,
                                 f"its last pass ({beat.ts}) ended in error: {beat.detail or 'no detail given'}",
                                 explain_cmd(self.log, name), beat.ts))
        if beat.late(self.at):
            out.append(self.item("watcher_late", name,
                                 f"no run since {beat.ts}; it runs every {duration_words(beat.period_s)} and is "
                                 f"late after {duration_words(2 * beat.period_s)}",
                                 explain_cmd(self.log, name), beat.ts))
        return out

    def no_watcher(self) -> list[Item]:
        """Pending handoffs and no ``watcher_run`` at all (the spec's "none while pending"), or only watchers a
        person retired."""
        if not self.runner.handoffs.unwatched():
            return []
        state = self.runner.handoffs.state
        pending = [(micros(h.created_at), h.line, h.created_ts) for h in state.items.values() if h.state == PENDING]
        *_, oldest = min(pending)
        why = ("every watcher in the log is retired" if state.watchers else "no watcher_run in the log")
        return [self.item("no_watcher", "failback", f"{len(pending)} handoff(s) pending and {why}: nothing brings "
                          "them back", "eventlog failback --help", oldest)]

    # -- lanes ------------------------------------------------------------------------------------

    def lanes_pass(self) -> list[Item]:
        """The lanes runner's last pass, when it ended in error for what belongs to no lane (its ``general``: a send
        that failed, new bad lines, no lane at all, a stop signal, a resume not recorded; all of its ``detail`` on
        an older runner's line, or none given). What concerns one lane is that lane's own item, said once: each
        lane or file it could not observe (``lane_unobserved``), each send it cut short (the stall's, while the
        stall stands). A problem cut short is whole in the pass's output."""
        lanes = self.runner.lanes
        last, said = lanes.last_pass, lanes.pass_error(self.at)
        if last is None or said is None:
            return []  # none in error, or each of its problems is a lane's own item (a stall's, while it stands)
        fix = ("no lane is known" if not lanes.lanes else
               "the stalls it did not resume stay uncovered, and its next pass tries them again once that is fixed")
        unobserved = len(lanes.unobserved())
        if unobserved:
            fix += f"; the {unobserved} lane(s) or file(s) it could not observe are named one each (lane_unobserved)"
        cut = next((found for found in map(_CUT.search, said) if found is not None), None)
        if cut is not None:
            fix += f"; that detail is cut ({cut[1]} characters in all): the whole is in its output ({LANES_OUTPUT})"
        return [self.item("lanes_error", "lanes", f"its last pass ({last.ts}) ended in error: "
                          f"{'; '.join(said) or 'no detail given'}; {fix}",
                          OBSERVE_HELP if not lanes.lanes else LANES_HELP, last.ts)]

    def pass_kept(self, product: str, kind: str) -> str | None:
        """Why the lanes runner's last pass, in error, sent no resume for this stall, in words that follow "ended
        in error" (None: its error is not why, so the next pass sends one): it could not observe the lane, or it
        judged this stall and did not send it (``unsent``; ``lanes_error`` says why); "" for an older runner's line,
        which does not say what belongs to a lane (read as all of it)."""
        lanes = self.runner.lanes
        last = lanes.last_pass
        if last is None or lanes.pass_exit(self.at) != "error":
            return None
        if product in lanes.unobserved():
            return " and could not observe it (lane_unobserved)"
        anchor = lanes.anchor(product, kind)
        if last.unsent.get(product) == kind and anchor is not None and anchor < last.line:
            return " without sending it (lanes_error says why; its next pass tries again)"
        return "" if last.general is None else None

    def lanes_unobserved(self) -> list[Item]:
        """Each lane (or lane file) the lanes runner's last pass could not observe, and why, until a pass that states
        otherwise or the lane's stop: its verdict is as of what was last read."""
        lanes = self.runner.lanes
        last = lanes.last_pass
        if last is None:
            return []
        return [self.item("lane_unobserved", key, f"the last lanes pass ({last.ts}) could not observe it: {why}"
                          + (f" (the whole is in its output: {LANES_OUTPUT})" if _CUT.search(why) else ""),
                          self.unobserved_next(key, why), last.ts)
                for key, why in lanes.unobserved().items()]

    def unobserved_next(self, key: str, why: str) -> str:
        """What to type about what a lanes pass could not observe: a lane's ``explain``; for its lanes directory,
        a listing that shows what is wrong with it (missing, unreadable: ``ls -ld``; no lane file: ``ls -la``)."""
        if key in self.runner.lanes.lanes:
            return explain_cmd(self.log, key)
        flat = " ".join(key.split())  # as the pass's detail holds it (:func:`eventlog.runners.process.excerpt`)
        if why.startswith(f"{DIR_UNREADABLE} {flat}: "):
            return command("ls -ld", [key])
        if why.startswith(f"{DIR_EMPTY} {flat} holds no "):
            return command("ls -la", [key])
        return LANES_HELP

    def lanes_late(self) -> list[Item]:
        """The lanes pass, when it is late as of T (:meth:`projections.lanes.Lanes.heartbeat`; worked out once per
        judgement)."""
        if self._late is None:
            beat = self.runner.lanes.heartbeat(self.at) if self.known else None
            self._late = ([self.item("lanes_late", "lanes", lanes_late_words(beat), LANES_HELP, beat.ts)]
                          if beat is not None and beat.late else [])
        return self._late

    def resumed(self, product: str, kind: str) -> str:
        """Whether a resume covers the stall: when it was enqueued and its task, or why none was sent yet."""
        lanes = self.runner.lanes
        resume = lanes.covering(product, kind)
        if resume is not None:
            task = f"task branch {resume.task_branch}" if resume.task_branch else "no task branch given"
            return f"; a resume was enqueued for it at {resume.ts} ({task})"
        sent = lanes.open_send(product, kind)
        if sent is not None and sent.under_way(self.at):
            return f"; {sending_words(sent)}"
        if sent is not None:
            return (f"; {cut_short_said(sent.ts)}: did it arrive? No pass sends it again on its own (explain says what "
                    "to type)")
        if lanes.state.check_ts is None:  # "is there a pass": any lane_check, as lanes_late judges it
            return "; no resume sent: no lanes pass in the log (eventlog lanes sends them)"
        last, kept = lanes.last_pass, self.pass_kept(product, kind)
        if last is not None and kept is not None:
            return f"; no resume sent: the last lanes pass ({last.ts}) ended in error{kept}"
        late = self.lanes_late()
        if late:
            return f"; no resume sent: no lanes pass since {late[0].since}, and one is late (lanes_late)"
        return f"; no resume sent yet: the next lanes pass sends one (the last ran at {lanes.state.check_ts})"

    def lanes(self) -> list[Item]:
        """Every lane stalled as of T (the seed's verdict, in English)."""
        lanes = self.runner.lanes
        out: list[Item] = []
        for r in lanes.judge(self.at, self.text)["results"]:
            if not r["stalled"]:
                continue
            product, kind = r["product"], r.get("kind")
            enqueued = self.resumed(product, kind or "")
            if kind == JOB_UNPICKED:
                since = r.get("finished_at")
                out.append(self.item("job_unpicked", product, f"a job finished at {since} and nothing was "
                                     f"committed since (unpicked after "
                                     f"{duration_words(lanes.unpicked_minutes * 60)}){enqueued}",
                                     explain_cmd(self.log, product), since))
            elif kind == STATUS_QUIET:
                since = r.get("updated_at")
                out.append(self.item("status_quiet", product, f"progress not updated since {since} "
                                     f"(quiet after {duration_words(lanes.quiet_hours * 3600)}){enqueued}",
                                     explain_cmd(self.log, product), since))
        return out

    # -- catch-up ---------------------------------------------------------------------------------

    def circuit(self) -> list[Item]:
        """The quota circuit, when it is open as of T."""
        c = self.runner.catchup
        if not c.circuit_open(self.at):
            return []
        until = c.state.open_until
        assert until is not None  # open means a circuit_opened with its open_until
        return [self.item("circuit_open", "circuit", f"the quota circuit is open until {until} "
                          f"({c.state.open_reason}): nothing is re-run before",
                          catchup_cmd(self.log, until), c.state.opened_ts, until)]

    def reruns(self) -> list[Item]:
        """Every catch-up re-run that ended badly or never reported its end as of T, until the job ran again."""
        return [self.rerun(b) for b in self.runner.catchup.bad_reruns(self.at)]

    def rerun(self, b: BadRerun) -> Item:
        """One re-run that did not end well: what happened, when, its lines; next: ``explain`` says what to do."""
        r = b.rerun
        since = r.kicked_ts if b.kind == "rerun_no_end" else r.finished_ts
        return self.item(b.kind, b.label, rerun_words(b) + "; it has not run since, so its skipped run is still "
                         "lost: re-run it by hand once you know why (explain says how); this clears when it runs "
                         "again", explain_cmd(self.log, b.label), since)

    def unfed(self, label: str | None = None) -> list[Item]:
        """Every guarded job nothing seems to feed as of T (``label``: that one only)."""
        return [self.item("unfed", u.label, unfed_words(u, self.at), explain_cmd(self.log, u.label),
                          u.marker.ts if u.marker is not None else u.job.ts)
                for u in self.runner.catchup.unfed(self.at) if label is None or u.label == label]

    def zone_unknown(self) -> list[Item]:
        """The machine's ``TZ`` names no zone and T is now judged in it, while the log has a guarded job (the
        verdicts judged by day): what is wrong, the fix, and the command that judges in the zone it likely misspells
        (else the one that lists the zones)."""
        tz, like = self.facts.zone_unknown, self.facts.zone_like
        if tz is None or not self.runner.catchup.guarded:
            return []
        guess = f"; {like} is the likely one: the command judges in it" if like is not None else ""
        return [self.item("zone_unknown", "TZ", f"TZ={q(tz)} is no time zone this machine knows: today and slots are "
                          "judged in UTC, so a job skipped today in its own zone may be missed, or a slot not come "
                          "yet taken as passed (catchup refuses to run). Set TZ to a zone it knows where the views "
                          "and runners run (TZ= in /etc/recovery-ledger/ledger.env for the shipped units), or give "
                          f"--assume-tz ZONE{guess}",
                          f"TZ={like} {status_cmd(self.log, domain='catchup')}" if like is not None
                          else "timedatectl list-timezones")]

    def candidates(self) -> list[Item]:
        """Every job to re-run as of T (seed 002's three conditions hold)."""
        c = self.runner.catchup
        held = "; held while the circuit is open" if c.circuit_open(self.at) else ""
        out: list[Item] = []
        for cand in c.candidates(self.at):
            marker = c.markers[cand.label]
            out.append(self.item("candidate", cand.label, f"the quota guard skipped it {today_words(self.at)} at "
                                 f"{marker.ts}, and a slot of today has passed; not re-run yet{held}",
                                 explain_cmd(self.log, cand.label), marker.ts))
        return out

    # -- sessions ---------------------------------------------------------------------------------

    def session(self, sid: str) -> list[Item]:
        """A session waiting for a decision, whose retry is due, that should have a worker and has none at work, or
        with an interrupt of a turn whose end the log never recorded."""
        sessions = self.runner.sessions
        s = sessions.sessions[sid]
        out: list[Item] = []
        code = session_code(s)
        if code is not None:
            out.append(self.item(code, sid, session_words(s), next_decision(self.log, sessions, sid), s.since))
        elif s.admission_state == BACKOFF and s.retry_at is not None:
            due = _time(s.retry_at)
            claimed = retry_claimed(s, self.at)
            if due is not None and self.known and due <= self.at and not (claimed and claimed["under_way"]):
                why = (claim_words(claimed) if claimed else "no worker became ready since: look at it, then at "
                       "the worker's log")
                return [self.item("retry_due", sid, f"{s.attention} ({s.reason}), failure {s.failures}: its retry "
                                  f"was due at {s.retry_at}; {why}, before any decision (close cannot be undone)",
                                  sessions_cmd(self.log, sid), s.retry_at)]
        wait = worker_wait(s, self.at) if self.known else None
        if wait is not None and wait["overdue"]:
            out.append(self.item(wait["kind"], sid, f"{s.admission_state}, but {worker_wait_words(wait)}; it takes "
                                 "no work meanwhile", sessions_cmd(self.log, sid), wait["since"]))
        lost = self.unrecorded().get(sid) if code is None else None  # a decision settles the turns first
        if lost:
            first = min((s.unknown_since[c.turn_id] for c in lost if c.turn_id in s.unknown_since),
                        key=lambda m: m.line, default=None)
            c = lost[0]
            ended = {"type": "turn_finished", "session_id": sid, "turn_id": c.turn_id, "outcome": "outcome_unknown",
                     "terminal_reason": c.reason_code or "interrupt_outcome_unknown"}
            how = "it started, no turn_finished came" if c.turn_id in s.running else "not even its start"
            out.append(self.item("interrupt_unrecorded", sid, f"{len(lost)} interrupt(s) ended with outcome "
                                 f"{c.outcome} ({c.reason_code or 'no reason code'}, line {c.result_line}) for turn "
                                 f"{c.turn_id}, whose end the log never recorded ({how}): the "
                                 "session still takes work as if it were known; once its worker is gone, record the "
                                 "turn's end, then decide", append_cmd(self.log, ended),
                                 first.ts if first is not None else None))
        return out

    def unrecorded(self) -> dict[str, list[Control]]:
        """:meth:`Sessions.unrecorded`, worked out once per judgement."""
        if self._unrecorded is None:
            self._unrecorded = self.runner.sessions.unrecorded()
        return self._unrecorded

    # -- times ahead of now ------------------------------------------------------------------------

    def ahead(self) -> list[Ahead]:
        """:func:`projections.ahead.dated_ahead` as of T, worked out once per judgement (none unless live)."""
        if self._ahead is None:
            self._ahead = dated_ahead(self.runner, self.at) if self.live else []
        return self._ahead

    def ahead_of(self, kind: Kind, ident: str) -> list[Ahead]:
        """The times ahead of now the verdicts of one id of ``kind`` are judged from."""
        return [a for a in self.ahead() if AHEAD_KIND[a.check] == kind and a.id == ident]

    def dated_ahead(self) -> list[Item]:
        """An item for each time ahead of now a verdict is judged from."""
        return [self.ahead_item(a) for a in self.ahead()]

    def ahead_item(self, a: Ahead) -> Item:
        """Which line, of what, how far ahead, the check it silences, what ends it, and how to see the id's lines."""
        where = f"line {a.line}" if a.line else f"{AHEAD_KIND[a.check]} {a.id}"
        wrong = _AHEAD_WRONG.get(a.check, "The clock of the writer of that line is ahead (or the time is a typo)")
        item = self.item("dated_ahead", where, f"{ahead_words(a, f'{self.facts.name}:{a.line}')}. {wrong}: fix it; "
                         f"{_AHEAD_WORDS[a.check][2]}", explain_cmd(self.log, a.id), a.ts, a.until)
        item.silences = self.silences(a)
        return item

    def silences(self, a: Ahead) -> Silenced:
        """The check ``a`` keeps from firing, its domain and id; a decision when what it holds back is one: a
        re-run's missing end (``rerun_no_end``), a claim whose resume was requested going stale
        (``stale_unknown_effect``)."""
        if a.check == "claim_stale":
            decision = self.runner.handoffs.items[a.id].state == REQUESTED
        else:
            decision = a.check in _BY_CODE and _BY_CODE[a.check].decision
        kind = AHEAD_KIND[a.check]
        return Silenced(check=a.check, domain=KIND_DOMAIN[kind], id=a.id, decision=decision)

    # -- the log ----------------------------------------------------------------------------------

    def the_log(self) -> list[Item]:
        """The log itself: missing, no event log, bad lines, rejected events, an unfinished batch, a torn last line.

        A file that is no event log has no torn-tail item: no append is taken on it at all, and
        cutting its tail would not make it a log.
        """
        facts, out = self.facts, []
        if facts.missing and facts.not_file is not None:
            out.append(self.item("missing", facts.name, f"{facts.not_file}: nothing can be judged until a log "
                                 "file is there again (moved aside, or put there by mistake?)", dir_cmd(facts.name)))
        elif facts.missing and facts.is_stream:
            out.append(self.item("missing", facts.name, "no such stream on the server: nothing can be judged (the "
                                 "server lost its store, the stream was deleted, or nothing was written yet?); the "
                                 "next append makes it again, and a running follow or serve then counts the "
                                 "committed lines it no longer holds as vanished",
                                 status_cmd(facts.name)))
        elif facts.missing:
            out.append(self.item("missing", facts.name, "no log at this path: nothing can be judged (moved, "
                                 "renamed, or not written yet?)", dir_cmd(facts.name)))
        if facts.not_a_log is not None:
            out.append(self.not_a_log(facts.not_a_log))
        if facts.vanished is not None:
            out.append(self.vanished(facts.vanished))
        if facts.gaps is not None:
            out.append(self.gaps(facts.gaps))
        for bad in facts.bad_lines:
            out.append(self.item("bad_line", f"line {bad.line}", bad.reason, line_cmd(facts, bad.line)))
        for rej in self.runner.rejected:
            out.append(self.item("rejected", f"line {rej['line']}", f"{rej['type']}: {rej['reason']}",
                                 line_cmd(facts, rej["line"])))
        if facts.not_a_log is not None:
            return out  # no append is taken at all: what one would cut is moot
        if facts.stuck_tail is not None:
            out.append(self.stuck_tail(facts.stuck_tail))
            return out
        if facts.unfinished is not None:
            out.append(self.unfinished(facts.unfinished))
        if facts.torn_line:
            out.append(self.item("torn_tail", "last line", "the last line has no newline: not committed (a writer "
                                 "died mid-line or is writing now); the next append cuts it",
                                 command("tail -c 300", [facts.name])))
        return out

    def unfinished(self, u: UnfinishedBatch) -> Item:
        """An unfinished batch the next append cuts: what it is, and the command that shows its first lines."""
        last = u.line + u.lines - 1
        ident = f"line {u.line}" if u.lines == 1 else f"lines {u.line}..{last}"
        return self.item("unfinished_batch", ident, f"{u.words} is not committed (a writer died mid-batch or is "
                         "writing it now): none of it is applied; the next append cuts it",
                         f"{command(f'tail -n +{u.line}', [self.facts.name])} | head")

    def stuck_tail(self, s: StuckTail) -> Item:
        """A tail no append cuts: what it is, how to look at it, and the command that keeps it aside and cuts it."""
        log, u = self.facts.name, self.facts.unfinished
        with_batch = "" if u is None else f"; with them go {u.words}, held and never applied"
        return self.item("torn_tail_stuck", "last line", f"the log {s.why}; no append cuts that, so every append "
                         "(runners' heartbeats and decisions too) is refused until a person does. See it: "
                         f"{command(f'tail -c +{s.start + 1}', [log])} | od -c | head. The command keeps it in "
                         f"{q(kept_tail(log, s.start))}, then cuts the log back to its committed {s.start} bytes "
                         f"(only while it is still {s.size})" + with_batch,
                         cut_tail_cmd(log, s))

    def vanished(self, v: LinesVanished) -> Item:
        """Committed lines that vanished while the log was followed: how many, when, and what is judged now.

        Its "since" is when it was first noticed (the wall clock), not a time the log wrote.
        """
        log = self.facts.name
        more = f"; {v.times} times since {v.first_at}" if v.times > 1 else ""
        return self.item("lines_vanished", log, f"{v.lines} committed lines vanished from the log while it was "
                         f"followed: at {v.last_at} it held {v.after} committed lines, {v.before} before{more}. "
                         "Every verdict now comes from the lines left; was it truncated or replaced by mistake? "
                         "Restore it from a backup. This stays until the server restarts", dir_cmd(log), v.first_at)

    def gaps(self, g: StreamGaps) -> Item:
        """A stream's sequences that hold no message any more: which, what is judged now, and the command that keeps
        what is left (an export)."""
        log = self.facts.name
        stream = log.split("?", 1)[0].rsplit("/", 1)[-1]
        return self.item("lines_vanished", log, f"{g.lines} committed line(s) are gone from the stream ({g.words}, "
                         f"in {g.runs} run(s)): deleted, purged, or dropped by the stream's limits (max_msgs, "
                         "max_bytes or max_age with discard old; appends refuse such a stream). Every verdict now "
                         "comes from the lines left. Keep what is left (the command), lift such limits, and restore "
                         "the lines from an export if there is one (into a new stream: eventlog import-log); this "
                         "stays while the stream lacks them",
                         f"{command('eventlog export', [log])} > {q(stream + '.jsonl')}")

    def not_a_log(self, why: str) -> Item:
        """A file that is no event log: what it is, what a person may do, and the command to look at it.

        The command only looks: whether LOG is the wrong path (the writers need the log's) or a
        file that took the log's place (moved aside, the next append starts a new log) is a
        person's to tell, and a move is only the second's answer.
        """
        log = self.facts.name
        aside = command("mv -n", [log, log + ".not-a-log"])
        return self.item("not_a_log", log, f"the file {why}; no append is taken on it, so every append (runners' "
                         "heartbeats and decisions too) is refused. Is it the wrong file? Give the writers the log's "
                         f"path. Did it take the log's place? Move it aside ({aside}): "
                         "the next append starts a new log", f"{command('head -c 300', [log])} | od -c | head")


def _time(text: str | None) -> datetime | None:
    """A time the log wrote, or None."""
    if text is None:
        return None
    try:
        return parse_time(text)
    except ValueError:
        return None


def unfed_words(u: Unfed, at: datetime) -> str:
    """A guarded job nothing feeds, in words: the views' reason, and every catch-up pass's after the job's label
    (one text for both). Its slot, how long ago it passed, its latest marker, why it may be so, what ends it."""
    latest = f"its latest is from {u.marker.ts}" if u.marker is not None else "it has none at all"
    return (f"nothing feeds its markers: its slot {u.slot:%H:%M} of {today_words(at)} passed "
            f"{duration_words(elapsed_s(at, u.slot))} ago and the log holds no marker of today for it, neither "
            f"skipped nor ran ({latest}); is `eventlog import quota-log` running (eventlog catchup "
            "--import-quota-log)? Or the job did not run today, or it was removed and is to be retired; no skip of "
            "it can be re-run, and any marker of today ends this")


#: How to import a job's markers by hand: the file its guard writes them to is in no line of the log, so no
#: view can put it in a command (it says so in words).
IMPORT_MARKERS_HELP = "eventlog import quota-log --help"


def retire_job_cmd(log: str | LogArg, job: JobRegistered) -> str:
    """The line that retires a job catch-up judges, piped to ``eventlog append LOG``: its ``job_registered``
    again with ``guarded`` false (an unguarded job is never a candidate, nor unfed), its calendar and interval
    kept, its ``ts`` the time it is pasted. An import of its plist registers it anew when it is back."""
    calendar = None if job.calendar is None else [
        {key: value for key, value in msgspec.to_builtins(entry).items() if value is not None}
        for entry in job.calendar]
    return append_cmd(log, {"type": "job_registered", "label": job.label, "guarded": False, "calendar": calendar,
                            "interval_s": job.interval_s})


def rerun_words(b: BadRerun) -> str:
    """What became of a re-run that did not end well, with its lines, in words."""
    r = b.rerun
    kicked = f"catch-up re-ran it at {r.kicked_ts} (line {r.kicked_line})" if r.kicked_ts is not None else \
        "a catch-up re-run (no catchup_kicked before its end)"
    if b.kind == "rerun_no_end":
        deadline = r.deadline()
        return (f"{kicked} and no end was ever written (no catchup_finished), though its timeout "
                f"({duration_words(r.timeout)}), twice its kill grace ({duration_words(2 * r.grace)}) and "
                f"{duration_words(END_MARGIN_S)} more passed by "
                f"{'?' if deadline is None else deadline.isoformat()}: the catch-up that ran it died or could not "
                "stop it, and the job may still run")
    return f"{kicked}: {rerun_end_words(r)}"


def rerun_end_words(r: Rerun) -> str:
    """How a re-run with a ``catchup_finished`` ended, with the line, in words."""
    where = f"at {r.finished_ts} (line {r.finished_line})"
    if r.outcome == "timeout_killed":
        said = "" if r.timeout_s is None else f" ({duration_words(r.timeout_s)})"
        return f"it ran over its timeout{said} and was killed {where}"
    if r.exit is None:
        return f"it ended {where} with no exit status (stopped before it ended, or how it ended is unknown)"
    if r.exit == 127:
        return f"it could not start (exit 127: the kick command or the scheduler refused it) {where}"
    if r.exit < 0:
        return f"it was ended by signal {-r.exit} (exit {r.exit}) {where}"
    return f"it ended with exit {r.exit} {where}"


def needs_human_words(reason: str | None) -> str:
    """Why a handoff was handed to a person, in words (a ``needs_human`` event's own words as written)."""
    if reason == REASON_CONFLICT:
        return ("the handshake found the tree changed by someone else (conflict); nothing was edited. A requeue "
                "alone meets the same conflict: bring the tree back to its saved head and requeue, or settle it "
                "by hand and skip it")
    if reason == REASON_UNKNOWN_EFFECT:
        return "a resume failed and may have had an effect (effect unknown)"
    if reason == REASON_UNCONFIRMED:
        return ("a resume was requested and nothing came back (resume_unconfirmed): it may have taken effect; "
                "a late answer of the same attempt is still taken")
    if reason == REASON_FAILING:
        return (f"its resume failed with effect none {RESUME_FAILING_AFTER} times in a row (resume_failing): "
                "nothing happened outside, and retrying alone does not bring it back; fix what its errors name, "
                "then release it (or skip it)")
    return reason or "no reason given"


def conflict_words(h: Handoff) -> str:
    """What is true after a conflict: the next attempt checks the tree against the same saved head, so it goes
    back only once the tree is where the handoff left it; else a person settles it and skips it."""
    where = f" of {h.repo}" if h.repo else ""
    saved = (f"HEAD at its saved head {h.head}" + (f" on {h.branch}" if h.branch else "") if h.head
             else "HEAD where it was (the handoff saved no head)")
    return (f"the saved head cannot change, so every new attempt meets the same conflict while the tree{where} is "
            f"not as the handoff left it: either bring it back ({saved}, no uncommitted changes; keep the other "
            "change on a branch of its own) and requeue it, or settle the work by hand and skip it with the reason")


def session_code(s: Session) -> str | None:
    """The reason code of a session that waits for a decision, or None."""
    if s.admission_state == RECOVERY_REQUIRED_STATE:
        return _ATTENTION_CODE.get(s.attention or "", "outcome_unknown")
    if s.admission_state != CLOSED and s.attention == CONTEXT_GAP:
        return "context_gap"
    if s.admission_state != CLOSED and s.unknown:  # a turn left unknown while the session moved on
        return "outcome_unknown"
    return None


def session_words(s: Session) -> str:
    """Why a session waits for a decision, in words."""
    left = ", ".join(sorted(s.unknown, key=natural_key))
    if s.admission_state == STOPPED or s.attention == CONTEXT_GAP:
        also = (f"; turn(s) {left} still of unknown outcome (never re-run on their own): abandon or "
                "confirm_completed each" if s.unknown else "")
        return ("stopped, and no checkpoint covers every turn it ran: start_fresh (without that context) or close"
                + also)
    if s.admission_state != RECOVERY_REQUIRED_STATE:
        return (f"{s.admission_state}, but turn(s) {left} ended with outcome unknown and no decision settled them; "
                "never re-run on their own: check what each did outside, then abandon or confirm_completed it")
    if s.attention == RESTORE_FAILED:
        return (f"checkpoint restore failed ({s.reason}), failure {s.failures}: stopped until a decision "
                "(retry_restore once the cause is fixed, start_fresh, or close)")
    if s.attention == STARTUP_FAILED:
        return (f"the worker ended before it was ready ({s.reason}), failure {s.failures}: stopped until a "
                "decision (start_fresh once the cause is fixed, or close)")
    turns = ", ".join(sorted(s.unknown, key=natural_key)) or "none left"
    gone = [t for t in s.unknown if s.gone_after(t)]
    wait = ("the execution is confirmed gone: check what the turn did outside, then abandon or "
            "confirm_completed" if gone else "waiting for the scheduler to confirm the execution gone "
            "(execution_gone) before abandon or confirm_completed")
    return f"turn(s) {turns} ended with outcome unknown ({s.reason}); never re-run on their own; {wait}"


def next_decision(log: str | LogArg, sessions: Sessions, sid: str) -> str:
    """The decide command of the first decision the session would accept now (``close`` last), else explain."""
    s = sessions.sessions[sid]
    accepted = [(d, turn) for d, turn, j in sessions.options(sid) if j.accepted and d != "confirm_completed"]
    accepted.sort(key=lambda dt: dt[0] == "close")
    if accepted and accepted[0][0] != "close":
        decision, turn = accepted[0]
        return decide_cmd(log, sid, decision, s.revision, turn)
    return explain_cmd(log, sid)


# --- the triage -------------------------------------------------------------------------------------


def triage(runner: Runner, as_of: datetime | None, as_of_text: str | None, facts: LogFacts,
           live: bool = False) -> Triage:
    """Everything that needs a person as of ``as_of`` (``as_of_text``: T as written), grouped, with the totals.

    ``as_of`` None: a log with no event judged at its last line (nothing is
    folded then). ``live``: T is the wall clock now, so the times a verdict is
    judged from that lie ahead of it are items too (``dated_ahead``). Every
    group holds all its items, ids in natural order; use
    :meth:`Triage.shown` for the first few of each and :meth:`Triage.only` to
    filter.
    """
    judge = _Judge(runner, as_of, as_of_text, facts, live)
    items: list[Item] = judge.the_log() + judge.dated_ahead()
    h = runner.handoffs
    for hid in h.items:
        items += judge.handoff(hid)
    for account in h.accounts:
        items += judge.account(account)
    for name in h.state.watchers:
        items += judge.watcher(name)
    items += judge.no_watcher()
    items += judge.lanes_late()
    items += judge.lanes_pass()
    items += judge.lanes_unobserved()
    items += judge.lanes()
    items += judge.zone_unknown()
    items += judge.unfed()
    items += judge.reruns()
    items += judge.circuit()
    items += judge.candidates()
    for sid in runner.sessions.sessions:
        items += judge.session(sid)
    by_code: dict[str, list[Item]] = {}
    for it in items:
        by_code.setdefault(it.reason_code, []).append(it)
    groups = []
    for code in sorted(by_code, key=_ORDER.__getitem__):
        r = _BY_CODE[code]
        found = sorted(by_code[code], key=lambda it: natural_key(it.id))
        groups.append(Group(domain=r.domain, reason_code=code, title=r.title, needs_decision=r.decision,
                            count=len(found), items=found, urgency=urgency(code)))
    empty = facts.events == 0 and not facts.bad_lines and not facts.torn_tail
    return Triage(log=facts.name, as_of=as_of_text, empty=empty and not facts.missing, log_missing=facts.missing,
                  needs_person=len(items), groups=groups, totals=totals(runner, judge, groups))


def session_needs(runner: Runner, session_ids: Iterable[str], as_of: datetime | None, as_of_text: str | None,
                  log: LogArg, live: bool = False) -> dict[str, list[Item]]:
    """The items :func:`triage` has about each of ``session_ids`` that needs a person as of ``as_of``, by the same
    rule (a decision to make, a retry due and nothing moved, no worker at work, an interrupt of a turn whose end the
    log never recorded; ``live``, T the wall clock now: a line of the session dated ahead of it that a check waits
    on, ``dated_ahead``); sessions that need nobody are left out. ``eventlog sessions`` shows them and exits 1 on
    them, as ``status``."""
    judge = _Judge(runner, as_of, as_of_text, LogFacts(name=log.name, assume_tz=log.assume_tz), live)
    return {sid: items for sid in session_ids
            if (items := judge.session(sid) + [judge.ahead_item(a) for a in judge.ahead_of("session", sid)])}


def totals(runner: Runner, judge: _Judge, groups: list[Group]) -> Totals:
    """The totals of each domain present in the log."""
    count = {g.reason_code: g.count for g in groups}
    out = Totals(log=LogTotals(events=judge.facts.events, bad_lines=len(judge.facts.bad_lines),
                               rejected=len(runner.rejected), torn_tail=judge.facts.torn_tail,
                               unfinished_batch=0 if judge.facts.unfinished is None else judge.facts.unfinished.lines,
                               torn_line=judge.facts.torn_line, torn_tail_stuck=judge.facts.stuck_tail is not None,
                               not_a_log=judge.facts.not_a_log is not None,
                               dated_ahead=len(judge.ahead()) if judge.live else None,
                               lines_vanished=judge.facts.lines_vanished))
    h = runner.handoffs
    if h.items or h.accounts:
        by_state: dict[str, int] = {}
        skips: dict[str, int] = {}
        started = 0
        oldest: int | None = None
        for item in h.items.values():
            by_state[item.state] = by_state.get(item.state, 0) + 1
            started += item.local_started
            if item.state == SKIPPED:
                skips[item.reason or ""] = skips.get(item.reason or "", 0) + 1
            if item.state == PENDING:
                created = micros(item.created_at)
                if oldest is None or created < oldest:
                    oldest = created
        ret = summary(h.state.latency.created_to_returned)
        age = None
        if oldest is not None and judge.known:
            age = num(round(elapsed_s(judge.at, datetime.fromtimestamp(oldest / 1_000_000, UTC)), 3))
        out.handoffs = HandoffTotals(
            total=len(h.items), failover_started=started, returned=by_state.get(RETURNED, 0),
            pending=by_state.get(PENDING, 0), oldest_pending_age_s=age, live_claims=h.live,
            needs_human=by_state.get(NEEDS_HUMAN, 0), skipped=by_state.get(SKIPPED, 0),
            skip_reasons=dict(sorted(skips.items(), key=lambda kv: (-kv[1], natural_key(kv[0])))),
            stale=count.get("stale_unknown_effect", 0) + count.get("stale_retryable", 0),
            deadline_passed=count.get("deadline_passed", 0), return_p50_s=ret["p50"], return_p95_s=ret["p95"],
            accounts=len(h.accounts))
    beats = h.state.watchers
    if beats:
        out.watchers = WatcherTotals(watchers=len(beats), late=count.get("watcher_late", 0),
                                     error=count.get("watcher_error", 0), last_run=h.state.watcher_text,
                                     retired=sum(beat.retired for beat in beats.values()))
    lanes = runner.lanes
    if lanes.lanes or lanes.last_pass is not None:
        results = lanes.judge(judge.at, judge.text)["results"]
        reasons = [r.get("reason") for r in results if not r["stalled"]]
        last = lanes.last_pass
        out.lanes = LaneTotals(products=len(results), stalled=sum(r["stalled"] for r in results),
                               moving=reasons.count("moving"), stopped=reasons.count("stopped-on-purpose"),
                               idle=reasons.count("lane-idle"), last_pass=None if last is None else last.ts,
                               last_pass_exit=lanes.pass_exit(judge.at),
                               late=bool(count.get("lanes_late")))
    c = runner.catchup
    if c.jobs or c.markers or c.state.open_until is not None or c.state.reruns:
        is_open = c.circuit_open(judge.at)
        out.catchup = CatchupTotals(jobs=len(c.jobs), guarded=sum(j.guarded for j in c.jobs.values()),
                                    candidates=count.get("candidate", 0), circuit="open" if is_open else "closed",
                                    open_until=c.state.open_until if is_open else None,
                                    reruns_failed=count.get("rerun_failed", 0),
                                    reruns_no_end=count.get("rerun_no_end", 0), unfed=count.get("unfed", 0))
    sessions = runner.sessions
    if sessions.sessions:
        states: dict[str, int] = {}
        for s in sessions.sessions.values():
            states[s.admission_state] = states.get(s.admission_state, 0) + 1
        waiting = sum(count.get(code, 0) for code in ("restore_failed", "startup_failed", "outcome_unknown",
                                                       "context_gap"))
        out.sessions = SessionTotals(
            sessions=len(sessions.sessions), admitted=states.get("admitted", 0), backoff=states.get(BACKOFF, 0),
            recovery_required=states.get(RECOVERY_REQUIRED_STATE, 0), stopped=states.get(STOPPED, 0),
            closed=states.get(CLOSED, 0), waiting_decision=waiting, retry_due=count.get("retry_due", 0),
            decisions=len(sessions.receipts), without_worker=sum(count.get(code, 0) for code in WORKER_WAITS))
    return out


# --- explain: a verdict for any id ------------------------------------------------------------------



class Verdict(msgspec.Struct, kw_only=True):
    """What one id is in one domain as of T: a word, plain words, since when, and what to type next.

    ``code`` is a short machine word (a state, a plan reason, a lane verdict,
    ``candidate``/``not_candidate``...), ``says`` the verdict for a person,
    ``needs_person`` the triage items of this id (the same as ``status``),
    ``next`` the commands to copy (may be empty: nothing to do), ``facts`` the
    domain's own record of it (the dump's item, the plan, the lane record, the
    session with the decisions it would accept).
    """

    kind: Kind
    id: str
    code: str
    says: str
    since: str | None = None
    for_s: int | float | None = None
    until: str | None = None
    needs_person: list[Item] = []
    next: list[str] = []
    facts: dict[str, Any] = {}


def explain(runner: Runner, ident: str, as_of: datetime | None, as_of_text: str | None,
            facts: LogFacts, live: bool = False) -> list[Verdict]:
    """The verdict of ``ident`` as of T in every domain that knows it (empty: no domain knows it); ``live``: as
    :func:`triage`'s."""
    judge = _Judge(runner, as_of, as_of_text, facts, live)
    out: list[Verdict] = []
    h = runner.handoffs
    if ident in h.items:
        out.append(_handoff_verdict(judge, ident))
    if ident in h.accounts:
        out.append(_account_verdict(judge, ident))
    if ident in h.state.watchers or ident in h.state.claims_by:
        out.append(_watcher_verdict(judge, ident))
    if ident in runner.lanes.lanes:
        out.append(_lane_verdict(judge, ident))
    c = runner.catchup
    if ident in c.jobs or ident in c.markers or ident in c.state.reruns:
        out.append(_catchup_verdict(judge, ident))
    if ident in runner.sessions.sessions:
        out.append(_session_verdict(judge, ident))
    control = runner.sessions.state.controls.get(ident)
    if control is not None:
        out.append(_interrupt_verdict(judge.log, ident, control))
    return out


#: The field of an event that names an id of each kind.
KIND_OF_FIELD: dict[str, Kind] = {"handoff_id": "handoff", "account": "account", "watcher": "watcher",
                                  "product": "lane", "label": "catchup", "session_id": "session",
                                  "turn_id": "turn", "target_turn_id": "turn", "covers_turn": "turn",
                                  "control_id": "interrupt"}


def turn_verdict(log: str | LogArg, session_id: str, turn_id: str, turn: dict[str, Any],
                 session: Session | None) -> Verdict:
    """A session's turn (``turn``: :class:`projections.turns.Turn` as a plain object, folded from the applied lines
    that name it): what happened to it in line order (:func:`~projections.turns.turn_words`), whether its outcome
    is still unknown (the session waits for a decision), and ``eventlog sessions LOG SESSION`` to look further."""
    unknown = session is not None and turn_id in session.unknown
    again = turn["last_started_line"] is not None and turn["last_started_line"] != turn["started_line"]
    running = turn["last_started_line"] is not None and (
        turn["finished_line"] is None or turn["finished_line"] < turn["last_started_line"])
    says = f"in session {session_id}: {turn_words(turn)}"
    if unknown:
        says += "; its outcome is still unknown: never re-run on its own, the session waits for a decision"
    code = ("outcome_unknown" if unknown else "started_again" if again and running else "running" if running
            else turn["resolution"] or turn["outcome"] or "named")
    facts = {"session_id": session_id, **turn, "unknown": unknown,
             "session_state": session.admission_state if session is not None else None}
    return Verdict(kind="turn", id=turn_id, code=code, says=says, since=None,
                   next=[sessions_cmd(log, session_id)], facts=facts)


def _interrupt_verdict(log: str | LogArg, control_id: str, c: Control) -> Verdict:
    """An interrupt (a control of the interrupt timeline): its verdict, its turn and session, and its timeline."""
    t = timeline(c)
    says = (f"in session {c.session_id}, turn {c.turn_id}: {t['verdict'] or 'no verdict yet'}"
            + (f"; outcome {t['outcome']}" if t["outcome"] is not None else "; no result yet"))
    return Verdict(kind="interrupt", id=control_id, code=t["verdict"] or "in_progress", says=says,
                   next=[sessions_cmd(log, c.session_id)], facts={"interrupts": {control_id: t}})


def not_applied(kind: Kind, ident: str, lines: int, rejected: int) -> Verdict:
    """The verdict of an id some lines name but no domain holds: none of those lines was applied."""
    why = (f"all {lines} line(s) naming it were rejected" if rejected == lines
           else f"{lines} line(s) name it, {rejected} of them rejected, and none made it a {kind} of this log")
    return Verdict(kind=kind, id=ident, code="not_applied", says=f"no {kind} {ident!r} in the log's state: {why} "
                   "(see each line's reason)", facts={"lines": lines, "rejected": rejected})


def _verdict(judge: _Judge, kind: Kind, ident: str, code: str, says: str, items: list[Item],
             since: str | None = None, until: str | None = None, next_cmds: list[str] | None = None,
             facts: dict[str, Any] | None = None) -> Verdict:
    since_text, for_s = judge.since(since)
    ahead = judge.ahead_of(kind, ident)
    zone = judge.zone_unknown() if kind == "catchup" else []
    items = zone + items + [judge.ahead_item(a) for a in ahead]
    says += "".join(f"; but {ahead_words(a)}" for a in ahead) + "".join(f"; but {it.reason}" for it in zone)
    cmds = list(next_cmds or [])
    for it in items:
        if it.next not in cmds and not it.next.startswith("eventlog explain "):
            cmds.insert(0, it.next)
    return Verdict(kind=kind, id=ident, code=code, says=says, since=since_text, for_s=for_s, until=until,
                   needs_person=items, next=cmds, facts=facts or {})


def _handoff_verdict(judge: _Judge, hid: str) -> Verdict:
    h = judge.runner.handoffs.items[hid]
    stale = judge.runner.handoffs.stale(hid, judge.at)
    revision = judge.runner.revisions["handoff_id"].get(hid, 0)
    log = judge.log
    facts = {"state": h.state, "account": h.account, "attempt": h.attempt, "watcher": h.watcher,
             "reason": h.reason, "stale": stale, "local_started": h.local_started, "revision": revision,
             "failing_in_a_row": h.failing, "deadline": h.deadline_ts}
    says = {
        PENDING: "pending: waits for a watcher to claim it when its account is due",
        "claimed": f"claimed by {h.watcher} (attempt {h.attempt}); no resume request yet",
        "resume_requested": f"resume requested (attempt {h.attempt} by {h.watcher}); waits for the handshake",
        RETURNED: "returned: the handshake verified it back in the cloud",
        NEEDS_HUMAN: f"handed to a person: {needs_human_words(h.reason)}",
        SKIPPED: f"skipped: {h.reason}",
    }[h.state]
    if stale == "unknown_effect":
        says += "; stale: silent since, effect unknown, never retried on its own"
    elif stale == "retryable":
        says += "; stale: safe to release and retry"
    if h.failing and h.state in LIVE | {PENDING}:
        says += (f"; its last {h.failing} resume attempt(s) failed with effect none (after {RESUME_FAILING_AFTER} "
                 "in a row the watcher hands it to a person)")
    cmds: list[str] = []
    if h.state == NEEDS_HUMAN and h.reason == REASON_FAILING:
        cmds = [handoff_cmd(log, "release", hid, "<what was fixed>"),
                handoff_cmd(log, "skip", hid, "<why it is closed>")]
    elif h.state == NEEDS_HUMAN and h.reason == REASON_CONFLICT:
        says += "; " + conflict_words(h)
        cmds = [handoff_cmd(log, "requeue", hid, "<the tree is back at the saved head: how>"),
                handoff_cmd(log, "skip", hid, "<settled by hand: how>")]
    elif h.state == NEEDS_HUMAN:
        cmds = [handoff_cmd(log, "requeue", hid, "<why it may go back>"),
                handoff_cmd(log, "skip", hid, "<why it is closed>")]
    elif stale == "unknown_effect":
        cmds = [handoff_cmd(log, "requeue", hid, "<checked: nothing happened outside>"),
                handoff_cmd(log, "skip", hid, "<why it is closed>")]
    elif h.state == PENDING:
        order = judge.runner.handoffs.claim_order()
        facts["claim_position"] = order.index(hid) + 1
        says += f" (number {order.index(hid) + 1} of {len(order)} in claim order)"
    if h.state in OPEN and judge.past_deadline(h):
        says += (f"; its deadline {h.deadline_ts} passed {judge.ago(h.deadline_ts)} ago: nothing ends it on a timer; "
                 "if it will not be done, skip it with the reason")
        if h.state != NEEDS_HUMAN and stale != "unknown_effect":  # those already offer skip
            cmds.append(handoff_cmd(log, "skip", hid, "<why it will not be done>"))
    return _verdict(judge, "handoff", hid, h.state, says, judge.handoff(hid), h.last_ts, next_cmds=cmds, facts=facts)


def _account_verdict(judge: _Judge, name: str) -> Verdict:
    handoffs = judge.runner.handoffs
    acc = handoffs.accounts[name]
    plan = handoffs.plan(name, judge.at, judge.text)
    limit = (f"its latest limit resets at {acc.reset_text} ({acc.confidence})" if acc.confidence is not None
             and acc.reset_text is not None else f"its latest limit has no reset time ({acc.confidence})"
             if acc.confidence is not None else "no limit recorded")
    probe = (f"latest probe {acc.last_outcome} at {acc.last_probe_ts}" if acc.last_outcome is not None
             else "never probed")
    why = {
        "nothing_pending": "no pending handoff of this account: no probe (a probe would only spend quota)",
        "waiting_reset": f"waits for its reset at {plan['next_probe_at']}: no probe before",
        "needs_person": "its latest probe was refused (auth_error): not probed until a person fixes the login "
                        "and probes it by hand",
        "backoff_transient": f"backing off after {acc.run} transient probe error(s) in a row: next probe at "
                             f"{plan['next_probe_at']}",
        "backoff_unexpected": f"backing off after {acc.run} probe error(s) in a row, the latest an answer nobody "
                              f"could read (unexpected): next probe at {plan['next_probe_at']}",
        "backoff_estimate": f"the estimated reset proved wrong ({acc.run} quota_limited probe(s) since): next "
                            f"probe at {plan['next_probe_at']}",
        "due": "probe now: work is pending and no known reset or backoff holds it",
    }[plan["reason"]]
    says = f"{why}; {limit}; {probe}; {acc.pending} handoff(s) pending"
    since = handoffs.failing_since(name, judge.at)
    if since is not None:  # RecoveryAccountBackingOff pages on this after 6 h
        says += f"; its probes have failed since {since} ({duration_words(elapsed_s(judge.at, parse_time(since)))})"
    if acc.last_outcome == "auth_error":
        says += "; the latest probe was refused (auth_error): the login needs a person"
    facts = {"plan": plan, "pending": acc.pending, "limit": {"reset_at": acc.reset_text, "confidence":
             acc.confidence}, "last_probe": {"outcome": acc.last_outcome, "ts": acc.last_probe_ts},
             "run": {"kind": acc.run_kind, "probes": acc.run, "latest": acc.run_ts, "failing_since": since}}
    until = plan["next_probe_at"] if not plan["probe"] else None
    cmds = []
    for a in judge.ahead_of("account", name):
        if a.check == "limit_reset" and judge.text is not None:  # the correction: no known reset, probe now
            cmds.append(append_cmd(judge.log, {
                "type": "limit_recorded", "account": name, "limited_at": judge.text, "reset_at": None,
                "source": f"corrected by hand: reset_at {a.ts} (line {a.line}) lay "
                          f"{duration_words(a.ahead_s)} ahead", "confidence": "unknown"}))
    return _verdict(judge, "account", name, plan["reason"], says, judge.account(name), since or acc.last_probe_ts,
                    until=until, next_cmds=cmds, facts=facts)


def _watcher_verdict(judge: _Judge, name: str) -> Verdict:
    state = judge.runner.handoffs.state
    claims = state.claims_by.get(name, 0)
    beat = state.watchers.get(name)
    if beat is None:
        return _verdict(judge, "watcher", name, "no_heartbeat", f"it made {claims} claim(s) but wrote no "
                        "heartbeat (watcher_run): whether it still runs cannot be judged", [],
                        facts={"name": name, "claims": claims, "last_run": None})
    if beat.retired:
        return _verdict(judge, "watcher", name, "retired", f"retired at {beat.ts} ({beat.detail or 'no reason'}): "
                        "no longer judged late or in error; a pass under this name brings it back", [], beat.ts,
                        facts=beat.item(judge.at) | {"name": name, "claims": claims, "retired": True})
    late = beat.late(judge.at)
    says = (f"last run {beat.ts}, exit {beat.exit}, every "
            f"{duration_words(beat.period_s)}: " + ("late (more than twice its period)" if late else "on time"))
    if beat.exit == "error":
        says += f"; that pass ended in error: {beat.detail or 'no detail given'}"
    code = "late" if late else beat.exit
    handoffs = judge.runner.handoffs
    cmds = [failback_cmd(judge.log, name, beat.period_s, handoffs.stale_after_s)] if late or beat.exit == "error" \
        else []
    if late:  # or it stopped for good (a renamed host, a one-off pass): a person says so
        says += "; if it stopped for good (a renamed host, a one-off pass), retire it"
        cmds.append(retire_cmd(judge.log, name))
    return _verdict(judge, "watcher", name, code, says, judge.watcher(name), beat.ts, next_cmds=cmds,
                    facts=beat.item(judge.at) | {"name": name, "claims": claims})


def _lane_verdict(judge: _Judge, product: str) -> Verdict:
    """A lane's verdict; when the last lanes pass could not observe it, or while the lanes pass is late, that too
    (what it says may be as of what was last read)."""
    verdict = _lane_said(judge, product)
    items = judge.lanes_unobserved()
    unseen = [it for it in items if it.id == product]
    if unseen:
        stop = lane_stop_cmd(judge.log, product, judge.text or unseen[0].since or "")
        # the lanes directory it could not be observed through: its own item's listing first, as status gives it
        shown = [it.next for it in items if it.id not in judge.runner.lanes.lanes and it.next != LANES_HELP
                 and any(f"lanes directory {' '.join(it.id.split())}{end}" in unseen[0].reason
                         for end in (": ", " holds no "))]
        verdict = _but(verdict, f"{unseen[0].reason}. Next: fix what it names (put its NAME.env back in the lanes "
                       "directory, its files where that file says), and the next pass observes it; if the lane is "
                       "retired, record its stop instead (the command below), then nothing is judged or sent for it",
                       unseen, [*shown, stop])
    late = judge.lanes_late()
    return _but(verdict, late[0].reason, late, [it.next for it in late]) if late else verdict


def _but(verdict: Verdict, why: str, items: list[Item], cmds: list[str]) -> Verdict:
    """``verdict``, but ``why`` too: its items first, its commands after those already listed."""
    return msgspec.structs.replace(verdict, says=f"{verdict.says}; but {why}",
                                   needs_person=items + verdict.needs_person,
                                   next=[*verdict.next, *(cmd for cmd in cmds if cmd not in verdict.next)])


def _lane_said(judge: _Judge, product: str) -> Verdict:
    lanes = judge.runner.lanes
    record = next(r for r in lanes.judge(judge.at, judge.text)["results"] if r["product"] == product)
    lane = lanes.lanes[product]
    if record["stalled"]:
        kind = record.get("kind", "")
        items = [it for it in judge.lanes() if it.id == product]
        says = f"stalled ({kind}): {items[0].reason}" if items else f"stalled ({kind})"
        code = kind
        since: str | None = record.get("finished_at") or record.get("updated_at")
        resume = lanes.covering(product, kind)
        facts: dict[str, Any] = {"record": record, "resume": None if resume is None else msgspec.to_builtins(resume)}
        if resume is not None:
            ends = ("a commit after the finished job" if kind == JOB_UNPICKED else "a progress update")
            says += (f", {judge.ago(resume.ts)} ago: the lanes runner sends no second one for this stall. Next: look "
                     f"at that task (its branch in the product's repository, or your queue); {ends} ends the stall "
                     "once eventlog observe lane records it. If the task went nowhere, send another by hand with "
                     f"your enqueue command ({product} {kind} as its last two arguments)")
            cmds: list[str] = []
        elif (cut := lanes.open_send(product, kind)) is not None and cut.under_way(judge.at):
            says += (". Next: nothing yet: its resume_enqueued covers the stall once the send went; if none is "
                     "written by then, the send was cut short and this says what to type")
            facts["sending"] = msgspec.to_builtins(cut)
            cmds = []
        elif cut is not None:
            says += (". Next: find out whether that resume arrived (your queue, or the task branch in the product's "
                     "repository). If it did, record it (the first command); if not, send it (the second, with your "
                     "enqueue command); until then no lanes pass sends it")
            facts["cut_short"] = msgspec.to_builtins(cut)
            cmds = cut_short_cmds(judge.log, product, kind)
        else:
            last = lanes.last_pass
            if last is not None and judge.pass_kept(product, kind) is not None and product not in lanes.unobserved():
                says += f": {'; '.join(last.general_said()) or 'no detail given'}"
            says += "; " + lanes_words(lanes.unpicked_minutes * 60, lanes.quiet_hours * 3600)
            cmds = [LANES_HELP]
        return _verdict(judge, "lane", product, code, says, items, since, next_cmds=cmds, facts=facts)
    reason = record.get("reason", "")
    if reason == "stopped-on-purpose":
        says = "not stalled: stopped on purpose (lane_stopped); nothing is sent to a stopped lane"
    elif reason == "lane-idle":
        says = "not stalled: its last status says idle"
    else:
        parts = []
        if lane.updated_ts is not None:
            parts.append(f"progress updated {judge.ago(lane.updated_ts)} ago (quiet after "
                         f"{duration_words(lanes.quiet_hours * 3600)})")
        else:
            parts.append("no progress status yet (never quiet)")
        if lane.finished_ts is not None:
            picked = lane.commit_at is not None and elapsed_s(lane.commit_at, parse_time(lane.finished_ts)) > 0
            parts.append(f"its last job finished {judge.ago(lane.finished_ts)} ago and "
                         + ("was picked up (a commit came after)" if picked else
                            f"is not unpicked yet (after {duration_words(lanes.unpicked_minutes * 60)})"))
        else:
            parts.append("no finished job waits")
        says = "not stalled: moving; " + "; ".join(parts)
    return _verdict(judge, "lane", product, reason, says, [], lane.updated_ts, facts={"record": record})


def _catchup_verdict(judge: _Judge, label: str) -> Verdict:
    c = judge.runner.catchup
    job, marker = c.jobs.get(label), c.markers.get(label)
    failed = why_not(job, marker, judge.at)
    is_open = c.circuit_open(judge.at)
    rerun = c.state.reruns.get(label)
    facts: dict[str, Any] = {
        "registered": job is not None, "guarded": job.guarded if job is not None else None,
        "marker": None if marker is None else {"skipped": marker.skipped, "ts": marker.ts, "kicked_at":
                                               marker.kicked_ts},
        "circuit": "open" if is_open else "closed", "open_until": c.state.open_until if is_open else None,
        "rerun": None if rerun is None else msgspec.to_builtins(rerun),
    }
    unfed = judge.unfed(label)
    facts["unfed"] = unfed[0].reason if unfed else None
    # a kick dated ahead holds its missing end back: the line that records it, once the job no longer runs
    ended = [rerun_end_cmd(judge.log, label) for a in judge.ahead_of("catchup", label) if a.check == "rerun_no_end"]
    # only a registered job is unfed: what it says, and its commands
    fed = None if not unfed or job is None else _unfed_said(judge.log, unfed[0], job)
    bad = [b for b in c.bad_reruns(judge.at) if b.label == label]
    if bad:
        return _bad_rerun_verdict(judge, bad[0], facts | {"why_not": failed}, unfed, fed)
    if fed is not None:
        facts["why_not"] = failed
        says = f"{fed[0]}; not a candidate, because " + "; and ".join(failed)
        return _verdict(judge, "catchup", label, "unfed", says, unfed, unfed[0].since, next_cmds=[*fed[1], *ended],
                        facts=facts)
    if not failed:
        code, says = "candidate", f"candidate: guarded, skipped {today_words(judge.at)}, and a slot of today has passed"
        if is_open:
            says += f"; but the circuit is open until {c.state.open_until}: nothing is re-run before"
        cmds = [catchup_cmd(judge.log)]
        since = marker.ts if marker is not None else None
    else:
        code, says, cmds, since = "not_candidate", "not a candidate, because " + "; and ".join(failed), [], None
        if marker is not None and marker.kicked and skipped_today(marker, judge.at):
            code, since = "kicked", marker.kicked_ts
            rest = [why for why in failed if not why.startswith("catch-up already re-ran")]
            says = f"kicked at {marker.kicked_ts}: catch-up re-ran it after today's skip" + (
                "; and it would not be a candidate anyway, because " + "; and ".join(rest) if rest else "")
        if rerun is not None and not rerun.ended:
            deadline = rerun.deadline()
            says += (f"; its re-run (kicked at {rerun.kicked_ts}, line {rerun.kicked_line}) has no end written yet: "
                     "it may still run" + ("" if deadline is None else
                                           f" (if none is written by {deadline.isoformat()}, that is named)"))
        if is_open:
            says += f"; the circuit is open until {c.state.open_until}"
    facts["why_not"] = failed
    return _verdict(judge, "catchup", label, code, says, [it for it in judge.candidates() if it.id == label],
                    since, until=c.state.open_until if is_open else None, next_cmds=[*cmds, *ended], facts=facts)


def _unfed_said(log: str | LogArg, item: Item, job: JobRegistered) -> tuple[str, list[str]]:
    """What ``explain`` says of a job nothing feeds (``item``: its ``unfed`` item), and its commands: how to import
    its markers, and the line that retires it."""
    says = (f"{item.reason} (named {duration_words(UNFED_AFTER_S)} after its first slot of today, of "
            "those not earlier than its registration); the shipped catch-up units import the markers before "
            "each pass (catchup --import-quota-log, docs/OPERATIONS.md): look at that pass's output; by hand, "
            "run eventlog import quota-log on this log with the file the job's guard writes its markers to (the "
            "job's stderr: its plist's StandardErrorPath, its unit's StandardError=); if the job was removed "
            "(no plist holds it any more: import launchd names it), retire it so that catch-up stops judging "
            "it: the last command below appends its registration with guarded false (an import of its plist "
            "registers it again)")
    return says, [IMPORT_MARKERS_HELP, retire_job_cmd(log, job)]


def _bad_rerun_verdict(judge: _Judge, b: BadRerun, facts: dict[str, Any], more: list[Item],
                       fed: tuple[str, list[str]] | None = None) -> Verdict:
    """A job whose catch-up re-run ended badly or never reported its end: what happened, and how to run it by hand
    where it runs (:func:`by_hand_cmds`; in words when the catch-up ran a kick command, or how is not written);
    ``more``: the label's other items; ``fed``: when nothing feeds it too, what :func:`_unfed_said` says of that,
    and its commands (after the re-run's: a run by hand is seen only once its marker reaches the log)."""
    label, r = b.label, b.rerun
    cmds = by_hand_cmds(label, r)
    if cmds is not None:
        run, check = f"re-run it by hand once you know why: {cmds.run}", f" ({cmds.check})"
    else:
        kick = f"its --kick-cmd, that command with {q(label)} as its last argument"
        run = "re-run it by hand once you know why, the way the catch-up does: " + (
            kick if r.kicked_by == "kick_cmd" else
            f"its catchup_kicked does not say how it kicked (an older line): with {kick}; with its --scheduler, "
            "through that scheduler")
        check = " (where the catch-up runs it)"
    by_hand = (f"{run}; this clears once the job runs again (a job_ran or job_skipped marker, or a catch-up re-run "
               "that exits 0)")
    next_cmds = [] if cmds is None else [cmds.run]
    if b.kind == "rerun_no_end":
        by_hand = (f"first make sure it no longer runs{check}, then record that it ended "
                   f"({rerun_end_cmd(judge.log, label)}): until then no catch-up of a --kick-cmd kicks anything "
                   "(re-runs never overlap); then " + by_hand)
        next_cmds = [*([] if cmds is None else [cmds.check]), rerun_end_cmd(judge.log, label), *next_cmds]
    since = r.kicked_ts if b.kind == "rerun_no_end" else r.finished_ts
    says = f"{rerun_words(b)}; {by_hand}"
    if fed is not None:
        says += (f". And {fed[0]}: until its markers reach the log, a run by hand clears neither (nothing shows "
                 "that it ran)")
        next_cmds = [*next_cmds, *fed[1]]
    return _verdict(judge, "catchup", label, b.kind, says, [judge.rerun(b), *more], since, next_cmds=next_cmds,
                    facts=facts)


def _session_verdict(judge: _Judge, sid: str) -> Verdict:
    sessions = judge.runner.sessions
    s = sessions.sessions[sid]
    d = describe(sessions, sid, judge.at if judge.known else None)
    state = s.admission_state + (f" ({s.attention})" if s.attention else "")
    if session_code(s) is not None:
        says = f"{state}: {session_words(s)}"
    elif s.admission_state == BACKOFF:
        due = "due now" if d["retry_due"] else "not yet"
        says = f"{state}: failure {s.failures} ({s.reason}); retries at {s.retry_at} ({due})"
        if d["retry_claimed"] is not None:
            says += f"; {claim_words(d['retry_claimed'])}"
    elif s.admission_state == STOPPED:
        says = f"{state}: resumable; a new worker's claim and ready resume it"
    elif s.admission_state == CLOSED:
        says = "closed: final, it admits nothing"
    elif d["worker_wait"] is None:
        says = f"{state}: admitted, takes work"
    else:
        says = f"{state}: admitted, no worker at work"
    if d["worker_wait"] is not None:
        says += f"; {worker_wait_words(d['worker_wait'])}"
    if d["fenced"]:
        says += f"; new work refused: {d['fenced']}"
    cmds = accept_cmds(judge.log, sid, d["would_accept"])
    d["interrupts"] = {cid: timeline(c) for cid, c in sorted(sessions.state.controls.items())
                       if c.session_id == sid}
    return _verdict(judge, "session", sid, s.admission_state, says, judge.session(sid), s.since,
                    until=s.retry_at if s.admission_state == BACKOFF else None, next_cmds=cmds, facts=d)


__all__ = [
    "DOMAINS", "KIND_OF_FIELD", "REASONS", "SHOWN", "UNREAD", "URGENCY", "BadLineFact", "Domain", "Group", "Item",
    "Kind", "LinesVanished", "LogArg", "LogFacts", "Reason", "Totals", "Triage", "UnfinishedBatch", "Verdict",
    "accept_cmds", "dir_cmd", "duration_option", "duration_words", "explain", "for_words", "natural_key",
    "not_applied", "retire_job_cmd", "session_needs", "status_cmd", "triage", "turn_verdict", "unfed_words",
    "urgency", "urgent_first",
]
