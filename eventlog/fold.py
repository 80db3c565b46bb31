"""What folding an event can come to: the types shared by the log and the projections."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, NamedTuple, Protocol

from eventlog.events import Event


class Rejected(NamedTuple):
    """An event that does not fit the state, with the reason."""

    reason: str


class _NotApplied:
    def __repr__(self) -> str:
        return "NOT_APPLIED"

    def __reduce__(self) -> str:
        return "NOT_APPLIED"


#: Recorded but not applied: a refused or repeated recovery decision.
NOT_APPLIED: Final = _NotApplied()

FoldResult = Rejected | _NotApplied | None


class Folder(Protocol):
    """What the log needs of its projections: fold, revision, view."""

    def fold(self, ev: Event, line: int, at: datetime) -> FoldResult:
        """Fold one event; None when applied."""
        ...

    def revision(self, ev: Event) -> int:
        """Applied events so far in ``ev``'s stream."""
        ...

    def view(self, as_of: datetime, as_of_text: str | None = None) -> dict[str, Any]:
        """``rejected`` and the domain parts of the dump (``as_of_text``: T as written)."""
        ...
