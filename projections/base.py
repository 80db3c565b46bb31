"""The projection interface: fold one event, judge a view as of a time.

A projection never reads the clock, the disk or the network. ``fold`` gets one
event with its line number and its time and returns what became of it:

- ``None``: applied (the event counts toward its stream's revision);
- :class:`Rejected`: it does not fit the state; the state is as it was;
- :data:`NOT_APPLIED`: recorded but not applied (a refused or repeated
  recovery decision, which has a receipt instead).

``view(as_of)`` returns the projection's part of the dump, judged at ``as_of``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from eventlog.events import Event
from eventlog.fold import NOT_APPLIED, FoldResult, Rejected

__all__ = [
    "NOT_APPLIED", "EntityCodec", "FoldResult", "Handler", "Projection", "Rejected", "elapsed_s", "micros",
    "nearest_rank", "num", "seconds", "summary",
]


Handler = Callable[[Any, Any, int, datetime], FoldResult]


class Projection(Protocol):
    """A pure fold of one domain."""

    #: Its key in the dump.
    name: str
    #: Event class -> the method that folds it.
    handlers: dict[type[Event], Handler]

    def view(self, as_of: datetime) -> dict[str, Any]:
        """This domain's part of the dump, judged at ``as_of``."""
        ...


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)


def micros(at: datetime) -> int:
    """An aware time as integer microseconds since the epoch: exact, small to keep and to pickle."""
    return (at - _EPOCH) // _MICRO


def elapsed_s(later: datetime, earlier: datetime) -> float:
    """Real seconds from ``earlier`` to ``later``.

    Not ``later - earlier``: Python subtracts wall clocks when both times share
    one tzinfo object (every time read with ``--assume-tz``), which is an hour
    off across a DST change. Through epoch microseconds it is exact.
    """
    return seconds(micros(later) - micros(earlier))


def seconds(us: int) -> float:
    """Microseconds as seconds (exact for whole and decimal-fraction seconds, as ``total_seconds``)."""
    return us / 1_000_000


def nearest_rank(values: Sequence[float], p: float) -> float | None:
    """The p-th percentile by nearest rank (spec: value at rank ceil(p/100 n))."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def num(value: float | None) -> float | int | None:
    """A duration for the dump: whole seconds print as integers."""
    if value is None:
        return None
    return int(value) if float(value).is_integer() else value


def summary(values: Sequence[float]) -> dict[str, Any]:
    """``{"n", "p50", "p95"}`` of durations in seconds."""
    return {"n": len(values), "p50": num(nearest_rank(values, 50)), "p95": num(nearest_rank(values, 95))}


S = TypeVar("S", bound=msgspec.Struct)


class EntityCodec(Generic[S]):
    """Packs a projection's map of entity structs (id -> struct) for snapshots and sidecars.

    Pickle rebuilds each struct by calling its class; msgspec's msgpack decoder
    builds them in C, about twice as fast for 100k handoffs, and a snapshot's
    load is what a restart waits for. Aware datetimes come back as the same
    instant in UTC: keep only times that are compared, never printed, in them.
    A map msgpack cannot hold (an integer past 64 bits, a time outside years
    1-9999 in UTC, both valid input) is left as it is, for pickle.
    """

    def __init__(self, kind: type[S]) -> None:
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(dict[str, kind])  # type: ignore[valid-type]

    def pack(self, entities: dict[str, S]) -> bytes | dict[str, S]:
        """The map as msgpack, or the map itself when msgpack cannot hold it."""
        try:
            return self._encoder.encode(entities)
        except (OverflowError, ValueError, TypeError):  # msgspec.EncodeError is a ValueError
            return entities

    def unpack(self, data: bytes | dict[str, S]) -> dict[str, S]:
        """The map again."""
        return self._decoder.decode(data) if isinstance(data, bytes) else data
