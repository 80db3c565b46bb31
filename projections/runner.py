"""One pass that feeds every domain projection."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from eventlog.events import EVENT_TYPES, KEY_FIELDS, Event, type_name
from projections.base import FoldResult, Handler, Projection, Rejected
from projections.catchup import Catchup
from projections.handoffs import Handoffs
from projections.lanes import Lanes
from projections.sessions import Sessions


class Runner:
    """Folds events into all four domains and keeps the log-wide tallies.

    ``revisions`` counts applied events per stream (spec section 2).
    """

    def __init__(self, stale_after_s: float = 1800, max_inflight: int = 2) -> None:
        self.handoffs = Handoffs(stale_after_s=stale_after_s, max_inflight=max_inflight)
        self.lanes = Lanes()
        self.catchup = Catchup()
        self.sessions = Sessions()
        self.rejected: list[dict[str, Any]] = []
        self.revisions: defaultdict[tuple[str, str], int] = defaultdict(int)

    def configure(self, stale_after_s: float = 1800, max_inflight: int = 2) -> None:
        """Set the judging thresholds (they change views, not folded state)."""
        self.handoffs.stale_after_s = stale_after_s
        self.handoffs.max_inflight = max_inflight

    @property
    def parts(self) -> tuple[Projection, ...]:
        """The domain projections in dump order."""
        return (self.handoffs, self.lanes, self.catchup, self.sessions)

    def fold(self, ev: Event, line: int, at: datetime) -> FoldResult:
        """Fold one event into its domain; record a rejection."""
        cls = type(ev)
        route = _ROUTES.get(cls)
        result = None if route is None else route[1](getattr(self, route[0]), ev, line, at)
        if result is None:
            field = _STREAM_FIELD[cls]
            if field is not None:
                self.revisions[(field, getattr(ev, field))] += 1
        elif isinstance(result, Rejected):
            self.rejected.append({"line": line, "type": type_name(ev), "reason": result.reason})
        return result

    def revision(self, ev: Event) -> int:
        """How many events of ``ev``'s stream were applied so far."""
        field = _STREAM_FIELD[type(ev)]
        if field is None:
            return 0
        return self.revisions.get((field, getattr(ev, field)), 0)

    def view(self, as_of: datetime) -> dict[str, Any]:
        """``rejected`` and every domain's part of the dump."""
        out: dict[str, Any] = {"rejected": list(self.rejected)}
        for part in self.parts:
            out[part.name] = part.view(as_of)
        return out


def _routes() -> dict[type[Event], tuple[str, Handler]]:
    probe = Runner()
    routes: dict[type[Event], tuple[str, Handler]] = {}
    for attr in ("handoffs", "lanes", "catchup", "sessions"):
        for cls, handler in getattr(probe, attr).handlers.items():
            routes[cls] = (attr, handler)
    return routes


def _stream_field(cls: type[Event]) -> str | None:
    fields = set(cls.__struct_fields__)
    return next((name for name in KEY_FIELDS if name in fields), None)


_ROUTES = _routes()
_STREAM_FIELD = {cls: _stream_field(cls) for cls in EVENT_TYPES.values()}
