"""``eventlog follow``, ``eventlog status`` and ``eventlog explain``: running next to the writers."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
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
    replay_log,
    say,
)
from eventlog.cli.timeline import controls_of, timeline_lines
from eventlog.clock import At
from eventlog.events import KEY_FIELDS, type_name
from eventlog.follow import TICK_S, Followed, Follower, follow, judged, write_text
from eventlog.logs import is_url, open_log
from eventlog.prom import of_replay
from eventlog.reader import Reader
from eventlog.status import status_view
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
(said on stderr). A LOG that does not exist yet is waited for (said on stderr); meanwhile
the dump holds "log_missing": true and no verdict, never an all-clear.
SIGINT and SIGTERM end it cleanly."""

FOLLOW_EXITS = """\
0  stopped by SIGINT or SIGTERM
2  bad usage, or a log that cannot be followed (its directory is missing, the stream is lost)"""

STATUS_EXITS = """\
0  nothing needs a person
1  something needs a person (each on its own line, or in needs_person)
2  bad usage or a log that cannot be read"""

EXPLAIN_EXITS = """\
0  done
2  bad usage, a log that cannot be read, or an id no line of LOG names"""


def register(sub: Any) -> None:
    """Add ``follow``, ``status`` and ``explain``."""
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

    s = command_parser(sub, "status", help="what needs a person now, then the headline numbers",
                       description="What needs a person as of now (or --at), one line each, then the "
                       "headline numbers.", exits=STATUS_EXITS)
    add_log(s)
    add_judging(s)
    s.add_argument("--json", action="store_true", help="one JSON object for machines")
    s.set_defaults(run=run_status)

    e = command_parser(sub, "explain", help="the lines that brought one id to its state, and the verdict",
                       description="Every line of LOG that names ID (file:line and the event; rejections "
                       "marked), then the verdict\nas of now (or --at) in each domain that knows ID.",
                       exits=EXPLAIN_EXITS)
    add_log(e)
    e.add_argument("id", metavar="ID", help="a handoff, account, session, product or job label")
    add_judging(e)
    e.add_argument("--json", action="store_true", help="one JSON object for machines")
    e.set_defaults(run=run_explain)


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
    the tick as a gauge) to ``prom_path``, each replaced atomically.
    """

    def write(follower: Followed) -> None:
        dump = judged(follower, at)
        write_text(dump_path, dumps(dump) + "\n")
        if prom_path:
            write_text(prom_path, of_replay(follower.replay, dump, tick_s))

    return write


def run_follow(args: argparse.Namespace) -> int:
    """Follow LOG until SIGINT/SIGTERM; exit 0 then."""
    try:
        tz, at = judging(args)
    except UsageError as err:
        error(str(err))
        return 2

    write = follow_writer(args.dump, args.prom, at, args.tick)
    if is_url(args.log):
        return _follow_stream(args, tz, write)
    follower = Follower(args.log, Runner, args.snapshot, assume_tz=tz)
    try:
        follow(follower, write, lambda note: error(note), tick_s=args.tick)
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
    except OSError as err:
        error(f"cannot follow {args.log}: {err}")
        return 2
    return 0


# -- status ----------------------------------------------------------------------


def run_status(args: argparse.Namespace) -> int:
    """Print what needs a person; exit 1 when anything does."""
    try:
        tz, at = judging(args)
        replay = replay_log(args.log, assume_tz=tz)
    except UsageError as err:
        error(str(err))
        return 2
    except OSError as err:
        error(f"cannot read {args.log}: {err.strerror or err}")
        return 2
    view = status_view(args.log, replay.dump(args.log, *at.resolve(replay.last_at, replay.last_ts)))
    attention, numbers = view["needs_person"], view["headline"]
    if args.json:
        print(dumps(view))
    else:
        say(f"{args.log} as of {view['as_of']}")
        if attention:
            say(f"Needs a person ({len(attention)}):")
            for line in attention:
                say(f"  - {line}")
        else:
            say("Nothing needs a person.")
        p50, p95 = (_seconds(numbers[k]) for k in ("return_p50_s", "return_p95_s"))
        say(f"Failover {numbers['failover']}, failback {numbers['failback']}, return p50 {p50}, p95 {p95}, "
              f"pending {numbers['pending']}, rejected {numbers['rejected']}")
    return 1 if attention else 0


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g} s"


# -- explain ---------------------------------------------------------------------


def lines_of(path: str, ident: str, assume_tz: Any = None) -> list[dict[str, Any]]:
    """Every line of ``path`` (a file or a stream) whose event names ``ident`` in its stream key field."""
    found: list[dict[str, Any]] = []
    reader = Reader(assume_tz)
    with open_log(path) as log:
        for n, raw in log.lines():
            decoded = reader.decode(raw, n)
            if isinstance(decoded, str):
                continue
            ev = decoded[0]
            if any(getattr(ev, key, None) == ident for key in KEY_FIELDS):
                found.append({"line": n, "type": type_name(ev), "ts": ev.ts,
                              "event": raw.decode("utf-8", "replace")})
    return found


def verdict(dump: dict[str, Any], ident: str) -> dict[str, Any]:
    """What the dump says of ``ident`` in each domain that knows it."""
    out: dict[str, Any] = {}
    if ident in dump["handoffs"]["items"]:
        out["handoff"] = dump["handoffs"]["items"][ident]
    if ident in dump["handoffs"]["probe_plan"]:
        out["probe_plan"] = dump["handoffs"]["probe_plan"][ident]
    if ident in dump["sessions"]["items"]:
        out["session"] = dump["sessions"]["items"][ident]
        if controls := controls_of(dump, ident):
            out["controls"] = controls
    checks = dump["lanes"]["checks"]
    if checks:
        for r in checks[-1]["results"]:
            if r["product"] == ident:
                out["lane"] = r
    if ident in dump["catchup"]["candidates"]:
        out["catchup"] = "candidate for a re-run now"
    rejected_lines = {r["line"]: r for r in dump["rejected"]}
    out["rejected_lines"] = rejected_lines
    return out


def run_explain(args: argparse.Namespace) -> int:
    """Print the lines behind one id and the verdict they lead to; exit 2 when no line names the id."""
    try:
        tz, at = judging(args)
        replay = replay_log(args.log, assume_tz=tz)
        found = lines_of(args.log, args.id, tz)
    except UsageError as err:
        error(str(err))
        return 2
    except OSError as err:
        error(f"cannot read {args.log}: {err.strerror or err}")
        return 2
    if not found:
        error(f"{args.log}: no line names {args.id!r}")
        return 2
    dump = replay.dump(args.log, *at.resolve(replay.last_at, replay.last_ts))
    judged = verdict(dump, args.id)
    rejected = judged.pop("rejected_lines")
    for item in found:
        if item["line"] in rejected:
            item["rejected"] = rejected[item["line"]]["reason"]
    if args.json:
        print(dumps({"log": args.log, "id": args.id, "as_of": dump["as_of"], "lines": found, "verdict": judged}))
        return 0
    for item in found:
        mark = f"   <- rejected: {item['rejected']}" if "rejected" in item else ""
        say(f"{args.log}:{item['line']}: {item['event']}{mark}")
    say(f"as of {dump['as_of']}:")
    for domain, value in judged.items():
        if domain == "controls":
            for line in timeline_lines(value):
                say(line)
            continue
        say(f"  {domain}: {dumps(value)}")
    sys.stdout.flush()
    return 0
