"""Each session turn's outcome, for ``GET /v1/sessions/{id}/turns/{turn_id}`` (seed 004).

Seed 004: an interrupted turn whose outcome cannot be told ends
``outcome_unknown``, and "the turn's ``terminal_reason`` tells why"
(``interrupt_checkpoint_unavailable``, ``interrupt_unanswered``); an accepted
``abandon`` closes the turn as ``cancelled`` ("turn を cancelled で閉じます"),
an accepted ``confirm_completed`` as completed.

A pure fold of applied events only: the caller feeds it what the session
projection applied (a rejected ``turn_started`` never reaches it). The session
verdicts (unknown turns, checkpoints, what a decision needs) stay in
:mod:`projections.sessions`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from eventlog.events import Event, RecoveryDecision, TurnFinished, TurnStarted

#: What an accepted decision makes of the turn it names.
RESOLVED_BY = {"abandon": "cancelled", "confirm_completed": "completed"}


class Turn(msgspec.Struct, kw_only=True):
    """One turn: when it started and finished (lines, times as written), how, and how a decision closed it."""

    started_line: int | None = None
    started_at: str | None = None
    finished_line: int | None = None
    finished_at: str | None = None
    outcome: str | None = None
    terminal_reason: str | None = None
    resolution: str | None = None
    resolved_line: int | None = None


class Turns:
    """Turns by session, then by turn id."""

    name = "turns"

    def __init__(self) -> None:
        self.sessions: dict[str, dict[str, Turn]] = {}

    def turn(self, session_id: str, turn_id: str) -> dict[str, Any] | None:
        """The turn as a plain object, or None when no applied event named it."""
        t = self.sessions.get(session_id, {}).get(turn_id)
        return None if t is None else msgspec.to_builtins(t)

    def fold(self, ev: Event, line: int, at: datetime) -> None:
        """Fold one applied event (others are ignored)."""
        if isinstance(ev, TurnStarted):
            t = self._turn(ev.session_id, ev.turn_id)
            if t.started_line is None:
                t.started_line, t.started_at = line, ev.ts
        elif isinstance(ev, TurnFinished):
            t = self._turn(ev.session_id, ev.turn_id)
            t.finished_line, t.finished_at = line, ev.ts
            t.outcome, t.terminal_reason = ev.outcome, ev.terminal_reason
        elif isinstance(ev, RecoveryDecision) and ev.target_turn_id is not None and ev.decision in RESOLVED_BY:
            t = self._turn(ev.session_id, ev.target_turn_id)
            t.resolution, t.resolved_line = RESOLVED_BY[ev.decision], line

    def _turn(self, session_id: str, turn_id: str) -> Turn:
        turns = self.sessions.setdefault(session_id, {})
        t = turns.get(turn_id)
        if t is None:
            t = turns[turn_id] = Turn()
        return t


__all__ = ["RESOLVED_BY", "Turn", "Turns"]
