"""The one clock of the shell, and when a command judges.

Every live command and runner reads the time through :func:`now` (an aware
time in the local offset), so tests pin it with freezegun in-process, or with
``--at`` in a subprocess. Projections never read it: they are given a time.

When to judge is an :class:`At`: now (the default of live commands), a fixed
time (``--at TIME``), or the log's last line (``--at log``, what a replay does).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, tzinfo

from eventlog.events import FIRST_YEAR, LAST_YEAR

#: A source of aware times.
Clock = Callable[[], datetime]

#: The ``--at`` word for "the log's last line".
LOG = "log"


def now() -> datetime:
    """The wall clock, aware, in the local offset."""
    return datetime.now().astimezone()


def fixed(at: datetime) -> Clock:
    """A clock that always says ``at``."""
    return lambda: at


@dataclass(frozen=True)
class At:
    """When to judge: a fixed ``time`` (``text``: as written), the log's last line (``log``), or now (neither)."""

    time: datetime | None = None
    text: str | None = None
    log: bool = False

    def resolve(self, last_at: datetime | None, last_ts: str | None) -> tuple[datetime | None, str | None]:
        """The time and its text, given the log's last line (None, None: a log with no event, at its last line)."""
        if self.log:
            return last_at, last_ts
        if self.time is not None:
            return self.time, self.text or self.time.isoformat()
        t = now()
        return t, t.isoformat()

    def clock(self, last_at: datetime | None) -> Clock:
        """The clock a runner acts by: fixed at the time or the last line (now when the log has none), else now."""
        if self.log:
            return fixed(last_at) if last_at is not None else now
        if self.time is not None:
            return fixed(self.time)
        return now


#: Judge as of now.
NOW = At()
#: Judge as of the log's last line.
LAST_LINE = At(log=True)


def parse_at(text: str | None, assume_tz: tzinfo | None = None, default: At = NOW) -> At:
    """``--at``: an ISO 8601 time (naive: in ``assume_tz``), ``log``, or None for ``default``.

    Raises ValueError with a message for a person.
    """
    if text is None:
        return default
    if text.strip().lower() == LOG:
        return LAST_LINE
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
    return At(value, text)


__all__ = ["LAST_LINE", "LOG", "NOW", "At", "Clock", "fixed", "now", "parse_at"]
