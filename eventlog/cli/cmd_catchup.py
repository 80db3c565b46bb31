"""``eventlog catchup``: re-run today's skipped jobs once the quota is back (seed 002).

A thin shell over ``eventlog.runners.catchup``.
"""

from __future__ import annotations

import argparse
from typing import Any

from eventlog.cli.common import (
    UsageError,
    add_judging,
    add_log,
    command_parser,
    duration,
    judging,
    refused,
    report,
    stoppable,
)
from eventlog.probe import EXPECTED
from eventlog.runners import catchup, schedulers
from eventlog.runners.common import command_words

DESCRIPTION = """\
Re-run today's quota-skipped jobs, one at a time:

- first, what feeds it (not with --dry-run): --import-launchd DIR (the jobs),
  --import-circuit FILE (the guard's circuit state) and --import-quota-log
  PATTERN (the files the guard writes its markers to: a glob, repeatable) run
  eventlog import launchd, circuit and quota-log on LOG, in that order, under
  the catch-up's lock; ~ is expanded, and an option given an empty value is not
  given (a unit passes each from a variable). What one cannot import (a file it
  cannot read, a directory that is none, a PATTERN that matches no file) is said
  on stderr (exit 1), and the pass goes on with the rest; a circuit FILE that
  does not exist while LOG holds no circuit event is only said (the guard need
  not write it before it first trips). A guarded job LOG registers that no
  plist of DIR holds is said with the line that retires it (to paste: its
  job_registered with guarded false);
- a guarded job whose calendar slot of today passed 2 h ago or more with no
  marker of today at all (neither skipped nor ran) is said on stderr on every
  pass, --dry-run included, until a marker of today comes or the job is retired
  (exit 1): nothing feeds its markers (is eventlog import quota-log running?),
  the job did not run today, or it was removed; no skip of it could ever be
  re-run (eventlog explain LOG LABEL says what to do). A slot earlier than the
  job's latest registration, or less than 2 h before midnight, is not judged
  (the next day's are). A log with no guarded job at all is said so too (exit
  1): nothing is judged (where no quota-guarded job runs, do not run catch-up);
- the candidates are those of the catch-up projection as of now (or --at);
  "today" and a slot's hour are the machine's zone's (TZ), or --assume-tz's
  (now taken in it), by its rules at each instant (a day the clock changes
  included); what it prints names that day and zone ("no candidates today
  (2026-12-02 in Asia/Tokyo)"). A TZ that names no zone this machine knows
  (Asia/Tokio; the C library then takes UTC) is refused when judging now
  without --assume-tz, --dry-run too (exit 2): give --assume-tz UTC for UTC;
- no candidates, --dry-run, or the circuit open: no probe, nothing kicked;
  --dry-run reads the log only (no lock file: it works in a read-only directory)
  and says when the circuit is open (until when: a run now re-runs nothing),
  when another catch-up holds the lock (a run now does nothing), and what a
  run now would say and do of an open re-run (below; the scheduler is asked,
  nothing is written; with no --scheduler, as with --kick-cmd), exit 1 too;
- the probe (CMD, no shell) is judged as the failback probe is: only its
  expected answer (--expect, PING_OK) with exit 0 is ok; "usage limit reached"
  with exit 0 is quota_limited. Not ok, a timeout, or a probe that cannot
  start: nothing kicked (a probe killed by a signal, or exit 126/127, is
  named so);
- else each candidate in turn, never two at once: re-judged on the log as it is
  then (a job that ran meanwhile, or a circuit that opened again, stops it),
  catchup_kicked appended (with timeout_s and kill_grace_s: by then its end must
  be written), the job re-run and waited for, then catchup_finished appended
  (exited with exit, or timeout_killed) before the next starts:
  --scheduler launchd   launchctl kickstart DOMAIN/LABEL, then launchctl list
                        every --poll until it no longer runs; over --timeout
                        launchctl kill SIGTERM, --kill-grace, then SIGKILL (the
                        job runs under launchd, outside our process group)
  --scheduler systemd   the same with systemctl start --no-block UNIT,
                        systemctl show, systemctl kill --signal=...
  --kick-cmd CMD        CMD with the label as its last argument (after --
                        when it starts with -) and in CATCHUP_LABEL; over
                        --timeout its process group gets SIGTERM, then
                        SIGKILL after --kill-grace; its exit is the re-run's
                        (work it left running is not waited for)
  A re-run that cannot start is recorded as exited with exit 127 (a kick call
  that timed out is checked with the scheduler first: the job may have
  started). No end is recorded that did not happen: a job that even SIGKILL
  did not end, or whose start cannot be told, keeps its catchup_kicked open,
  and the catch-up kicks nothing more. No job is kicked whose catchup_kicked
  could not be written, and nothing more after a line that could not be: a
  re-run whose catchup_finished could not be written (a full disk) is still
  reported with its exit, and stderr prints the exact line to paste
  (... | eventlog append LOG); until it is, the log holds the re-run open.
- an open re-run (catchup_kicked, no catchup_finished) that the catch-up which
  kicked it left behind (it died, was killed, or could not stop it): with
  --scheduler, the scheduler is asked: still running (or it cannot tell),
  nothing is kicked and the command that stops it is said; no longer running,
  its end is written (exited, no exit status: how it ended is unknown). With
  --kick-cmd nobody can tell, so nothing is kicked until a person records its
  end (the command is said): re-runs never overlap.
- every re-run that did not end well (killed at its timeout, an exit other
  than 0 or none, no end past its timeout, twice its kill grace and 5 min) is
  said on stderr on every pass, --dry-run included, until the job runs again:
  eventlog explain LOG LABEL says how to run it by hand.
- one catch-up at a time per log: a second one finds LOG.catchup.lock (beside
  the log file itself, symbolic links resolved) held, says so on stderr with
  the pid and command of the one that holds it, and does nothing. A lock file
  that cannot be opened or created (another user's, a directory this user may
  not write, no inode left) is said, naming it and why, and nothing is done
  (exit 1).
- SIGTERM or SIGINT: the running probe or re-run is stopped as over --timeout
  (its process group, or the job through the scheduler: SIGTERM, --kill-grace,
  SIGKILL), nothing more is kicked, what was cut short is said on stderr, and
  it exits 1; once the stopped re-run no longer runs its end is written
  (exited, no exit status), and the job is not kicked again today.

Why it exits 1 is on stderr, one line each."""

EXITS = """\
0    done: re-runs exited 0, or nothing to do (no candidates, a dry run, the
     circuit open, another catch-up running)
1    what --import-* names could not be imported, no guarded job is in the log,
     a guarded job has no marker of today 2 h after its slot (nothing feeds
     it?), the probe was not ok, a re-run did not exit 0, could not start or
     could not be stopped, a re-run of an earlier pass did not end well or may
     still run (until the job runs again), the log could not be read or
     written (a re-run's end not written is said with the line to paste), nor
     its lock file LOG.catchup.lock created or opened beside it (named, and why;
     a symbolic link there is never followed: nothing done), it takes no append
     (no event log), SIGTERM or SIGINT stopped it,
     or LOG has bad lines (a catch-up writes no line per pass, so it cannot
     tell new ones from old: each counts; the rest is still judged and kicked)
2    bad usage (a command still the '<...>' placeholder of a copied command,
     a TZ that names no zone, judging now without --assume-tz) or no such
     log: nothing run or written"""


def register(sub: Any) -> None:
    """Add ``catchup``."""
    p = command_parser(sub, "catchup", help="re-run today's quota-skipped jobs, one at a time",
                       description=DESCRIPTION, exits=EXITS)
    add_log(p)
    p.add_argument("--probe-cmd", metavar="CMD", help="checks that the quota is back (exit 0); needed unless --dry-run")
    p.add_argument("--kick-cmd", metavar="CMD", help="re-runs one job (its label: last argument, CATCHUP_LABEL)")
    p.add_argument("--scheduler", choices=("launchd", "systemd"),
                   help="re-run jobs by their label through launchd (launchctl) or systemd (systemctl)")
    p.add_argument("--launchd-domain", metavar="DOMAIN", help="launchd domain of the jobs (gui/UID)")
    p.add_argument("--systemd-user", action="store_true", help="the user's systemd manager (systemctl --user)")
    p.add_argument("--poll", type=duration, default=schedulers.POLL_S, metavar="DURATION",
                   help="how often a job under --scheduler is looked at (2s)")
    p.add_argument("--expect", default=EXPECTED, metavar="TEXT", help=f"a healthy probe's answer ({EXPECTED})")
    p.add_argument("--dry-run", action="store_true", help="print the candidates; no probe, no kick, nothing written")
    p.add_argument("--import-launchd", metavar="DIR", help="first, eventlog import launchd LOG DIR: the jobs' plists")
    p.add_argument("--import-circuit", metavar="FILE",
                   help="first, eventlog import circuit LOG FILE: the quota guard's circuit state file")
    p.add_argument("--import-quota-log", metavar="PATTERN", action="append", default=[],
                   help="first, eventlog import quota-log LOG with the files PATTERN matches (a glob, ~ expanded; "
                        "repeatable): where the guard writes its markers")
    add_judging(p)
    p.add_argument("--timeout", type=duration, default=catchup.KICK_TIMEOUT_S, metavar="DURATION",
                   help="re-run timeout (45m)")
    p.add_argument("--kill-grace", type=duration, default=catchup.KILL_GRACE_S, metavar="DURATION",
                   help="SIGTERM to SIGKILL (30s)")
    p.add_argument("--probe-timeout", type=duration, default=catchup.PROBE_TIMEOUT_S, metavar="DURATION",
                   help="probe timeout (5m)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run_catchup)


def run_catchup(args: argparse.Namespace) -> int:
    """``eventlog catchup``: see ``eventlog catchup --help``."""
    try:
        tz, at = judging(args)
        opts = catchup.Options(
            log=args.log,
            probe_cmd=command_words(args.probe_cmd, "--probe-cmd") if args.probe_cmd else None,
            kick_cmd=command_words(args.kick_cmd, "--kick-cmd") if args.kick_cmd else None,
            scheduler=schedulers.scheduler(args.scheduler, launchd_domain=args.launchd_domain,
                                           systemd_user=args.systemd_user) if args.scheduler else None,
            poll_s=args.poll, expected=args.expect,
            dry_run=args.dry_run, at=at, timeout_s=args.timeout, kill_grace_s=args.kill_grace,
            probe_timeout_s=args.probe_timeout, assume_tz=tz, import_launchd=args.import_launchd or None,
            import_circuit=args.import_circuit or None,
            import_quota_log=[pattern for pattern in args.import_quota_log if pattern],
        )
        opts.check()
    except (UsageError, ValueError) as err:
        return refused(err)
    done = stoppable("catchup", lambda: catchup.run_catchup(opts))
    return report(done, args.json, done.text(), done.notes)
