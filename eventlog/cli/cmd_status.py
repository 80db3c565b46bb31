"""``eventlog status`` (the triage screen) and ``eventlog explain`` (one id's verdict): renderers only.

The triage and the verdicts are judged by :mod:`projections.triage` (pure) through
:mod:`eventlog.views`; this module parses the arguments and prints them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from datetime import tzinfo
from typing import Any, NamedTuple, TypeVar

import msgspec

from eventlog.cli.common import UsageError, add_judging, add_log, command_parser, dumps, error, judging, replay_log, say
from eventlog.cli.timeline import timeline_lines
from eventlog.clock import At, zone_name
from eventlog.logs import is_url, password_note
from eventlog.runners.common import bad_lines, named_problem
from eventlog.views import Explained, explain, status, status_of_missing
from projections.ahead import TOLERANCE_S
from projections.triage import (
    DOMAINS,
    SHOWN,
    URGENCY,
    Group,
    Item,
    LogArg,
    Triage,
    Verdict,
    duration_words,
    for_words,
    status_cmd,
    urgency,
    urgent_first,
)

#: The lines a default screen aims to stay within (a 1M-event log with every kind of trouble included).
SCREEN_LINES = 50

STATUS = """\
What needs a person as of now (or --at), grouped by reason: each item with its
reason, how long it has been so, and the command to copy for the next step;
then the totals of each domain the log holds. Every domain is looked at:
handoffs (handed to a person, stale claims, still out past their deadline,
accounts backing off), watchers (late, or ended in error; a retired one is
not), lanes (stalled now, with whether a resume went out; the lanes runner's
last pass, when it ended in error or is late: no lane_check for twice its
period), catch-up (a guarded job with no marker of today 2 h after its slot:
nothing feeds its markers?; re-runs that ended badly or never reported their
end, candidates, an open circuit), sessions (waiting for a decision, a retry
due, no worker at work though one should be: claimed and not ready after 1 h,
or none claimed 10 min after a worker ended or a decision was accepted), and
the log itself (missing, bad lines, rejected events, the complete lines of an
unfinished batch a writer left, an unfinished last line; a tail no append will
cut, and a file that is no event log at all, so every append is refused, wait
for a person's decision; as of now, a line dated more than {ahead} ahead whose
time a check waits on, such as a watcher's last run: until the clock passes it,
that check cannot fire). --domain and --needs-decision narrow the screen, but
what keeps lines from every domain (a missing log, a file that is no log, bad
lines, committed lines gone, a last line no append cuts) is shown in every view
and counts: a line nobody could read may belong to the domain asked for; and a
line dated ahead is shown with the domain of the check it silences (a session's
claim with sessions; with --needs-decision when that check is a decision). Ids
are in natural order (h-2 before h-10). A screen fits 50 lines, its groups most
urgent first: what a person must decide, then what a person must act on, then
what the runners or the clock clear by themselves. It shows the first few of
each group (at most 3, fewer when there are many groups); when even one each
does not fit, the least urgent groups take one line each (count, first id, the
command that lists them all), and the head counts each domain with the command
that lists it in full. --all shows every item. --json keeps the groups in the
order of the reasons (by domain), each with its urgency (0 to decide, 1 to act
on, 2 cleared by themselves: the screen's order, and serve's console's). --json
prints one object: per item {domain, id, reason_code, reason, since, for_s,
until, next, needs_decision, silences}, the groups with their counts, and the
totals (times ISO 8601, durations in seconds, counts as numbers).""".replace("{ahead}", duration_words(TOLERANCE_S))

STATUS_EXITS = """\
0  nothing needs a person
1  something needs a person (a missing log included)
2  bad usage or a log that cannot be read"""

EXPLAIN = """\
Every line of LOG that names ID (file:line and the event; rejections marked),
then the verdict as of now (or --at) in each domain that knows ID: a handoff,
an account (its probe plan and why), a watcher, a lane (judged now), a catch-up
job label (candidate, or why not, the circuit, a kick; a re-run that ended
badly or never reported its end, and how to run the job by hand) or a session
(its state, why, and the decisions it would accept now, as commands to copy).

Bad lines are left out of every verdict: those whose text names ID are listed
among the lines (their reason, and the command that prints one), and the log's
bad lines are counted on stderr (--json: bad_lines {count, first} and
named_by_bad_lines [{line, reason, next}])."""

EXPLAIN_EXITS = """\
0  done
2  bad usage, a log that cannot be read, or an id no line and no domain of LOG knows (when only bad
   lines name it, stderr says which, why they are bad, and how to print them)"""


def register(sub: Any) -> None:
    """Add ``status`` and ``explain``."""
    s = command_parser(sub, "status", help="what needs a person now, grouped, with the command to copy",
                       description=STATUS, exits=STATUS_EXITS)
    add_log(s)
    add_judging(s)
    s.add_argument("--domain", action="append", choices=DOMAINS, metavar="DOMAIN",
                   help=f"only this domain ({', '.join(DOMAINS)}); may be given again")
    s.add_argument("--needs-decision", action="store_true",
                   help="only what a person must decide (handoffs handed over, sessions stopped)")
    s.add_argument("--all", action="store_true", help="every item of every group, not the first few")
    s.add_argument("--json", action="store_true", help="one JSON object for machines")
    s.set_defaults(run=run_status)

    e = command_parser(sub, "explain", help="the lines that brought one id to its state, and its verdict now",
                       description=EXPLAIN, exits=EXPLAIN_EXITS)
    add_log(e)
    e.add_argument("id", metavar="ID", help="a handoff, account, watcher, product, job label or session")
    add_judging(e)
    e.add_argument("--json", action="store_true", help="one JSON object for machines")
    e.set_defaults(run=run_explain)


# -- status ----------------------------------------------------------------------


def run_status(args: argparse.Namespace) -> int:
    """Print the triage; exit 1 when anything needs a person."""

    def judge(tz: tzinfo | None, at: At) -> tuple[Triage, LogArg]:
        t = status_of_missing(args.log, at) if _missing(args.log) else status(replay_log(args.log, assume_tz=tz),
                                                                               args.log, at)
        return t, LogArg(t.log, zone_name(tz))

    read = reading(args, judge)
    if read is None:
        return 2
    judged, log = read[0].only(args.domain, args.needs_decision), read[1]
    if args.json:
        shown = judged.shown(None if args.all else SHOWN)
        print(dumps(msgspec.to_builtins(shown)))
    else:
        for line in screen(judged, log, None if args.all else SCREEN_LINES, args.needs_decision):
            say(line)
    return 1 if judged.needs_person else 0


R = TypeVar("R")


def reading(args: argparse.Namespace, judge: Callable[[tzinfo | None, At], R]) -> R | None:
    """``judge(zone, at)`` with the zone and time of ``--assume-tz``/``--at``; None (exit 2) when the usage is
    bad or LOG cannot be read, said in one line on stderr."""
    try:
        return judge(*judging(args))
    except UsageError as err:
        error(str(err))
    except OSError as err:
        error(f"cannot read {args.log}: {err.strerror or err}")
    return None


def _missing(log: str) -> bool:
    """A file LOG that is not there (its directory is): the triage says so; anything else unreadable is exit 2."""
    if is_url(log) or os.path.lexists(log):
        return False
    return os.path.isdir(os.path.dirname(log) or ".")


class Shape(NamedTuple):
    """What a screen shows of its groups (most urgent first): ``items`` items of each of the first ``full`` groups,
    one line for each of the next ``brief``, and one line for all the rest together."""

    items: int
    full: int
    brief: int


def shapes(groups: int) -> list[Shape]:
    """Every shape a screen of ``groups`` groups may take, from the most it shows to the least: 3, 2, then 1 item
    of every group; then one line for each of the least urgent groups, one more at a time; then fewer such lines."""
    return ([Shape(n, groups, 0) for n in range(SHOWN, 0, -1)]
            + [Shape(1, full, groups - full) for full in range(groups - 1, -1, -1)]
            + [Shape(1, 0, brief) for brief in range(groups - 1, -1, -1)])


def screen(t: Triage, log: LogArg, lines: int | None = SCREEN_LINES, needs_decision: bool = False) -> list[str]:
    """The triage for people, its groups most urgent first (:func:`~projections.triage.urgent_first`): the first
    of :func:`shapes` that keeps it within ``lines`` (None: every item of every group). ``log`` and
    ``needs_decision`` go into the commands that list what it leaves out."""
    if lines is None:
        return _screen(t, log, None, needs_decision)
    for shape in shapes(len(t.groups)):
        out = _screen(t, log, shape, needs_decision)
        if len(out) <= lines:
            break
    return out


def _screen(t: Triage, log: LogArg, shape: Shape | None, needs_decision: bool) -> list[str]:
    """A head line (and what pasting its commands needs), the count, and when the screen leaves any item out the
    counts by urgency and by domain with the command that lists each in full; the groups as ``shape`` says (None:
    every item); the totals."""
    groups = urgent_first(t.groups)
    out = [head(t)]
    if (note := password_note(t.log)) is not None:
        out.append(note)
    if not t.needs_person:
        out.append("Nothing needs a person.")
    else:
        out.append(f"Needs a person: {t.needs_person:,} ({_plural(len(t.groups), 'reason')}).")
    full, brief = (len(groups), 0) if shape is None else (shape.full, shape.brief)
    limit = None if shape is None else shape.items
    if full < len(groups) or any(limit is not None and g.count > limit for g in groups):
        out += guide_lines(groups, log, needs_decision)
    for g in groups[:full]:
        out += group_lines(g, limit)
    if brief:
        out += ["", "Then one line each: its count, its first id, and the command that lists every one (of a "
                "single item, its own command):"]
        out += [brief_line(g, log, needs_decision) for g in groups[full:full + brief]]
    if rest := groups[full + brief:]:
        out.append(f"  and {_plural(len(rest), 'more reason')} ({_plural(sum(g.count for g in rest), 'item')}): "
                   "the commands above list every one")
    out.append("")
    out += totals_lines(t)
    return out


def guide_lines(groups: list[Group], log: LogArg, needs_decision: bool) -> list[str]:
    """For a screen that leaves items out: how many items each urgency holds (the screen's order), then each domain's
    count with the command that lists it in full (and those a person decides, unless that is the view)."""
    ranks = [sum(g.count for g in groups if urgency(g.reason_code) == rank) for rank in range(len(URGENCY))]
    said = ", ".join(f"{n:,} {words}" for n, words in zip(ranks, URGENCY, strict=True) if n)
    rows = [] if needs_decision or not ranks[0] else [("to decide", ranks[0], status_cmd(log, True, None, True))]
    for d in DOMAINS:
        if n := sum(g.count for g in groups if g.domain == d):
            rows.append((d, n, status_cmd(log, True, d, needs_decision)))
    width = max(len(f"{label}: {n:,}") for label, n, _cmd in rows)
    return [f"Not all shown; most urgent first: {said}. In full:",
            *(f"  {f'{label}: {n:,}':<{width}}  {cmd}" for label, n, cmd in rows)]


def brief_line(g: Group, log: LogArg, needs_decision: bool) -> str:
    """A group in one line: ``  TITLE: COUNT; first ID (for 2 h): eventlog status LOG --domain D --all``; a group of
    one item has that item's own command to copy instead (``TITLE: 1; ID (for 2 h): NEXT``)."""
    first = g.items[0]
    since = f" ({for_words(first.for_s)})" if first.for_s is not None else ""
    if g.count == 1:
        return f"  {g.title}: 1; {first.id}{since}: {first.next}"
    return f"  {g.title}: {g.count:,}; first {first.id}{since}: {status_cmd(log, True, g.domain, needs_decision)}"


def head(t: Triage) -> str:
    """The first line: the log and the time it is judged at, or that it is missing or empty."""
    when = f"as of {t.as_of}" if t.as_of is not None else "as of its last line, and it has none"
    if t.log_missing:
        return f"{t.log}: no such log ({when})"
    if t.empty:
        return f"{t.log}: empty, no line yet ({when})"
    if t.as_of is None:
        return f"{t.log}: no event with a time yet ({when})"
    return f"{t.log} {when}"


def group_lines(g: Group, limit: int | None) -> list[str]:
    """A group's title with its count, then each shown item (reason, then the command on its own line)."""
    items = g.items if limit is None else g.items[:limit]
    more = f" (first {len(items)}; --all for every one)" if len(items) < g.count else ""
    out = ["", f"{g.title}: {g.count:,}{more}"]
    for it in items:
        out += item_lines(it)
    return out


def item_lines(it: Item) -> list[str]:
    """One item: ``  ID (for 2 h 5 min): reason`` and the command to copy, indented."""
    since = f" ({for_words(it.for_s)})" if it.for_s is not None else ""
    return [f"  {it.id}{since}: {it.reason}", f"      {it.next}"]


def totals_lines(t: Triage) -> list[str]:
    """One line of totals for each domain present in the log, the log's own last."""
    tot = t.totals
    out: list[str] = []
    if (h := tot.handoffs) is not None:
        p50, p95 = (duration_words(v) if v is not None else "n/a" for v in (h.return_p50_s, h.return_p95_s))
        oldest = f" (oldest {duration_words(h.oldest_pending_age_s)})" if h.oldest_pending_age_s is not None else ""
        out.append(f"Handoffs: failover {h.failover_started:,}/{h.total:,}, failback {h.returned:,}/{h.total:,}; "
                   f"pending {h.pending:,}{oldest}, claimed {h.live_claims:,}, handed to a person "
                   f"{h.needs_human:,}, skipped {h.skipped:,}{_by_reason(h.skip_reasons)}, stale {h.stale:,}"
                   + (f", past their deadline {h.deadline_passed:,}" if h.deadline_passed else "")
                   + f"; return p50 {p50}, p95 {p95}; {_plural(h.accounts, 'account')}")
    if (w := tot.watchers) is not None:
        retired = f", retired {w.retired:,}" if w.retired else ""
        out.append(f"Watchers: {w.watchers:,}, late {w.late:,}, last pass in error {w.error:,}{retired}; "
                   f"last run {w.last_run or 'never'}")
    if (la := tot.lanes) is not None:
        last = f"; last lanes pass {la.last_pass} ({la.last_pass_exit})" if la.last_pass is not None else ""
        late = "; the lanes pass is late" if la.late else ""
        out.append(f"Lanes: {_plural(la.products, 'product')}; stalled {la.stalled:,}, moving {la.moving:,}, "
                   f"stopped {la.stopped:,}, idle {la.idle:,}{last}{late}")
    if (c := tot.catchup) is not None:
        circuit = f"open until {c.open_until}" if c.circuit == "open" else "closed"
        reruns = (f"re-runs ended badly {c.reruns_failed:,}, never reported their end {c.reruns_no_end:,}; "
                  if c.reruns_failed or c.reruns_no_end else "")
        unfed = f"no marker of today though their slot passed {c.unfed:,}; " if c.unfed else ""
        out.append(f"Catch-up: {_plural(c.jobs, 'job')} ({c.guarded:,} guarded); candidates {c.candidates:,}; "
                   f"{unfed}{reruns}circuit {circuit}")
    if (s := tot.sessions) is not None:
        out.append(f"Sessions: {s.sessions:,}; admitted {s.admitted:,}, backoff {s.backoff:,}, recovery required "
                   f"{s.recovery_required:,}, stopped {s.stopped:,}, closed {s.closed:,}; waiting for a decision "
                   f"{s.waiting_decision:,}, retry due {s.retry_due:,}"
                   + (f", no worker at work {s.without_worker:,}" if s.without_worker else "")
                   + f"; {_plural(s.decisions, 'decision')} logged")
    lg = tot.log
    tails = [f"an unfinished batch of {_plural(lg.unfinished_batch, 'complete line')}"] if lg.unfinished_batch else []
    if lg.torn_line:
        tails.append("an unfinished last line")
    torn = ""
    if tails:
        stuck = " no append will cut" if lg.torn_tail_stuck else ""
        torn = f", {' and '.join(tails)}{stuck}"
    refused = "; no event log: every append is refused" if lg.not_a_log else ""
    ahead = f"; {_plural(lg.dated_ahead, 'line')} dated ahead of now" if lg.dated_ahead else ""
    gone = f"; {_plural(lg.lines_vanished, 'committed line')} vanished" if lg.lines_vanished else ""
    out.append(f"Log: {_plural(lg.events, 'event')}, {_plural(lg.bad_lines, 'bad line')}, "
               f"{lg.rejected:,} rejected{torn}{refused}{ahead}{gone}")
    return out


#: How many skip reasons the totals line names (``--json`` has every one), and how much of each.
SKIP_REASONS_SHOWN = 5
_REASON_CHARS = 60


def _by_reason(counts: dict[str, int]) -> str:
    """`` (expired 69, obsolete 29)``: the first few reasons, most first (empty when there is none)."""
    if not counts:
        return ""
    shown = [f"{_short(reason)} {n:,}" for reason, n in list(counts.items())[:SKIP_REASONS_SHOWN]]
    more = len(counts) - SKIP_REASONS_SHOWN
    if more > 0:
        shown.append(f"{_plural(more, 'more reason')}: --json")
    return f" ({', '.join(shown)})"


def _short(reason: str) -> str:
    """A reason on one line, cut to a screen's share."""
    flat = " ".join(reason.split()) or "(empty)"
    return flat if len(flat) <= _REASON_CHARS else flat[:_REASON_CHARS - 3] + "..."


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


# -- explain ---------------------------------------------------------------------


def run_explain(args: argparse.Namespace) -> int:
    """Print the lines behind one id and its verdicts; exit 2 when nothing (or only bad lines) knows the id."""

    def judge(tz: tzinfo | None, at: At) -> Explained:
        replay = replay_log(args.log, assume_tz=tz)
        found = explain(replay, args.log, args.id, at, tz)
        if found is None:
            said = bad_lines(replay).problem(args.log)
            raise UsageError("; ".join([f"{args.log}: no line or domain names {args.id!r}", *([said] if said else [])]))
        if not found.verdicts:
            raise UsageError(named_problem(args.log, args.id, found.named_by_bad_lines, only=True))
        return found

    judged = reading(args, judge)
    if judged is None:
        return 2
    if args.json:
        print(dumps(msgspec.to_builtins(judged, builtin_types=(msgspec.Raw,))))  # each line's event as written
    else:
        for line in explained_lines(judged):
            say(line)
    sys.stdout.flush()
    said = judged.bad_lines.problem(args.log)
    if said:
        error(said)
    return 0


def explained_lines(e: Explained) -> list[str]:
    """The lines (``LOG:LINE: event``, rejections and bad lines marked), then each verdict with its commands."""
    rows = [(line.line, f"{e.log}:{line.line}: {bytes(line.event).decode('utf-8', 'replace')}"
             + (f"   <- rejected: {line.rejected}" if line.rejected is not None else "")) for line in e.lines]
    rows += [(b.line, f"{e.log}:{b.line}: a bad line, left out of every verdict: {b.reason}   <- see it: {b.next}")
             for b in e.named_by_bad_lines]
    out = [text for _n, text in sorted(rows)]
    out.append(f"as of {e.as_of}:" if e.as_of is not None else "as of its last line, and it has none:")
    if (note := password_note(e.log)) is not None:
        out.append(f"  {note}")
    for v in e.verdicts:
        out += verdict_lines(v)
    return out


def verdict_lines(v: Verdict) -> list[str]:
    """One verdict: ``KIND ID: what it is``, since when, what needs a person, the commands to copy."""
    out = [f"  {v.kind} {v.id}: {v.says}"]
    if v.since is not None:
        ago = f" ({for_words(v.for_s)})" if v.for_s is not None else ""
        out.append(f"    since {v.since}{ago}" + (f"; until {v.until}" if v.until else ""))
    if v.needs_person:
        out.append(f"    needs a person: {', '.join(it.reason_code for it in v.needs_person)} (as status shows it)")
    for cmd in v.next:
        out.append(f"    next: {cmd}")
    if v.kind in ("session", "interrupt") and v.facts.get("interrupts"):
        out += ["  " + line for line in timeline_lines(v.facts["interrupts"])]
    return out
