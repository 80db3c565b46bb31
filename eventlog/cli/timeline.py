"""The interrupt timeline of a session for people (``eventlog explain SESSION``).

:func:`controls_of` picks a session's controls out of a dump
(``sessions.controls``, judged by ``projections.controls``);
:func:`timeline_lines` writes them as text, each stage with its ``elapsed_ms``.
"""

from __future__ import annotations

from typing import Any


def controls_of(dump: dict[str, Any], session_id: str) -> dict[str, Any]:
    """The dump's controls of one session, by control id."""
    controls: dict[str, Any] = dump["sessions"].get("controls", {})
    return {cid: c for cid, c in controls.items() if c["session_id"] == session_id}


def timeline_lines(controls: dict[str, Any]) -> list[str]:
    """Each control: a head line (verdict, budgets, outcome, effect), then one line per stage in log order."""
    out: list[str] = []
    for cid, c in controls.items():
        head = [f"interrupt {cid} (turn {c['turn_id']}, {c['operation'] or 'no result yet'}): "
                f"{c['verdict'] or 'no verdict yet'}"]
        if c["budget_exceeded"]:
            head.append(f"budget exceeded: {', '.join(c['budget_exceeded'])}")
        if c["late_sdk_interrupt_answered"]:
            head.append("SDK answered after the engine's terminal")
        if c["result_line"] is not None:
            code = f" ({c['reason_code']})" if c["reason_code"] else ""
            effect = f"{c['effect_ms']} ms" if c["effect_ms"] is not None else "unknown"
            head.append(f"outcome {c['outcome']}{code}, effect {effect} (line {c['result_line']})")
        out.append("  " + "; ".join(head))
        width = max((len(str(s["elapsed_ms"])) for s in c["stages"]), default=1)
        for s in c["stages"]:
            said = " ".join(f"{k}={s[k]}" for k in ("outcome", "reason_code", "budget_ms") if s[k] is not None)
            out.append(f"    {s['elapsed_ms']:>{width}} ms  {s['stage']:<28} line {s['line']}"
                       + (f"  {said}" if said else ""))
        problem = c["first_problem"]
        if problem is not None:
            where = f" (line {problem['line']})" if problem["line"] is not None else ""
            word = "missing" if problem["problem"] == "missing" else "out of order"
            out.append(f"    first problem: {problem['stage']} {word}{where}")
    return out


__all__ = ["controls_of", "timeline_lines"]
