"""What folding an event can come to: the types shared by the log and the projections."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, ClassVar, Final, NamedTuple, Protocol, runtime_checkable

import msgspec

from eventlog.events import Event


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off for a while (as it was before afterwards).

    Folding and building views make millions of objects that live on (the state, the
    dump); the collector would walk that growing heap again and again, finding
    nothing: events and most of the state hold no cycles.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Rejected(NamedTuple):
    """An event that does not fit the state, with the reason."""

    reason: str


class _NotApplied:
    def __repr__(self) -> str:
        return "NOT_APPLIED"


#: Recorded but not applied: a refused or repeated recovery decision.
NOT_APPLIED: Final = _NotApplied()

FoldResult = Rejected | _NotApplied | None


class Folder(Protocol):
    """What the log needs of its projections: fold, revision, view.

    A folder may also have ``fold_block(evs, first_line, ats)``, which folds events of consecutive lines
    as ``fold`` folds each; the replay's block path then calls it once per block of ordinary lines.
    """

    def fold(self, ev: Event, line: int, at: datetime) -> FoldResult:
        """Fold one event; None when applied."""
        ...

    def revision(self, ev: Event) -> int:
        """Applied events so far in ``ev``'s stream."""
        ...

    def view(self, as_of: datetime, as_of_text: str | None = None) -> dict[str, Any]:
        """``rejected`` and the domain parts of the dump (``as_of_text``: T as written)."""
        ...


@runtime_checkable
class Stateful(Protocol):
    """A folder whose folded state can be saved and loaded (snapshots, the sidecar).

    ``State`` is a msgspec Struct type: the schema of the saved state. The
    codec (:mod:`eventlog.snapshot`) encodes ``save_state()`` with msgpack and
    decodes it with a typed decoder of ``State``; ``load_state`` takes such a
    decoded value into a fresh folder.
    """

    State: ClassVar[type[msgspec.Struct]]

    def save_state(self) -> msgspec.Struct:
        """The folded state (it shares the folder's containers: encode it, do not keep it)."""
        ...

    def load_state(self, state: Any) -> None:
        """Take a decoded ``State`` as this (fresh) folder's state."""
        ...

    def state_key(self) -> str:
        """The settings the folded state depends on (a snapshot folded under others is not used)."""
        ...
