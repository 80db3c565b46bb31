"""One pass that feeds every domain projection."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from itertools import count
from typing import Any, TypedDict

import msgspec

from eventlog.events import EVENT_TYPES, KEY_FIELDS, Event, type_name
from eventlog.reader import FAST_TYPES
from projections.base import FoldResult, Projection, Rejected
from projections.catchup import Catchup, CatchupState
from projections.handoffs import Handoffs, HandoffsState
from projections.lanes import Lanes, LanesState
from projections.sessions import Sessions, SessionsState

#: The streams whose entities count their own revision: a handoff, a session (:class:`EntityRevisions`).
ENTITY_STREAMS: frozenset[str] = frozenset({"handoff_id", "session_id"})

#: The domains (the names of :attr:`Runner.parts`).
DOMAINS: frozenset[str] = frozenset({"handoffs", "lanes", "catchup", "sessions"})


class RejectedLine(TypedDict):
    """A line whose event did not fit the state (the dump's ``rejected``)."""

    line: int
    type: str
    reason: str


class RunnerState(msgspec.Struct):
    """Everything the runner folds: each domain's state, the rejected lines, the revisions."""

    handoffs: HandoffsState = msgspec.field(default_factory=HandoffsState)
    lanes: LanesState = msgspec.field(default_factory=LanesState)
    catchup: CatchupState = msgspec.field(default_factory=CatchupState)
    sessions: SessionsState = msgspec.field(default_factory=SessionsState)
    rejected: list[RejectedLine] = []
    #: Key field -> id -> applied events of that stream, for the streams the runner counts
    #: (a handoff and a session count their own: :data:`ENTITY_STREAMS`).
    revisions: dict[str, dict[str, int]] = {}


class EntityRevisions(Mapping[str, int]):
    """A stream's revisions read off its entities, each of which counts its applied events (``revision``).

    The entities are ``projection.state.<entities>``, looked up on every read (a loaded state
    replaces them). It holds the projection, not a function of the runner: a deep copy of the
    runner (:func:`eventlog.snapshot.copy` without the codec) then reads its own copy. An entity
    at revision 0 (made without an applied event) is not in the stream, as with a count.
    """

    __slots__ = ("_name", "_projection")

    def __init__(self, projection: Projection, entities: str) -> None:
        self._projection = projection
        self._name = entities

    def _entities(self) -> Mapping[str, Any]:
        entities: Mapping[str, Any] = getattr(self._projection.state, self._name)
        return entities

    def __getitem__(self, key: str) -> int:
        revision: int = self._entities()[key].revision
        if not revision:
            raise KeyError(key)
        return revision

    def get(self, key: str, default: Any = None) -> Any:
        """The stream's revision, else ``default``."""
        entity = self._entities().get(key)
        return default if entity is None or not entity.revision else entity.revision

    def __iter__(self) -> Iterator[str]:
        return (key for key, entity in self._entities().items() if entity.revision)

    def __len__(self) -> int:
        return sum(1 for entity in self._entities().values() if entity.revision)


class Runner:
    """Folds events into all four domains and keeps the log-wide tallies (folded state: :class:`RunnerState`).

    ``revisions`` holds the applied events per stream (spec section 2):
    key field -> id -> count; a handoff and a session count their own, the runner
    the other streams (:attr:`counts`). ``folding`` names the domains it folds (all by default);
    the events of the others pass unfolded and uncounted, for a replay split between
    processes (:mod:`eventlog.jobs`; the types no domain folds go with ``handoffs``).
    """

    State = RunnerState

    def __init__(
        self,
        stale_after_s: float | None = None,
        max_inflight: int = 2,
        unpicked_minutes: float | None = None,
        quiet_hours: float | None = None,
        folding: frozenset[str] = DOMAINS,
    ) -> None:
        self.folding = folding
        self.handoffs = Handoffs(stale_after_s=stale_after_s, max_inflight=max_inflight)
        self.lanes = Lanes(unpicked_minutes=unpicked_minutes, quiet_hours=quiet_hours)
        self.catchup = Catchup()
        self.sessions = Sessions()
        self.rejected: list[RejectedLine] = []
        #: The runner's own counts, of the streams no entity counts.
        self.counts: dict[str, dict[str, int]] = {name: {} for name in KEY_FIELDS if name not in ENTITY_STREAMS}
        self._route()

    def _route(self) -> None:
        """Set :attr:`revisions` and the dispatch (the routes hold the runner's counts)."""
        entities = {"handoff_id": EntityRevisions(self.handoffs, "items"),
                    "session_id": EntityRevisions(self.sessions, "sessions")}
        #: Key field -> id -> applied events of that stream (spec section 2), in :data:`KEY_FIELDS` order.
        self.revisions: dict[str, Mapping[str, int]] = {
            name: entities[name] if name in ENTITY_STREAMS else self.counts[name] for name in KEY_FIELDS}
        self._dispatch_by_type()

    def _dispatch_by_type(self) -> None:
        """Event class -> (bound handler, the runner's counts of its stream's key field, that field).

        The counts are None where no stream or an entity counts (:data:`ENTITY_STREAMS`).
        """
        self._dispatch: dict[type[Event], tuple[Route, dict[str, int] | None, str]] = {}
        self._field: dict[type[Event], str | None] = {}
        for cls in EVENT_TYPES.values():
            field = _stream_field(cls)
            self._field[cls] = field
            counts = self.counts[field] if field is not None and field not in ENTITY_STREAMS else None
            handler = _NOTHING
            owner = self.handoffs.name
            for part in self.parts:
                if cls in part.handlers:
                    handler = part.handlers[cls].__get__(part)  # a bound method: cheaper to call than a partial
                    owner = part.name
            if field in ENTITY_STREAMS and handler is _NOTHING:
                raise TypeError(f"{cls.__name__} names a {field} but no projection folds it: its revision would "
                                "go uncounted")
            self._dispatch[cls] = (handler, counts, field or "") if owner in self.folding else (_NOTHING, None, "")
        for fast, cls in FAST_TYPES.items():  # the replay's fast path decodes these subclasses
            self._dispatch[fast] = self._dispatch[cls]
            self._field[fast] = self._field[cls]

    def save_state(self) -> RunnerState:
        """The folded state of every domain and of the runner (shared, not copied: encode it, do not keep it)."""
        return RunnerState(self.handoffs.state, self.lanes.state, self.catchup.state, self.sessions.state,
                           self.rejected, self.counts)

    def load_state(self, state: RunnerState) -> None:
        """Take a decoded state as this runner's (the settings stay this runner's)."""
        counts = {name: state.revisions.get(name, {}) for name in self.counts}
        self.handoffs.state = state.handoffs
        self.lanes.state = state.lanes
        self.catchup.state = state.catchup
        self.sessions.state = state.sessions
        self.rejected = state.rejected
        self.counts = counts
        self._route()  # the routes hold the revision counts

    def state_key(self) -> str:
        """The settings the folded state depends on: the caller's lane thresholds judge, as folded, the records
        of ``lane_check`` events that state none (None: the lanes runner's, as the log states them)."""
        lanes = self.lanes
        return f"unpicked_minutes={lanes.configured_unpicked_minutes!r},quiet_hours={lanes.configured_quiet_hours!r}"

    def configure(self, stale_after_s: float | None = None, max_inflight: int = 2) -> None:
        """Set the judging thresholds (they change views, not folded state); a ``stale_after_s`` of None is the
        watcher's own (its last heartbeat), else 30 min."""
        self.handoffs.configured_stale_after_s = stale_after_s
        self.handoffs.max_inflight = max_inflight

    @property
    def parts(self) -> tuple[Projection, ...]:
        """The domain projections in dump order."""
        return (self.handoffs, self.lanes, self.catchup, self.sessions)

    def fold(self, ev: Event, line: int, at: datetime) -> FoldResult:
        """Fold one event into its domain; count it in its stream or record its rejection."""
        handler, counts, field = self._dispatch[type(ev)]
        result = handler(ev, line, at)
        if result is None:
            if counts is not None:
                key = getattr(ev, field)
                counts[key] = counts.get(key, 0) + 1
        elif result.__class__ is Rejected:
            self.rejected.append({"line": line, "type": type_name(ev), "reason": result.reason})
        return result

    def fold_block(self, evs: list[Event], first_line: int, ats: list[datetime]) -> None:
        """Fold events of lines ``first_line`` on (times ``ats``), as :meth:`fold` folds each: the replay's
        block path, one call for a block rather than one per event (a subclass that does more in ``fold`` gets
        its ``fold`` for each)."""
        if self.__class__.fold is not Runner.fold:
            for line, ev, at in zip(count(first_line), evs, ats):
                self.fold(ev, line, at)
            return
        dispatch = self._dispatch  # fold's body, inline: this runs for nearly every event of a replay
        rejected = self.rejected
        for line, ev, at in zip(count(first_line), evs, ats):
            handler, counts, field = dispatch[ev.__class__]
            result = handler(ev, line, at)
            if result is None:
                if counts is not None:
                    key = getattr(ev, field)
                    counts[key] = counts.get(key, 0) + 1
            elif result.__class__ is Rejected:
                rejected.append({"line": line, "type": type_name(ev), "reason": result.reason})

    def revision(self, ev: Event) -> int:
        """How many events of ``ev``'s stream were applied so far."""
        field = self._field[type(ev)]
        return 0 if field is None else self.revisions[field].get(getattr(ev, field), 0)

    def view(self, as_of: datetime, as_of_text: str | None = None) -> dict[str, Any]:
        """``rejected`` and every domain's part of the dump (``as_of_text``: T as written)."""
        out: dict[str, Any] = {"rejected": list(self.rejected)}
        for part in self.parts:
            out[part.name] = part.view(as_of, as_of_text)
        return out


def thresholds(unpicked_s: float | None, quiet_s: float | None) -> Runner:
    """An empty set of projections that judges lanes with these thresholds (None: the lanes runner's, as the log
    states them, else the seed's)."""
    unpicked_minutes, quiet_hours = in_units(unpicked_s, quiet_s)
    return Runner(unpicked_minutes=unpicked_minutes, quiet_hours=quiet_hours)


def in_units(unpicked_s: float | None, quiet_s: float | None) -> tuple[float | None, float | None]:
    """The thresholds in seconds as the projection takes them: minutes unpicked, hours quiet (None stays None)."""
    return (None if unpicked_s is None else unpicked_s / 60, None if quiet_s is None else quiet_s / 3600)


Route = Callable[[Any, int, datetime], FoldResult]


def _nothing(ev: Event, line: int, at: datetime) -> FoldResult:
    """Events no projection folds are applied and change nothing."""
    return None


_NOTHING: Route = _nothing


def _stream_field(cls: type[Event]) -> str | None:
    fields = set(cls.__struct_fields__)
    return next((name for name in KEY_FIELDS if name in fields), None)
