"""Times a live verdict is judged from that lie ahead of now: a writer's clock ahead silences a check (pure).

Spec section 2 lets ``ts`` run backwards between writers, so a line dated ahead
(a clock a day fast, a typo of 2062 for 2026) is accepted and applied. But every
verdict that waits for time to pass since such a line says "not yet" until the
real clock passes it: a watcher whose last heartbeat is dated ahead is never
late, so if it dies right after, nothing says so. :func:`dated_ahead` lists
every such time of the folded state, judged at view time from the few times
the views already use (nothing is folded for it):

- ``watcher_late``: a watcher's last ``watcher_run`` (it cannot be late before
  that time plus twice its period);
- ``claim_stale``: the last event of a live claim (it cannot go stale before
  that time plus the stale age);
- ``pending_age``: the creation of a pending handoff (its age, the oldest
  pending age, counts from it);
- ``probe_backoff``: the latest probe of an account backing off (the next probe
  waits for the backoff counted from it);
- ``job_unpicked``, ``status_quiet``: a lane's last finished job and last status
  (a stall counts from them);
- ``job_picked``: a lane's last commit, when it is what makes its last finished
  job count as picked up (a commit dated after the job);
- ``retry_due``: the failure that put a session in backoff (its ``retry_at``
  counts from it, and new work is refused until then);
- ``catchup_skip``: a guarded job's latest skip, not kicked since, dated a later
  day than now's (a skip dated another day is no skip of today, so it is no
  candidate; one ahead but of today still is, and silences nothing);
- ``rerun_no_end``: the ``catchup_kicked`` of a catch-up re-run with no end
  written (its missing end is named only once its timeout, twice its kill grace
  and a margin have passed since the kick: :meth:`projections.catchup.Rerun.deadline`).
- ``worker_not_ready``, ``decision_unclaimed``, ``worker_gone``: what a session
  that should have a worker waits on (:func:`projections.sessions.waited_from`):
  the claim of a worker still starting (it is not judged not ready before the
  claim plus ``WORKER_STARTUP_TIMEOUT_SEC``; a backoff's retry claimed, too: its
  retry is under way until then), an accepted ``retry_restore``/``start_fresh``
  no worker claimed since, or the end of the worker to replace (no claim is
  missed before it plus ``CLAIM_WAIT``).

- ``limited_at``: the ``limited_at`` of an account's latest ``limit_recorded``
  (a limit is not hit ahead of now: 2062 typed for 2026). It waits on no
  time, but it is no true latest limit: an import of the ledger sorted by
  time put such a limit after the account's true ones, and its ``reset_at``
  decides the account's probe over theirs (a reset long past: "probe now"
  while the true limit holds until tomorrow).

Times a line writes as a field (a ``reset_at``, an ``open_until``, a
``deadline``) are meant to lie ahead and are not judged against the tolerance.
One is judged against a wider bound:

- ``limit_reset``: the ``reset_at`` of an account's latest ``limit_recorded``,
  when it lies more than :data:`RESET_AHEAD_MAX_S` (8 days) ahead of now. No
  quota window is longer than a week (seed 000: weekly limits are the longest),
  so such a reset (2062 typed for 2026) is a mistake that holds the account's
  probe, and so all its pending handoffs, until then.

Stopped and idle lanes, and handoffs that are neither pending nor claimed,
wait for no time.

Pure: the caller gives now (only a live view judges this: with ``--at``, T is
no clock, and a line later than T is no writer's clock ahead).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal

import msgspec

from eventlog.events import parse_time
from projections.base import elapsed_s, later
from projections.catchup import Rerun, marker_day
from projections.handoffs import LIVE, PENDING
from projections.runner import Runner
from projections.sessions import BACKOFF, waited_from

#: How far ahead of now a time may lie before it counts: clocks of different hosts drift by seconds, and a
#: writer a little ahead silences nothing for long. Five minutes is far below every period judged (a stall
#: after 90 min, a stale claim after 30 min, a watcher late after twice its period).
TOLERANCE_S = 300.0

#: How far ahead of now an account's ``reset_at`` may lie before it counts (``limit_reset``): the longest quota
#: window is a week (seed 000: weekly limits), and a day more leaves room for zones and a reset read late.
RESET_AHEAD_MAX_S = 8 * 86400.0

#: The check a time ahead silences (the ``check`` label of ``recovery_dated_ahead``).
Check = Literal["watcher_late", "claim_stale", "pending_age", "probe_backoff", "job_unpicked", "status_quiet",
                "job_picked", "retry_due", "catchup_skip", "rerun_no_end", "limited_at", "limit_reset",
                "worker_not_ready", "decision_unclaimed", "worker_gone"]
CHECKS: tuple[Check, ...] = Check.__args__  # type: ignore[attr-defined]


class Ahead(msgspec.Struct, frozen=True, kw_only=True):
    """A time a live verdict is judged from that lies ahead of now.

    ``check``: what it silences; ``id``: the watcher, handoff, account, lane
    (product), session or job label; ``line``: the line that wrote it (0: not
    known); ``ts``: the time as written; ``ahead_s``: how far ahead of now;
    ``until``: the earliest the check can speak again, as a time (None: no such
    time, or past what can be written).
    """

    check: Check
    id: str
    line: int
    ts: str
    ahead_s: float
    until: str | None = None


def dated_ahead(runner: Runner, now: datetime, tolerance_s: float = TOLERANCE_S) -> list[Ahead]:
    """Every time of the folded state a verdict as of ``now`` is judged from that lies more than ``tolerance_s``
    ahead of ``now``, in line order. O(entities): a comparison for each pending or claimed handoff, less for the
    rest."""
    edge = later(now.astimezone(UTC), timedelta(seconds=tolerance_s))
    if edge is None:  # now at the end of time: nothing lies ahead
        return []
    found = _Found(now, edge)
    handoffs = runner.handoffs
    for name, beat in handoffs.state.watchers.items():
        if beat.retired:  # no view judges it late
            continue
        found.check("watcher_late", name, beat.line, beat.at, beat.ts, 2 * beat.period_s)
    stale_s = handoffs.stale_after_s
    for hid, h in handoffs.items.items():
        state = h.state
        if state == PENDING:
            found.check("pending_age", hid, h.line, h.created_at, h.created_ts)
        elif state in LIVE:
            found.check("claim_stale", hid, h.last_line, h.last_at, h.last_ts, stale_s)
    reset_edge = later(now.astimezone(UTC), timedelta(seconds=RESET_AHEAD_MAX_S))
    for account, acc in handoffs.accounts.items():
        if acc.limited_text is not None:  # no time to wait for: no until
            found.check("limited_at", account, acc.limit_line, parse_time(acc.limited_text), acc.limited_text)
        if acc.reset_at is not None and acc.reset_text is not None and reset_edge is not None \
                and acc.reset_at > reset_edge:  # it holds the probe (waiting_reset) until then
            found.add("limit_reset", account, acc.limit_line, acc.reset_at, acc.reset_text, acc.reset_text)
        if acc.pending and acc.run and acc.run_ts is not None:
            probed = parse_time(acc.run_ts)
            if probed > edge and (plan := handoffs.plan(account, now))["reason"].startswith("backoff_"):
                found.add("probe_backoff", account, acc.run_line, probed, acc.run_ts, plan["next_probe_at"])
    lanes = runner.lanes
    for product, lane in lanes.lanes.items():
        if lane.stopped or lane.idle:
            continue
        finished = lane.finished_at
        if finished is not None and lane.finished_ts is not None:
            found.check("job_unpicked", product, lane.finished_line, finished, lane.finished_ts,
                        lanes.unpicked_minutes * 60)
            commit = lane.commit_at
            if commit is not None and lane.commit_ts is not None and elapsed_s(commit, finished) > 0:  # as evaluate
                found.check("job_picked", product, lane.commit_line, commit, lane.commit_ts)
        if lane.updated_at is not None and lane.updated_ts is not None:
            found.check("status_quiet", product, lane.updated_line, lane.updated_at, lane.updated_ts,
                        lanes.quiet_hours * 3600)
    for sid, s in runner.sessions.sessions.items():
        if s.admission_state == BACKOFF and s.since is not None:
            found.check("retry_due", sid, s.since_line, parse_time(s.since), s.since, until=s.retry_at)
        waits = waited_from(s, retry=True)
        if waits is not None:
            kind, mark, bound = waits
            found.check(kind, sid, mark.line, mark.at, mark.ts, bound.total_seconds())
    catchup = runner.catchup
    for label, marker in catchup.markers.items():
        job = catchup.jobs.get(label)
        if marker.skipped and not marker.kicked and job is not None and job.guarded \
                and marker_day(marker, now) != now.date():  # ahead, but of today: still today's skip (a candidate)
            found.check("catchup_skip", label, marker.line, marker.at, marker.ts)
    for label, r in catchup.open_reruns().items():
        _open_rerun(found, label, r)
    return sorted(found.out, key=lambda a: (a.line, a.check, a.id))


class _Found:
    """The times found ahead so far, judged against ``now`` and its edge (now plus the tolerance, in UTC: a
    comparison with it is one of instants whatever the time's zone)."""

    def __init__(self, now: datetime, edge: datetime) -> None:
        self.now, self.edge = now, edge
        self.out: list[Ahead] = []

    def check(self, check: Check, ident: str, line: int, at: datetime, ts: str, wait_s: float | None = None,
              until: str | None = None) -> None:
        """Add ``at`` when it lies past the edge; ``wait_s``: the check speaks that long after it (sets ``until``)."""
        if at > self.edge:
            if wait_s is not None:
                end = _after(at, wait_s)
                until = None if end is None else end.isoformat()
            self.add(check, ident, line, at, ts, until)

    def add(self, check: Check, ident: str, line: int, at: datetime, ts: str, until: str | None) -> None:
        """Add a time known to lie past the edge."""
        self.out.append(Ahead(check=check, id=ident, line=line, ts=ts, ahead_s=elapsed_s(at, self.now),
                              until=until))


def _open_rerun(found: _Found, label: str, r: Rerun) -> None:
    """An open re-run's kick, when it lies ahead (until: when its missing end is named, None past what can be held)."""
    if r.kicked_ts is not None:
        deadline = r.deadline()
        found.check("rerun_no_end", label, r.kicked_line, parse_time(r.kicked_ts), r.kicked_ts,
                    until=None if deadline is None else deadline.isoformat())


def _after(at: datetime, wait_s: float) -> datetime | None:
    """``at`` plus ``wait_s`` seconds (None: past what can be written, a threshold of 1e308 s say)."""
    try:
        wait = timedelta(seconds=wait_s)
    except OverflowError:
        return None
    return later(at, wait)


__all__ = ["CHECKS", "RESET_AHEAD_MAX_S", "TOLERANCE_S", "Ahead", "Check", "dated_ahead"]
