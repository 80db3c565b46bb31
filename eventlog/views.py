"""The live views of a log for people and consoles: the triage (``status``) and one id's verdict (``explain``).

The judging is pure (:mod:`projections.triage`); this module is its shell
side: it reads what the judging needs from a replayed log (:func:`facts`)
and, for ``explain``, the lines that name the id. ``eventlog status``,
``eventlog explain`` and an HTTP console call these same functions, so they
show the same triage.

- :func:`status` (a replayed log) and :func:`status_of_missing` (no log at
  that path) give a :class:`projections.triage.Triage`;
- :func:`explain` gives an :class:`Explained` (the lines and the verdicts, and
  the bad lines whose text names the id), or None when nothing names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from eventlog.clock import At, unknown_tz, zone_like, zone_name
from eventlog.events import KEY_FIELDS, Event, RecoveryDecision, type_name
from eventlog.logs import no_event_log, open_log, printed
from eventlog.reader import Reader, as_written
from eventlog.replay import Replay
from eventlog.runners.common import BadLines, NamedBadLine, id_pattern
from projections.runner import Runner
from projections.sessions import ACCEPTED
from projections.triage import (
    KIND_OF_FIELD,
    BadLineFact,
    LinesVanished,
    LogArg,
    LogFacts,
    StreamGaps,
    StuckTail,
    Triage,
    UnfinishedBatch,
    Verdict,
    not_applied,
    triage,
    turn_verdict,
)
from projections.triage import explain as verdicts_of
from projections.turns import Turns

#: The fields that name a session's turn (``explain`` folds the lines that name a turn id into its story).
TURN_FIELDS: tuple[str, ...] = ("turn_id", "target_turn_id", "covers_turn")
#: Fields whose value names an id ``explain`` finds lines by: the stream keys, the watcher's name, a turn and an
#: interrupt (``control_id``). Every id field a line holds: a turn id was named by four lines and "no line" found it.
ID_FIELDS: tuple[str, ...] = (*KEY_FIELDS, "watcher", *TURN_FIELDS, "control_id")


def facts(replay: Replay, log: str, vanished: LinesVanished | None = None, live: bool = False) -> LogFacts:
    """What the triage needs of the log itself: its name, events, bad lines, a torn tail (an unfinished batch, a
    torn last line, and whether it is stuck), whether it is no event log at all (every append is refused either
    way), the committed lines that vanished while a live process followed it (``vanished``: only it knows), and a
    stream's sequences that hold no message any more (its replay's ``vanished``: every read sees them), and the
    zone of ``--assume-tz`` it was read in (every ``eventlog`` command on it carries it); ``live``: T is now, so
    without ``--assume-tz`` it is judged in the machine's zone, and a ``TZ`` that names none is a fact too
    (:func:`zone_unknown`). The name is
    LOG as printed (:func:`eventlog.logs.printed`): the commands the triage prints never carry a password."""
    stuck = None if replay.stuck_tail is None else StuckTail(*replay.stuck_tail)
    u = replay.uncommitted
    unfinished = None if u is None else UnfinishedBatch(u.words(), u.line, u.lines, u.torn_after)
    v = replay.vanished
    gaps = None if v is None else StreamGaps(lines=v.lines, runs=v.runs, words=v.words())
    tz = zone_unknown(replay, live)
    return LogFacts(name=printed(log), assume_tz=zone_name(replay.reader.assume_tz), events=replay.events,
                    zone_unknown=tz, zone_like=None if tz is None else zone_like(tz),
                    torn_tail=replay.torn_tail, unfinished=unfinished, stuck_tail=stuck,
                    not_a_log=no_event_log(log, replay), vanished=vanished, gaps=gaps,
                    bad_lines=[BadLineFact(b["line"], b["reason"]) for b in replay.bad_lines])


def zone_unknown(replay: Replay, live: bool) -> str | None:
    """``TZ`` as set when a judgement as of now (``live``) of ``replay`` takes the machine's zone (it was read without
    ``--assume-tz``, whose zone now is judged in otherwise) and ``TZ`` names no zone (:func:`eventlog.clock.unknown_tz`:
    UTC is taken); else None."""
    return unknown_tz() if live and replay.reader.assume_tz is None else None


def _runner(replay: Replay) -> Runner:
    runner = replay.folder
    assert isinstance(runner, Runner)
    return runner


def status(replay: Replay, log: str, at: At, vanished: LinesVanished | None = None,
           live: bool | None = None) -> Triage:
    """The triage of a replayed log as of ``at`` (now, a time, or its last line); ``vanished``: see :func:`facts`.

    ``live``: ``at`` is the wall clock now (default: ``at.live``; a caller that pinned now to a time says so),
    so the times a verdict is judged from that lie ahead of it are items (``dated_ahead``).
    """
    as_of, text = at.resolve(replay.last_at, replay.last_ts)
    live = at.live if live is None else live
    return triage(_runner(replay), as_of, text, facts(replay, log, vanished, live), live)


def status_of_missing(log: str, at: At, not_file: str | None = None) -> Triage:
    """The triage of a log that is not there: one item, the log is missing (never an all-clear).

    ``not_file``: what is at its path instead (``LOG is a directory, not a log file``), which the item says.
    """
    as_of, text = at.resolve(None, None)
    return triage(Runner(), as_of, text, LogFacts(name=printed(log), assume_tz=zone_name(at.zone), missing=True,
                                                  not_file=not_file))


class Line(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One line of the log that names the id: its number, type, ``ts``, the event as written, and its rejection.

    ``event`` is the line's own JSON text (:func:`eventlog.reader.as_written`), never parsed and written again:
    a number past what a double holds (``1`` and 309 zeros, ``18446744073709551617``) is shown as written.
    """

    line: int
    type: str
    ts: str
    event: msgspec.Raw
    rejected: str | None = None


class Explained(msgspec.Struct, kw_only=True):
    """``explain ID``: the lines that name it (log order) and its verdict in each domain that knows it.

    ``bad_lines``: the log's bad lines (how many, the first few), left out of
    every verdict; ``named_by_bad_lines``: those whose text names the id. No
    verdict (and no line) when only bad lines name it.
    """

    log: str
    id: str
    as_of: str | None
    lines: list[Line]
    verdicts: list[Verdict]
    bad_lines: BadLines
    named_by_bad_lines: list[NamedBadLine]


def lines_of(path: str, ident: str, assume_tz: Any = None, bad: Mapping[int, str] | None = None,
             named: list[NamedBadLine] | None = None) -> list[tuple[Line, str, Event]]:
    """Every line of ``path`` (a file or a stream) whose event names ``ident``, in log order, with the first field of
    :data:`ID_FIELDS` that does and the event.

    The lines in ``bad`` (number: reason; a replay's bad lines) are not read as
    events: those whose text names ``ident`` (:func:`eventlog.runners.common.id_pattern`)
    are added to ``named``, in the same single read.
    """
    found: list[tuple[Line, str, Event]] = []
    reader = Reader(assume_tz)
    bad = bad or {}
    pattern = id_pattern(ident) if bad and named is not None else None
    with open_log(path) as log:
        for n, raw in log.lines():
            if n in bad:
                if pattern is not None and named is not None and pattern.search(raw):
                    named.append(NamedBadLine.of(printed(path), n, bad[n]))
                continue
            decoded = reader.decode(raw, n)
            if isinstance(decoded, str):
                continue
            ev = decoded[0]
            field = next((key for key in ID_FIELDS if getattr(ev, key, None) == ident), None)
            if field is not None:
                found.append((Line(line=n, type=type_name(ev), ts=ev.ts, event=msgspec.Raw(as_written(raw))), field,
                              ev))
    return found


def explain(replay: Replay, log: str, ident: str, at: At, assume_tz: Any = None) -> Explained | None:
    """The lines that name ``ident`` and its verdict as of ``at``; None when no line, bad or not, and no domain
    knows it.

    Reads the log again for the lines (raises OSError when it cannot).
    """
    named: list[NamedBadLine] = []
    named_by = lines_of(log, ident, assume_tz, {b["line"]: b["reason"] for b in replay.bad_lines}, named)
    found = [line for line, _field, _ev in named_by]
    runner = _runner(replay)
    as_of, text = at.resolve(replay.last_at, replay.last_ts)
    judged = verdicts_of(runner, ident, as_of, text, facts(replay, log, live=at.live), at.live)
    bad = BadLines.of(replay.bad_lines)
    if not found and not judged:
        if not named:
            return None
        return Explained(log=printed(log), id=ident, as_of=text, lines=[], verdicts=[], bad_lines=bad,
                         named_by_bad_lines=named)
    rejected = {r["line"]: r["reason"] for r in runner.rejected}
    for item in found:
        item.rejected = rejected.get(item.line)
    judged += turn_verdicts(runner, LogArg(printed(log), zone_name(replay.reader.assume_tz)), ident, named_by)
    if not judged:  # lines name it, and none of them made it an entity (all rejected, say)
        field = named_by[0][1]
        judged = [not_applied(KIND_OF_FIELD[field], ident, len(found), sum(x.rejected is not None for x in found))]
    return Explained(log=printed(log), id=ident, as_of=text, lines=found, verdicts=judged, bad_lines=bad,
                     named_by_bad_lines=named)


def turn_verdicts(runner: Runner, log: LogArg, turn_id: str, named_by: list[tuple[Line, str, Event]]) -> list[Verdict]:
    """The verdict of turn ``turn_id`` in each session that has one, folded (:class:`projections.turns.Turns`) from
    the lines that name it that the replay applied: not rejected, and of the decisions only those accepted the first
    time (a refused or repeated one changes nothing), as ``GET /v1/sessions/{id}/turns/{turn_id}`` folds them."""
    lines = [(line, ev) for line, _field, ev in named_by
             if line.rejected is None and any(getattr(ev, f, None) == turn_id for f in TURN_FIELDS)]
    decided = {line.line for line, ev in lines if isinstance(ev, RecoveryDecision)}
    applied = {r.line for r in runner.sessions.receipts
               if r.line in decided and r.result == ACCEPTED and not r.replayed} if decided else set()
    turns = Turns()
    for line, ev in lines:
        if not isinstance(ev, RecoveryDecision) or line.line in applied:
            turns.fold(ev, line.line)
    sessions = runner.sessions.sessions
    return [turn_verdict(log, sid, turn_id, msgspec.to_builtins(t), sessions.get(sid))
            for sid, t in sorted(turns.of(turn_id).items())]


__all__ = ["ID_FIELDS", "TURN_FIELDS", "Explained", "Line", "explain", "facts", "lines_of", "status",
           "status_of_missing", "turn_verdicts", "zone_unknown"]
