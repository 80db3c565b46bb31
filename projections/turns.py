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

A turn may start again after it ended or was resolved (the spec allows a
``turn_started`` of a known turn id once the session admits turns: after an
abandon and a ``start_fresh``, say): its first start and its latest are both
kept, and :func:`turn_words` tells the whole story in line order, so a
"cancelled" turn that runs again is never shown as only cancelled.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from eventlog.events import Event, RecoveryDecision, TurnFinished, TurnStarted

#: What an accepted decision makes of the turn it names.
RESOLVED_BY = {"abandon": "cancelled", "confirm_completed": "completed"}
#: ... and the decision that made it so.
RESOLVING = {resolution: decision for decision, resolution in RESOLVED_BY.items()}


class Turn(msgspec.Struct, kw_only=True):
    """One turn: when it first started and finished (lines, times as written), how, how a decision closed it, and
    its latest start (``starts``: how many; the latest is the first when there was one)."""

    started_line: int | None = None
    started_at: str | None = None
    finished_line: int | None = None
    finished_at: str | None = None
    outcome: str | None = None
    terminal_reason: str | None = None
    resolution: str | None = None
    resolved_line: int | None = None
    starts: int = 0
    last_started_line: int | None = None
    last_started_at: str | None = None


class Turns:
    """Turns by session, then by turn id."""

    name = "turns"

    def __init__(self) -> None:
        self.sessions: dict[str, dict[str, Turn]] = {}

    def turn(self, session_id: str, turn_id: str) -> dict[str, Any] | None:
        """The turn as a plain object, or None when no applied event named it."""
        t = self.sessions.get(session_id, {}).get(turn_id)
        return None if t is None else msgspec.to_builtins(t)

    def fold(self, ev: Event, line: int, at: datetime | None = None) -> None:
        """Fold one applied event (others are ignored; ``at`` is not read: a turn's times are its lines')."""
        if isinstance(ev, TurnStarted):
            t = self._turn(ev.session_id, ev.turn_id)
            if t.started_line is None:
                t.started_line, t.started_at = line, ev.ts
            t.starts += 1
            t.last_started_line, t.last_started_at = line, ev.ts
        elif isinstance(ev, TurnFinished):
            t = self._turn(ev.session_id, ev.turn_id)
            t.finished_line, t.finished_at = line, ev.ts
            t.outcome, t.terminal_reason = ev.outcome, ev.terminal_reason
        elif isinstance(ev, RecoveryDecision) and ev.target_turn_id is not None and ev.decision in RESOLVED_BY:
            t = self._turn(ev.session_id, ev.target_turn_id)
            t.resolution, t.resolved_line = RESOLVED_BY[ev.decision], line

    def of(self, turn_id: str) -> dict[str, Turn]:
        """Session -> its turn ``turn_id``, for every session that has one of that id."""
        return {sid: turns[turn_id] for sid, turns in self.sessions.items() if turn_id in turns}

    def _turn(self, session_id: str, turn_id: str) -> Turn:
        turns = self.sessions.setdefault(session_id, {})
        t = turns.get(turn_id)
        if t is None:
            t = turns[turn_id] = Turn()
        return t


def turn_words(t: Turn | dict[str, Any]) -> str:
    """What happened to a turn, in line order: its first start, how it finished, how a decision resolved it, and a
    later start (with whether anything ended it since)."""
    d = msgspec.to_builtins(t) if isinstance(t, Turn) else t
    said: list[tuple[int, str]] = []
    if d["started_line"] is not None:
        said.append((d["started_line"], f"started at line {d['started_line']} ({d['started_at']})"))
    if d["finished_line"] is not None:
        why = f" ({d['terminal_reason']})" if d["terminal_reason"] else ""
        said.append((d["finished_line"], f"finished {d['outcome']}{why} at line {d['finished_line']} "
                                         f"({d['finished_at']})"))
    if d["resolved_line"] is not None:
        said.append((d["resolved_line"], f"{d['resolution']} by an accepted {RESOLVING[d['resolution']]} at line "
                                         f"{d['resolved_line']}"))
    last = d["last_started_line"]
    if last is not None and last != d["started_line"]:
        after = " after its resolution" if d["resolved_line"] is not None and last > d["resolved_line"] else ""
        open_ = d["finished_line"] is None or d["finished_line"] < last
        said.append((last, f"started again at line {last} ({d['last_started_at']}){after}"
                           + ("; no end recorded since" if open_ else "")))
    elif last is not None and d["finished_line"] is None:
        said.append((last, "no end recorded yet"))
    if d["started_line"] is None:
        said.insert(0, (0, "never started in the log"))
    return "; ".join(words for _line, words in sorted(said, key=lambda x: x[0]))


__all__ = ["RESOLVED_BY", "RESOLVING", "Turn", "Turns", "turn_words"]
