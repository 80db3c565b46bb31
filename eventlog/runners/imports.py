"""Importing what users already have into a log: launchd jobs and the quota guard's markers (seed 002).

The parsers are in ``eventlog.importers``; these functions read the inputs,
keep only what the log does not hold yet (so importing the same input again
adds nothing), and append it, under ``LOG.import.lock`` (two imports at once
do not add the same twice). The log is created when absent.

Both reports have ``problems`` (inputs that could not be read; the rest is
imported) and ``status``: 1 when there is any, else 0. They raise RunnerError
for bad usage, OSError when the log cannot be read, and AppendError when
nothing could be written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import tzinfo
from typing import Any

import msgspec

from eventlog import importers
from eventlog.logs import is_url, open_log
from eventlog.runners.common import RunnerError, runner_lock


@dataclass(kw_only=True)
class LaunchdImport:
    """``import launchd``: the ``*.plist`` files of ``directory`` into ``log``."""

    log: str
    directory: str
    guard_pattern: str = importers.GUARD_PATTERN


class LaunchdReport(msgspec.Struct, kw_only=True):
    """Labels registered (new or changed), how many were unchanged, and plists that could not be read."""

    registered: list[str]
    unchanged: int
    problems: list[str]

    @property
    def status(self) -> int:
        """1 when a plist could not be read, else 0."""
        return 1 if self.problems else 0


def import_launchd(opts: LaunchdImport) -> LaunchdReport:
    """One ``job_registered`` per plist, unless the label's current registration is the same."""
    if not os.path.isdir(opts.directory):
        raise RunnerError(f"{opts.directory} is not a directory")
    try:
        events, problems = importers.read_launchd(opts.directory, opts.guard_pattern)
    except OSError as err:
        raise RunnerError(f"cannot read {opts.directory}: {err.strerror or err}") from err
    with runner_lock(opts.log, "import", wait=True):
        new = importers.new_registrations(events, known(opts.log))
        _append(opts.log, new)
    return LaunchdReport(registered=[ev["label"] for ev in new], unchanged=len(events) - len(new), problems=problems)


@dataclass(kw_only=True)
class QuotaLogImport:
    """``import quota-log``: the guard's ``CLAUDE_QUOTA_JOB_*`` markers in ``files`` into ``log``."""

    log: str
    files: list[str]
    #: The zone the markers' epoch times are written in (None: the local zone).
    assume_tz: tzinfo | None = None


class QuotaLogReport(msgspec.Struct, kw_only=True):
    """Markers imported, already in the log, older than their job's latest; inputs that could not be read."""

    imported: int
    already: int
    older: int
    problems: list[str]

    @property
    def status(self) -> int:
        """1 when an input could not be read, else 0."""
        return 1 if self.problems else 0


def import_quota_log(opts: QuotaLogImport) -> QuotaLogReport:
    """The markers not in the log yet and not older than their job's latest, in time order."""
    events: list[dict[str, Any]] = []
    problems: list[str] = []
    for path in opts.files:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                found, bad = importers.read_markers(f, opts.assume_tz)
        except OSError as err:
            problems.append(f"cannot read {path}: {err.strerror or err}")
            continue
        events.extend(found)
        problems.extend(f"{path}: {p}" for p in bad)
    with runner_lock(opts.log, "import", wait=True):
        plan = importers.new_markers(events, known(opts.log))
        _append(opts.log, plan.new)
    return QuotaLogReport(imported=len(plan.new), already=plan.already, older=plan.older, problems=problems)


def known(target: str) -> importers.Known:
    """What the log (a file or a stream; absent: nothing) already holds, for an import."""
    if not is_url(target):
        return importers.known(target)
    with open_log(target) as log:
        if not log.exists():
            return importers.Known()
        return importers.known_lines(log.lines())


def _append(target: str, events: list[dict[str, Any]]) -> None:
    if events:
        with open_log(target) as log:
            log.append(events)


__all__ = ["LaunchdImport", "LaunchdReport", "QuotaLogImport", "QuotaLogReport", "import_launchd",
           "import_quota_log", "known"]
