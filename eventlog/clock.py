"""The one clock of the shell, and when a command judges.

Every live command and runner reads the time through :func:`now` (an aware
time in the machine's zone), so tests pin it with freezegun in-process, or with
``--at`` in a subprocess. Projections never read it: they are given a time.

When to judge is an :class:`At`: now (the default of live commands), a fixed
time (``--at TIME``), or the log's last line (``--at log``, what a replay does).

The time an :class:`At` gives carries the zone its day and hours are judged in
(catch-up's "today" and "the slot has passed"): a named zone (``--assume-tz``'s,
or the machine's for live commands) when its offset at that instant is the
time's own, else the time's fixed offset (:func:`in_zone`). So one instant
gives one answer however it is written (now, ``--at`` with an offset, or
without one and ``--assume-tz``), also on the day a clock changes. Now, with
``--assume-tz ZONE``, is taken in ZONE: the same instant, ZONE's day and hours,
whatever the machine's zone.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, tzinfo
from functools import lru_cache
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from eventlog.events import FIRST_YEAR, LAST_YEAR

#: A source of aware times.
Clock = Callable[[], datetime]

#: The ``--at`` word for "the log's last line".
LOG = "log"


def now() -> datetime:
    """The wall clock, aware, in the machine's zone (:func:`local_zone`; its offset alone when it has none)."""
    return in_zone(datetime.now().astimezone(), local_zone())


def local_zone() -> tzinfo | None:
    """The machine's named zone: ``TZ`` (a zone name or a TZif file's path), else /etc/localtime.

    None when neither names one (a POSIX rule such as ``TZ=JST-9``, no /etc/localtime): times
    then keep their fixed offset. A ``TZ`` nothing can read is said on stderr, once
    (:func:`local_zone_problem`): the C library takes UTC for it, and so does every day and hour judged here.
    """
    tz = os.environ.get("TZ")
    zone = _local_zone(tz)
    if zone is None and tz is not None and tz not in _SAID:
        _SAID.add(tz)
        if (problem := local_zone_problem()) is not None:
            print(f"eventlog: {problem}", file=sys.stderr, flush=True)
    return zone


#: The ``TZ`` values :func:`local_zone` said are no zone (once each per process).
_SAID: set[str] = set()
#: A POSIX ``TZ`` rule (``JST-9``, ``EST5EDT``, ``<+0330>-3:30``, ``CET-1CEST,M3.5.0,M10.5.0/3``): a name, the
#: offset to add to get UTC, then a summer name, its offset and when it starts and ends, as the C library reads it.
_POSIX_NAME = r"(?:[A-Za-z]{3,}|<[A-Za-z0-9+\-]{3,}>)"
_POSIX_OFFSET = r"[+-]?\d{1,2}(?::\d{1,2}){0,2}"
_POSIX_DATE = r"(?:J\d{1,3}|\d{1,3}|M\d{1,2}\.\d\.\d)(?:/[+-]?\d{1,3}(?::\d{1,2}){0,2})?"
_POSIX_RULE = re.compile(f"{_POSIX_NAME}{_POSIX_OFFSET}(?:{_POSIX_NAME}(?:{_POSIX_OFFSET})?"
                         f"(?:,{_POSIX_DATE},{_POSIX_DATE})?)?", re.ASCII)


def local_zone_problem() -> str | None:
    """Why the machine's zone is not what ``TZ`` says: ``TZ`` set to what neither a zone (zoneinfo: a name such
    as ``Asia/Tokyo`` or ``UTC``, a zone file's path) nor a POSIX rule (``JST-9``) is, ``:`` before any, such
    as ``Asia/Tokio``: the C library then takes UTC, silently. None when nothing is wrong (``TZ`` unset or empty
    included: UTC, as the C library reads it)."""
    tz = unknown_tz()
    return None if tz is None else f"TZ={shlex.quote(tz)} is no time zone this machine knows: local time is UTC"


def unknown_tz() -> str | None:
    """``TZ`` as set when it names no zone (:func:`local_zone_problem`: the C library takes UTC for it), else None."""
    tz = os.environ.get("TZ")
    if tz is None or _local_zone(tz) is not None or _POSIX_RULE.fullmatch(tz.removeprefix(":")):
        return None
    return tz


def zone_like(tz: str) -> str | None:
    """The zone name this machine knows that ``tz`` most likely misspells (``Asia/Tokio``: ``Asia/Tokyo``), or None.

    Reads the zone names on disk (:func:`zoneinfo.available_timezones`): only for a ``TZ`` already found wrong.
    """
    found = difflib.get_close_matches(tz.removeprefix(":"), sorted(available_timezones()), n=1, cutoff=0.8)
    return found[0] if found else None


#: The file the C library reads the machine's zone from when ``TZ`` is not set.
LOCALTIME = "/etc/localtime"
#: What a ``TZ`` value may hold to be pasted unquoted into a shell command (``TZ=Asia/Tokyo eventlog ...``).
_PASTABLE = re.compile(r"[\w+\-/.,]+")


def local_zone_name() -> str:
    """The machine's zone as a ``TZ=`` value that makes another process judge days and hours as this one does
    (:func:`local_zone`): ``TZ`` as set (a zone name, a zone file's path; ``UTC`` when empty), else the zone
    /etc/localtime links to (``Europe/Berlin``), else /etc/timezone's; ``UTC`` without /etc/localtime, as the C
    library reads it. "" when none of them names one that can be pasted into a shell unquoted, or ``TZ`` names no
    zone (:func:`unknown_tz`: another process given it would judge in UTC, and say nothing)."""
    tz = os.environ.get("TZ")
    if tz is not None and unknown_tz() is not None:
        return ""
    if tz is not None:
        name = tz.removeprefix(":") or "UTC"
    elif not os.path.lexists(LOCALTIME):
        name = "UTC"
    else:
        name = _localtime_name()
    return name if _PASTABLE.fullmatch(name) else ""


def _localtime_name() -> str:
    """The zone /etc/localtime links to (``Europe/Berlin``), else /etc/timezone's; "" when neither says."""
    target = os.path.realpath(LOCALTIME)
    name = target.split("/zoneinfo/", 1)[1] if "/zoneinfo/" in target else ""
    if not name:
        try:
            with open("/etc/timezone", encoding="utf-8") as f:
                name = f.read().strip()
        except (OSError, ValueError):
            name = ""
    return name


def zone_name(zone: tzinfo | None) -> str | None:
    """The name of a named zone (``--assume-tz``'s: ``Asia/Tokyo``), to give another command; None for none."""
    key = getattr(zone, "key", None)
    return key if isinstance(key, str) else None


@lru_cache(maxsize=8)
def _local_zone(tz: str | None) -> tzinfo | None:
    name = LOCALTIME if tz is None else tz.removeprefix(":")
    if not name:
        return UTC  # TZ="" is UTC to the C library
    try:
        if not name.startswith("/"):
            return _own_copy(name)
        with open(name, "rb") as f:
            # TZ unset: /etc/localtime's rules, named as local_zone_name names them (the texts that name the zone
            # a day is judged in, follow's zone label), when that name is a zone this machine knows
            key = _localtime_name() if tz is None else ""
            return ZoneInfo.from_file(f, key=key if key and _known(key) else None)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def _known(key: str) -> bool:
    """Whether ``key`` names a zone zoneinfo can load (so :func:`_own` can make its copy)."""
    try:
        _own_copy(key)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return False
    return True


@lru_cache(maxsize=64)
def _own_copy(key: str) -> ZoneInfo:
    """A zone of our own, not the ``ZoneInfo(key)`` the reader gives times read with ``--assume-tz``.

    Python compares and subtracts two times of the *same* tzinfo object by their wall clocks
    (an hour off across a clock change); a T in another object is compared by its instant.
    """
    return ZoneInfo.no_cache(key)


def _own(zone: tzinfo | None) -> tzinfo | None:
    return _own_copy(zone.key) if isinstance(zone, ZoneInfo) and zone.key is not None else zone


def in_zone(at: datetime, *zones: tzinfo | None) -> datetime:
    """The instant ``at`` in the zone its day and hours are judged in.

    The first of ``zones`` (None skipped) whose offset at that instant is ``at``'s own; else
    ``at``'s own zone (a named one stays named: a time read with ``--assume-tz``). A UTC time
    on a machine in Europe/Berlin stays in UTC; 10:00+01:00 there is 10:00 in Europe/Berlin.
    """
    offset = at.utcoffset()
    for zone in zones:
        if zone is not None:
            there = at.astimezone(_own(zone))
            if there.utcoffset() == offset:
                return there
    own = _own(at.tzinfo)
    return at if own is at.tzinfo else at.astimezone(own)


def wall_time_change(wall: datetime) -> Literal["skipped", "repeated"] | None:
    """Whether ``wall`` (a wall clock given its zone, as ``--assume-tz`` gives it) is one its zone skipped or
    repeated at a clock change; None when it occurs once.

    Such a time is read with the offset in force before the change (Python's ``fold=0``): a skipped
    02:30 in America/New_York is 02:30-05:00 (the instant New York calls 03:30-04:00), a repeated
    01:30 the first of the two (-04:00). docs/DECISIONS.md, "A wall time a zone skipped or repeated".
    """
    first, second = wall.replace(fold=0), wall.replace(fold=1)
    if first.utcoffset() == second.utcoffset():
        return None
    back = first.astimezone(UTC).astimezone(first.tzinfo)
    return "repeated" if back.replace(tzinfo=None, fold=0) == first.replace(tzinfo=None) else "skipped"


def wall_time_note(name: str, text: str, wall: datetime, taken: str = "written as", where: str = "the input"
                   ) -> str | None:
    """Words for a time ``text`` (given as ``name``) read as ``wall`` that its zone skipped or repeated (None: it
    occurs once, or ``wall`` has a fixed offset): how it was ``taken``, the other reading, and to give the offset
    in ``where`` to mean that. ``append`` and ``serve`` say it of a line, the views and runners of ``--at``."""
    change = wall_time_change(wall)
    if change is None:
        return None
    zone = zone_name(wall.tzinfo) or str(wall.tzinfo)
    if change == "skipped":
        there = wall.astimezone(UTC).astimezone(wall.tzinfo).isoformat()
        how = (f"is a wall time {zone} skipped (its clocks went forward): {taken} {wall.isoformat()}, in the "
               f"offset before the change (the instant {zone} calls {there})")
    else:
        how = (f"occurs twice in {zone} (its clocks went back): {taken} {wall.isoformat()}, the first of the two "
               f"(the second is {wall.replace(fold=1).isoformat()})")
    return f"{name} {text!r} {how}; give the offset in {where} if another was meant"


def fixed(at: datetime) -> Clock:
    """A clock that always says ``at``."""
    return lambda: at


@dataclass(frozen=True)
class At:
    """When to judge: a fixed ``time`` (``text``: as written), the log's last line (``log``), or now (neither).

    The times it gives are in the zone they are judged in (:meth:`zoned`): ``zone``
    (``--assume-tz``'s), then the machine's when ``local`` (live commands; a replay
    sets it False: it judges the same on every machine), else their own offset.
    Now is always ``zone``'s when there is one (:meth:`wall_clock`).
    """

    time: datetime | None = None
    text: str | None = None
    log: bool = False
    zone: tzinfo | None = None
    local: bool = True

    def zoned(self, at: datetime) -> datetime:
        """``at`` in the zone it is judged in (:func:`in_zone`)."""
        return in_zone(at, self.zone, local_zone() if self.local else None)

    @property
    def live(self) -> bool:
        """Whether it judges as of the wall clock now (neither a fixed time nor the last line)."""
        return self.time is None and not self.log

    def resolve(self, last_at: datetime | None, last_ts: str | None) -> tuple[datetime | None, str | None]:
        """The time and its text, given the log's last line (None, None: a log with no event, at its last line)."""
        if self.log:
            return None if last_at is None else self.zoned(last_at), last_ts
        if self.time is not None:
            return self.zoned(self.time), self.text or self.time.isoformat()
        t = self.wall_clock()
        return t, t.isoformat()

    def clock(self, last_at: datetime | None) -> Clock:
        """The clock a runner acts by: fixed at the time or the last line (now when the log has none), else now."""
        if self.log and last_at is not None:
            return fixed(self.zoned(last_at))
        if not self.log and self.time is not None:
            return fixed(self.zoned(self.time))
        return self.wall_clock

    def wall_clock(self) -> datetime:
        """The wall clock in the zone it is judged in: ``zone``'s when given (the instant is the same; its day and
        hours are the zone's, whatever the machine's), else as :meth:`zoned` puts it."""
        t = now()
        return self.zoned(t if self.zone is None else t.astimezone(self.zone))


#: Judge as of now.
NOW = At()
#: Judge as of the log's last line.
LAST_LINE = At(log=True)


def parse_at(text: str | None, assume_tz: tzinfo | None = None, default: At = NOW, *, local: bool = True) -> At:
    """``--at``: an ISO 8601 time (naive: in ``assume_tz``), ``log``, or None for ``default``.

    Its times are judged in ``assume_tz``, then (``local``) the machine's zone, when they
    fit (:class:`At`). Raises ValueError with a message for a person.
    """
    if text is None:
        return replace(default, zone=assume_tz, local=local)
    if text.strip().lower() == LOG:
        return replace(LAST_LINE, zone=assume_tz, local=local)
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--at {text!r} is not an ISO 8601 time (or 'log' for the last line)") from None
    if not FIRST_YEAR <= value.year <= LAST_YEAR:
        raise ValueError(f"--at {text!r} is outside the years {FIRST_YEAR} to {LAST_YEAR} (spec section 1, Ranges)")
    if value.tzinfo is None:
        if assume_tz is None:
            raise ValueError(f"--at {text!r} has no UTC offset (add one, or give --assume-tz)")
        value = value.replace(tzinfo=assume_tz)
        text = value.isoformat()
    return At(value, text, zone=assume_tz, local=local)


__all__ = ["LAST_LINE", "LOG", "NOW", "At", "Clock", "fixed", "in_zone", "local_zone", "local_zone_name",
           "local_zone_problem", "now", "parse_at", "unknown_tz", "wall_time_change", "wall_time_note", "zone_like",
           "zone_name"]
