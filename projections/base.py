"""The projection interface: fold one event, judge a view as of a time; and how folded state is kept.

A projection never reads the clock, the disk or the network. ``fold`` gets one
event with its line number and its time and returns what became of it:

- ``None``: applied (the event counts toward its stream's revision);
- :class:`Rejected`: it does not fit the state; the state is as it was;
- :data:`NOT_APPLIED`: recorded but not applied (a refused or repeated
  recovery decision, which has a receipt instead).

``view(as_of, as_of_text)`` returns the projection's part of the dump, judged at
``as_of`` (``as_of_text``: T as the dump's ``as_of`` prints it, for verdicts that print T).

**Folded state is typed msgspec fields.** Everything a projection folds lives
in one msgspec Struct, its ``State`` class, held in ``self.state``; nothing
else of the projection is state (thresholds given to its constructor are
settings). Snapshots and the appender's sidecar encode the state with msgspec
msgpack and decode it with a typed decoder built from these declarations
(:mod:`eventlog.snapshot`): the types are the file's schema, a file that does
not fit them is refused and the log is replayed instead, and nothing in it
is ever run. So:

- **To add state, add a typed field with a default** to the ``State`` struct
  (``heartbeats: dict[str, Heartbeat] = {}``) and use it through
  ``self.state``. The codec follows the types; there is nothing else to write.
- Use what msgpack holds: ``str``, ``int`` (up to 64 bits; a state holding a
  bigger one is simply not saved), ``float``, ``bool``, ``None``, lists, dicts
  with ``str`` keys, and Structs or TypedDicts of those. No sets, tuples as
  keys, or classes of your own that are not Structs.
- A ``datetime`` comes back from a snapshot as **the same instant in UTC**.
  Keep a ``datetime`` only for a time that is compared or measured
  (:func:`elapsed_s`, :func:`micros`); keep a time that is printed, or that
  another printed time is computed from, as the text the reader left in the
  event (``ev.ts``: always with its offset) and read it with
  :func:`eventlog.events.parse_time` when needed.
- Say what the rules allow: a closed set of words is a ``Literal`` (a handoff's
  ``state``), so a snapshot naming another is refused. Prefer small structs
  for many entities (``array_like=True`` packs them as lists; ``gc=False``
  when they hold no containers that could form a cycle).

A snapshot is used only by the same code: its version is a hash of the
source of ``eventlog/`` and ``projections/``, so changing the state needs no
migration (old snapshots are rebuilt from the log).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any, Protocol

import msgspec

from eventlog.events import Event
from eventlog.fold import NOT_APPLIED, FoldResult, Rejected

__all__ = [
    "NOT_APPLIED", "FoldResult", "Handler", "Projection", "Rejected", "elapsed_s", "later", "micros", "nearest_rank",
    "num", "seconds", "summary",
]


Handler = Callable[[Any, Any, int, datetime], FoldResult]


class Projection(Protocol):
    """A pure fold of one domain."""

    #: Its key in the dump.
    name: str
    #: Event class -> the method that folds it.
    handlers: dict[type[Event], Handler]

    @property
    def state(self) -> msgspec.Struct:
        """Everything it folded: an instance of its ``State`` struct (see the module docstring)."""
        ...

    def view(self, as_of: datetime, as_of_text: str | None = None) -> dict[str, Any]:
        """This domain's part of the dump, judged at ``as_of`` (``as_of_text``: T as the dump prints it)."""
        ...


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)
_SECOND = timedelta(seconds=1)
#: A fixed offset -> the epoch in it (see :func:`micros`).
_EPOCHS: dict[tzinfo, datetime] = {}


def micros(at: datetime) -> int:
    """An aware time as integer microseconds since the epoch: exact, and small to keep.

    Python subtracts two aware times cheaply only when they share one tzinfo object; so
    a time with a fixed offset is measured from the epoch written in that very offset
    (the reader gives every time with the same offset the same object). A zone with
    DST goes through UTC, where the wall clock would be an hour off.
    """
    zone = at.tzinfo
    if zone.__class__ is not timezone:  # a zone with DST (or of another library: not always hashable)
        return (at - _EPOCH) // _MICRO
    epoch = _EPOCHS.get(zone)
    if epoch is None:
        epoch = _EPOCHS[zone] = _EPOCH.astimezone(zone)
    if epoch.tzinfo is not zone:  # an equal offset, another object (a time not read by eventlog.events)
        return (at - _EPOCH) // _MICRO
    return (at - epoch) // _MICRO


def elapsed_s(later: datetime, earlier: datetime) -> float:
    """Real seconds from ``earlier`` to ``later``.

    Not ``later - earlier``: Python subtracts wall clocks when both times share
    one tzinfo object (every time read with ``--assume-tz``), which is an hour
    off across a DST change. Through epoch microseconds it is exact.
    """
    zone = later.tzinfo
    if zone is earlier.tzinfo and zone.__class__ is timezone:  # one fixed offset: the wall clocks' difference
        return (later - earlier) / _SECOND
    return seconds(micros(later) - micros(earlier))


def not_before(at: datetime, other: datetime) -> bool:
    """Whether ``at`` is the same instant as ``other`` or later (as :func:`elapsed_s` ``>= 0``, cheaper).

    Python compares two aware times by their instants unless both share one tzinfo object; then it
    compares wall clocks, which only a zone with DST gets wrong (an hour across its change).
    """
    zone = at.tzinfo
    if zone is not other.tzinfo or zone.__class__ is timezone:
        return at >= other
    return micros(at) >= micros(other)


def later(at: datetime, wait: timedelta) -> datetime | None:
    """``at`` plus ``wait`` of real time, in ``at``'s own zone; None ("never") past what Python can hold.

    Every time computed from a logged one (a backoff, a retry, a deadline)
    goes through here: spec section 1 says such a time that falls outside
    what the language can hold counts as "never" (printed ``null``), and no
    projection, dump or view may fail on it.
    """
    try:
        return (at.astimezone(UTC) + wait).astimezone(at.tzinfo)
    except (OverflowError, ValueError):
        return None


def seconds(us: int) -> float:
    """Microseconds as seconds (exact for whole and decimal-fraction seconds, as ``total_seconds``)."""
    return us / 1_000_000


def nearest_rank(values: Sequence[float], p: float, *, ordered: bool = False) -> float | None:
    """The p-th percentile by nearest rank (spec: value at rank ceil(p/100 n)); ``ordered``: already sorted."""
    if not values:
        return None
    ordered_values = values if ordered else sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered_values)))
    return ordered_values[rank - 1]


def num(value: float | None) -> float | int | None:
    """A duration for the dump: whole seconds print as integers."""
    if value is None:
        return None
    return int(value) if float(value).is_integer() else value


def summary(values: Sequence[float]) -> dict[str, Any]:
    """``{"n", "p50", "p95"}`` of durations in seconds (as :func:`nearest_rank` ranks them; sorted once)."""
    ordered = sorted(values)
    return {"n": len(ordered), "p50": num(nearest_rank(ordered, 50, ordered=True)),
            "p95": num(nearest_rank(ordered, 95, ordered=True))}
