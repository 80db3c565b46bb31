"""``eventlog stalls`` and ``eventlog lanes``: stall verdicts, and the runner that sends resumes (seed 001).

``eventlog stalls LOG [--at TIME] [--assume-tz ZONE] [--unpicked-minutes 90]
[--quiet-hours 8]`` judges every lane as of TIME (default: now) and prints the
``impl-lane-watch/v1`` record as one line of JSON (``checked_at`` is TIME as
given, or now). Exit 1 when a lane is stalled, 0 when none is, 2 bad usage or
an unreadable file. It writes nothing.

``eventlog lanes LOG --enqueue-cmd CMD [--timeout 300] [--json]`` appends a
``lane_check`` (ts: now), then for each lane that check finds stalled and that
no ``resume_enqueued`` covers yet (same product and kind, after the stall's
anchor), runs CMD (split as a shell would, run without one) with the product
and the kind as its last two arguments and in ``RESUME_PRODUCT`` and
``RESUME_KIND``, and then appends ``resume_enqueued``. The last non-empty line
CMD prints on stdout, if any, is its ``task_branch``. Stopped and idle lanes
are never stalled, so never resumed.

- CMD fails (non-zero exit, over ``--timeout``: SIGTERM then SIGKILL to its
  process group, or cannot start): no ``resume_enqueued`` is appended, the
  failure goes to stderr and the exit status is 1; the stall is still
  uncovered, so the next run tries again.
- The resume is appended after CMD succeeded: a crash between the two sends
  it again on the next run (at least once, never silently lost).
- Two runners of one log take turns (``LOG.lanes.lock``), so the second sees
  the first's ``resume_enqueued`` and does not send the same resume again.
- Exit 0 done (stalls resumed or already covered), 1 a CMD failed, 2 bad
  usage or no such log, 3 the append was refused.
"""

from __future__ import annotations

import argparse
from typing import Any

from eventlog.appender import AppendError
from eventlog.cli.cmd_catchup import log_exists, now_local, state_of
from eventlog.cli.common import UsageError, append_failed, dumps, error, judging, record_line, replay_log
from eventlog.cli.process import command, run_bounded, runner_lock
from eventlog.logs import Log, LogUnavailable, open_log
from projections.runner import Runner

#: How long CMD may take to enqueue one resume.
ENQUEUE_TIMEOUT_S = 300.0
#: SIGTERM to SIGKILL for a CMD over its timeout.
ENQUEUE_KILL_GRACE_S = 5.0


def register(sub: Any) -> None:
    """Add ``stalls`` and ``lanes``."""
    parts = (__doc__ or "").split("\n\n")
    p = sub.add_parser("stalls", help="judge every lane now (or --at); exit 1 when one is stalled",
                       description=parts[1] if len(parts) > 1 else None)
    p.add_argument("log", metavar="LOG")
    p.add_argument("--at", metavar="TIME", help="judge as of TIME instead of now")
    p.add_argument("--assume-tz", metavar="ZONE", help="zone for times written without an offset")
    p.add_argument("--unpicked-minutes", type=float, default=90, metavar="N", help="job-unpicked after N min (90)")
    p.add_argument("--quiet-hours", type=float, default=8, metavar="N", help="status-quiet after N hours (8)")
    p.set_defaults(run=run_stalls)

    q = sub.add_parser(
        "lanes",
        help="record a lane check and send a resume for each new stall",
        description="\n\n".join(parts[2:]) if len(parts) > 2 else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    q.add_argument("log", metavar="LOG")
    q.add_argument("--enqueue-cmd", required=True, metavar="CMD", help="sends one resume: CMD ... PRODUCT KIND")
    q.add_argument("--timeout", type=float, default=ENQUEUE_TIMEOUT_S, metavar="SECONDS",
                   help="CMD timeout (300)")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q.set_defaults(run=run_lanes)


def run_stalls(args: argparse.Namespace) -> int:
    """``eventlog stalls``: the record of every lane as of TIME; exit 1 when one is stalled."""
    try:
        tz, at = judging(args)
    except UsageError as err:
        error(str(err))
        return 2
    runner = Runner(unpicked_minutes=args.unpicked_minutes, quiet_hours=args.quiet_hours)
    try:
        replay_log(args.log, assume_tz=tz, runner=runner)
    except OSError as err:
        error(f"cannot read {args.log}: {err.strerror or err}")
        return 2
    if at is None:
        now = now_local()
        at = (now, now.isoformat())
    record = runner.lanes.judge(*at)
    print(record_line(record))
    return 1 if any(result["stalled"] for result in record["results"]) else 0


def run_lanes(args: argparse.Namespace) -> int:
    """``eventlog lanes``: see the module's docstring."""
    try:
        argv = command(args.enqueue_cmd, "--enqueue-cmd")
        if not log_exists(args.log):
            raise UsageError(f"cannot read {args.log}: no such log file")
    except (UsageError, LogUnavailable) as err:
        error(str(err))
        return 2
    try:
        with runner_lock(args.log, "lanes", wait=True):
            return _lanes(args, argv)
    except AppendError as err:
        return append_failed(err)
    except OSError as err:
        error(f"{args.log}: {err.strerror or err}")
        return 2


def _lanes(args: argparse.Namespace, argv: list[str]) -> int:
    with open_log(args.log) as log:
        return _lanes_on(log, args, argv)


def _lanes_on(log: Log, args: argparse.Namespace, argv: list[str]) -> int:
    checked_at = now_local().isoformat()
    log.append([{"type": "lane_check", "ts": checked_at}])
    lanes = state_of(log).lanes
    record = next(r for r in reversed(lanes.checks) if r["checked_at"] == checked_at)
    report: dict[str, Any] = {"check": record, "enqueued": [], "already_enqueued": [], "failed": []}
    lines: list[str] = []
    for result in record["results"]:
        product = result["product"]
        if not result["stalled"]:
            lines.append(f"{product}: {result['reason']}")
            continue
        kind = result["kind"]
        if lanes.covered(product, kind):
            report["already_enqueued"].append({"product": product, "kind": kind})
            lines.append(f"{product}: {kind}, resume already enqueued")
            continue
        failure = None
        try:
            ran = run_bounded([*argv, product, kind], env={"RESUME_PRODUCT": product, "RESUME_KIND": kind},
                              timeout=args.timeout, grace=ENQUEUE_KILL_GRACE_S, capture=True)
        except OSError as err:
            failure = f"could not start: {err}"
        else:
            if ran.timed_out:
                failure = f"timed out after {args.timeout:g} s"
            elif ran.exit != 0:
                failure = f"exit {ran.exit}"
        if failure is not None:
            error(f"{product}: {kind}: --enqueue-cmd failed ({failure}); no resume_enqueued, the next run retries")
            report["failed"].append({"product": product, "kind": kind, "error": failure})
            lines.append(f"{product}: {kind}, enqueue FAILED ({failure})")
            continue
        event: dict[str, Any] = {"type": "resume_enqueued", "product": product, "kind": kind}
        branch = task_branch(ran.stdout)
        if branch is not None:
            event["task_branch"] = branch
        log.append([event])
        report["enqueued"].append({"product": product, "kind": kind, "task_branch": branch})
        lines.append(f"{product}: {kind}, resume enqueued" + (f" (task branch {branch})" if branch else ""))
    if args.json:
        print(dumps(report))
    else:
        print(f"lane check at {checked_at}")
        for line in lines:
            print(f"  {line}")
    return 1 if report["failed"] else 0


def task_branch(stdout: str) -> str | None:
    """The last non-empty line of CMD's stdout, stripped, or None."""
    for line in reversed(stdout.splitlines()):
        if line.strip():
            return line.strip()
    return None
