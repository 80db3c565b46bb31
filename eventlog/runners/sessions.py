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

Bad lines: a decision is judged on the applied lines only, as the spec's
rules say; it is never refused because a bad line names the session (the API's
answers are the spec's, and the CLI keeps the API's rules). The bad lines of
the log, and those whose text names the session
(:func:`eventlog.runners.common.naming`), come back with the receipt
(:attr:`Decided.bad_lines`, :attr:`Decided.named_by_bad_lines`) and are said
to a person (:meth:`Decided.warnings`) (docs/DECISIONS.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from eventlog.appender import AppendError
from eventlog.logs import Log
from eventlog.runners.common import (
    BadLines,
    NamedBadLine,
    RunnerError,
    bad_lines_said,
    check_said,
    folder,
    named_problem,
    naming,
)
from projections.sessions import (
    DECISIONS,
    IDEMPOTENCY_KEY_REUSED,
    Session,
    Sessions,
    change_words,
    describe,
    needs_decision,
)
from projections.triage import sessions_cmd

#: How a decision's fields are named to whoever sent it: ``eventlog decide``'s options ...
CLI_NAMES: Mapping[str, str] = {"idempotency_key": "--idempotency-key", "reason": "--reason",
                                "evidence_ref": "--evidence-ref", "actor": "--actor"}
#: ... and the API's (``POST /v1/sessions/{id}/recovery-decisions``: the body's fields, a header, the key).
HTTP_NAMES: Mapping[str, str] = {"idempotency_key": "the Idempotency-Key header", "reason": 'the body\'s "reason"',
                                 "evidence_ref": 'the body\'s "evidence_ref"', "actor": "the key's name"}


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

    def check(self, names: Mapping[str, str] = CLI_NAMES) -> None:
        """RunnerError for a decision that is not valid input (nothing is written then), naming each field as
        ``names`` says (:data:`CLI_NAMES`: the options of ``eventlog decide``; :data:`HTTP_NAMES`: the API's)."""
        if self.decision not in DECISIONS:
            raise RunnerError(f"decision {self.decision!r} is not one of {', '.join(DECISIONS)}")
        if not self.idempotency_key:
            raise RunnerError(f"{names['idempotency_key']} must not be empty")
        if self.actor is not None and not self.actor.strip():
            raise RunnerError(f"{names['actor']} must not be empty")
        check_said(names["reason"], self.reason)
        check_said(names["evidence_ref"], self.evidence_ref)


class Decided(msgspec.Struct, kw_only=True):
    """A decision's receipt (the dump's: ``line``, ..., ``first_line``, ``actor``), the session after, and a note.

    ``note``: for a repeated key, what the first request with it was (its line, and
    for ``IDEMPOTENCY_KEY_REUSED`` what it asked); None otherwise.
    """

    receipt: dict[str, Any]
    session: dict[str, Any]
    note: str | None = None
    #: The log's bad lines as the decision was judged (left out of it), and those that name the session.
    bad_lines: BadLines = msgspec.field(default_factory=BadLines)
    named_by_bad_lines: list[NamedBadLine] = msgspec.field(default_factory=list)

    @property
    def accepted(self) -> bool:
        """Whether the decision (or the first one with its key) was accepted."""
        return bool(self.receipt["result"] == "accepted")

    @property
    def status(self) -> int:
        """0 accepted, 3 refused (the code is in the receipt)."""
        return 0 if self.accepted else 3

    def bad_lines_fields(self) -> dict[str, Any]:
        """``bad_lines`` and ``named_by_bad_lines``, as the receipt of ``decide --json`` and the API carry them."""
        return {"bad_lines": msgspec.to_builtins(self.bad_lines),
                "named_by_bad_lines": msgspec.to_builtins(self.named_by_bad_lines)}

    def warnings(self, log: str) -> list[str]:
        """What a person is told of the bad lines of ``log`` (none: nothing): how many, and which name the session."""
        return bad_lines_said(log, str(self.receipt["session_id"]), self.bad_lines, self.named_by_bad_lines,
                              then="; this decision was judged without them, on a session that may not be what "
                              "happened: look at them")


def decide(log: Log, request: Decision, names: Mapping[str, str] = CLI_NAMES) -> Decided:
    """Append one decision under the log's lock; its receipt and the session after it, with the log's bad lines.

    The receipt is :meth:`~projections.sessions.Receipt.explained`; a refused one
    also has ``next``, the command that shows the session (LOG named as ``log``
    is). Raises RunnerError for bad input (its fields named as ``names`` says),
    :class:`UnknownId` for a session with no event yet (its message names the
    bad lines that name it, if any), and AppendError (or its subclasses) when
    nothing was written.
    """
    request.check(names)
    state = log.state()
    before = folder(state).sessions
    sid = request.session_id
    named = naming(log, state.bad_lines, sid)
    if sid not in before.sessions:
        raise UnknownId(unknown_session(log.name, sid, state.bad_lines, named))
    bad = BadLines.of(state.bad_lines)
    event: dict[str, Any] = {"type": "recovery_decision", **msgspec.to_builtins(request)}
    for optional in ("target_turn_id", "evidence_ref", "actor"):
        if event[optional] is None:
            del event[optional]
    written = log.append([event])
    sessions = folder(log.state()).sessions
    receipt = sessions.receipt_of(written.first_seq)
    if receipt is None:  # the log was replaced between the append and the read-back
        raise AppendError([f"the receipt of seq {written.first_seq} is not in the log any more"])
    if receipt["result"] != "accepted":
        receipt["next"] = sessions_cmd(log.name, sid)
    return Decided(receipt=receipt, session=sessions.session(sid).item(), note=_key_note(sessions, request, receipt),
                   bad_lines=bad, named_by_bad_lines=named)


def refusal(receipt: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Why a decision was refused, for people, as (label, words): ``why`` (the rule's own words, as ``eventlog
    sessions`` gives them; ``key`` for an idempotency key used for another request), ``moved by`` (the accepted
    decision that moved the session past the revision it was decided on), ``last change`` (its latest applied
    event, when another), ``next`` (the command that shows it). ``decide`` prints one per line; the API's 409 and
    the console say them in one message."""
    out = [("key" if receipt["result"] == IDEMPOTENCY_KEY_REUSED else "why", str(receipt["why"]))]
    decided, last = receipt.get("decided_since"), receipt.get("last_change")
    if decided is not None:
        out.append(("moved by", change_words(decided)))
    if last is not None and (decided is None or last["line"] != decided["line"]):
        out.append(("last change", change_words(last)))
    if receipt.get("next"):
        out.append(("next", str(receipt["next"])))
    return out


def unknown_session(log: str, session_id: str, bad: Sequence[Mapping[str, Any]], named: list[NamedBadLine]) -> str:
    """Why ``session_id`` is unknown, for people: only bad lines name it (which), or no line does (and the log's
    ``bad`` lines, if any)."""
    if named:
        return named_problem(log, session_id, named, only=True)
    said = BadLines.of(bad).problem(log)
    return "; ".join([f"{log}: no session {session_id!r} (no event of it yet)", *([said] if said else [])])


def _key_note(sessions: Sessions, request: Decision, receipt: dict[str, Any]) -> str | None:
    """What a repeated idempotency key's first request was, for people; None for a key's first use."""
    first = sessions.first_use(request.session_id, request.idempotency_key)
    if first is None or receipt["first_line"] == receipt["line"]:
        return None
    if receipt["result"] == IDEMPOTENCY_KEY_REUSED:
        return (f"idempotency key {request.idempotency_key!r} was used at line {first.line} for another request "
                f"({first.describe()}); nothing changed (send this one with a new key)")
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


__all__ = ["CLI_NAMES", "HTTP_NAMES", "Decided", "Decision", "UnknownId", "decide", "describe", "needs_decision",
           "refusal", "state_line", "unknown_session"]
