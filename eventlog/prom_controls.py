"""Metrics of the interrupt timeline (``sessions.controls`` of a dump), as data for ``eventlog.prom``.

- ``recovery_control_effect_seconds`` (histogram): ``effect_ms`` of every
  control that has one, in seconds (a no-op on a finished turn is 0).
- ``recovery_controls_total`` (counter, label ``verdict``): controls closed by
  their ``control_result``, by verdict; every verdict is listed, 0 included.
  Only a result makes a verdict final (later events of the control are
  rejected), so each count only grows while the log does.

:func:`control_families` returns the families; ``eventlog.prom`` writes them
with the ``log`` label like every other family.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Final, NamedTuple

from projections.controls import VERDICTS

#: Upper bounds of the effect buckets, in seconds: around the 5 s engine grace and the 30 s capture budget.
EFFECT_BUCKETS_S: Final = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

Sample = tuple[str, dict[str, str], float]


class Family(NamedTuple):
    """One metric family: its name, type, help and samples ``(sample name, labels, value)``."""

    name: str
    kind: str
    help: str
    samples: list[Sample]


def control_families(dump: dict[str, Any]) -> list[Family]:
    """The effect histogram and the counter of finished controls by verdict."""
    controls = dump["sessions"].get("controls", {}).values()
    millis = sorted(c["effect_ms"] for c in controls if c["effect_ms"] is not None)
    effects = [ms / 1000 for ms in millis]
    name = "recovery_control_effect_seconds"
    histogram: list[Sample] = [
        (f"{name}_bucket", {"le": _bound(b)}, bisect_right(effects, b)) for b in EFFECT_BUCKETS_S
    ]
    histogram += [(f"{name}_bucket", {"le": "+Inf"}, len(effects)), (f"{name}_sum", {}, sum(millis) / 1000),
                  (f"{name}_count", {}, len(effects))]
    finished = [c["verdict"] for c in controls if c["result_line"] is not None]
    by_verdict: list[Sample] = [("recovery_controls_total", {"verdict": v}, finished.count(v)) for v in VERDICTS]
    return [
        Family(name, "histogram", "Interrupts: from the durable acceptance to the turn's terminal (effect_ms).",
               histogram),
        Family("recovery_controls_total", "counter", "Interrupts closed by their control_result, by verdict.",
               by_verdict),
    ]


def _bound(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


__all__ = ["EFFECT_BUCKETS_S", "Family", "control_families"]
