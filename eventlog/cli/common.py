"""What the subcommands share: the grammar (LOG, --at, --assume-tz, durations), output, logs and progress."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Mapping
from datetime import tzinfo
from typing import Any, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec
import orjson

from eventlog.appender import AppendError
from eventlog.clock import NOW, At, parse_at, wall_time_note
from eventlog.logs import PASSWORD_VAR, TOKEN_VAR, is_url, open_log, taken
from eventlog.printable import escape
from eventlog.replay import Progress, Replay
from eventlog.runners.common import RunnerError
from projections.runner import Runner

R = TypeVar("R")


class UsageError(Exception):
    """Bad usage or an unreadable file: exit 2."""


# --- the grammar ---------------------------------------------------------------------------


#: Exit 4 in every command's ``--help`` (:func:`eventlog.cli.output_lost`), unless it says more.
OUTPUT_LOST = ("stdout could not be written: its reader went away (nothing is said), or a write",
               "failed (said on stderr, with what was done all the same)")


def command_parser(sub: Any, name: str, *, help: str, description: str | None = None,
                   exits: str) -> argparse.ArgumentParser:
    """A subcommand whose help shows ``description`` as written and its exit codes (``exits``) last.

    Exit 4 (stdout could not be written) is added unless ``exits`` has its own line for it.
    """
    lines = exits.strip().splitlines()
    if not any(line.startswith("4 ") for line in lines):
        width = len(lines[0]) - len(lines[0][1:].lstrip())  # the code's column and the space after it
        after = [i for i, line in enumerate(lines) if line[:1].isdigit() and int(line.split()[0]) > 4]
        at = after[0] if after else len(lines)
        lines[at:at] = [f"{'4':<{width}}{OUTPUT_LOST[0]}", " " * width + OUTPUT_LOST[1]]
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help, description=plain(description or help),
        epilog="exit status:\n" + "\n".join(f"  {line}" for line in lines),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def plain(doc: str) -> str:
    """Help text without reStructuredText markup: ``x`` and :func:`~a.b.x` become x."""
    doc = re.sub(r":[a-z]+:`~?(?:[\w.]+\.)?([^`]+)`", r"\1", doc)
    return re.sub(r"``([^`]+)``", r"\1", doc)


#: What an empty LOG says: the shipped units pass ``${LEDGER_LOG}``, empty when ledger.env misses or misspells it.
EMPTY_LOG = "LOG is empty (is LEDGER_LOG set in ledger.env?)"
#: What a ``nats://`` LOG's password is, in every LOG's help.
LOG_PASSWORD = (f"USER's password comes from {PASSWORD_VAR} (one written in the URL works too; no output shows "
                f"it), a token from {TOKEN_VAR}")
#: The help of LOG.
LOG_HELP = f"a JSONL file, or nats://[USER@]HOST:PORT/STREAM; {LOG_PASSWORD}"


def log_path(text: str) -> str:
    """A LOG argument as it is printed (:func:`eventlog.logs.taken`: a password in a ``nats://`` URL is kept
    aside, never printed); ArgumentTypeError (exit 2 at parse time) when it is empty or blank.

    An empty LOG would otherwise read as the working directory (``serve``, ``follow``) or as a log named ``""``.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(EMPTY_LOG)
    return taken(text)


def add_log(parser: argparse.ArgumentParser, help: str | None = None, **more: Any) -> None:
    """LOG: the first positional argument of every command that reads or writes a log (:func:`log_path`)."""
    parser.add_argument("log", metavar="LOG", type=log_path, help=help or LOG_HELP, **more)


def add_judging(parser: argparse.ArgumentParser, default: str = "now") -> None:
    """``--at`` and ``--assume-tz``."""
    parser.add_argument("--at", metavar="TIME",
                        help=f"judge as of TIME (ISO 8601), or 'log' for the ts of the log's last event (its last line "
                             f"applied or rejected) (default: {default})")
    add_assume_tz(parser, "; days and hours (catch-up's today) are ZONE's: now's, and TIME's when its offset is "
                          "ZONE's then")


def add_assume_tz(parser: argparse.ArgumentParser, more: str = "") -> None:
    """``--assume-tz``: the zone of times written without an offset (``more``: what else it does); the ``eventlog``
    commands a command prints carry it (:class:`projections.triage.LogArg`)."""
    parser.add_argument("--assume-tz", metavar="ZONE",
                        help="read times written without an offset (in LOG and --at) in ZONE, e.g. Asia/Tokyo" + more
                        + "; the eventlog commands printed carry it")


def judging(args: Any, default: At = NOW, *, local: bool = True) -> tuple[tzinfo | None, At]:
    """The zone of ``--assume-tz`` and the time of ``--at``; UsageError when bad.

    ``local``: judge days and hours in the machine's zone too (live commands; not a replay). A ``--at`` without an
    offset that ``--assume-tz``'s zone skipped or repeated is said on stderr, as ``append`` says such a line
    (:func:`eventlog.clock.wall_time_note`): it is taken in the offset before the change.
    """
    tz = zone(args.assume_tz)
    try:
        at = parse_at(args.at, tz, default, local=local)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if at.time is not None and (note := wall_time_note("--at", args.at, at.time, "judged as of", "--at")):
        error(note)
    return tz, at


def zone(name: str | None) -> tzinfo | None:
    """The zone of ``--assume-tz``, or None when the option is not given.

    UsageError for a name no zone has, the empty one too: ``--assume-tz "$VAR"`` with VAR unset or empty
    would else read every line without an offset as bad, and nothing would say why.
    """
    if name is None:
        return None
    if not name.strip():
        raise UsageError(f"--assume-tz {name!r} names no time zone (an unset variable?): give a zone such as "
                         "Asia/Tokyo, or leave the option out to read only times with an offset")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise UsageError(f"--assume-tz: unknown time zone {name!r}") from err


_DURATION = re.compile(
    r"(?:(?P<d>\d+(?:\.\d+)?)d)?(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m)?(?:(?P<s>\d+(?:\.\d+)?)s)?"
)
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(text: str) -> float:
    """Seconds in ``90m``, ``8h``, ``30s``, ``1h30m``, ``2d`` (units in that order) or a plain number of seconds."""
    t = text.strip()
    try:
        value = float(t)
    except ValueError:
        m = _DURATION.fullmatch(t)
        if m is None or not any(m.groups()):
            raise ValueError(f"{text!r} is not a duration (e.g. 90m, 8h, 1h30m, 30s, 2d; a plain number is "
                             "seconds)") from None
        return sum(float(v) * _UNITS[unit] for unit, v in m.groupdict().items() if v is not None)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{text!r} is not a duration: it must be a number of seconds, 0 or more")
    return value


def duration(text: str) -> float:
    """An argparse ``type``: a duration in seconds (:func:`parse_duration`)."""
    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def whole_duration(text: str) -> int:
    """An argparse ``type``: a duration in whole seconds."""
    value = duration(text)
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds")
    return int(value)


class Deprecated(argparse.Action):
    """A hidden old flag that still works: its value is converted for the new flag, with a line on stderr.

    ``scale`` (when given) turns the old number into seconds: ``--unpicked-minutes 30`` is ``--unpicked 1800``.
    """

    def __init__(self, option_strings: list[str], dest: str, *, new: str, scale: float | None = None,
                 **kw: Any) -> None:
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kw)
        self.new = new
        self.scale = scale

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        value: Any = values
        if self.scale is not None:
            try:
                value = float(values) * self.scale
            except ValueError:
                parser.error(f"{option_string}: {values!r} is not a number")
            if not math.isfinite(value) or value < 0:
                parser.error(f"{option_string}: {values!r} must be 0 or more")
        from projections.triage import duration_option  # only for a deprecated flag

        shown = duration_option(value) if self.scale is not None else value
        error(f"{option_string} is deprecated: use {self.new} (here: {self.new} {shown})")
        setattr(namespace, self.dest, value)


def add_thresholds(parser: argparse.ArgumentParser, *, runner: bool = False) -> None:
    """The lane thresholds ``--unpicked`` and ``--quiet`` (and their deprecated spellings).

    The lanes ``runner`` judges with its own (90m and 8h unless given); a view left without them
    gets None: the runner's, as the log's last ``lane_check`` states them, else 90m and 8h.
    """
    unpicked, quiet = (90 * 60.0, 8 * 3600.0) if runner else (None, None)
    default = "" if runner else "the lanes runner's, as its last lane_check states, else "
    parser.add_argument("--unpicked", type=duration, default=unpicked, metavar="DURATION",
                        help=f"a finished job not picked up for this long is stalled ({default}90m)")
    parser.add_argument("--quiet", type=duration, default=quiet, metavar="DURATION",
                        help=f"progress not updated for this long is stalled ({default}8h)")
    parser.add_argument("--unpicked-minutes", dest="unpicked", action=Deprecated, new="--unpicked", scale=60)
    parser.add_argument("--quiet-hours", dest="quiet", action=Deprecated, new="--quiet", scale=3600)


# --- output ----------------------------------------------------------------------------------


def say(line: str = "") -> None:
    """One line on stdout, for a person (escaped)."""
    print(escape(line))


def error(message: str) -> None:
    """One line on stderr, for a person (escaped)."""
    print(f"eventlog: {escape(message)}", file=sys.stderr)


def record_line(record: Mapping[str, Any]) -> str:
    """An ``impl-lane-watch/v1`` record exactly as seed 001 prints it (spec: ``json.dumps``, ``ensure_ascii=False``)."""
    return json.dumps(record, ensure_ascii=False)


def dumps(value: Any) -> str:
    """One line of compact JSON, UTF-8 left as is (orjson: a 14 MB dump in 0.03 s, not 0.3 s).

    A ``msgspec.Raw`` in ``value`` (a log line as written: ``explain``'s events) is embedded as it is.
    """
    try:
        return orjson.dumps(value, default=_embedded, option=orjson.OPT_NON_STR_KEYS).decode()
    except orjson.JSONEncodeError:  # an integer past 64 bits (valid input): the slower encoder takes any
        try:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        except TypeError:  # and a msgspec.Raw, which only msgspec embeds
            return msgspec.json.encode(value).decode()


def _embedded(value: Any) -> orjson.Fragment:
    if isinstance(value, msgspec.Raw):
        return orjson.Fragment(bytes(value))
    raise TypeError(f"{type(value).__name__} is no JSON")


def print_json(value: Any) -> None:
    """Print ``value`` as :func:`dumps` does, its UTF-8 bytes written straight out (no str of 14 MB in between)."""
    try:
        data = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        print(dumps(value))
        return
    out = sys.stdout
    buffer = getattr(out, "buffer", None)
    if buffer is None:
        out.write(data.decode())
        return
    out.flush()
    buffer.write(data)


#: What a one-shot command leaves to the operating system at its exit (:func:`leave_at_exit`).
LEFT_AT_EXIT: list[object] = []


def leave_at_exit(*values: object) -> None:
    """Keep ``values`` to the end: ``eventlog`` exits without freeing them object by object.

    Freeing the state of a 1M-event replay a million objects at a time takes about a tenth of
    the replay, for memory the process gives back whole a moment later. In a process that calls
    :func:`eventlog.cli.main` itself, they are let go when ``main`` returns.
    """
    LEFT_AT_EXIT.extend(values)


#: What this command did that its output was to tell (:func:`mark_done`).
DONE: list[str] = []


def mark_done(note: str) -> None:
    """Note what the command has done (lines written to a log) before it prints it on stdout.

    When stdout cannot be written, the notes are said on stderr, so that nobody
    does it again because its output never came (:func:`eventlog.cli.output_lost`).
    """
    DONE.append(note)


def report(result: Any, as_json: bool, text: list[str], notes: list[str] | None = None) -> int:
    """Print a runner's report (JSON for machines, ``text`` for people), then its notes and problems on stderr.

    Returns the report's ``status`` (its exit status). The problems are said even
    when stdout cannot be written (then the status is exit 4's).
    """
    try:
        if as_json:
            print(dumps(msgspec.to_builtins(result)))
        else:
            for line in text:
                say(line)
        sys.stdout.flush()
    finally:
        for line in [*(notes or []), *result.problems]:
            error(line)
    return int(result.status)


def stoppable(command: str, do: Callable[[], Any]) -> Any:
    """Run a runner's pass (``do``) with SIGTERM and SIGINT held (:func:`eventlog.runners.process.stop_on_signals`).

    The runner records what a stop signal cut short in its report (``interrupted``, a problem: exit 1). A
    signal that came when nothing was left to cut short is said on stderr; one the runner did not record
    ends the command in :func:`eventlog.cli.main` (said on stderr, exit 1).
    """
    from eventlog.runners.process import stop_on_signals

    with stop_on_signals() as received:
        done = do()
        if received and getattr(done, "interrupted", None) is None:
            name = signal.Signals(received[0]).name
            error(f"{command}: {name} came when no command was left to stop: the run had done its work")
    return done


def run_appending(args: Any, do: Callable[[], Any], lines: Callable[[Any], tuple[list[str], list[str]]]) -> int:
    """Run an import or an observer (``do``) that appends to ``args.log``, then print its report.

    ``lines(report)`` gives its text for people and its notes. Bad usage (ValueError) and a log that
    cannot be read are exit 2, a refused or failed append its own status; else the report's status.
    """
    try:
        done = do()
    except ValueError as err:
        error(str(err))
        return 2
    except AppendError as err:
        return append_failed(err, args.log)
    except OSError as err:
        error(f"cannot read {args.log}: {err.strerror or err}")
        return 2
    text, notes = lines(done)
    return report(done, args.json, text, notes)


def append_failed(err: AppendError, log: str, messages: list[str] | None = None) -> int:
    """Report a refused or failed append to ``log``, one line per note and per problem, each naming the log once
    (:meth:`~eventlog.appender.AppendError.said`); its exit status. ``messages``: the problems in the caller's
    words (default: the error's)."""
    for note in err.notes:
        error(f"{log}: {note}")
    for message in err.said(log, messages):
        error(message)
    return err.exit_code


def refused(err: Exception) -> int:
    """Say on stderr why a command did nothing (its usage, its options, its log: a UsageError or a ValueError);
    its exit status: 2, or a RunnerError's own (1 for a log whose server cannot be reached now,
    :class:`~eventlog.runners.common.LogNotReached`: a log that could not be read, not bad usage)."""
    error(str(err))
    return err.exit_code if isinstance(err, RunnerError) else 2


def person_acts(log: str, what: str, act: Callable[[], R]) -> R | int:
    """Do a person's command that appends one line (``act`` builds its options, checks them and writes): its
    report, or the exit status once stderr says why not: 2 bad usage or input (nothing written), 1 ``what``
    could not be appended to ``log`` (or its server cannot be reached)."""
    try:
        return act()
    except (UsageError, ValueError) as err:  # RunnerError is a ValueError
        return refused(err)
    except AppendError as err:
        append_failed(err, log, [f"cannot append {what}: " + "; ".join(err.messages)])
        return 1


# --- logs ------------------------------------------------------------------------------------


def replay_log(
    path: str,
    *,
    assume_tz: tzinfo | None = None,
    strict: bool = False,
    runner: Runner | None = None,
    show_progress: bool = True,
) -> Replay:
    """Replay one log (a file or a ``nats://`` stream) from empty state (raises OSError when it cannot be read)."""
    with open_log(path) as log:
        progress = None
        if show_progress and not is_url(path) and os.path.isfile(path):
            progress = terminal_progress(path, os.path.getsize(path))
        return log.replay(assume_tz=assume_tz, strict=strict, runner=runner if runner is not None else Runner(),
                          progress=progress)


def terminal_progress(label: str, total: int) -> Progress | None:
    """A progress line on stderr for long reads, only when stderr is a terminal."""
    if total < 16 << 20 or not sys.stderr.isatty():
        return None
    started = time.monotonic()
    shown = False

    def show(lines: int, done: int) -> None:
        nonlocal shown
        if lines < 0:
            if shown:
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()
            return
        shown = True
        rate = lines / max(time.monotonic() - started, 1e-6)
        sys.stderr.write(f"\r{label}: {lines:,} lines, {100 * done / total:.0f}% ({rate:,.0f} lines/s)")
        sys.stderr.flush()

    return show
