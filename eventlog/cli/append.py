"""``eventlog append`` (events from stdin, all or none) and ``eventlog schema``.

LOG is a file or a ``nats://HOST:PORT/STREAM`` JetStream stream (:mod:`eventlog.logs`).
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from typing import Any

from eventlog.appender import AppendError, Input, read_input
from eventlog.cli.common import (
    UsageError,
    add_assume_tz,
    add_log,
    append_failed,
    command_parser,
    dumps,
    error,
    mark_done,
    zone,
)
from eventlog.clock import now, zone_name
from eventlog.events import MAX_ID_CHARS, parse_time, schema
from eventlog.logs import LogUnavailable, open_log
from projections.ahead import RESET_AHEAD_MAX_S, TOLERANCE_S
from projections.base import elapsed_s
from projections.triage import LogArg, duration_words, status_cmd

APPEND = """\
Read events from stdin, one JSON object per line, validate every one, then write
all of them or none, under an exclusive lock on LOG (created if absent). seq is
set, continuing from the log's last (a seq given is checked as a replay checks
it, so "seq": null is bad input, then replaced); a given ts is kept, a missing
one is set to now. A transition a replay would reject is refused unless
--no-check. Prints {"log", "written", "first_seq", "last_seq", "torn_tail_cut"}
as one JSON line.

With --assume-tz, times written without an offset in the input are read in
ZONE and written with its offset; the log's own lines are read in ZONE too. A
wall time ZONE skipped or repeated at a clock change is written with the offset
in force before the change (a repeated one: the first of the two), and said on
stderr, naming its input line. Every time given is written as ISO 8601's
extended form: YYYY-MM-DDTHH:MM[:SS[.fraction]] then Z or +hh:mm/-hh:mm, with
an upper-case T; any other (2026-12-02 00:00:00+00:00, +0530, +05:45:30) is bad
input. So is an id (handoff_id, account, product, label, session_id, watcher,
worker, job_id, turn_id, target_turn_id, covers_turn, control_id) that holds a
NUL character (\\u0000) or is longer than {max_id} characters: no command could
name it (bad_id).

A ts more than {ahead} ahead of now is written as given (a writer's clock may
run ahead of another's), and said on stderr: a check that waits on it (a
watcher late, a claim stale, a lane stalled) cannot fire until the clock passes
it. So is a limit_recorded whose reset_at lies more than {reset} ahead (no
quota window is that long: a typo of the year holds the account's probe), or
whose limited_at lies more than {ahead} ahead (no limit is hit ahead of now,
yet as the account's latest its reset_at decides the account's probe).""".replace(
    "{ahead}", duration_words(TOLERANCE_S)).replace("{reset}", duration_words(RESET_AHEAD_MAX_S)).replace(
    "{max_id}", f"{MAX_ID_CHARS:,}")

APPEND_EXITS = """\
0  written
1  the log could not be written (nothing partial is left; a log this run created is removed again)
2  bad input (each bad line named on stderr), bad usage, a closed stdin, or a LOG that does not look
   like an event log (left untouched)
3  a conflict: a refused transition or a revision mismatch
4  written, but stdout could not be written (its reader went away, a full disk): stderr says what
   was written (its seq); do not append it again"""


def register(sub: Any) -> None:
    """Add the ``append`` and ``schema`` subcommands."""
    p = command_parser(sub, "append", help="append events from stdin to LOG, all or none", description=APPEND,
                       exits=APPEND_EXITS)
    add_log(p)
    p.add_argument("--expect-revision", type=int, metavar="N", help="the first event's stream must be at revision N")
    p.add_argument("--no-check", dest="check", action="store_false",
                   help="write valid events without the transition check")
    p.add_argument("--fsync", action="store_true", help="fsync the log before returning")
    add_assume_tz(p)
    p.set_defaults(run=run)
    s = command_parser(sub, "schema", help="print the JSON Schema of the event union", exits="0  done")
    s.set_defaults(run=lambda args: print(dumps(schema())) or 0)


def run(args: argparse.Namespace) -> int:
    """Append stdin's events to LOG; print what was written as JSON."""
    try:
        tz = zone(args.assume_tz)
    except UsageError as err:
        error(str(err))
        return 2
    if sys.stdin is None:
        error(f"{args.log}: stdin is closed: no events to append; nothing was written")
        return 2
    try:
        given = read_input(sys.stdin.buffer, "stdin", tz)
    except OSError as err:
        error(f"{args.log}: cannot read stdin ({err.strerror or err}); nothing was written")
        return 2
    if given.problems:
        for problem in given.problems:
            error(f"{args.log}: {problem}")
        return 2
    try:
        with open_log(args.log, assume_tz=tz) as log:
            result = log.append(given.events, expect_revision=args.expect_revision, check=args.check, fsync=args.fsync)
    except LogUnavailable as err:
        error(str(err))
        return 2
    except AppendError as err:
        return append_failed(err, args.log, given.named(err.messages))
    wall_times = [f"{given.where(i, result.first_seq)}: {words}" for i, words in given.wall_times]
    for note in [*result.notes, *wall_times, *dated_ahead(given, result.first_seq, LogArg(args.log, zone_name(tz)))]:
        error(f"{args.log}: {note}")
    seqs = f"seq {result.first_seq}" + (f" to {result.last_seq}" if result.last_seq != result.first_seq else "")
    mark_done(f"{args.log}: {result.written} event(s) written ({seqs}): do not append them again")
    print(dumps({"log": args.log, "written": result.written, "first_seq": result.first_seq,
                 "last_seq": result.last_seq, "torn_tail_cut": result.torn_tail_cut}))
    return 0


def dated_ahead(given: Input, first_seq: int, log: LogArg) -> list[str]:
    """A warning for each event written to ``log`` whose ``ts`` (or limit ``limited_at``) lies more than the tolerance
    ahead of now, or whose limit ``reset_at`` more than :data:`projections.ahead.RESET_AHEAD_MAX_S` (its input line,
    its ``seq``, how far ahead): written as given, as the views will name them."""
    at = now()
    edge = at + timedelta(seconds=TOLERANCE_S)
    reset_edge = at + timedelta(seconds=RESET_AHEAD_MAX_S)
    out = []
    for i, event in enumerate(given.events):
        where = given.where(i, first_seq)
        ts = event.get("ts")
        if isinstance(ts, str) and (when := parse_time(ts)) > edge:  # (none given: the appender set it to now)
            out.append(f"{where} is dated {ts}, {duration_words(elapsed_s(when, at))} ahead of now: written as "
                       "given, but a check that waits on it (a watcher late, a claim stale, a lane stalled) cannot "
                       f"fire until the clock passes it; is the writer's clock right? ({status_cmd(log)} names what "
                       "it silences)")
        limit = event.get("type") == "limit_recorded"
        limited = event.get("limited_at") if limit else None
        if isinstance(limited, str) and limited != ts and (when := parse_time(limited)) > edge:  # (ts: said above)
            out.append(f"{where} says account {event.get('account')!r} was limited at {limited}, "
                       f"{duration_words(elapsed_s(when, at))} ahead of now: written as given, but no limit is hit "
                       "ahead of now, and as the account's latest limit its reset_at decides the account's probe; a "
                       f"typo of the year? ({status_cmd(log)} names it)")
        reset = event.get("reset_at") if limit else None
        if isinstance(reset, str) and (when := parse_time(reset)) > reset_edge:
            out.append(f"{where} says account {event.get('account')!r} resets at {reset}, "
                       f"{duration_words(elapsed_s(when, at))} ahead of now: written as given, but no probe of it "
                       f"is made before then; a typo of the year? ({status_cmd(log)} names it, with the correction)")
    return out
