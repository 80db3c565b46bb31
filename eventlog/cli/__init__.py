"""The ``eventlog`` command: a thin shell over the Python API.

This package is the one place that wires the log to the projections. Each
module registers its subcommands; each subcommand parses arguments, calls
one documented function, prints (text for people, ``--json`` for machines)
and returns an exit status:

- 0 done; 1 something needs a person (a ``--check`` mismatch, a stall);
- 2 bad usage, an unreadable file, bad input; 3 a conflict (refused transition).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from collections.abc import Sequence

from eventlog.cli import (
    append,
    cmd_catchup,
    cmd_failback,
    cmd_handoff,
    cmd_import,
    cmd_lanes,
    cmd_observe,
    cmd_serve,
    cmd_sessions,
    cmd_status,
    live,
    replay,
    transfer,
)

COMMANDS = (replay, append, live, cmd_status, cmd_failback, cmd_handoff, cmd_lanes, cmd_catchup, cmd_import,
            cmd_observe,
            cmd_sessions, cmd_serve, transfer)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every ``eventlog`` subcommand."""
    parser = argparse.ArgumentParser(
        prog="eventlog",
        description="The ledger of interrupted automated work: append events, replay, judge, and act on the verdicts.",
        epilog="Every COMMAND --help says what it does and what its exit status means: 0 done, 1 something "
        "needs a person, 2 bad usage, an unreadable file or bad input, 3 a conflict.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub)
    return parser


def _version() -> str:
    try:
        return importlib.metadata.version("recovery-ledger")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``eventlog`` subcommand; returns its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        sys.stderr.close()
        return 0
    except OverflowError as err:
        # The ranges of spec section 1 keep every computed time and number in range, and a computed
        # time past what Python holds counts as "never"; one that still overflows is said, not dumped.
        print(f"eventlog: a value out of range stopped {getattr(args, 'command', 'the command')} "
              f"(OverflowError: {err}); the log is unchanged: please report it with the log", file=sys.stderr)
        return 2


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
