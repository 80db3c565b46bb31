"""``eventlog export`` and ``eventlog import-log``: a JetStream day to a fixture file, and a file into a stream.

``eventlog export LOG > day.jsonl`` writes every message of a ``nats://`` LOG as
one line, in stream order; an event stored without ``seq`` gets its stream
sequence as ``seq`` (a file LOG is written as its complete lines). Replaying
the file gives the same dump as replaying the stream.

``eventlog import-log FILE LOG`` publishes every complete line of FILE, in
order, into the EMPTY stream of a ``nats://`` LOG (created when absent): line N
becomes stream sequence N. A line that is not an event goes to
``<prefix>.bad`` as it is, so the stream replays to the same dump as the file.
A torn last line and the complete lines of an unfinished batch at the end (its
last line missing) are not imported, as a replay leaves them out: both are
reported on stderr and counted in the JSON object it prints ("torn_line",
"unfinished_batch": how many lines; "torn_tail": either).

Exit status: 0 done; 1 the import stopped partway (the lines before the one
named are in the stream); 2 bad usage, an unreadable file or stream, a stream
that is not empty.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from eventlog.appender import AppendError
from eventlog.cli.common import LOG_PASSWORD, add_log, append_failed, command_parser, dumps, error, mark_done
from eventlog.logs import LogUnavailable, is_url, open_log

IMPORT_EXITS = """\
0  done
1  the import stopped partway (the lines before the one named are in the stream)
2  bad usage, an unreadable file or stream, a stream that is not empty"""


def register(sub: Any) -> None:
    """Add ``export`` and ``import-log``."""
    parts = (__doc__ or "").split("\n\n")
    p = command_parser(sub, "export", help="write a log (a nats:// stream) as JSONL lines on stdout",
                       description=parts[1], exits="0  done\n2  a log that cannot be read")
    add_log(p)
    p.set_defaults(run=run_export)
    q = command_parser(sub, "import-log", help="publish a JSONL file into an empty nats:// stream, line N as seq N",
                       description=parts[2], exits=IMPORT_EXITS)
    q.add_argument("file", metavar="FILE")
    add_log(q, f"nats://[USER@]HOST:PORT/STREAM[?prefix=P&replicas=N]; {LOG_PASSWORD}")
    q.set_defaults(run=run_import_log)


def run_export(args: argparse.Namespace) -> int:
    """Write LOG to stdout, one line per message."""
    out = sys.stdout.buffer
    try:
        with open_log(args.log) as log:
            if is_url(args.log):
                from eventlog.jetstream import JetStreamLog, export

                assert isinstance(log, JetStreamLog)
                export(log, out)
            else:
                for _n, raw in log.lines():
                    out.write(raw + b"\n")
    except OSError as err:
        error(f"cannot read {args.log}: {err.strerror or err}")
        return 2
    out.flush()
    return 0


def run_import_log(args: argparse.Namespace) -> int:
    """Import FILE into the empty stream LOG; print what was done."""
    if not is_url(args.log):
        error(f"{args.log}: import-log writes into a nats://HOST:PORT/STREAM log")
        return 2
    try:
        source = open(args.file, "rb")
    except OSError as err:
        error(f"cannot read {args.file}: {err.strerror or err}")
        return 2
    try:
        with source, open_log(args.log) as log:
            from eventlog.jetstream import JetStreamLog, import_log

            assert isinstance(log, JetStreamLog)
            report = import_log(source, log)
    except LogUnavailable as err:
        error(str(err))
        return 2
    except AppendError as err:
        return append_failed(err, args.log)
    except OSError as err:
        error(f"cannot import {args.file}: {err.strerror or err}")
        return 2
    if report.unfinished is not None:
        error(f"{args.file}: {report.unfinished.words()} is not committed (a writer stopped mid-batch): its "
              f"{report.unfinished.lines} line(s) were not imported")
    if report.torn_line:
        error(f"{args.file}: its last line has no newline (a torn tail, not committed): not imported")
    if report.error:
        error(f"{args.log}: import stopped at {report.error}; lines 1..{report.imported} are in the stream")
    if report.imported:
        mark_done(f"{args.log}: {report.imported} line(s) of {args.file} imported (seq {report.first_seq} to "
                  f"{report.last_seq})")
    print(dumps({"log": args.log, "file": args.file, "imported": report.imported, "bad_lines": report.bad_lines,
                 "torn_tail": report.torn_tail, "unfinished_batch": report.unfinished_lines,
                 "torn_line": report.torn_line, "first_seq": report.first_seq, "last_seq": report.last_seq,
                 "error": report.error}))
    return 1 if report.error else 0
