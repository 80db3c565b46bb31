"""The interrupt timeline of seed 004 (section 3): per control, its stages, what went wrong, and a verdict.

A worker logs each stage of an interrupt (``worker.turn.interrupt.stage``,
the ``interrupt_stage`` event) with ``elapsed_ms`` since the interrupt was
received, in the normal order ``control_received → sdk_interrupt_called →
sdk_interrupt_answered → engine_terminal → capture_started →
capture_finished → finalize_started → finalize_finished``, and ends with one
``control.result`` (``control_result``): the turn's final outcome, a stable
``reason_code`` and ``effect_ms``. The sessions projection folds both with
:func:`fold_stage` and :func:`fold_result`; :func:`timeline` judges one
control for the dump (``sessions.controls``). Pure: no clock, no disk.

The rules (docs/DECISIONS.md, "The interrupt timeline"):

- A control belongs to the session (and turn) its first event names; an event
  naming it with another session or turn, a stage recorded twice, and anything
  after its ``control_result`` are rejected (so the timeline a result closes is
  final, and a control keeps at most nine stages).
- **Late SDK**: a ``late_sdk_interrupt_answered`` stage, or an
  ``sdk_interrupt_answered`` logged after ``engine_terminal``. It is not out of
  order (the seed: it is never inserted in the normal order).
- **First problem**: walking the normal order up to the furthest stage logged,
  the first stage that is missing or that was logged after a later stage.
  ``sdk_interrupt_answered`` is not missing when the SDK answered late or the
  engine's grace ran out (that is what a timeout means).
- **Budgets**: ``engine_grace`` (5 s) when ``engine_terminal`` has
  ``outcome: timeout`` or ``elapsed_ms`` over 5000; ``capture`` when
  ``capture_finished`` has ``outcome: timeout`` or took longer than its
  ``budget_ms`` (30000 when not given) after ``capture_started``.
- **Verdict**, the first that holds in :data:`VERDICTS` order (the earliest
  cause in the timeline wins; a symptom of the receipt comes after the stages
  that explain it; a warning after every failure):
  ``engine_timeout`` (grace exceeded, or the result's code
  ``interrupt_unanswered``), ``capture_timeout``, ``capture_failed``
  (``capture_finished`` ``outcome: failed``), ``checkpoint_unavailable``
  (``finalize_finished`` ``outcome: failed`` with ``CHECKPOINT_UNAVAILABLE``, or
  the result's code ``interrupt_checkpoint_unavailable``/``CHECKPOINT_UNAVAILABLE``),
  ``deadline_exceeded`` (the result's code), ``unexplained`` (the result's
  outcome is ``unknown``/``outcome_unknown`` and nothing above says why),
  ``late_sdk``, ``clean``. Before its result a control has a verdict only when
  a failure already holds (``null`` otherwise): only a result makes it final.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from eventlog.events import INTERRUPT_STAGES, LATE_SDK, ControlResult, InterruptStage, StageName
from projections.base import FoldResult, Rejected

#: The engine must reach its terminal within this grace after the interrupt (the seed: it never changes).
ENGINE_GRACE_MS: Final = 5_000
#: The checkpoint capture budget when ``capture_finished`` does not give its ``budget_ms``.
CAPTURE_BUDGET_MS: Final = 30_000

ENGINE_GRACE: Final = "engine_grace"
CAPTURE: Final = "capture"

#: Every verdict, in precedence order (the first that holds is the control's).
VERDICTS: Final = (
    "engine_timeout", "capture_timeout", "capture_failed", "checkpoint_unavailable", "deadline_exceeded",
    "unexplained", "late_sdk", "clean",
)
#: Final outcomes that say the turn's effect is not known.
UNKNOWN_OUTCOMES: Final = frozenset({"unknown", "outcome_unknown"})
#: The result's ``reason_code`` (lower case) naming each cause.
ENGINE_CODES: Final = frozenset({"interrupt_unanswered"})
CHECKPOINT_CODES: Final = frozenset({"interrupt_checkpoint_unavailable", "checkpoint_unavailable"})
DEADLINE_CODE: Final = "deadline_exceeded"

_ORDER: Final = {name: i for i, name in enumerate(INTERRUPT_STAGES)}
#: Stage name -> (its place in the log order of the control's stages, the stage).
_Seen = dict[str, tuple[int, "Stage"]]


class Stage(msgspec.Struct, array_like=True, gc=False):
    """One logged stage: its name, ``elapsed_ms``, its line, and what the worker said of it."""

    stage: StageName
    elapsed_ms: int
    line: int
    outcome: str | None = None
    reason_code: str | None = None
    budget_ms: int | None = None

    def item(self) -> dict[str, Any]:
        """The dump's stage."""
        return {"stage": self.stage, "elapsed_ms": self.elapsed_ms, "outcome": self.outcome,
                "reason_code": self.reason_code, "budget_ms": self.budget_ms, "line": self.line}


class Control(msgspec.Struct, array_like=True, gc=False):
    """One control (an interrupt) of a turn: its stages in log order and its result."""

    session_id: str
    turn_id: str | None
    #: Line of the control's first event.
    first_line: int
    stages: list[Stage] = msgspec.field(default_factory=list)
    operation: str | None = None
    outcome: str | None = None
    reason_code: str | None = None
    effect_ms: int | None = None
    #: Line of its ``control_result``; None before it.
    result_line: int | None = None


# --- folding ----------------------------------------------------------------------------


def fold_stage(controls: dict[str, Control], ev: InterruptStage, line: int) -> FoldResult:
    """Add one stage to its control (created on its first event); Rejected when it does not fit."""
    c = controls.get(ev.control_id)
    if c is not None:
        why = _misfit(c, ev.control_id, ev.session_id, ev.turn_id)
        if why is None:
            why = next((f"stage {ev.stage} of control {ev.control_id!r} is already recorded (line {s.line})"
                        for s in c.stages if s.stage == ev.stage), None)
        if why is not None:
            return Rejected(why)
    else:
        c = controls[ev.control_id] = Control(ev.session_id, ev.turn_id, line)
    c.stages.append(Stage(ev.stage, ev.elapsed_ms, line, ev.outcome, ev.reason_code, ev.budget_ms))
    return None


def fold_result(controls: dict[str, Control], ev: ControlResult, line: int) -> FoldResult:
    """Close a control with its result (created when no stage came first); Rejected when it does not fit."""
    c = controls.get(ev.control_id)
    if c is not None:
        why = _misfit(c, ev.control_id, ev.session_id, ev.turn_id)
        if why is not None:
            return Rejected(why)
        if c.turn_id is None:
            c.turn_id = ev.turn_id
    else:
        c = controls[ev.control_id] = Control(ev.session_id, ev.turn_id, line)
    c.operation, c.outcome, c.reason_code, c.effect_ms = ev.operation, ev.outcome, ev.reason_code, ev.effect_ms
    c.result_line = line
    return None


def _misfit(c: Control, control_id: str, session_id: str, turn_id: str | None) -> str | None:
    """Why an event naming an existing control does not fit it, or None."""
    if session_id != c.session_id or (turn_id is not None and c.turn_id is not None and turn_id != c.turn_id):
        return (f"control {control_id!r} belongs to session {c.session_id!r}, turn {c.turn_id!r} "
                f"(line {c.first_line})")
    if c.result_line is not None:
        return f"control {control_id!r} already has its control_result (line {c.result_line})"
    return None


# --- judging ----------------------------------------------------------------------------


def timeline(c: Control) -> dict[str, Any]:
    """The dump's item of one control: stages, first problem, late SDK, budgets exceeded, result, verdict."""
    by: _Seen = {s.stage: (pos, s) for pos, s in enumerate(c.stages)}
    late = LATE_SDK in by or (
        "sdk_interrupt_answered" in by and "engine_terminal" in by
        and by["sdk_interrupt_answered"][0] > by["engine_terminal"][0]
    )
    budgets = _budgets(by)
    verdict = _verdict(c, by, budgets, late)
    return {
        "session_id": c.session_id,
        "turn_id": c.turn_id,
        "operation": c.operation,
        "stages": [s.item() for s in c.stages],
        "first_problem": _first_problem(by, late, ENGINE_GRACE in budgets, whole=verdict in _REACH_THE_END),
        "late_sdk_interrupt_answered": late,
        "budget_exceeded": budgets,
        "outcome": c.outcome,
        "reason_code": c.reason_code,
        "effect_ms": c.effect_ms,
        "result_line": c.result_line,
        "verdict": verdict,
    }


def _budgets(by: _Seen) -> list[str]:
    """Which budgets ran out: ``engine_grace`` (5 s), ``capture`` (its ``budget_ms``, else 30 s)."""
    out: list[str] = []
    engine = by.get("engine_terminal")
    if engine is not None and (_is(engine[1].outcome, "timeout") or engine[1].elapsed_ms > ENGINE_GRACE_MS):
        out.append(ENGINE_GRACE)
    finished, started = by.get("capture_finished"), by.get("capture_started")
    if finished is not None:
        f = finished[1]
        budget = f.budget_ms if f.budget_ms is not None else CAPTURE_BUDGET_MS
        took = f.elapsed_ms - started[1].elapsed_ms if started is not None else None
        if _is(f.outcome, "timeout") or (took is not None and took > budget):
            out.append(CAPTURE)
    return out


#: Verdicts of a result whose timeline should have reached ``finalize_finished``: no failure of a stage
#: explains where it stopped, so the stages it never reached are missing (where it got lost).
_REACH_THE_END: Final = frozenset({"deadline_exceeded", "unexplained", "late_sdk", "clean"})


def _first_problem(by: _Seen, late: bool, engine_timed_out: bool, whole: bool) -> dict[str, Any] | None:
    """The first stage of the normal order that is missing or came late in the log.

    Walked up to the furthest stage logged; with ``whole`` (the result is in and no stage's failure
    explains an early stop) to the end, so a timeline closed before ``finalize_finished`` names where it
    stopped. A no-op with no stage at all (``effect_ms`` 0 on a finished turn) has none to miss.
    """
    last = len(INTERRUPT_STAGES) - 1 if whole and by else -1
    reached = max((_ORDER[name] for name in by if name in _ORDER), default=last)
    reached = max(reached, last)
    for i, name in enumerate(INTERRUPT_STAGES[: reached + 1]):
        if name == "sdk_interrupt_answered" and (late or engine_timed_out):
            continue  # a late answer is recorded apart; after a timeout it may never come
        if name not in by:
            return {"stage": name, "problem": "missing", "line": None}
        pos, stage = by[name]
        if any(_ORDER.get(other, -1) > i and other_pos < pos for other, (other_pos, _s) in by.items()):
            return {"stage": name, "problem": "out_of_order", "line": stage.line}
    return None


def _verdict(c: Control, by: _Seen, budgets: list[str], late: bool) -> str | None:
    """The first verdict of :data:`VERDICTS` that holds; None before the result when no failure holds."""
    code = (c.reason_code or "").lower()
    capture = by.get("capture_finished")
    finalize = by.get("finalize_finished")
    if ENGINE_GRACE in budgets or code in ENGINE_CODES:
        return "engine_timeout"
    if CAPTURE in budgets:
        return "capture_timeout"
    if capture is not None and _is(capture[1].outcome, "failed"):
        return "capture_failed"
    if (finalize is not None and _is(finalize[1].outcome, "failed")
            and (finalize[1].reason_code or "").lower() in CHECKPOINT_CODES) or code in CHECKPOINT_CODES:
        return "checkpoint_unavailable"
    if code == DEADLINE_CODE:
        return "deadline_exceeded"
    if c.result_line is None:
        return None
    if (c.outcome or "").lower() in UNKNOWN_OUTCOMES:
        return "unexplained"
    return "late_sdk" if late else "clean"


def _is(value: str | None, word: str) -> bool:
    """Whether a worker's word is ``word`` (case does not matter)."""
    return value is not None and value.lower() == word


__all__ = ["CAPTURE_BUDGET_MS", "ENGINE_GRACE_MS", "VERDICTS", "Control", "Stage", "fold_result", "fold_stage",
           "timeline"]
