"""``eventlog failback``: one pass of the failback watcher (``eventlog.runners.failback``)."""

from __future__ import annotations

import argparse
import socket
from typing import Any

from eventlog.cli.common import (
    UsageError,
    add_judging,
    add_log,
    command_parser,
    duration,
    error,
    judging,
    mark_done,
    person_acts,
    refused,
    report,
    stoppable,
    whole_duration,
)
from eventlog.probe import EXPECTED
from eventlog.runners import failback, handoff
from eventlog.runners.common import command_words

DESCRIPTION = """\
One pass of the failback watcher, as cron or launchd would run it every 15 minutes:
release stale claims, hand requests silent past --stale-after to a person
(needs_human, resume_unconfirmed), probe the accounts that are due (only when
something is pending and a slot is free), claim in claim order, journal
resume_requested, run the resume command and record its answer, then write the
heartbeat (watcher_run, exit ok or error).

A handoff whose resume failed with effect none 3 times in a row (any other
end of an attempt, or a person's handoff release or requeue, starts the count
again; a stale claim the pass itself released neither counts nor breaks it) is
not claimed again: the pass hands it to a person (needs_human, resume_failing,
naming the attempts that failed). Once the cause is fixed, `eventlog handoff
release LOG ID --reason TEXT` sends it back.

The resume command prints its answer as the last JSON object on stdout:
  {"handoff_id", "branch", "head", "dirty", "todos"}  verified: returned
  {"conflict": "..."}                                 conflict: a person
  {"started": "..."}        nothing appended: the session reports verified,
                            conflict or resume_failed itself later (eventlog
                            append, with FAILBACK_ATTEMPT as its attempt)
  {"failed": "...", "effect": "none"}   resume_failed, nothing happened: pending
  {"failed": "..."}         resume_failed, effect unknown: a person

Commands run without a shell, in their own process group, bounded by
--timeout (SIGTERM, then SIGKILL after --kill-grace). A command's result is
its own exit and what it printed by then: a session it leaves running in the
background is neither waited for nor stopped (its pipes are read for 0.5 s
more, then closed: let it write to a file). What the pass copies from their
output into a line is cut to 200 characters, with a mark. A probe that gives
no answer (could not start, over --timeout, killed by a signal, exit 126 or
127) is an error of the pass: its probe_result (network_timeout after
--timeout, else as the output says) names the exit or signal.
Commands get FAILBACK_LOG (a nats:// LOG without its password: a command opens
it where NATS_PASSWORD holds it), FAILBACK_WATCHER, FAILBACK_ACCOUNT and, for the
resume command, FAILBACK_HANDOFF_ID, FAILBACK_ATTEMPT, FAILBACK_REPO,
FAILBACK_BRANCH, FAILBACK_HEAD; {handoff_id}-style placeholders are filled in
the arguments.
Once the pass has run for --budget it starts no more commands, so it ends
within --budget plus one --timeout (and --kill-grace); what it did not reach
is named on stderr and in the report (not_reached), and a later pass takes it.

SIGTERM or SIGINT: the running command is stopped as over --timeout and no
other starts; a stopped resume command is recorded as resume_failed, effect
unknown (to a person; effect none when it had not started yet), a stopped probe
not at all; the heartbeat says exit error with a detail that names the signal,
and what was cut short is said on stderr.

A probe's or resume's answer the log does not take (a full disk, a file it may
not write) is shown all the same, marked NOT written (--json: "written": false,
and the lines in "unwritten"), and stderr gives the line(s) as an `eventlog
append LOG` command to paste once the log takes writes again: it happened, and
no other line says so. A log it may not read and write is said with the reason
(exit 1; --json: the report, exit error); the pass starts no command then.

It acts as of now; --at TIME (or 'log') pins its clock, for tests.
Why it exits 1 is on stderr, one line each.

  eventlog failback LOG --retire NAME --reason TEXT
runs no pass: a person says watcher NAME stopped for good (a renamed host, a
one-off --watcher pass). It appends NAME's final heartbeat (watcher_run with
retired: true, its last period, exit ok, the reason and --actor); status,
explain, serve and follow --prom then no longer call it late (the dump keeps
the spec's rule). A later pass under that name brings it back. Pending
handoffs with every watcher retired are still named (no_watcher)."""

EXITS = """\
0  the pass ran and nothing new needs a person
1  the pass could not do its own work (a command that could not start, a probe
   that gave no answer, a log
   that could not be read or written (an answer it could not record is printed to
   paste), bad lines new since this watcher's last
   watcher_run, accounts or handoffs not reached within --budget, SIGTERM or
   SIGINT) or it sent work to a person (a resume that failed with effect
   unknown, a conflict, a stale resume_requested, a resume that failed with
   effect none 3 times in a row). Older bad lines are only named on stderr
2  bad usage (a command or --watcher still the '<...>' placeholder of a copied
   command, an empty --watcher no line of the log names), or no such log:
   nothing run or written
With --retire: 0 retired (now, or already: nothing written), 1 the log could
not be written, 2 bad usage (an empty --reason or a '<...>' placeholder), no
such log, or no line names the watcher"""


def register(sub: Any) -> None:
    """Add the ``failback`` subcommand."""
    p = command_parser(sub, "failback", help="one failback watcher pass: probe, claim, resume, verify",
                       description=DESCRIPTION, exits=EXITS)
    add_log(p)
    p.add_argument("--probe-cmd", metavar="CMD", help="the small probe (e.g. one that answers PING_OK); required for a "
                   "pass")
    p.add_argument("--resume-cmd", metavar="CMD",
                   help="resumes a handoff and prints the handshake; required for a pass")
    p.add_argument("--watcher", default=f"failback@{socket.gethostname()}", metavar="NAME", help="this watcher's name")
    p.add_argument("--period", type=whole_duration, default=900, metavar="DURATION",
                   help="how often the pass runs (15m)")
    p.add_argument("--timeout", type=duration, default=120.0, metavar="DURATION", help="bound on each command (2m)")
    p.add_argument("--kill-grace", type=duration, default=failback.KILL_GRACE_S, metavar="DURATION",
                   help="SIGTERM to SIGKILL for a command over --timeout (5s)")
    p.add_argument("--budget", type=duration, default=failback.BUDGET_S, metavar="DURATION",
                   help="start no command once the pass has run this long (5m)")
    p.add_argument("--stale-after", type=duration, default=1800.0, metavar="DURATION", help="stale claim age (30m)")
    p.add_argument("--max-inflight", type=int, default=2, metavar="N", help="claims at once (2)")
    p.add_argument("--expect", default=EXPECTED, metavar="TEXT", help=f"a healthy probe's answer ({EXPECTED})")
    add_judging(p)
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--retire", metavar="NAME", help="run no pass: watcher NAME stopped for good (needs --reason)")
    p.add_argument("--reason", metavar="TEXT", help="with --retire: why it stopped for good (kept in the log)")
    p.add_argument("--actor", default=None, metavar="NAME", help="with --retire: who says so (default: the OS user)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Check the usage, run one pass (or retire a watcher), print its report; the problems on stderr."""
    if args.retire is not None:
        return _retire(args)
    if args.reason is not None or args.actor is not None:
        error("--reason and --actor go with --retire NAME")
        return 2
    if args.probe_cmd is None or args.resume_cmd is None:
        error("a pass needs --probe-cmd and --resume-cmd (or --retire NAME --reason TEXT)")
        return 2
    try:
        tz, at = judging(args)
        opts = failback.Options(
            log=args.log,
            probe_cmd=command_words(args.probe_cmd, "--probe-cmd"),
            resume_cmd=command_words(args.resume_cmd, "--resume-cmd"),
            watcher=args.watcher,
            period_s=args.period,
            timeout_s=args.timeout,
            kill_grace_s=args.kill_grace,
            budget_s=args.budget,
            stale_after_s=args.stale_after,
            max_inflight=args.max_inflight,
            expected=args.expect,
            at=at,
            assume_tz=tz,
        )
        opts.check()
    except (ValueError, UsageError) as err:  # RunnerError is a ValueError
        return refused(err)
    done = stoppable("failback", lambda: failback.run_pass(opts))
    return report(done, args.json, done.text(), done.notes)


def _retire(args: argparse.Namespace) -> int:
    """``eventlog failback LOG --retire NAME --reason TEXT``."""
    if args.reason is None:
        error("--retire needs --reason TEXT: why it stopped for good")
        return 2
    def retire() -> handoff.RetireReport:
        tz, at = judging(args)
        opts = handoff.Retire(log=args.log, watcher=args.retire, reason=args.reason,
                              actor=args.actor if args.actor is not None else handoff.os_user(), at=at, assume_tz=tz)
        opts.check()
        return handoff.retire(opts)

    done = person_acts(args.log, f"the final heartbeat of {args.retire}", retire)
    if isinstance(done, int):
        return done
    if done.event is not None:
        mark_done(f"{args.log}: watcher {args.retire} retired")
    return report(done, args.json, done.text())

