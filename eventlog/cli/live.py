"""``eventlog follow``: running next to the writers (``status`` and ``explain`` are in ``cmd_status``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from eventlog.cli.common import (
    UsageError,
    add_judging,
    add_log,
    command_parser,
    dumps,
    duration,
    error,
    judging,
)
from eventlog.clock import At
from eventlog.follow import (
    TICK_S,
    Followed,
    Follower,
    Leftovers,
    OutputRefused,
    follow,
    hold_outputs,
    judged,
    write_text,
)
from eventlog.logs import is_url, open_log, unusable, written_over
from eventlog.prom import of_replay
from eventlog.snapshot import why_not_written
from projections.runner import Runner

FOLLOW = """\
Replay LOG, then watch it: on every change fold only the new complete lines and
rewrite the dump (atomically: a temporary file, then rename), and with --prom the
Prometheus text exposition. The dump is the one `tools/replay --at NOW LOG` would
print when it is written (judged as of now, or --at). With no new line it judges
again and rewrites both at least every --tick, so a watcher that stopped shows
as late, a claim as stale, a lane as stalled within one tick. The Prometheus
file carries the time it was judged at, the last event's time, each watcher's
last run and period, and the tick (docs/METRICS.md has the alerts). A partial
last line is waited for; a truncated or replaced log is replayed from the start
(said on stderr). A LOG that does not exist (yet, or any more), whose path holds
a directory, a FIFO or a device while it runs, or that it may no longer read
(its permissions changed), is waited for (said on stderr); meanwhile the dump
holds "log_missing": true beside the counts of an empty log (read them as "no
verdict", never as an all-clear), and the Prometheus file recovery_log_missing
1; so is a nats:// stream its server does not hold (not made yet, or gone: a
server that lost its store), read from its start once it is there. A nats://
LOG whose server cannot be reached or does not answer (noticed within the
URL's timeout, at the start too) is waited for, for ever, and said on stderr;
meanwhile the dump holds "log_unreachable" {since, reason, seq} beside the
counts as of that seq, and recovery_log_unreachable is 1; once the server is
back, the stream is read up to its end at once and followed again. Committed
lines that vanish while it runs (a truncated log, a log moved away and made
again: the log is never rotated, every verdict comes from all of it; a stream
gone and made again), or while it was stopped (the --snapshot of the log or
stream held them), stay counted until it restarts: the dump's "lines_vanished"
and recovery_vanished_lines_total. The snapshot is saved at most every 10 s
and on exit, only when the log moved past what it holds. It is a cache: one
that cannot be saved is said once on stderr (and when it is saved again),
recovery_snapshot_unsaved is 1 meanwhile, and it goes on.
No output may be LOG (by any path or link), its sidecar, a runner's lock
beside it, another output, or a follow's lock. One follow per output: each
--dump, --prom and --snapshot is locked (flock on .NAME.follow.lock beside it,
holding the pid) while it runs, and a follow started on an output another
follow (or a replay --snapshot) writes is refused, naming its pid; the kernel
releases the lock when the process ends, however it ends. What a writer killed
mid-write left beside an output it locked (.NAME.<16 hex>.tmp) is removed once
a minute old, and named on stderr. SIGINT and SIGTERM end it cleanly."""

FOLLOW_EXITS = """\
0  stopped by SIGINT or SIGTERM
2  bad usage (an output that is LOG, its sidecar, a runner's lock, another output or a follow's
   lock: nothing is written), an output another running follow or replay --snapshot writes
   (its pid named: nothing is written), a log that cannot be followed (a directory, a FIFO or a
   device, a file that cannot be read, one in a directory that does not exist; a stream of another
   prefix), or a --dump or --prom that cannot be written (named on stderr)"""



def register(sub: Any) -> None:
    """Add ``follow``."""
    p = command_parser(sub, "follow", help="keep a dump (and Prometheus metrics) of LOG fresh",
                       description=FOLLOW, exits=FOLLOW_EXITS)
    add_log(p)
    p.add_argument("--dump", required=True, metavar="PATH", help="rewritten atomically on every change and every tick")
    p.add_argument("--prom", metavar="PATH", help="also write the Prometheus text exposition here")
    p.add_argument("--snapshot", metavar="PATH", help="start from this snapshot and keep it up to date")
    p.add_argument("--tick", type=tick, default=TICK_S, metavar="DURATION",
                   help=f"with no new line, judge again and rewrite the outputs this often ({TICK_S:g}s)")
    add_judging(p)
    p.set_defaults(run=run_follow)


# -- follow ----------------------------------------------------------------------


def tick(text: str) -> float:
    """An argparse ``type``: ``--tick``, a duration of more than 0 seconds."""
    value = duration(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the tick must be more than 0 seconds")
    return value


def follow_writer(dump_path: str, prom_path: str | None, at: At, tick_s: float | None = None
                  ) -> Callable[[Followed], None]:
    """What ``follow`` calls on every change and every tick: judge as of ``at`` (now), rewrite the outputs.

    The dump goes to ``dump_path`` and, when given, the Prometheus exposition (with
    the tick as a gauge, and whether the follower's snapshot is saved when it keeps one) to ``prom_path``, each
    replaced atomically.
    """

    def write(follower: Followed) -> None:
        dump = judged(follower, at)
        _write_output(dump_path, dumps(dump) + "\n")
        if prom_path:
            unsaved = None if getattr(follower, "snapshot_path", None) is None else \
                getattr(follower, "unsaved", None) is not None
            _write_output(prom_path, of_replay(follower.replay, dump, tick_s, live=at.live, snapshot_unsaved=unsaved))

    return write


class OutputError(Exception):
    """An output of ``follow`` (the dump, the Prometheus file) that cannot be written: the message names it."""


def _write_output(path: str, text: str) -> None:
    """:func:`write_text`, an OSError raised as :class:`OutputError` naming ``path`` (not the log followed) and
    why (:func:`eventlog.snapshot.why_not_written`)."""
    try:
        write_text(path, text)
    except OSError as err:
        raise OutputError(f"cannot write {path}: {why_not_written(path, err)}") from err


def swept(write: Callable[[Followed], None], leftovers: Leftovers) -> Callable[[Followed], None]:
    """``write``, then :meth:`Leftovers.again`: a file a writer killed mid-write left beside an output, too young
    to remove when follow started, is removed on the first change or tick after it comes of age."""

    def write_and_sweep(follower: Followed) -> None:
        write(follower)
        leftovers.again()

    return write_and_sweep


def run_follow(args: argparse.Namespace) -> int:
    """Follow LOG until SIGINT/SIGTERM; exit 0 then."""
    try:
        tz, at = judging(args)
    except UsageError as err:
        error(str(err))
        return 2

    outputs = [("--dump", args.dump), ("--prom", args.prom), ("--snapshot", args.snapshot)]
    clash = written_over(args.log, outputs)
    if clash is not None:
        error(f"{clash}; not following it")
        return 2
    never = None if is_url(args.log) else unusable(args.log)  # a FIFO would block in open() for good, deaf to SIGTERM
    if never is not None:
        error(f"{never}; not following it")
        return 2
    with ExitStack() as held:  # each output's lock, until follow ends
        try:
            holding = hold_outputs(outputs, held)
        except OutputRefused as err:
            error(str(err))
            return 2
        for note in holding.notes:
            error(note)
        leftovers = Leftovers(holding.locked, error)
        write = swept(follow_writer(args.dump, args.prom, at, args.tick), leftovers)
        if is_url(args.log):
            return _follow_stream(args, tz, write)
        return _follow_file(args, tz, write)


def _follow_file(args: argparse.Namespace, tz: Any, write: Callable[[Any], None]) -> int:
    """Follow a log file (:func:`eventlog.follow.follow`)."""
    follower = Follower(args.log, Runner, args.snapshot, assume_tz=tz)
    try:
        follow(follower, write, lambda note: error(note), tick_s=args.tick)
    except OutputError as err:
        error(str(err))
        return 2
    except OSError as err:
        error(f"cannot follow {args.log}: {err.strerror or err}")
        return 2
    return 0


def _follow_stream(args: argparse.Namespace, tz: Any, write: Callable[[Any], None]) -> int:
    """Follow a JetStream stream with an ordered consumer (``eventlog.jetstream.follow``)."""
    try:
        from eventlog.jetstream import JetStreamLog, StreamFollower
        from eventlog.jetstream import follow as follow_stream

        with open_log(args.log, Runner, assume_tz=tz) as log:
            assert isinstance(log, JetStreamLog)
            follow_stream(StreamFollower(log, args.snapshot), write, lambda note: error(note), tick_s=args.tick)
    except OutputError as err:
        error(str(err))
        return 2
    except OSError as err:
        error(f"cannot follow {args.log}: {err}")
        return 2
    return 0
