"""The ``eventlog`` command: a thin shell over the Python API.

This package is the one place that wires the log to the projections. Each
module registers its subcommands; each subcommand parses arguments, calls
one documented function, prints (text for people, ``--json`` for machines)
and returns an exit status:

- 0 done; 1 something needs a person (a ``--check`` mismatch, a stall);
- 2 bad usage, an unreadable file, bad input; 3 a conflict (refused transition);
- 4 stdout could not be written (:data:`OUTPUT_LOST`, handled here for every command).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
from collections.abc import Sequence
from contextlib import suppress
from typing import Any

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
        "needs a person, 2 bad usage, an unreadable file or bad input, 3 a conflict, 4 stdout could not be "
        "written (its reader went away, a full disk).",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show program's version number and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=CommandParser)
    names = (COMMAND_MODULES[command],) if command in COMMAND_MODULES else MODULES
    for name in names:
        importlib.import_module(f"eventlog.cli.{name}").register(sub)
    return parser


class CommandParser(argparse.ArgumentParser):
    """A command's parser: its positionals and options in any order (``sessions LOG --json S1`` as
    ``sessions LOG S1 --json``), every command alike.

    argparse alone takes a positional after an option only when no positional before it may be left out: it
    gave ``sessions``' SESSION nothing at ``LOG`` and left ``S1`` unrecognized (``explain``'s ID, required,
    was taken). A command with such a positional (``?`` or ``*``) is parsed as
    :meth:`~argparse.ArgumentParser.parse_known_intermixed_args` does; the others as before, which already
    takes them in any order and judges a bad LOG before a missing option.
    """

    _intermixing = False

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        nargs = {a.nargs for a in self._get_positional_actions()}
        # Python 3.11's intermixed parsing refuses what follows ``--`` (``sessions -- LOG -ID``, the form the views
        # print for a LOG or id starting with '-'): there every argument is placed as written anyway.
        if (self._intermixing or not nargs & {argparse.OPTIONAL, argparse.ZERO_OR_MORE}
                or "--" in (sys.argv[1:] if args is None else args)):
            return super().parse_known_args(args, namespace)
        self._intermixing = True  # parse_known_intermixed_args calls parse_known_args twice
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


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


#: The exit status of a command whose output could not be written to stdout; no command uses it for anything else.
OUTPUT_LOST = 4


class OutputLost(Exception):
    """stdout could not be written: ``error`` says why (a BrokenPipeError: its reader went away).

    Not an OSError: a command's ``except OSError`` (a log it cannot read) never takes it for its own.
    """

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class _Guarded:
    """``sys.stdout`` (or its ``buffer``) whose failed write or flush raises :class:`OutputLost`.

    On the first failure fd ``fd`` is pointed at /dev/null, so that what is still
    buffered, and the interpreter's flush at exit, go nowhere instead of failing
    again. A stdout that was closed when the process started (None) raises on the
    first write, not on a flush of nothing.
    """

    def __init__(self, stream: Any, fd: int | None) -> None:
        self._stream = stream
        self._fd = fd

    def write(self, data: Any) -> int:
        if self._stream is None:
            raise OutputLost(OSError(errno.EBADF, "stdout is closed"))
        try:
            return int(self._stream.write(data))
        except OSError as err:
            raise self._lost(err) from err

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except OSError as err:
            raise self._lost(err) from err

    def _lost(self, err: OSError) -> OutputLost:
        if self._fd is not None:
            with suppress(OSError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, self._fd)
                os.close(devnull)
            self._fd = None
        return OutputLost(err)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._stream, name)  # AttributeError when there is no stream
        if name == "buffer":  # print_json writes the bytes of a dump straight to it
            value = _Guarded(value, self._fd)
            self.__dict__[name] = value
        return value


def guard_stdout() -> None:
    """Make every failure to write ``sys.stdout`` an :class:`OutputLost`, which :func:`main` turns into exit 4.

    For a process of its own (the console script, ``python -m eventlog``): it may point fd 1 at /dev/null.
    """
    if isinstance(sys.stdout, _Guarded):
        return
    fd = None
    if sys.stdout is not None:
        with suppress(OSError, ValueError):
            fd = sys.stdout.fileno()
    sys.stdout = _Guarded(sys.stdout, fd)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``eventlog`` subcommand; returns its exit status (4 for a lost output needs :func:`guard_stdout`)."""
    try:
        return _main(argv)
    finally:
        _let_go()


def _let_go() -> None:
    if "eventlog.cli.common" in sys.modules:
        common = sys.modules["eventlog.cli.common"]
        common.LEFT_AT_EXIT.clear()
        common.DONE.clear()


def _main(argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        try:
            return _run(argv)
        finally:  # what is still buffered is part of the output: failing to write it is the command's failure
            if sys.stdout is not None:
                sys.stdout.flush()
    except OutputLost as lost:
        return output_lost(lost, argv[0] if argv else None)


def _run(argv: list[str]) -> int:
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except KeyboardInterrupt as stop:
        from eventlog.runners.process import Interrupted

        if not isinstance(stop, Interrupted):
            return 130
        # a runner's stop signal that its report does not record (eventlog.cli.common.stoppable)
        print(f"eventlog: {args.command} {stop.said()}" + ("" if stop.what else ": nothing recorded of it"),
              file=sys.stderr)
        return 1
    except OverflowError as err:
        # The ranges of spec section 1 keep every computed time and number in range, and a computed
        # time past what Python holds counts as "never"; one that still overflows is said, not dumped.
        print(f"eventlog: a value out of range stopped {getattr(args, 'command', 'the command')} "
              f"(OverflowError: {err}); the log is unchanged: please report it with the log", file=sys.stderr)
        return 2


def output_lost(lost: OutputLost, command: str | None) -> int:
    """Say on stderr that stdout could not be written, and what the command did all the same; exit 4.

    A reader that went away (``tools/replay | head``) is no news: nothing is said
    then, unless the command wrote something (:func:`eventlog.cli.common.mark_done`),
    so that nobody does it again.
    """
    from eventlog.cli.common import DONE, error

    what = f"eventlog {command}" if command in COMMAND_MODULES else "eventlog"
    done = f"; it was done all the same: {'; '.join(DONE)}" if DONE else ""
    if isinstance(lost.error, BrokenPipeError):
        message = f"stdout was closed by its reader: the output of {what} is lost{done}" if done else None
    else:
        message = f"cannot write to stdout ({lost.error.strerror or lost.error}): the output of {what} is lost{done}"
    if message is not None:
        with suppress(OSError):
            error(message)
    return OUTPUT_LOST


def run() -> None:
    """Console-script entry point; what a one-shot command kept to the end is not freed (``leave_at_exit``)."""
    guard_stdout()
    status = _main(None)
    common = sys.modules.get("eventlog.cli.common")
    if common is None or not common.LEFT_AT_EXIT:
        sys.exit(status)
    with suppress(OutputLost):  # _main flushed stdout, and said so when it could not
        sys.stdout.flush()
    try:
        sys.stderr.flush()
    except OSError:
        status = status or 2
    os._exit(status)
