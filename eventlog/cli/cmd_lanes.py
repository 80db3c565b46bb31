"""``eventlog stalls`` and ``eventlog lanes``: stall verdicts, and the runner that sends resumes (seed 001).

Both are thin shells over ``eventlog.runners.lanes``.
"""

from __future__ import annotations

import argparse
from typing import Any

from eventlog.cli.common import (
    UsageError,
    add_judging,
    add_log,
    add_thresholds,
    command_parser,
    duration,
    error,
    judging,
    record_line,
    refused,
    report,
    stoppable,
)
from eventlog.runners import lanes
from eventlog.runners.common import command_words
from projections.ahead import TOLERANCE_S
from projections.triage import duration_words

STALLS = """\
Judge every lane as of now (or --at) and print the impl-lane-watch/v1 record as
one line of JSON, exactly as seed 001 prints it (checked_at: the time judged at).
It writes nothing; the bad lines of LOG it skipped are named on stderr, and so,
as of now, is a lane's time (a finished job, a status, a commit) dated more than
{ahead} ahead: a writer's clock ahead, which keeps the lane from being judged
stalled until the clock passes it.""".replace("{ahead}", duration_words(TOLERANCE_S))

STALLS_EXITS = """\
0  no lane is stalled
1  a lane is stalled, LOG has bad lines, or (as of now) a lane's time is dated ahead
2  bad usage or a log that cannot be read"""

LANES = """\
With --observe DIR, first observe every lane of DIR: each NAME.env there (not
hidden; the KEY=VALUE files the recovery-ledger-observe-lane@NAME units read:
LANE_PRODUCT, LANE_WORKER_LOG, LANE_FINISHED_REGEX, LANE_REPO, LANE_REF,
LANE_PROGRESS, LANE_STOP_FILE) is one lane, observed as eventlog observe lane
does with those options (an empty or unset one is not given). The files are
read as data, never run: a line that is no KEY=VALUE, an unknown key, a key
set twice, a quote not closed, a bare value with a quote or a backslash
(systemd drops it: quote the value), a # after a space in a value, export, a
byte order mark, a space systemd does not trim (U+00A0, U+3000) around a value
(systemd keeps each in it), no LANE_PRODUCT or no source is named
FILE:LINE: reason and that lane is not observed. A lane that cannot be observed
is named (lane PRODUCT (FILE): why) and the others still are; so is a DIR that
cannot be read or holds no NAME.env, and a lane the log knows, not stopped on
purpose, that no NAME.env names (its file moved out before its stop was
recorded): it is judged from what was last read, so no resume is sent for it.
The lane_check states each lane or file it could not observe, and why
(unobserved): status, explain and serve name each until a later pass observes
it or the lane is stopped. So one timer observes and checks, and its
lane_check is the heartbeat of both.

Judge every lane as of now (or --at), append the run's lane_check (ts: the time
judged at) with how the run stands, exit ok or exit error and a detail saying
what it could not do (what it says on stderr), and only then, for each lane
found stalled that no resume_enqueued covers yet (same product and kind, after
the stall's anchor) and whose send no pass cut short, run CMD (split as a shell
would, run without one, in its own process group) with the product and the
kind as its last two arguments and in RESUME_PRODUCT and RESUME_KIND, then
append resume_enqueued. The last non-empty line CMD prints on stdout is its
task_branch (cut to 200 characters, with a mark). Stopped and idle lanes are
never stalled, so never resumed. A run that ends in error after its lane_check
(a CMD that failed, a resume not recorded, a stop signal) appends a second
lane_check, same ts, exit error; status, explain, follow and serve name a run
that ended in error. Each lane_check with a detail states which of its problems
belong to no lane (general: a CMD that failed, new bad lines, no lane, a stop
signal, a resume not recorded): status names those as the run's error
(lanes_error), and a lane it could not observe or a send it cut short once
each, in that lane's own item.

CMD's result is its own exit: a CMD that starts the work in the background and
exits 0 has enqueued it, even while the work it left running holds its stdout
(read for 0.5 s more, then closed: let it write to a file); that work is
neither waited for nor stopped by this run.

That first lane_check names the resumes the run is about to send (sending,
exit sending), so a send whose outcome is unknown is never repeated on its own:
the run killed while CMD ran (kill -9 too), or CMD over --timeout (SIGTERM,
then SIGKILL after --kill-grace) or stopped by SIGTERM or SIGINT after it may
have sent, or CMD killed by a signal not the run's (the OOM killer's). Until
a resume_enqueued records it, every later run skips that
stall and asks "did it arrive?" (exit 1), with the eventlog append line that
records it and this command with --resend PRODUCT, which sends it again once
you know it did not (a PRODUCT with no open send, a typo or one answered
since, is refused: exit 2, naming those that are open); status, explain, serve and follow --prom say the same,
once each send's --timeout and --kill-grace (stated in that lane_check) and a
minute have passed: until then the run is under way, not an error. Each later
run restates the sends still open (unsure), so the line that records one
clears every view at once. A CMD that fails (a non-zero exit; cannot start) gets no resume_enqueued: the
run's second lane_check says so (unsent) and the next run retries it. A
log that takes no append (a full disk, no event log, a tail no append cuts, one
this user may not write) gets no CMD run: its lane_check could not be written,
and nothing could record the resume. A resume sent whose resume_enqueued cannot
be written is said with the eventlog append command that records it: until it
is pasted, later runs ask whether it arrived (never send it again). A log with
no lane at all is said (nothing feeds lane state: --observe DIR, or eventlog
observe lane for each lane). Two runners of one log take turns
(LOG.lanes.lock); one that waits for it over a second says so on stderr, once:
the lock file, and the pid and command that hold it (it goes on when that one
ends). SIGTERM or SIGINT: the running CMD is stopped as over
--timeout (its outcome unknown, as above), no other starts (the next run sends
those), nor is the lock waited for any longer, and what was cut short is said.
Why it exits 1 is on stderr, one line each.

The lane_check states --unpicked and --quiet (unpicked_s, quiet_s, seconds):
status, explain, follow, serve, stalls and tools/replay judge lanes with them
(until a later check states others), so they show the stalls this run acts on.
It states --period too (period_s: how often this runs, as its timer does; 1h):
while the log has a lane not stopped on purpose, status, explain, serve and
follow --prom name the lanes pass late when no lane_check came for twice it
(lanes_late; none at all: twice it since the first lane event)."""

LANES_EXITS = """\
0  done: every stall resumed or already covered
1  a CMD failed, a resume's send was cut short (did it arrive?), a lane of
   --observe DIR could not be observed (or DIR read; or a lane of the log, not
   stopped, has no NAME.env there), the log could not be read or written (a
   resume sent but not recorded is said so, with the line to paste: later runs
   ask whether it arrived until it is), nor its lock file LOG.lanes.lock
   created or opened beside it (named, and why; a symbolic link there is never
   followed: nothing done), it has bad lines new
   since the last lane_check (older ones are only named on stderr), it has no
   lane at all (nothing feeds lane state: --observe DIR, or eventlog observe
   lane for each lane), or SIGTERM or SIGINT stopped the run
2  bad usage (--enqueue-cmd still the '<...>' placeholder of a copied command;
   a --resend PRODUCT with no open send to send again, named with those that
   are open) or no such log (with --observe a log file or stream is created,
   as observe lane does): nothing run or written"""


def register(sub: Any) -> None:
    """Add ``stalls`` and ``lanes``."""
    p = command_parser(sub, "stalls", help="judge every lane now (or --at); exit 1 when one is stalled",
                       description=STALLS, exits=STALLS_EXITS)
    add_log(p)
    add_judging(p)
    add_thresholds(p)
    p.set_defaults(run=run_stalls)

    q = command_parser(sub, "lanes", help="record a lane check and send a resume for each new stall",
                       description=LANES, exits=LANES_EXITS)
    add_log(q)
    q.add_argument("--enqueue-cmd", required=True, metavar="CMD", help="sends one resume: CMD ... PRODUCT KIND")
    q.add_argument("--timeout", type=duration, default=lanes.ENQUEUE_TIMEOUT_S, metavar="DURATION",
                   help="CMD timeout (5m)")
    q.add_argument("--kill-grace", type=duration, default=lanes.KILL_GRACE_S, metavar="DURATION",
                   help="SIGTERM to SIGKILL for a CMD over --timeout (5s)")
    q.add_argument("--observe", metavar="DIR",
                   help="observe each lane of DIR/NAME.env first (as the observe-lane@ units; empty: none)")
    q.add_argument("--period", type=duration, default=lanes.PERIOD_S, metavar="DURATION",
                   help="how often this runs, as its timer does (1h): late after twice it")
    q.add_argument("--resend", action="append", default=[], metavar="PRODUCT",
                   help="send PRODUCT's resume though a run was cut short while sending it (you know it did not "
                        "arrive); repeatable")
    add_thresholds(q, runner=True)
    add_judging(q)
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q.set_defaults(run=run_lanes)


def run_stalls(args: argparse.Namespace) -> int:
    """``eventlog stalls``: the record of every lane as of TIME; exit 1 when one is stalled."""
    try:
        tz, at = judging(args)
        report = lanes.judge_stalls(lanes.StallOptions(log=args.log, at=at, unpicked_s=args.unpicked,
                                                       quiet_s=args.quiet, assume_tz=tz))
    except (UsageError, ValueError) as err:
        error(str(err))
        return 2
    except OSError as err:
        error(f"cannot read {args.log}: {err.strerror or err}")
        return 2
    print(record_line(report.record))
    for problem in report.problems:
        error(problem)
    return report.status


def run_lanes(args: argparse.Namespace) -> int:
    """``eventlog lanes``: see ``eventlog lanes --help``."""
    try:
        tz, at = judging(args)
        opts = lanes.LanesOptions(log=args.log, enqueue_cmd=command_words(args.enqueue_cmd, "--enqueue-cmd"),
                                  timeout_s=args.timeout, kill_grace_s=args.kill_grace, unpicked_s=args.unpicked,
                                  quiet_s=args.quiet, at=at, assume_tz=tz, observe_dir=args.observe or None,
                                  period_s=args.period, resend=args.resend)
        opts.check()
    except (UsageError, ValueError) as err:
        return refused(err)
    done = stoppable("lanes", lambda: lanes.run_lanes(opts))
    return report(done, args.json, done.observed_text() + done.text(), done.notes)
