"""``eventlog replay`` (and ``tools/replay``): dumps, checks, and the lane-check records.

A LOG is a file or a ``nats://HOST:PORT/STREAM`` JetStream stream; a stream's dump is
the same as its file's would be (its ``torn_tail`` is always false).
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from contextlib import ExitStack
from datetime import tzinfo
from typing import Any

from eventlog.cli.common import (
    LOG_HELP,
    UsageError,
    add_judging,
    add_thresholds,
    command_parser,
    dumps,
    duration,
    error,
    judging,
    leave_at_exit,
    log_path,
    print_json,
    record_line,
    replay_log,
    say,
)
from eventlog.clock import LAST_LINE
from eventlog.jobs import MAX_JOBS, JobFailed, replay_in_jobs
from eventlog.logs import is_url, open_log, written_over
from eventlog.replay import BadLine, Replay
from projections.runner import Runner, in_units, thresholds

EXITS = """\
0  done
1  a --check mismatch
2  bad usage, a file that cannot be read, or (with --strict) bad input"""

DESCRIPTION = """\
Replay each LOG from empty state and print its dump (one line of JSON each),
judged as of the ts of the log's last event (its last line applied or rejected:
not the largest ts, and a bad line does not count) unless --at is given: that
is what makes a fixed log a test. A LOG is a file or a nats://HOST:PORT/STREAM
stream; a stream's dump is the same as its file's would be."""


def register(sub: Any) -> None:
    """Add the ``replay`` subcommand."""
    p = command_parser(sub, "replay", help="replay logs and print one dump each", description=DESCRIPTION,
                       exits=EXITS)
    p.add_argument("logs", nargs="*", metavar="LOG", type=log_path, help=LOG_HELP)
    add_judging(p, default="the log's last event")
    p.add_argument("--checks", metavar="LOG", type=log_path, help="print only the impl-lane-watch/v1 records of LOG")
    p.add_argument("--check", action="store_true", help="compare each dump with LOG's .expected.json")
    p.add_argument("--strict", action="store_true", help="stop with exit 2 at the first bad line")
    p.add_argument("--stale-after", type=duration, metavar="DURATION",
                   help="stale claim age (default: the failback watcher's, as its heartbeat says, else 30m)")
    p.add_argument("--max-inflight", type=int, default=2, metavar="N", help="claims at once (2)")
    add_thresholds(p)
    p.add_argument("--snapshot", metavar="PATH",
                   help="start from this snapshot when it matches LOG, and save the new state to it (under "
                        "follow's lock on it: not while a follow keeps it, said on stderr)")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="fold the domains in N processes (1 to 4; a file LOG; the same dump)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Replay each LOG on its own and print or check its dump."""
    try:
        tz, at = judging(args, default=LAST_LINE, local=False)  # the same dump on every machine
    except UsageError as err:
        error(str(err))
        return 2
    if args.checks:
        if args.logs or args.check:
            error("--checks takes exactly one LOG")
            return 2
        logs = [args.checks]
    else:
        logs = args.logs
    if not logs:
        error("no LOG given")
        return 2
    if args.snapshot and len(logs) != 1:
        error("--snapshot takes exactly one LOG")
        return 2
    clash = written_over(logs[0], [("--snapshot", args.snapshot)]) if args.snapshot else None
    if clash is not None:
        error(f"{clash}; nothing replayed")
        return 2
    if not 1 <= args.jobs <= MAX_JOBS:
        error(f"--jobs must be 1 to {MAX_JOBS} (one process per group of domains)")
        return 2
    if args.jobs > 1 and (args.snapshot or any(is_url(log) for log in logs)):
        error("--jobs replays files from the start: not with --snapshot or a nats:// LOG")
        return 2
    status = 0
    for path in logs:
        try:
            lane_thresholds = args.unpicked is not None or args.quiet is not None
            if args.snapshot and not lane_thresholds:
                replay = replay_from_snapshot(path, args.snapshot, tz, args.strict)
                assert isinstance(replay.folder, Runner)
                runner = replay.folder
                runner.configure(stale_after_s=args.stale_after, max_inflight=args.max_inflight)
            elif args.jobs > 1:
                unpicked_minutes, quiet_hours = in_units(args.unpicked, args.quiet)
                replay = replay_in_jobs(path, args.jobs, assume_tz=tz, strict=args.strict,
                                        unpicked_minutes=unpicked_minutes, quiet_hours=quiet_hours)
                assert isinstance(replay.folder, Runner)
                runner = replay.folder
                runner.configure(stale_after_s=args.stale_after, max_inflight=args.max_inflight)
            else:
                if args.snapshot:  # a lane_check that states no thresholds is judged with these when folded
                    error("--unpicked and --quiet replay from the start, without the snapshot")
                runner = thresholds(args.unpicked, args.quiet)
                runner.configure(stale_after_s=args.stale_after, max_inflight=args.max_inflight)
                replay = replay_log(path, assume_tz=tz, strict=args.strict, runner=runner)
        except OSError as err:
            error(f"cannot read {path}: {err.strerror or err}")
            status = 2
            continue
        except BadLine as bad:
            error(f"{path}:{bad.line}: {bad.reason}")
            return 2
        except JobFailed as err:
            error(f"{path}: {err}")
            return 2
        if args.checks:
            for record in runner.lanes.checks:
                print(record_line(record))
            continue
        dump = replay.dump(path, *at.resolve(replay.last_at, replay.last_ts))
        if args.check:
            status = max(status, check(path, dump))
        else:
            print_json(dump)
        leave_at_exit(replay, dump)
    sys.stdout.flush()
    return status


def replay_from_snapshot(path: str, snap: str, tz: tzinfo | None, strict: bool) -> Replay:
    """Replay ``path`` from the snapshot when it matches (else from the start); save the snapshot if it moved.

    Under the snapshot's output lock, as ``follow`` writes it (:func:`eventlog.follow.hold_outputs`, never waited
    for), first sweeping what a writer killed mid-write left beside it. While another process holds it (a follow
    keeping that snapshot) the snapshot is read all the same, and not saved: said once on stderr. A ``path`` that
    is a pipe is replayed from the start, the snapshot neither read nor written (its bytes cannot be read again
    to check the snapshot against them): said once, that alone.
    """
    from eventlog.follow import OutputHeld, hold_outputs, sweep  # here: a replay without --snapshot needs none

    with ExitStack() as held:
        try:
            holding = hold_outputs([("--snapshot", snap)], held, command="replay")
        except OutputHeld as err:
            if not _a_pipe(path):  # else the pipe's own words say the snapshot is not used at all
                error(f"{err.held}: it is read if it matches the log, and not saved")
            return _from_snapshot(path, snap, tz, strict, save=False)
        for note in holding.notes:
            error(note)
        sweep(holding.locked, error)
        return _from_snapshot(path, snap, tz, strict, save=True)


def _a_pipe(path: str) -> bool:
    """Whether the file LOG ``path`` is a pipe (not a URL; one that cannot be looked at is none: opening it says
    why)."""
    try:
        return not is_url(path) and stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


def _from_snapshot(path: str, snap: str, tz: tzinfo | None, strict: bool, save: bool) -> Replay:
    """:func:`replay_from_snapshot` once its lock is settled; ``save``: the snapshot may be written."""
    if is_url(path):
        from eventlog.jetstream import JetStreamLog
        from eventlog.jetstream import replay_from_snapshot as from_stream

        with open_log(path) as log:
            assert isinstance(log, JetStreamLog)
            return from_stream(log, snap, tz, strict, error, save)
    from eventlog import snapshot  # here: a replay without --snapshot does not import it

    with open(path, "rb") as f:
        fresh = Replay(Runner(), tz)
        if not f.seekable():  # a pipe: its bytes cannot be read again to check a snapshot against them
            error(f"{path} is not a file (a pipe?): replayed from the start, without the snapshot {snap} (not "
                  "read, not saved)")
            fresh.feed(f, strict=strict)
            return fresh
        loaded, why = snapshot.load(snap, f, fresh)
        if loaded is None and why != "no snapshot":
            error(f"{why}; replaying from the start")
        replay = loaded or fresh
        loaded_at = None if loaded is None else loaded.offset
        replay.feed(f, strict=strict)
        if not save or replay.offset == loaded_at:
            return replay  # another holds it, or it is still up to date: writing it again would change nothing
        try:
            snapshot.save(snap, f, replay, snapshot.folder_version(replay), path)
        except snapshot.NotSaved as err:  # a cache: the dump is printed all the same
            error(f"snapshot {snap} not saved: {err}")
    return replay


def expected_path(log: str) -> str:
    """``LOG`` minus ``.jsonl`` plus ``.expected.json``."""
    stem = log[: -len(".jsonl")] if log.endswith(".jsonl") else log
    return stem + ".expected.json"


def check(log: str, dump: dict[str, Any]) -> int:
    """Compare a dump with the expected one beside its log; print the differences."""
    path = expected_path(log)
    try:
        with open(path, encoding="utf-8") as f:
            expected = json.load(f)
    except (OSError, ValueError) as err:
        error(f"cannot read {path}: {err}")
        return 2
    problems = differences(expected, dump)
    if not problems:
        say(f"ok       {log}")
        return 0
    say(f"MISMATCH {log} (expected {path})")
    for problem in problems:
        say(f"    {problem}")
    return 1


def differences(expected: Any, actual: Any, where: str = "") -> list[str]:
    """Readable differences between two JSON values (``log`` at the top is not compared)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out: list[str] = []
        for key in expected:
            if not where and key == "log":
                continue
            at = f"{where}.{key}" if where else str(key)
            if key not in actual:
                out.append(f"{at}: missing (expected {dumps(expected[key])})")
            else:
                out.extend(differences(expected[key], actual[key], at))
        for key in actual:
            if key not in expected and (where or key != "log"):
                at = f"{where}.{key}" if where else str(key)
                out.append(f"{at}: unexpected {dumps(actual[key])}")
        return out
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        out = []
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            out.extend(differences(e, a, f"{where}[{i}]"))
        return out
    if expected == actual and (type(expected) is type(actual) or _same_number(expected, actual)):
        return []
    return [f"{where or '(dump)'}: expected {dumps(expected)}, got {dumps(actual)}"]


def _same_number(a: Any, b: Any) -> bool:
    numbers = (int, float)
    return (
        isinstance(a, numbers) and isinstance(b, numbers)
        and not isinstance(a, bool) and not isinstance(b, bool) and a == b
    )
