"""``eventlog handoff``: what a person does with a handoff, or a broken account (``eventlog.runners.handoff``)."""

from __future__ import annotations

import argparse
from typing import Any

from eventlog.cli.common import (
    add_judging,
    add_log,
    command_parser,
    duration,
    judging,
    mark_done,
    person_acts,
    report,
    stoppable,
)
from eventlog.probe import EXPECTED
from eventlog.runners import handoff
from eventlog.runners.common import command_words

DESCRIPTION = """\
What a person does with one handoff (each is one checked append at the revision
read, with the reason and the actor; a reason that is still the '<...>'
placeholder of a copied command is refused, exit 2):

  eventlog handoff release LOG ID --reason R   claimed -> released (pending again)
  eventlog handoff requeue LOG ID --reason R   claimed or needs_human -> released;
                                               resume_requested -> resume_failed of the
                                               live attempt, effect none (you checked that
                                               nothing happened outside): pending again
  eventlog handoff skip LOG ID --reason R      any open state -> skip (closed, not returned)
  eventlog handoff probe LOG ACCOUNT --probe-cmd CMD
                                               probe one account now and record the result:
                                               how a fixed login is recorded (an account whose
                                               probe said auth_error is not probed until then)"""

PROBE = """\
Probe ACCOUNT once now, whatever its plan says, with the failback watcher's probe
command, and append the probe_result (and limit_recorded, as the watcher would),
with the actor. This is how a person records that an account's login is fixed:
an account whose last probe said auth_error is not probed by the watcher
(plan needs_person) until a probe says anything else. A result the log does not
take (a full disk) is shown all the same, marked NOT written, and stderr gives it
as an `eventlog append LOG` command to paste once the log takes writes again."""

ACTION_EXITS = """\
0  appended
1  the log could not be written
2  bad usage (an empty --reason, or the '<...>' placeholder of a copied command),
   no such log, or no handoff of that id
3  refused: the handoff is not in a state this action applies to, or it moved meanwhile
   (the reason is on stderr)
Bad lines of the log are named on stderr (how many, the first three) whatever the status."""

PROBE_EXITS = """\
0  the probe said ok (recorded)
1  it said something else or gave no answer (recorded; the outcome is on stderr, and
   the exit or signal of a probe killed, timed out or exit 126/127), it could not start, the
   log could not be written (before the probe: none is run; after it: the result is
   printed to paste), lines of it were bad (named on stderr), or SIGTERM or
   SIGINT stopped it (the probe's process group is stopped; nothing recorded)
2  bad usage (a --probe-cmd still the '<...>' placeholder of a copied command), no
   such log, or no line names the account: nothing run or recorded"""

HELP = {
    "release": "give back a claim before any request (claimed -> pending)",
    "requeue": "send a handoff back to pending (from claimed, resume_requested or needs_human)",
    "skip": "close a handoff without returning it, with the reason",
}


def register(sub: Any) -> None:
    """Add ``handoff release|requeue|skip|probe``."""
    p = command_parser(sub, "handoff", help="a person releases, requeues or skips a handoff, or probes an account",
                       description=DESCRIPTION, exits=ACTION_EXITS)
    hsub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action in handoff.ACTIONS:
        a = command_parser(hsub, action, help=HELP[action], description=DESCRIPTION, exits=ACTION_EXITS)
        add_log(a)
        a.add_argument("handoff_id", metavar="ID", help="the handoff")
        a.add_argument("--reason", required=True, metavar="TEXT", help="why (kept in the log)")
        _common(a)
        a.set_defaults(run=run_action)
    pr = command_parser(hsub, "probe", help="probe one account now and record the result (e.g. after fixing its login)",
                        description=PROBE, exits=PROBE_EXITS)
    add_log(pr)
    pr.add_argument("account", metavar="ACCOUNT")
    pr.add_argument("--probe-cmd", required=True, metavar="CMD", help="the failback watcher's probe command")
    pr.add_argument("--expect", default=EXPECTED, metavar="TEXT", help=f"a healthy probe's answer ({EXPECTED})")
    pr.add_argument("--timeout", type=duration, default=120.0, metavar="DURATION", help="bound on the probe (2m)")
    pr.add_argument("--kill-grace", type=duration, default=handoff.KILL_GRACE_S, metavar="DURATION",
                    help="SIGTERM to SIGKILL (5s)")
    _common(pr)
    pr.set_defaults(run=run_probe)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--actor", default=handoff.os_user(), metavar="NAME", help="who does it (default: the OS user)")
    add_judging(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run_action(args: argparse.Namespace) -> int:
    """``eventlog handoff release|requeue|skip``."""
    def act() -> handoff.ActReport:
        tz, at = judging(args)
        opts = handoff.Act(log=args.log, handoff_id=args.handoff_id, action=args.action, reason=args.reason,
                           actor=args.actor, at=at, assume_tz=tz)
        opts.check()
        return handoff.act(opts)

    done = person_acts(args.log, f"the {args.action} of {args.handoff_id}", act)
    if isinstance(done, int):
        return done
    for line in done.text():
        mark_done(f"{args.log}: {line}")
    return report(done, args.json, done.text())


def run_probe(args: argparse.Namespace) -> int:
    """``eventlog handoff probe``."""
    def probe() -> handoff.ProbeReport:
        tz, at = judging(args)
        opts = handoff.ProbeOnce(log=args.log, account=args.account,
                                 probe_cmd=command_words(args.probe_cmd, "--probe-cmd"), timeout_s=args.timeout,
                                 kill_grace_s=args.kill_grace, expected=args.expect, actor=args.actor, at=at,
                                 assume_tz=tz)
        opts.check()
        done: handoff.ProbeReport = stoppable("handoff probe", lambda: handoff.probe_once(opts))
        return done

    done = person_acts(args.log, f"a probe's result of {args.account} (so no probe was run)", probe)
    if isinstance(done, int):
        return done
    for line in done.text():
        mark_done(f"{args.log}: {line} (recorded)")
    return report(done, args.json, done.text())
