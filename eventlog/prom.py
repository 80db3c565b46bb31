"""The dump in the Prometheus text exposition format (node_exporter's textfile collector).

Named and typed by the Prometheus conventions: what only grows is a ``counter``
named ``*_total``; durations are a ``histogram`` in ``*_seconds``; times are
``*_timestamp_seconds`` gauges (seconds since the epoch); every label set is
fixed by the code's own word lists, so no series comes and goes as a verdict
changes (a closed set is always listed in full, 0 or 1). Every family carries
the ``log`` label, and ``assume_tz`` when the log was read with ``--assume-tz``
(so the commands an alert prints read it so too). docs/METRICS.md is the
reference, with an alert for each.

:func:`exposition` renders one dump; what a dump does not hold (the latency
samples, the last event's time, ``follow``'s tick, a torn tail no append cuts,
an unfinished batch, a file that is no event log, the times a verdict is judged
from that lie ahead of now, the catch-up re-runs that did not end well, the guarded jobs nothing feeds) is passed
beside it, and :func:`of_replay` takes those from a replay. The interrupt timeline's two families are built in
``eventlog.prom_controls``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from eventlog.clock import local_zone_name, zone_name
from eventlog.events import PROBE_OUTCOMES
from eventlog.logs import no_event_log
from eventlog.prom_controls import control_families
from eventlog.replay import Replay
from eventlog.views import zone_unknown as unknown_zone
from projections.ahead import CHECKS, Ahead, dated_ahead
from projections.handoffs import (
    PLAN_REASONS,
    REASON_CONFLICT,
    REASON_FAILING,
    REASON_UNCONFIRMED,
    REASON_UNKNOWN_EFFECT,
    STATES,
)
from projections.lanes import KINDS, Heartbeat
from projections.runner import Runner
from projections.sessions import WORKER_WAITS, Admission, Attention

#: Upper bounds of the handoff latency buckets, in seconds: 1 s to a week.
LATENCY_BUCKETS_S: tuple[float, ...] = (
    1, 5, 15, 30, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 172800, 604800,
)
#: The ``reason`` label of ``recovery_handoff_needs_human``: the four the project gives, anything else ``other``.
NEEDS_HUMAN_REASONS: tuple[str, ...] = (REASON_CONFLICT, REASON_UNKNOWN_EFFECT, REASON_UNCONFIRMED, REASON_FAILING,
                                        "other")
ADMISSIONS: tuple[str, ...] = Admission.__args__  # type: ignore[attr-defined]
#: The ``attention`` label: each word, and "" for none.
ATTENTIONS: tuple[str, ...] = ("", *Attention.__args__)  # type: ignore[attr-defined]
#: A catch-up re-run's reason code (``projections.catchup.RerunKind``) -> its ``kind`` label
#: (``recovery_catchup_reruns``).
RERUN_KINDS: dict[str, str] = {"rerun_failed": "failed", "rerun_no_end": "no_end"}
LATENCY_PAIRS: tuple[str, ...] = ("created_to_returned", "claimed_to_requested", "requested_to_verified")

Labels = dict[str, str]
Samples = Sequence[tuple[Labels, float]]


class _Text:
    """The exposition being written: one family at a time, HELP and TYPE first; every sample labelled with ``log``,
    and ``assume_tz`` when given."""

    def __init__(self, log: str, assume_tz: str | None = None) -> None:
        self.log: Labels = {"log": log, **({"assume_tz": assume_tz} if assume_tz else {})}
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_: str) -> None:
        self.lines.append(f"# HELP {name} {help_}")
        self.lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, labels: Labels, value: float) -> None:
        self.lines.append(f"{name}{_labels({**self.log, **labels})} {_value(value)}")

    def gauge(self, name: str, help_: str, samples: Samples) -> None:
        self.family(name, "gauge", help_)
        for labels, value in samples:
            self.sample(name, labels, value)

    def counter(self, name: str, help_: str, samples: Samples) -> None:
        assert name.endswith("_total"), name
        self.family(name, "counter", help_)
        for labels, value in samples:
            self.sample(name, labels, value)

    def histogram(self, name: str, help_: str, series: Sequence[tuple[Labels, Sequence[float]]]) -> None:
        self.family(name, "histogram", help_)
        for labels, values in series:
            ordered = sorted(values)
            for bound in LATENCY_BUCKETS_S:
                self.sample(f"{name}_bucket", {**labels, "le": _value(bound)}, bisect_right(ordered, bound))
            self.sample(f"{name}_bucket", {**labels, "le": "+Inf"}, len(ordered))
            self.sample(f"{name}_sum", labels, sum(ordered))
            self.sample(f"{name}_count", labels, len(ordered))


def exposition(
    dump: dict[str, Any],
    *,
    durations: Mapping[str, Sequence[float]] | None = None,
    last_event_at: datetime | None = None,
    tick_s: float | None = None,
    unrecorded: int | None = None,
    retry_under_way: int | None = None,
    without_worker: Mapping[str, int] | None = None,
    decision_wait_s: float | None = None,
    torn_tail_stuck: bool | None = None,
    unfinished_batch: int | None = None,
    not_a_log: bool | None = None,
    ahead: Sequence[Ahead] | None = None,
    reruns: Mapping[str, int] | None = None,
    unfed: int | None = None,
    zone_unknown: bool | None = None,
    lanes_error: bool | None = None,
    lanes_unobserved: int | None = None,
    lanes_beat: Heartbeat | None = None,
    lanes_late: bool | None = None,
    deadline_passed: int | None = None,
    retired: Collection[str] = (),
    no_watcher: bool | None = None,
    failing: Mapping[str, float] | None = None,
    snapshot_unsaved: bool | None = None,
    zone: str | None = None,
    assume_tz: str | None = None,
) -> str:
    """The text exposition of one dump.

    ``durations``: the handoff latency samples in seconds by pair (the histogram;
    left out when None); ``last_event_at``: the last applied or rejected line's
    time; ``tick_s``: ``follow``'s tick (exported so an alert needs no constant); ``unrecorded``: sessions
    with an interrupt of unknown outcome for a turn whose end the log never recorded (``Sessions.unrecorded``);
    ``retry_under_way``: sessions of ``retry_due`` whose retry a worker claimed less than 1 h ago
    (``Sessions.retry_under_way``); ``without_worker``: sessions that should have a worker and have none at work
    past its bound, by kind (``Sessions.without_worker``; left out when None); ``decision_wait_s``: the longest any
    session has waited for a decision, in seconds (``Sessions.decision_wait_s``; left out when None);
    ``torn_tail_stuck``: the torn tail is one no append cuts (``Replay.stuck_tail``); ``unfinished_batch``: the
    complete lines of an unfinished batch at the end (``Replay.uncommitted``; held, neither events nor bad
    lines); ``not_a_log``: the file is no event log, so no append is taken on it (``eventlog.logs.no_event_log``);
    ``ahead``: the times a verdict is judged from that lie ahead of now (``projections.ahead.dated_ahead``; left
    out when None: not judged live); ``reruns``: catch-up re-runs that did not end well, by kind (``failed``,
    ``no_end``: ``projections.catchup.Catchup.bad_reruns``; left out when None); ``unfed``: guarded jobs whose
    slot of today passed 2 h ago with no marker of today (``projections.catchup.Catchup.unfed``; left out when
    None); ``zone_unknown``: catch-up's today is judged in the machine's zone, whose ``TZ`` names no zone (UTC
    taken), while the log has a guarded job (status: ``zone_unknown``; left out when None: not judged live);
    ``lanes_error``: the lanes
    runner's last pass ended in error for what belongs to no lane (``Lanes.pass_error``; status: ``lanes_error``);
    ``lanes_unobserved``: the lanes or lane files the last observing pass could not observe, stopped lanes left out
    (``Lanes.unobserved``; status: one ``lane_unobserved`` each); ``lanes_beat``: the lanes pass's heartbeat as of the
    dump's ``as_of`` (``Lanes.heartbeat``; None: no pass is due, or not judged); ``lanes_late``: it is late
    (status: ``lanes_late``; left out when None); ``deadline_passed``: handoffs still out (pending,
    claimed) whose deadline passed as of the dump's ``as_of`` (``Handoffs.past_deadline``); ``retired``: watchers
    a person retired, left out of the per-watcher families (so ``RecoveryWatcherDead`` stops for them; the dump
    still lists them); ``no_watcher``: handoffs are pending and no watcher runs, none ever ran or every one is
    retired (``Handoffs.unwatched``; left out when None); ``failing``: by account, how long its probes have been
    failing in a row as of the dump's ``as_of``, in seconds (``Handoffs.failing_since``; an account of the dump's
    ``probe_plan`` not in it: 0; the family is left out when None); ``snapshot_unsaved``: ``follow`` could not save
    its ``--snapshot`` the last time it was to (left out when None: it keeps none); ``zone``: the ``TZ=`` value
    of the zone catch-up's days were judged in (``--assume-tz``'s, else ``eventlog.clock.local_zone_name``; ""
    when it has none that can be pasted, or not judged live), the ``zone`` label of the catch-up verdicts judged
    by day (candidates, probe, unfed), so the commands an alert prints judge in it too (left out when None);
    ``assume_tz``: the zone name of the ``--assume-tz`` the log was read with, the ``assume_tz`` label of every
    sample, so the ``eventlog`` commands an alert prints carry ``--assume-tz`` too (left out when None or "").
    """
    out = _Text(str(dump.get("log", "")), assume_tz)
    one: Labels = {}

    out.gauge("recovery_log_missing", "1 while the followed log does not exist (a nats:// stream: its server holds "
              "none), or its path holds no file (a directory, a FIFO, a device): no verdict is given then.",
              [(one, int(bool(dump.get("log_missing"))))])
    out.gauge("recovery_log_unreachable", "1 while the server of the followed stream (nats://) cannot be reached or "
              "does not answer: the other values stay as of its last sequence folded (dump: log_unreachable).",
              [(one, int(bool(dump.get("log_unreachable"))))])
    out.counter("recovery_events_total", "Lines applied or rejected.", [(one, dump["events"])])
    vanished = dump.get("lines_vanished") or {}
    out.counter("recovery_vanished_lines_total", "Committed lines that vanished: from a followed file since follow "
                "(or serve) started (truncated, moved away and made again, or a file with fewer lines in its "
                "place); a stream's sequences that hold no message any more (deleted, purged, dropped by its "
                "limits) (status: lines_vanished).",
                [(one, vanished.get("lines", 0))])
    out.counter("recovery_bad_lines_total", "Lines that are bad input (listed in the dump's bad_lines).",
                [(one, len(dump["bad_lines"]))])
    out.counter("recovery_rejected_events_total", "Events rejected as transitions that do not fit.",
                [(one, len(dump["rejected"]))])
    out.gauge("recovery_torn_tail", "1 when the log ends in what is not committed: a partial last line, or the "
              "complete lines of an unfinished batch (recovery_unfinished_batch_lines).",
              [(one, int(dump["torn_tail"]))])
    if unfinished_batch is not None:
        out.gauge("recovery_unfinished_batch_lines", "Complete lines of an unfinished batch at the end of the log: "
                  "held, never applied, neither events nor bad lines; the next append cuts them "
                  "(status: unfinished_batch).", [(one, unfinished_batch)])
    if torn_tail_stuck is not None:
        out.gauge("recovery_torn_tail_stuck", "1 when the log ends in bytes no append cuts: every append is "
                  "refused until a person cuts them (status: torn_tail_stuck).", [(one, int(torn_tail_stuck))])
    if not_a_log is not None:
        out.gauge("recovery_not_a_log", "1 when the file is no event log (none of its lines is a JSON object): every "
                  "append is refused (status: not_a_log).", [(one, int(not_a_log))])
    if ahead is not None:
        checks = Counter(a.check for a in ahead)
        out.gauge("recovery_dated_ahead", "Times a verdict is judged from that lie ahead of now by more than the "
                  "tolerance (a writer's clock ahead), by the check they keep from firing (status: dated_ahead).",
                  [({"check": check}, checks[check]) for check in CHECKS])
    out.gauge("recovery_judged_timestamp_seconds", "The time every verdict here was judged at (the dump's as_of).",
              _when(one, dump.get("as_of")))
    out.gauge("recovery_last_event_timestamp_seconds", "The time of the last applied or rejected line.",
              [] if last_event_at is None else [(one, last_event_at.timestamp())])
    if tick_s is not None:
        out.gauge("recovery_follow_tick_seconds", "follow rewrites this file at least this often.", [(one, tick_s)])
    if snapshot_unsaved is not None:
        out.gauge("recovery_snapshot_unsaved", "1 while follow cannot save its --snapshot (a cache: it goes on, but "
                  "a restart replays the whole log); its stderr says why.", [(one, int(snapshot_unsaved))])

    _handoffs(out, dump["handoffs"], durations)
    if failing is not None:
        out.gauge("recovery_account_probes_failing_seconds", "How long the account's probes have been failing in a "
                  "row (transient errors, unreadable answers, or quota_limited after an estimated reset), from the "
                  "first of them, while they hold its pending handoffs; 0 otherwise. It does not start again when a "
                  "backoff runs out (status: backoff_transient, backoff_unexpected, backoff_estimate).",
                  [({"account": account}, failing.get(account, 0)) for account in dump["handoffs"]["probe_plan"]])
    if deadline_passed is not None:
        out.gauge("recovery_handoff_deadline_passed", "Handoffs still out (pending, claimed, resume_requested) whose "
                  "deadline has passed: nothing ends them on a timer, a person decides (status: deadline_passed).",
                  [(one, deadline_passed)])
    _watchers(out, dump["handoffs"], retired)
    if no_watcher is not None:
        out.gauge("recovery_no_watcher", "1 when handoffs are pending and no watcher runs: none ever ran, or a person "
                  "retired every one (retired ones do not count), so nothing brings them back (status: no_watcher).",
                  [(one, int(no_watcher))])

    now = dump["lanes"].get("now") or {"results": []}
    lanes = [({"product": str(r["product"]), "kind": kind}, int(bool(r["stalled"]) and r.get("kind") == kind))
             for r in now["results"] for kind in KINDS]
    out.gauge("recovery_lane_stalled", "1 when the lane is stalled now, by stall kind (both kinds always listed).",
              lanes)
    if lanes_error is not None:
        out.gauge("recovery_lanes_last_pass_error", "1 when the lanes runner's last pass ended in error for what "
                  "belongs to no lane (a resume it could not send, no lane in the log, new bad lines, a stop; status: "
                  "lanes_error); a lane it could not observe is recovery_lanes_unobserved, a send cut short its "
                  "stall's recovery_lane_stalled.", [(one, int(lanes_error))])
    if lanes_unobserved is not None:
        out.gauge("recovery_lanes_unobserved", "Lanes (or lane files) the last lanes pass with --observe could not "
                  "observe, a lane stopped on purpose since left out: their verdict is as of what was last read, and "
                  "no resume is sent to a lane no NAME.env names; passes without --observe keep them (status: "
                  "lane_unobserved).", [(one, lanes_unobserved)])
    if lanes_late is not None:
        _lanes_pass(out, lanes_beat, lanes_late)

    c = dump["catchup"]
    daily: Labels = {} if zone is None else {"zone": zone}
    out.gauge("recovery_catchup_candidates", "Skipped scheduled jobs to re-run now (zone: the TZ their today is "
              "judged in).", [(daily, len(c["candidates"]))])
    out.gauge("recovery_catchup_circuit_open", "1 while the quota circuit is open.",
              [(one, int(c["circuit"] == "open"))])
    out.gauge("recovery_catchup_probe", "1 when a catch-up run now would probe (candidates, circuit not open; "
              "zone: the TZ their today is judged in).", [(daily, int(bool(c["probe"])))])
    if reruns is not None:
        out.gauge("recovery_catchup_reruns", "Catch-up re-runs that did not end well, until the job runs again, by "
                  "kind (both always listed): failed (killed at its timeout, an exit other than 0 or none; status: "
                  "rerun_failed), no_end (no end written past its timeout and kill grace; status: rerun_no_end).",
                  [({"kind": kind}, reruns.get(kind, 0)) for kind in RERUN_KINDS.values()])
    if unfed is not None:
        out.gauge("recovery_catchup_unfed", "Guarded jobs whose calendar slot of today passed 2 h ago or more and "
                  "the log holds no marker of today for them (neither skipped nor ran): nothing feeds their markers "
                  "(eventlog import quota-log), or they did not run (status: unfed; zone: the TZ their today is "
                  "judged in).", [(daily, unfed)])
    if zone_unknown is not None:
        out.gauge("recovery_catchup_zone_unknown", "1 when catch-up's today and slots are judged in the machine's "
                  "zone (no --assume-tz) and its TZ names no time zone it knows, so UTC is taken, while the log has "
                  "a guarded job (status: zone_unknown).", [(one, int(zone_unknown))])

    s = dump["sessions"]
    tally = Counter((item["admission_state"], item["attention"] or "") for item in s["items"].values())
    out.gauge("recovery_sessions", "Sessions by admission state and attention (\"\": none); every pair listed.",
              [({"admission_state": a, "attention": t}, tally[(a, t)]) for a in ADMISSIONS for t in ATTENTIONS])
    out.gauge("recovery_sessions_retry_due", "Sessions in backoff whose retry_at has come.",
              [(one, len(s.get("retry_due", [])))])
    if retry_under_way is not None:
        out.gauge("recovery_sessions_retry_under_way", "Sessions of recovery_sessions_retry_due whose retry a worker "
                  "claimed at or after retry_at less than WORKER_STARTUP_TIMEOUT_SEC (1 h) ago: it may still be "
                  "retrying storage, not overdue.", [(one, retry_under_way)])
    if without_worker is not None:
        out.gauge("recovery_sessions_without_worker", "Sessions that should have a worker and have none at work, by "
                  "kind (every kind listed): worker_not_ready (claimed, not ready after WORKER_STARTUP_TIMEOUT_SEC, "
                  "1 h), worker_gone (its worker failed, drained or is gone, and no claim 10 min since), "
                  "decision_unclaimed (retry_restore or start_fresh accepted, and no claim 10 min since) (status: "
                  "the same reason codes).",
                  [({"kind": kind}, without_worker.get(kind, 0)) for kind in WORKER_WAITS])
    if decision_wait_s is not None:
        out.gauge("recovery_sessions_decision_wait_seconds", "The longest any session has waited for a decision, "
                  "judged at recovery_judged_timestamp_seconds: seconds since the event that put it there (status: "
                  "the for_s of restore_failed, startup_failed, outcome_unknown, context_gap); 0 when none waits.",
                  [(one, decision_wait_s)])
    out.gauge("recovery_sessions_unknown_turn_left", "Sessions that moved on (neither recovery_required nor "
              "closed) still holding a turn of unknown outcome: never re-run on its own, it waits for abandon, "
              "confirm_completed or close (status: outcome_unknown).",
              [(one, sum(1 for item in s["items"].values() if item["unknown_turns"]
                         and item["admission_state"] not in ("recovery_required", "closed")))])
    if unrecorded is not None:
        out.gauge("recovery_sessions_interrupt_unrecorded", "Sessions with an interrupt that ended with the turn's "
                  "outcome unknown, of a turn whose end the log never recorded: never started, or no turn_finished "
                  "(status: interrupt_unrecorded).",
                  [(one, unrecorded)])

    for family in control_families(dump):  # the interrupt timeline: eventlog/prom_controls.py
        out.family(family.name, family.kind, family.help)
        for sample, labels, value in family.samples:
            out.sample(sample, labels, value)
    return "\n".join(out.lines) + "\n"


def of_replay(replay: Replay, dump: dict[str, Any], tick_s: float | None = None, live: bool = False,
              snapshot_unsaved: bool | None = None) -> str:
    """The exposition of ``dump``, a dump of ``replay``, with the latency samples and last time it holds.

    ``live``: the dump is judged as of the wall clock now, so the times ahead of it are counted, and catch-up's
    days in the zone of ``--assume-tz`` (the one ``replay`` was read in), else in the machine's, which the
    ``zone`` label names ("" otherwise, or when ``TZ`` names no zone: no label to Prometheus; then
    ``recovery_catchup_zone_unknown`` is 1 while the log has a guarded job). Every sample carries ``assume_tz``
    when ``replay`` was read with ``--assume-tz`` (its own argument, never the log's content).
    ``snapshot_unsaved``: ``follow``'s last save of its ``--snapshot`` failed (None: it keeps none).
    """
    as_of = dump.get("as_of")
    at = datetime.fromisoformat(as_of) if as_of is not None else None  # the live verdicts below: judged at T
    ahead = None
    if live and isinstance(replay.folder, Runner) and at is not None:
        ahead = dated_ahead(replay.folder, at)
    handoffs = getattr(replay.folder, "handoffs", None)
    durations = handoffs.durations() if handoffs is not None else None
    sessions = getattr(replay.folder, "sessions", None)
    unrecorded = len(sessions.unrecorded()) if sessions is not None else None
    retrying = late = unwatched = failing = without = waited = None
    retired: list[str] = []
    if handoffs is not None:
        unwatched = handoffs.unwatched()
        failing = handoffs.failing_s(at) if at is not None else {}
        retired = [name for name, beat in handoffs.state.watchers.items() if beat.retired]
        late = len(handoffs.past_deadline(at)) if at is not None else 0
    if sessions is not None:
        retrying = len(sessions.retry_under_way(at)) if at is not None else 0
        without = sessions.without_worker(at) if at is not None else {}
        waited = sessions.decision_wait_s(at) if at is not None else 0.0
    catchup = getattr(replay.folder, "catchup", None)
    reruns = unfed = zone_unknown = None
    if catchup is not None:
        reruns = Counter(RERUN_KINDS[b.kind] for b in (catchup.bad_reruns(at) if at is not None else []))
        unfed = len(catchup.unfed(at)) if at is not None else 0
        if live:
            zone_unknown = catchup.guarded and unknown_zone(replay, live) is not None
    lanes = getattr(replay.folder, "lanes", None)
    lanes_error = None if lanes is None else at is not None and lanes.pass_error(at) is not None
    lanes_unobserved = None if lanes is None else len(lanes.unobserved())
    beat = lanes.heartbeat(at) if lanes is not None and at is not None else None
    lanes_late = None if lanes is None else beat is not None and beat.late
    return exposition(dump, durations=durations, last_event_at=replay.last_at, tick_s=tick_s, unrecorded=unrecorded,
                      retry_under_way=retrying, without_worker=without, decision_wait_s=waited,
                      lanes_error=lanes_error, lanes_unobserved=lanes_unobserved, lanes_beat=beat,
                      lanes_late=lanes_late,
                      torn_tail_stuck=replay.stuck_tail is not None,
                      unfinished_batch=0 if replay.uncommitted is None else replay.uncommitted.lines,
                      not_a_log=no_event_log(str(dump.get("log", "")), replay) is not None, ahead=ahead,
                      reruns=reruns, unfed=unfed, zone_unknown=zone_unknown, deadline_passed=late, retired=retired,
                      no_watcher=unwatched, failing=failing, snapshot_unsaved=snapshot_unsaved,
                      zone=(zone_name(replay.reader.assume_tz) or local_zone_name()) if live else "",
                      assume_tz=zone_name(replay.reader.assume_tz))


def _handoffs(out: _Text, h: dict[str, Any], durations: Mapping[str, Sequence[float]] | None) -> None:
    one: Labels = {}
    by_state = h["by_state"]
    out.gauge("recovery_handoffs", "Handoffs by state (every state listed).",
              [({"state": state}, by_state.get(state, 0)) for state in STATES])
    out.counter("recovery_handoffs_created_total", "Handoffs created.", [(one, h["total"])])
    out.counter("recovery_handoff_failover_started_total", "Handoffs a local session picked up.",
                [(one, h["failover"]["started"])])
    out.counter("recovery_handoff_failback_returned_total", "Handoffs verified back in the cloud.",
                [(one, h["failback"]["returned"])])
    reasons: Counter[str] = Counter()
    for reason, n in h.get("needs_human_reasons", {}).items():
        reasons[reason if reason in NEEDS_HUMAN_REASONS else "other"] += n
    out.gauge("recovery_handoff_needs_human", "Handoffs handed to a person, by reason (conflict, "
              "resume_failed_unknown_effect, resume_unconfirmed, resume_failing, other: a needs_human event's own "
              "words).",
              [({"reason": r}, reasons[r]) for r in NEEDS_HUMAN_REASONS])
    out.gauge("recovery_handoff_stale_claims", "Stale live claims by kind (retryable, unknown_effect).",
              [({"kind": k}, len(h["stale_claims"].get(k, []))) for k in ("retryable", "unknown_effect")])
    oldest = h["pending"]["oldest_age_s"]
    out.gauge("recovery_handoff_pending_oldest_age_seconds", "Age of the oldest pending handoff (0: none pending).",
              [(one, oldest if oldest is not None else 0)])
    if durations is not None:
        out.histogram("recovery_handoff_latency_seconds", "Handoff durations by pair (first time each state "
                      "was reached).", [({"pair": pair}, durations.get(pair, ())) for pair in LATENCY_PAIRS])
    probes = h["probes"]
    out.counter("recovery_probes_total", "Probe results by outcome.",
                [({"outcome": o}, probes.get(o, 0)) for o in PROBE_OUTCOMES])
    plans = Counter(plan["reason"] for plan in h["probe_plan"].values())
    out.gauge("recovery_probe_plan_accounts", "Accounts by the reason of their probe plan now.",
              [({"reason": r}, plans[r]) for r in PLAN_REASONS])


def _watchers(out: _Text, h: dict[str, Any], retired: Collection[str]) -> None:
    watchers = sorted((name, w) for name, w in h.get("watchers", {}).items() if name not in retired)
    out.gauge("recovery_watcher_late", "1 when the failback watcher is late (the spec's rule: the last "
              "watcher_run of any watcher, or none while handoffs are pending).",
              [({}, int(bool(h["watcher"]["late"])))])
    out.gauge("recovery_watcher_last_run_timestamp_seconds", "When each watcher last wrote its heartbeat (a watcher "
              "a person retired is left out of this and the next three).",
              [s for name, w in watchers for s in _when({"watcher": name}, w["last_run"])])
    out.gauge("recovery_watcher_period_seconds", "Each watcher's period, as its last heartbeat says.",
              [({"watcher": name}, w["period_s"]) for name, w in watchers])
    out.gauge("recovery_watcher_last_run_error", "1 when the watcher's last pass ended in error.",
              [({"watcher": name}, int(w["exit"] == "error")) for name, w in watchers])
    out.gauge("recovery_watcher_heartbeat_late", "1 when the watcher's last heartbeat is older than twice "
              "its period.", [({"watcher": name}, int(bool(w["late"]))) for name, w in watchers])


def _lanes_pass(out: _Text, beat: Heartbeat | None, late: bool) -> None:
    """The lanes pass's heartbeat (samples only while a pass is due: a lane not stopped on purpose), and whether it
    is late."""
    one: Labels = {}
    out.gauge("recovery_lanes_last_pass_timestamp_seconds", "When the last lanes pass ran (the last lane_check), "
              "while the log has a lane not stopped on purpose.",
              _when(one, beat.ts) if beat is not None and beat.checked else [])
    out.gauge("recovery_lanes_period_seconds", "How often the lanes runner runs, as its last lane_check says "
              "(period_s; 1 h when none does).", [(one, beat.period_s)] if beat is not None else [])
    out.gauge("recovery_lanes_last_pass_age_seconds", "Seconds from the last lanes pass to the time judged at "
              "(before the first pass: from the first lane event), while the log has a lane not stopped on purpose.",
              [(one, max(0.0, beat.age_s))] if beat is not None else [])
    out.gauge("recovery_lanes_late", "1 when no lanes pass came for twice its period, or none at all while lanes "
              "have been fed that long: nothing checks the lanes, nor observes them with --observe (status: "
              "lanes_late).", [(one, int(late))])


def _when(labels: Labels, text: str | None) -> list[tuple[Labels, float]]:
    """A ``*_timestamp_seconds`` sample of a time as printed; none when there is no time (or no offset)."""
    if text is None:
        return []
    value = datetime.fromisoformat(text)
    return [] if value.tzinfo is None else [(labels, value.timestamp())]


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return "{" + body + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _value(value: float) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))
