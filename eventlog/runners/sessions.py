"""Operator decisions with receipts, and what each session would accept now (seed 004).

:func:`decide` appends one ``recovery_decision`` to the log, accepted or not
(a refused decision is part of the audit trail), and returns its receipt. The
receipt is the judgement of the projection that folds the appended line under
the log's exclusive lock: two decisions with the same expected revision are
folded one after the other, so the second sees the revision the first one
moved and is refused with ``REQUEST_STALE`` (it is still written). No
``expect_revision`` is passed to the appender on purpose: the decision carries
its own ``expected_revision`` and the projection checks it in the spec's order,
after the idempotency key, so a repeated key still gets its first receipt back.
The receipt is then read back by the ``seq`` the appender gave the line.
An idempotency key sent before with the same request returns its first receipt
(``replayed``); with another request the receipt is ``IDEMPOTENCY_KEY_REUSED``;
either way nothing changes, and :attr:`Decided.note` says which line the key
was first used on.

:func:`describe` (from :mod:`projections.sessions`, where it is pure) is one
session as the dump shows it, plus whether its retry is due, whether it waits
for a person, and which decisions it would accept now.
"""

from __future__ import annotations

from typing import Any

import msgspec

from eventlog.appender import AppendError
from eventlog.logs import Log
from eventlog.runners.common import RunnerError, folder
from projections.sessions import (
    DECISIONS,
    IDEMPOTENCY_KEY_REUSED,
    Session,
    Sessions,
    describe,
    needs_decision,
)

#: What a refusal code means, for people.
WHY = {
    "REQUEST_STALE": "the session's revision or state does not allow this decision now (see `eventlog sessions`)",
    "RECOVERY_REQUIRED": "the previous execution has not been confirmed gone after that turn (wait for execution_gone)",
    "CHECKPOINT_UNAVAILABLE": "confirm_completed needs --evidence-ref and a committed checkpoint covering the turn",
    "IDEMPOTENCY_KEY_REUSED": "the idempotency key was used for another request; nothing changed (use a new key)",
}


class UnknownId(RunnerError):
    """An id no line of the log names (a CLI's exit 2, an API's 404)."""


class Decision(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One operator's recovery decision, as sent."""

    session_id: str
    decision: str
    expected_revision: int
    idempotency_key: str
    reason: str
    target_turn_id: str | None = None
    evidence_ref: str | None = None
    #: Who decides (``eventlog decide``: the OS user; the API: the key's name).
    actor: str | None = None

    def check(self) -> None:
        """RunnerError for a decision that is not valid input (nothing is written then)."""
        if self.decision not in DECISIONS:
            raise RunnerError(f"decision {self.decision!r} is not one of {', '.join(DECISIONS)}")
        if not self.idempotency_key or not self.reason.strip():
            raise RunnerError("--idempotency-key and --reason must not be empty")
        if self.actor is not None and not self.actor.strip():
            raise RunnerError("--actor must not be empty")


class Decided(msgspec.Struct, kw_only=True):
    """A decision's receipt (the dump's: ``line``, ..., ``first_line``, ``actor``), the session after, and a note.

    ``note``: for a repeated key, what the first request with it was (its line, and
    for ``IDEMPOTENCY_KEY_REUSED`` what it asked); None otherwise.
    """

    receipt: dict[str, Any]
    session: dict[str, Any]
    note: str | None = None

    @property
    def accepted(self) -> bool:
        """Whether the decision (or the first one with its key) was accepted."""
        return bool(self.receipt["result"] == "accepted")

    @property
    def status(self) -> int:
        """0 accepted, 3 refused (the code is in the receipt)."""
        return 0 if self.accepted else 3


def decide(log: Log, request: Decision) -> Decided:
    """Append one decision under the log's lock; its receipt and the session after it.

    Raises RunnerError for bad input, :class:`UnknownId` for a session with no
    event yet, and AppendError (or its subclasses) when nothing was written.
    """
    request.check()
    before = folder(log.state()).sessions
    if request.session_id not in before.sessions:
        raise UnknownId(f"{log.name}: no session {request.session_id!r} (no event of it yet)")
    event: dict[str, Any] = {"type": "recovery_decision", **msgspec.to_builtins(request)}
    for optional in ("target_turn_id", "evidence_ref", "actor"):
        if event[optional] is None:
            del event[optional]
    written = log.append([event])
    sessions = folder(log.state()).sessions
    receipt = sessions.receipt_of(written.first_seq)
    if receipt is None:  # the log was replaced between the append and the read-back
        raise AppendError([f"the receipt of seq {written.first_seq} is not in the log any more"])
    return Decided(receipt=receipt, session=sessions.session(request.session_id).item(),
                   note=_key_note(sessions, request, receipt))


def _key_note(sessions: Sessions, request: Decision, receipt: dict[str, Any]) -> str | None:
    """What a repeated idempotency key's first request was, for people; None for a key's first use."""
    first = sessions.first_use(request.session_id, request.idempotency_key)
    if first is None or receipt["first_line"] == receipt["line"]:
        return None
    if receipt["result"] == IDEMPOTENCY_KEY_REUSED:
        return (f"idempotency key {request.idempotency_key!r} was used at line {first.line} for another request "
                f"({first.describe()}); nothing changed")
    return f"idempotency key {request.idempotency_key!r} was first used at line {first.line}: its receipt again"


def state_line(s: Session | dict[str, Any]) -> str:
    """A session's state in one line, for people."""
    d = s.item() if isinstance(s, Session) else s
    parts = [d["admission_state"], f"revision {d['revision']}", f"generation {d['generation']}",
             f"failures {d['failures']}"]
    if d["attention"]:
        parts.append(f"attention {d['attention']}")
    if d["admission_state"] == "stopped":
        parts.append("resumable" if d["resumable"] else "not resumable")
    return ", ".join(parts)


__all__ = ["WHY", "Decided", "Decision", "UnknownId", "decide", "describe", "needs_decision", "state_line"]
