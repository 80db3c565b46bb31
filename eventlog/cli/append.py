"""``eventlog append`` (events from stdin, all or none) and ``eventlog schema``.

LOG is a file or a ``nats://HOST:PORT/STREAM`` JetStream stream (:mod:`eventlog.logs`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from eventlog.appender import AppendError
from eventlog.cli.common import dumps, error
from eventlog.events import schema
from eventlog.logs import LogUnavailable, open_log
from eventlog.reader import MAX_LINE_BYTES, TOO_LONG, describe_bad_json, iter_lines


def register(sub: Any) -> None:
    """Add the ``append`` and ``schema`` subcommands."""
    p = sub.add_parser("append", help="append events from stdin to LOG, all or none", description=__doc__)
    p.add_argument("log", metavar="LOG")
    p.add_argument("--expect-revision", type=int, metavar="N", help="the first event's stream must be at revision N")
    p.add_argument("--no-check", dest="check", action="store_false",
                   help="write valid events without the transition check")
    p.add_argument("--fsync", action="store_true", help="fsync the log before returning")
    p.set_defaults(run=run)
    s = sub.add_parser("schema", help="print the JSON Schema of the event union")
    s.set_defaults(run=lambda args: print(dumps(schema())) or 0)


def read_stdin(stream: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Objects from stdin lines (blank lines skipped), and the bad lines' messages."""
    objs: list[dict[str, Any]] = []
    problems: list[str] = []
    for n, (raw, _end, _complete) in enumerate(iter_lines(stream), 1):
        line = raw[:-1] if raw.endswith(b"\r") else raw
        if line == TOO_LONG:
            problems.append(f"stdin line {n}: too_long: longer than {MAX_LINE_BYTES} bytes")
            continue
        if not line.strip():
            continue
        try:
            obj = msgspec.json.decode(line)
        except Exception:  # noqa: BLE001 - named precisely below
            problems.append(f"stdin line {n}: {describe_bad_json(line)}")
            continue
        if not isinstance(obj, dict):
            problems.append(f"stdin line {n}: not_object: expected a JSON object")
            continue
        objs.append(obj)
    return objs, problems


def run(args: argparse.Namespace) -> int:
    """Append stdin's events to LOG; print what was written as JSON."""
    objs, problems = read_stdin(sys.stdin.buffer)
    if problems:
        for problem in problems:
            error(problem)
        return 2
    try:
        with open_log(args.log) as log:
            result = log.append(objs, expect_revision=args.expect_revision, check=args.check, fsync=args.fsync)
    except LogUnavailable as err:
        error(str(err))
        return 2
    except AppendError as err:
        for message in err.messages:
            error(f"{args.log}: stdin {message}" if message.startswith("line ") else f"{args.log}: {message}")
        return err.exit_code
    for note in result.notes:
        error(f"{args.log}: {note}")
    print(dumps({"log": args.log, "written": result.written, "first_seq": result.first_seq,
                 "last_seq": result.last_seq, "torn_tail_cut": result.torn_tail_cut}))
    return 0
