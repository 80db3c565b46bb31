"""The handoff as an ``eventsourcing`` (9.5.6) aggregate: the library's way to rebuild the same events.

Only the benchmark imports this (the ``bench`` extra); the project never
depends on the library. Each event of spec section 3 that names a handoff
is one decorated method whose arguments are every field of the line
(``ts`` and ``seq`` included), and whose body is the state change the
library replays on :meth:`Repository.get`. The bodies do not check
transitions (the project's fold does): that favours the library.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event


def handoff_uuid(handoff_id: str) -> UUID:
    """The aggregate id of a handoff id (the library wants UUIDs)."""
    return uuid5(NAMESPACE_URL, f"/handoffs/{handoff_id}")


class Handoff(Aggregate):
    """One handoff: its state, account, last claimed attempt and reason."""

    @staticmethod
    def create_id(handoff_id: str, **_: Any) -> UUID:
        return handoff_uuid(handoff_id)

    @event("Created")
    def __init__(
        self,
        handoff_id: str,
        account: str,
        ts: str,
        seq: int,
        deadline: str | None = None,
        importance: int = 0,
        repo: str | None = None,
        branch: str | None = None,
        head: str | None = None,
    ) -> None:
        self.handoff_id = handoff_id
        self.account = account
        self.state = "pending"
        self.attempt = 0
        self.created_ts = ts
        self.deadline = deadline
        self.importance = importance
        self.watcher: str | None = None
        self.reason: str | None = None
        self.local_started = False

    @event("LocalStarted")
    def local_start(self, ts: str, seq: int) -> None:
        self.local_started = True

    @event("LocalStartFailed")
    def local_start_failed(self, ts: str, seq: int, error: str) -> None:
        self.reason = error

    @event("Claimed")
    def claim(self, ts: str, seq: int, watcher: str, attempt: int) -> None:
        self.state = "claimed"
        self.watcher = watcher
        self.attempt = attempt

    @event("Released")
    def release(self, ts: str, seq: int, reason: str) -> None:
        self.state = "pending"
        self.watcher = None

    @event("ResumeRequested")
    def request_resume(self, ts: str, seq: int, attempt: int) -> None:
        self.state = "resume_requested"

    @event("ResumeFailed")
    def resume_failed(self, ts: str, seq: int, attempt: int, error: str, effect: str) -> None:
        self.state = "pending" if effect == "none" else "needs_human"

    @event("Verified")
    def verify(self, ts: str, seq: int, attempt: int, branch: str, head: str, dirty: bool, todos: str) -> None:
        self.state = "returned"

    @event("Conflict")
    def conflict(self, ts: str, seq: int, detail: str) -> None:
        self.state = "needs_human"
        self.reason = "conflict"

    @event("NeedsHuman")
    def needs_human(self, ts: str, seq: int, reason: str) -> None:
        self.state = "needs_human"
        self.reason = reason

    @event("Skipped")
    def skip(self, ts: str, seq: int, reason: str) -> None:
        self.state = "skipped"
        self.reason = reason


#: Wire type -> the aggregate's method name.
METHODS = {
    "local_started": "local_start",
    "local_start_failed": "local_start_failed",
    "claimed": "claim",
    "released": "release",
    "resume_requested": "request_resume",
    "resume_failed": "resume_failed",
    "verified": "verify",
    "conflict": "conflict",
    "needs_human": "needs_human",
    "skip": "skip",
}


class HandoffApp(Application[UUID]):
    """An application with the in-memory (POPO) recorder and no cache, no snapshots."""

    env = {"PERSISTENCE_MODULE": "eventsourcing.popo"}


def store(app: HandoffApp, lines: Iterable[dict[str, Any]], batch: int = 2000) -> list[UUID]:
    """Record every handoff event of ``lines`` (decoded log lines, in log order); the aggregate ids."""
    live: dict[str, Handoff] = {}
    dirty: dict[str, Handoff] = {}
    ids: list[UUID] = []
    for obj in lines:
        fields = dict(obj)
        kind = fields.pop("type")
        hid = fields.pop("handoff_id")
        if kind == "handoff_created":
            agg = Handoff(handoff_id=hid, **fields)
            live[hid] = agg
            ids.append(agg.id)
        else:
            agg = live[hid]
            getattr(agg, METHODS[kind])(**fields)
        dirty[hid] = agg
        if len(dirty) >= batch:
            app.save(*dirty.values())
            dirty.clear()
    if dirty:
        app.save(*dirty.values())
    return ids


def rebuild(app: HandoffApp, ids: Iterable[UUID]) -> int:
    """Rebuild every aggregate from its stored events; the number of events replayed."""
    get = app.repository.get
    n = 0
    for uid in ids:
        agg: Handoff = get(uid)
        n += agg.version
    return n
