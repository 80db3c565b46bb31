"""``eventlog decide`` and ``eventlog sessions``: operator decisions with receipts (seed 004).

Thin shells over ``eventlog.runners.sessions``.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Any

import msgspec

from eventlog.appender import AppendError
from eventlog.cli.common import (
    UsageError,
    add_assume_tz,
    add_judging,
    add_log,
    append_failed,
    command_parser,
    dumps,
    error,
    judging,
    mark_done,
    replay_log,
    say,
    zone,
)
from eventlog.clock import zone_name
from eventlog.logs import LogUnavailable, Unreachable, open_log, password_note
from eventlog.replay import BadLine, Replay
from eventlog.runners import sessions as runner
from eventlog.runners.common import BadLines, NamedBadLine, bad_lines, bad_lines_said, folder, naming
from projections.sessions import DECISIONS, claim_words, worker_wait_words
from projections.triage import LogArg, accept_cmds, for_words, opt, session_needs, sessions_cmd

DECIDE = """\
Append a recovery_decision to LOG, accepted or not (a refused decision is part of
the audit trail), and print its receipt. The decision is judged under the log's
lock by the same rules as the replay: of two decisions made on one revision, one
is accepted and the other refused with REQUEST_STALE. A refusal says why in the
words `sessions` gives for the same rule, who moved the session when its revision
moved (the decision's line, actor, time and reason) and the command that shows
it (next: eventlog sessions LOG SESSION). The same idempotency key with the same
request (decision, expected revision, target turn, evidence) returns the first
receipt; with another request it is IDEMPOTENCY_KEY_REUSED and changes nothing.
The line names who decided (--actor, by default the OS user).

Bad lines change neither the decision nor the exit status: it is judged on the
applied lines, as the spec's rules say. Before the receipt, stderr counts the
log's bad lines and names those whose text names SESSION (line, reason, the
command that prints it): the session it was judged on may not be what happened.
The --json receipt carries them too (bad_lines {count, first},
named_by_bad_lines [{line, reason, next}])."""

DECIDE_EXITS = """\
0  accepted (or the same request again with its key, first accepted)
1  the log could not be read or written (its server cannot be reached: stderr says why)
2  bad input, no such log, or no session of that id (when only bad lines name it, stderr says
   which; nothing written)
3  refused (the code is in the receipt), IDEMPOTENCY_KEY_REUSED included
4  the decision was written, but stdout could not be (its reader went away, a full disk): stderr
   names its line and result; the same --idempotency-key prints its receipt again"""

SESSIONS = """\
Each session's state, why it stopped, when it retries (due or not, as of now or
--at), and which decisions it would accept now, each as the whole `eventlog
decide` command explain prints (close last; replace '<why>'). A session that
needs a person says why and since when, as `eventlog status` does, with status'
command under it (next:) (--json: needs, its items of status --json; [] for
none). A session that should have a worker and has none at work is named once
that is late: a claimed worker not ready after WORKER_STARTUP_TIMEOUT_SEC (1 h),
or no claim 10 min after its worker ended or after a retry_restore/start_fresh
was accepted (--json: worker_wait); as of now, a line the wait counts from dated
ahead of now is named as status names it (dated_ahead). The log's bad lines are left out of every state: they are
counted on stderr (--json: bad_lines {count, first}); for one SESSION, those
that name it are named (--json: named_by_bad_lines [{line, reason, next}])."""

SESSIONS_EXITS = """\
0  no session shown needs a person, and LOG has no bad line
1  a session shown needs a person by the rule of status (a decision to make, a retry due and no
   worker ready since, no worker at work though it should have one, an interrupt of a turn whose
   end the log never recorded), or LOG has bad lines
2  bad usage, a log that cannot be read, or no session of that id"""


def register(sub: Any) -> None:
    """Add ``decide`` and ``sessions``."""
    p = command_parser(sub, "decide", help="apply an operator's recovery decision and print its receipt",
                       description=DECIDE, exits=DECIDE_EXITS)
    add_log(p)
    p.add_argument("session", metavar="SESSION")
    p.add_argument("--decision", required=True, choices=DECISIONS)
    p.add_argument("--expected-revision", required=True, type=int, metavar="N",
                   help="the session revision the decision was made on")
    p.add_argument("--idempotency-key", required=True, metavar="K", help="the same key returns the first receipt")
    p.add_argument("--reason", required=True, metavar="TEXT", help="why (kept in the log)")
    p.add_argument("--target-turn", metavar="T", help="the unknown turn (abandon, confirm_completed)")
    p.add_argument("--evidence-ref", metavar="E", help="what shows the turn completed (confirm_completed)")
    p.add_argument("--actor", metavar="NAME", default=None,
                   help="who decides, kept in the log (default: the OS user)")
    add_assume_tz(p)
    p.add_argument("--json", action="store_true", help="print the receipt as one line of JSON")
    p.set_defaults(run=run_decide)

    p = command_parser(sub, "sessions", help="each session's state, why it stopped, what decisions would be accepted",
                       description=SESSIONS, exits=SESSIONS_EXITS)
    add_log(p)
    p.add_argument("session", metavar="SESSION", nargs="?")
    add_judging(p)
    p.add_argument("--json", action="store_true", help="one JSON object for machines")
    p.set_defaults(run=run_sessions)


# --- decide ---------------------------------------------------------------------------


def run_decide(args: argparse.Namespace) -> int:
    """``eventlog decide``: exit 0 accepted, 3 refused, 2 bad input or an unknown session."""
    request = runner.Decision(
        session_id=args.session, decision=args.decision, expected_revision=args.expected_revision,
        idempotency_key=args.idempotency_key, reason=args.reason, target_turn_id=args.target_turn,
        evidence_ref=args.evidence_ref, actor=args.actor if args.actor is not None else os_user(),
    )
    try:
        request.check()
        log = open_log(args.log, assume_tz=zone(args.assume_tz))
        there = log.exists()
    except Unreachable as err:  # the log could not be read (nor written), as the runners say it
        error(f"cannot read {args.log}: {err}")
        return 1
    except (ValueError, LogUnavailable, UsageError) as err:
        error(str(err))
        return 2
    with log:
        if not there:
            error(f"{args.log}: no such log file")
            return 2
        try:
            done = runner.decide(log, request)
        except ValueError as err:  # runner.UnknownId
            error(str(err))
            return 2
        except AppendError as err:
            return append_failed(err, args.log)
    receipt = done.receipt
    result = "accepted" if done.accepted else f"refused: {receipt['result']}"
    mark_done(f"{args.log}: the decision is written at line {receipt['line']} ({result}); deciding again with "
              f"{opt('--idempotency-key', args.idempotency_key)} prints its receipt")
    for line in done.warnings(args.log):  # before the receipt: a person reads it before acting on the receipt
        error(line)
    if args.json:
        print(dumps({**receipt, "session": done.session, **done.bad_lines_fields()}))
    else:
        again = " (repeated idempotency key: the first receipt)" if receipt["replayed"] else ""
        by = f" by {receipt['actor']}" if receipt["actor"] else ""
        say(f"{result}{again}: {receipt['decision']} of {receipt['session_id']}{by} at line {receipt['line']}")
        if done.accepted:
            if done.note is not None:
                say(f"  key: {done.note}")
        else:
            for label, words in runner.refusal(receipt):
                say(f"  {label}: {words}")
        say(f"  now: {runner.state_line(done.session)}")
        say(f"  receipt: {dumps(receipt)}")
    return done.status


def said_bad_lines(log: str, ident: str | None, bad: BadLines, named: list[NamedBadLine]) -> None:
    """On stderr, after what was printed: the log's bad lines, and those that name ``ident``."""
    sys.stdout.flush()
    for line in bad_lines_said(log, ident, bad, named):
        error(line)


# --- sessions -------------------------------------------------------------------------


def run_sessions(args: argparse.Namespace) -> int:
    """``eventlog sessions``: exit 1 when a shown session needs a person (:func:`session_needs`, the rule of
    ``status``) or LOG has bad lines."""
    try:
        tz, at = judging(args)
        replay = replay_log(args.log, assume_tz=tz)
        named = _naming(args.log, replay, args.session)
    except UsageError as err:
        error(str(err))
        return 2
    except (OSError, BadLine) as err:
        error(f"cannot read {args.log}: {getattr(err, 'strerror', None) or err}")
        return 2
    sessions = folder(replay).sessions
    as_of, as_of_text = at.resolve(replay.last_at, replay.last_ts)
    ids = sorted(sessions.sessions)
    if args.session is not None:
        if args.session not in sessions.sessions:
            error(runner.unknown_session(args.log, args.session, replay.bad_lines, named))
            return 2
        ids = [args.session]
    log = LogArg(args.log, zone_name(tz))  # in the commands printed
    needs = session_needs(folder(replay), ids, as_of, as_of_text, log, at.live)
    shown = {sid: {**runner.describe(sessions, sid, as_of), "needs": msgspec.to_builtins(needs.get(sid, []))}
             for sid in ids}
    bad = bad_lines(replay)
    if args.json:
        more = {"named_by_bad_lines": msgspec.to_builtins(named)} if args.session is not None else {}
        print(dumps({"log": args.log, "as_of": as_of_text, "items": shown, "bad_lines": msgspec.to_builtins(bad),
                     **more}))
    else:
        say(f"{args.log}: {len(ids)} session(s) as of {as_of_text}")
        if (note := password_note(args.log)) is not None:
            say(note)
        for sid, d in shown.items():
            _print_person(log, sid, d)
    said_bad_lines(args.log, args.session, bad, named)
    return 1 if bad.count or needs else 0


def _naming(log: str, replay: Replay, session: str | None) -> list[NamedBadLine]:
    """The bad lines that name ``session`` (none asked: none searched; one more read, only when there are any)."""
    if session is None or not replay.bad_lines:
        return []
    with open_log(log) as opened:
        return naming(opened, replay.bad_lines, session)


def os_user() -> str:
    """The OS user running the command (``uid N`` when it has no name)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no LOGNAME/USER and no passwd entry
        return f"uid {os.getuid()}"


def _since(item: dict[str, Any]) -> str:
    """`` (since T, for 2 h 5 min)`` of a status item (empty when it has no time)."""
    if item["since"] is None:
        return ""
    return f" (since {item['since']}" + (f", {for_words(item['for_s'])})" if item["for_s"] is not None else ")")


def _print_person(log: LogArg, sid: str, d: dict[str, Any]) -> None:
    """One session of the text view; every command printed is whole, to copy (status' and explain's own)."""
    say()
    say(f"{sid}: {d['admission_state']}" + (f" ({d['attention']})" if d["attention"] else ""))
    for item in d["needs"]:
        say(f"  needs a person: {item['reason']}{_since(item)}")
        if item["next"] != sessions_cmd(log, sid):  # that one prints what is read here
            say(f"    next: {item['next']}")
    say(f"  revision {d['revision']}, generation {d['generation']}, failures {d['failures']}")
    if d["reason"] is not None:
        say(f"  last reason: {d['reason']}")
    if d["retry_at"] is not None:
        when = {True: "due now", False: "not yet", None: ""}[d["retry_due"]]
        say(f"  retries at {d['retry_at']} ({when})" if when else f"  retries at {d['retry_at']}")
    if d["retry_claimed"] is not None:
        say(f"  {claim_words(d['retry_claimed'])}")
    if d["worker_wait"] is not None and not d["worker_wait"]["overdue"]:  # once overdue, a needs line says it
        say(f"  {worker_wait_words(d['worker_wait'])}")
    if d["unknown_turns"]:
        say(f"  unknown turns (never re-run on their own): {', '.join(d['unknown_turns'])}")
    if d["admission_state"] == "stopped":
        say("  resumable: " + ("yes" if d["resumable"] else "no (context gap: start_fresh or close)"))
    if d["fenced"] is not None:
        say(f"  new work refused: {d['fenced']}")
    for r in d["decisions"]:
        again = f" (key first used at line {r['first_line']})" if r["first_line"] != r["line"] else ""
        turn = f"turn {r['target_turn_id']}, " if r["target_turn_id"] is not None else ""
        say(f"  decided at line {r['line']}: {r['decision']} by {r['actor'] or 'unknown'}: {r['result']}{again}; "
            f"{turn}at {r['ts']}: {r['reason']!r}")
    for cid, c in d["controls"].items():
        effect = f", effect {c['effect_ms']} ms" if c["effect_ms"] is not None else ""
        say(f"  interrupt {cid} (turn {c['turn_id']}): {c['verdict'] or 'in progress'}{effect}")
    if d["would_accept"]:
        say("  would accept now:")
        for cmd in accept_cmds(log, sid, d["would_accept"]):
            say(f"    {cmd}")
    else:
        say("  would accept now: nothing")
    if d["would_refuse"]:
        say("  would refuse now:")
    for e in d["would_refuse"]:
        turn = f" {e['target_turn_id']}" if "target_turn_id" in e else ""
        say(f"    {e['decision']}{turn}: {e['result']} ({e['why']})")
