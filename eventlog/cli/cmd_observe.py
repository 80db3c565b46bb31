"""``eventlog observe lane``: a lane's worker log, repository, progress and stop files into lane events.

A thin shell over ``eventlog.runners.observe``.
"""

from __future__ import annotations

import argparse
from typing import Any

from eventlog.cli.common import (
    UsageError,
    add_judging,
    add_log,
    command_parser,
    error,
    judging,
    run_appending,
    stoppable,
)
from eventlog.observe import FINISHED
from eventlog.runners import observe
from projections.ahead import TOLERANCE_S
from projections.triage import duration_words

DESCRIPTION = """\
Read what a lane leaves on disk (seed 001) and append to LOG (created if absent)
only what changed since the log's latest events of PRODUCT: nothing changed,
nothing written, so it is safe every 10 minutes from cron.

  --worker-log FILE   job_finished for each "job finished" line not older than the
                      lane's latest: by default JOB_FINISHED job=ID ts=TIME (TIME an
                      epoch or ISO 8601; job= optional), or --finished-regex with
                      named groups ts and (optionally) job_id. A line older than the
                      lane's latest is counted (older: FILE:LINE), not appended; a
                      last line without its newline is not read until it ends
                      (unfinished) while it may still become one: it holds
                      JOB_FINISHED or ends with its start (with --finished-regex:
                      the regex finds it already)
  --repo DIR          repo_commit when git rev-parse REF (--ref, HEAD) differs from
                      the lane's latest head, at the time the ref moved there (its
                      reflog; the committer date without one)
  --progress FILE     status_updated at the file's mtime when newer than the lane's
                      latest, with state idle when the file says so, else running:
                      a JSON object's top-level "state" (any layout), else the first
                      state line: state, State or STATE at the start of a line or of
                      a Markdown bullet (-, *, +), then : or = and the state in any
                      case, either maybe quoted or in emphasis: state: idle,
                      state=idle, "state": "idle", - state: idle, State: Idle,
                      - **State:** idle
  --stop-file FILE    lane_stopped (at its mtime) when it appears, lane_started (now)
                      when it does not exist; one that cannot be checked (a symlink
                      loop, no permission) is a problem: the stop stays as LOG says

An option given an empty value is not given (--worker-log= observes no worker
log; --finished-regex= and --ref= are their defaults), so a unit can pass each
source from a variable a lane leaves unset (ops/systemd/lane.env).

Times without an offset (worker log lines) and mtimes are written in --assume-tz
(default: the local zone).

A worker log line or a progress file mtime more than {ahead} ahead of now (--at;
2062 typed for 2026, a clock ahead) is not appended and is named on stderr
(counted in dated_ahead); a job_finished or status_updated LOG holds dated ahead
is never the lane's latest, so it keeps no line with a true time out.

Two at once on one LOG take turns (LOG.observe.lock); one that waits for it
over a second says so on stderr, once: the lock file, and the pid and command
that hold it (it goes on when that one ends).""".replace(
    "{ahead}", duration_words(TOLERANCE_S))

EXITS = """\
0  observed (appended what changed, or nothing)
1  a source could not be read or checked, or a time of it lies ahead of now (the
   others were observed), the worker log's last line, which may still become a
   "job finished" line, has had no newline for a minute (not read), LOG has bad lines
   (named; the rest was observed), LOG could not be written, nor its lock file
   LOG.observe.lock created or opened beside it (named, and why; a symbolic link
   there is never followed: nothing was done), or SIGTERM or SIGINT stopped it (git's
   process group is stopped; nothing appended)
2  bad usage, or LOG cannot be read
3  a conflict (an event the log refuses)"""


def register(sub: Any) -> None:
    """Add ``observe lane``."""
    obs = command_parser(sub, "observe", help="turn what users already have on disk into events",
                         description="Observe a source and append only what changed.\n\n"
                         "  eventlog observe lane LOG PRODUCT ...   a lane (seed 001)", exits=EXITS)
    osub = obs.add_subparsers(dest="source", required=True, metavar="SOURCE")
    p = command_parser(osub, "lane", help="a lane's worker log, repository, progress and stop files",
                       description=DESCRIPTION, exits=EXITS)
    add_log(p, "the log to append to (created if absent)")
    p.add_argument("product", metavar="PRODUCT", help="the lane's product name")
    p.add_argument("--worker-log", metavar="FILE", help="the worker's log (job finished lines)")
    p.add_argument("--finished-regex", default=FINISHED, metavar="RE",
                   help="a job finished line, with named groups ts and job_id (default: JOB_FINISHED job=ID ts=TIME)")
    p.add_argument("--repo", metavar="DIR", help="the product repository")
    p.add_argument("--ref", default="HEAD", metavar="REF", help="the ref that moves when work is picked up (HEAD)")
    p.add_argument("--progress", metavar="FILE", help="the progress file")
    p.add_argument("--stop-file", metavar="FILE", help="the file that stops the lane on purpose")
    add_judging(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run_observe_lane)


def run_observe_lane(args: argparse.Namespace) -> int:
    """``eventlog observe lane``."""
    try:
        tz, at = judging(args)
    except UsageError as err:
        error(str(err))
        return 2
    return run_appending(args, lambda: stoppable("observe lane", lambda: observe.observe_lane(
        observe.LaneObservation(log=args.log, product=args.product, worker_log=args.worker_log,
                                finished_regex=args.finished_regex or FINISHED, repo=args.repo,
                                ref=args.ref or "HEAD",
                                progress=args.progress, stop_file=args.stop_file, assume_tz=tz, at=at))),
        lambda done: (done.text(), []))
