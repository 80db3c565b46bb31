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
import importlib
import os
import sys
from collections.abc import Sequence

#: The modules (``eventlog.cli.NAME``) that register the subcommands, in the order ``--help`` lists them.
MODULES = ("replay", "append", "live", "cmd_status", "cmd_failback", "cmd_handoff", "cmd_lanes", "cmd_catchup",
           "cmd_import", "cmd_observe", "cmd_sessions", "cmd_serve", "transfer")
#: Subcommand -> the module that registers it: a command imports only its own module (a replay starts
#: without importing the server, the importers and the runners of every other command).
COMMAND_MODULES: dict[str, str] = {
    "replay": "replay", "append": "append", "schema": "append", "follow": "live", "status": "cmd_status",
    "explain": "cmd_status", "failback": "cmd_failback", "handoff": "cmd_handoff", "stalls": "cmd_lanes",
    "lanes": "cmd_lanes", "catchup": "cmd_catchup", "import": "cmd_import", "observe": "cmd_observe",
    "decide": "cmd_sessions", "sessions": "cmd_sessions", "serve": "cmd_serve", "keys": "cmd_serve",
    "export": "transfer", "import-log": "transfer",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every ``eventlog`` subcommand, or of ``command`` alone when it is one."""
    parser = argparse.ArgumentParser(
        prog="eventlog",
        description="The ledger of interrupted automated work: append events, replay, judge, and act on the verdicts.",
        epilog="Every COMMAND --help says what it does and what its exit status means: 0 done, 1 something "
        "needs a person, 2 bad usage, an unreadable file or bad input, 3 a conflict.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show program's version number and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    names = (COMMAND_MODULES[command],) if command in COMMAND_MODULES else MODULES
    for name in names:
        importlib.import_module(f"eventlog.cli.{name}").register(sub)
    return parser


class _Version(argparse.Action):
    """``--version``: the installed version, looked up only when asked (importlib.metadata is slow to import)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(f"{parser.prog} {_version()}")
        parser.exit()


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("recovery-ledger")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``eventlog`` subcommand; returns its exit status."""
    try:
        return _main(argv)
    finally:
        _let_go()


def _let_go() -> None:
    if "eventlog.cli.common" in sys.modules:
        sys.modules["eventlog.cli.common"].LEFT_AT_EXIT.clear()


def _main(argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv else None)
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
    """Console-script entry point; what a one-shot command kept to the end is not freed (``leave_at_exit``)."""
    status = _main(None)
    common = sys.modules.get("eventlog.cli.common")
    if common is None or not common.LEFT_AT_EXIT:
        sys.exit(status)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    except OSError:
        status = status or 2
    os._exit(status)
