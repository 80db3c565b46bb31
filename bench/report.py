"""One row per figure: the figure, its reference, the ratio, the target and the verdict; as a table or JSON."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

PASS = "PASS"  # noqa: S105 - a verdict, not a password
MISS = "MISS"
INFO = "info"
ERROR = "ERROR"

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt,
}


@dataclass
class Row:
    """One measured figure, side by side with its reference."""

    group: str
    what: str
    value: float | None
    unit: str
    reference: float | None = None
    ref_what: str = ""
    ratio: float | None = None
    target: str = ""
    verdict: str = INFO
    note: str = ""


def verdict(value: float | None, target: str) -> str:
    """PASS or MISS of ``value`` against a target like ``<= 2.0``."""
    op, _, limit = target.partition(" ")
    if value is None:
        return MISS
    return PASS if _OPS[op](value, float(limit)) else MISS


def compared(
    group: str, what: str, value: float, unit: str, reference: float, ref_what: str, target: str,
    *, invert: bool = False, note: str = "",
) -> Row:
    """A row whose ratio is value / reference (``invert``: reference / value) checked against ``target``."""
    if invert:
        ratio = reference / value if value else None
    else:
        ratio = value / reference if reference else None
    return Row(group, what, value, unit, reference, ref_what, ratio, target, verdict(ratio, target), note)


def figure(value: float | None, unit: str) -> str:
    """A figure for people: seconds, milliseconds, MB, rates."""
    if value is None:
        return "-"
    if unit == "s":
        return f"{value:.3g} s" if value < 100 else f"{value:.0f} s"
    if unit == "ms":
        return f"{value:.3g} ms" if value < 1000 else f"{value:,.0f} ms"
    if unit == "MB":
        return f"{value:,.1f} MB"
    if unit.endswith("/s"):
        return f"{value:,.0f} {unit}"
    return f"{value:g} {unit}"


def ratio_text(ratio: float | None) -> str:
    """A ratio for people: ``6.85x``, ``3,660x``."""
    if ratio is None:
        return ""
    return f"{ratio:,.0f}x" if ratio >= 100 else f"{ratio:.3g}x"


def table(rows: Sequence[Row]) -> str:
    """The rows as a fixed-width text table; notes go under their row."""
    head = ("group", "measurement", "figure", "reference", "ratio", "target", "verdict")
    cells = [head]
    for r in rows:
        ref = figure(r.reference, r.unit) if r.reference is not None else ""
        if ref and r.ref_what:
            ref = f"{ref} ({r.ref_what})"
        cells.append((r.group, r.what, figure(r.value, r.unit), ref, ratio_text(r.ratio), r.target, r.verdict))
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    out: list[str] = []
    for i, c in enumerate(cells):
        out.append("  ".join(x.ljust(w) for x, w in zip(c, widths, strict=True)).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
        elif rows[i - 1].note:
            out.append(" " * (widths[0] + 2) + "  " + rows[i - 1].note)
    return "\n".join(out)


def markdown(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table (for docs/PERFORMANCE.md)."""
    out = [
        "| group | measurement | figure | reference | ratio | target | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ref = figure(r.reference, r.unit) if r.reference is not None else ""
        if ref and r.ref_what:
            ref = f"{ref} ({r.ref_what})"
        what = r.what + (f"; {r.note}" if r.note else "")
        out.append(f"| {r.group} | {what} | {figure(r.value, r.unit)} | {ref} | {ratio_text(r.ratio)} | {r.target} "
                   f"| {r.verdict} |")
    return "\n".join(out)
