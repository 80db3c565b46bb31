"""``eventlog follow``, ``eventlog status`` and ``eventlog explain``: running next to the writers."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from eventlog.cli.common import UsageError, dumps, error, judging, replay_log, zone
from eventlog.events import KEY_FIELDS, type_name
from eventlog.follow import Follower, follow, write_text
from eventlog.logs import is_url, open_log
from eventlog.prom import exposition
from eventlog.reader import Reader
from projections.runner import Runner


def register(sub: Any) -> None:
    """Add ``follow``, ``status`` and ``explain``."""
    p = sub.add_parser("follow", help="keep a dump (and Prometheus metrics) of LOG fresh")
    p.add_argument("log", metavar="LOG")
    p.add_argument("--dump", required=True, metavar="PATH", help="rewritten atomically on every change")
    p.add_argument("--prom", metavar="PATH", help="also write the Prometheus text exposition here")
    p.add_argument("--snapshot", metavar="PATH", help="start from this snapshot and keep it up to date")
    p.set_defaults(run=run_follow)

    s = sub.add_parser("status", help="what needs a person now, then the headline numbers")
    s.add_argument("log", metavar="LOG")
    s.add_argument("--at", metavar="TIME", help="judge as of TIME (default: the last event's ts)")
    s.add_argument("--assume-tz", metavar="ZONE")
    s.add_argument("--json", action="store_true", help="one JSON object for machines")
    s.set_defaults(run=run_status)

    e = sub.add_parser("explain", help="the lines that brought one id to its state, and the verdict")
    e.add_argument("log", metavar="LOG")
    e.add_argument("id", metavar="ID", help="a handoff, account, session, product or job label")
    e.add_argument("--assume-tz", metavar="ZONE")
    e.add_argument("--json", action="store_true")
    e.set_defaults(run=run_explain)


# -- follow ----------------------------------------------------------------------


def run_follow(args: argparse.Namespace) -> int:
    """Follow LOG until SIGINT/SIGTERM; exit 0 then."""

    def write(follower: Follower) -> None:
        dump = follower.dump()
        write_text(args.dump, dumps(dump) + "\n")
        if args.prom:
            write_text(args.prom, exposition(dump))

    if is_url(args.log):
        return _follow_stream(args, write)
    follower = Follower(args.log, Runner, args.snapshot)
    try:
        follow(follower, write, lambda note: error(note))
    except OSError as err:
        error(f"cannot follow {args.log}: {err}")
        return 2
    return 0


def _follow_stream(args: argparse.Namespace, write: Callable[[Any], None]) -> int:
    """Follow a JetStream stream with an ordered consumer (:func:`eventlog.jetstream.follow`)."""
    try:
        from eventlog.jetstream import JetStreamLog, StreamFollower
        from eventlog.jetstream import follow as follow_stream

        with open_log(args.log, Runner) as log:
            assert isinstance(log, JetStreamLog)
            follow_stream(StreamFollower(log, args.snapshot), write, lambda note: error(note))
    except OSError as err:
        error(f"cannot follow {args.log}: {err}")
        return 2
    return 0


# -- status ----------------------------------------------------------------------


def needs_person(dump: dict[str, Any]) -> list[str]:
    """What needs a person in a dump, one line each."""
    out: list[str] = []
    h = dump["handoffs"]
    for hid, item in sorted(h["items"].items()):
        if item["state"] == "needs_human":
            out.append(f"handoff {hid} ({item['account']}): handed to a person")
    for hid in h["stale_claims"]["unknown_effect"]:
        out.append(f"handoff {hid}: resume requested and silent since; effect unknown, never retried automatically")
    if h["watcher"]["late"]:
        out.append(f"failback watcher is late (last run {h['watcher']['last_run'] or 'never'})")
    checks = dump["lanes"]["checks"]
    if checks:
        for r in checks[-1]["results"]:
            if r["stalled"]:
                out.append(f"lane {r['product']}: {r['kind']}: {r['detail']} (checked {checks[-1]['checked_at']})")
    for sid, item in sorted(dump["sessions"]["items"].items()):
        if item["admission_state"] == "recovery_required":
            turns = f", unknown turns {', '.join(item['unknown_turns'])}" if item["unknown_turns"] else ""
            out.append(f"session {sid}: recovery required ({item['attention']}: {item['reason']}{turns})")
        elif item["attention"] == "CONTEXT_GAP":
            out.append(f"session {sid}: stopped with a context gap; start_fresh or close")
    if dump["bad_lines"]:
        first = dump["bad_lines"][0]
        out.append(f"{len(dump['bad_lines'])} bad line(s), first at line {first['line']}: {first['reason']}")
    return out


def headline(dump: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers: failover, failback, return time."""
    h = dump["handoffs"]
    ret = h["latency_s"]["created_to_returned"]
    return {
        "failover": f"{h['failover']['started']}/{h['failover']['total']}",
        "failback": f"{h['failback']['returned']}/{h['failback']['total']}",
        "return_p50_s": ret["p50"],
        "return_p95_s": ret["p95"],
        "pending": h["pending"]["count"],
        "rejected": len(dump["rejected"]),
    }


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
    dump = replay.dump(args.log, *(at or (None, None)))
    attention = needs_person(dump)
    numbers = headline(dump)
    if args.json:
        print(dumps({"log": args.log, "as_of": dump["as_of"], "needs_person": attention, "headline": numbers}))
    else:
        print(f"{args.log} as of {dump['as_of']}")
        if attention:
            print(f"Needs a person ({len(attention)}):")
            for line in attention:
                print(f"  - {line}")
        else:
            print("Nothing needs a person.")
        p50, p95 = (_seconds(numbers[k]) for k in ("return_p50_s", "return_p95_s"))
        print(f"Failover {numbers['failover']}, failback {numbers['failback']}, return p50 {p50}, p95 {p95}, "
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
    """Print the lines behind one id and the verdict they lead to; exit 1 when the id is unknown."""
    try:
        tz = zone(args.assume_tz)
        replay = replay_log(args.log, assume_tz=tz)
        found = lines_of(args.log, args.id, tz)
    except UsageError as err:
        error(str(err))
        return 2
    except OSError as err:
        error(f"cannot read {args.log}: {err.strerror or err}")
        return 2
    dump = replay.dump(args.log)
    judged = verdict(dump, args.id)
    rejected = judged.pop("rejected_lines")
    for item in found:
        if item["line"] in rejected:
            item["rejected"] = rejected[item["line"]]["reason"]
    if args.json:
        print(dumps({"log": args.log, "id": args.id, "as_of": dump["as_of"], "lines": found, "verdict": judged}))
        return 0 if found else 1
    if not found:
        print(f"{args.id}: no line of {args.log} names it")
        return 1
    for item in found:
        mark = f"   <- rejected: {item['rejected']}" if "rejected" in item else ""
        print(f"{args.log}:{item['line']}: {item['event']}{mark}")
    print(f"as of {dump['as_of']}:")
    for domain, value in judged.items():
        print(f"  {domain}: {dumps(value)}")
    sys.stdout.flush()
    return 0

