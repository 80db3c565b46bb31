"""The dump in the Prometheus text exposition format (node_exporter's textfile collector).

Every metric is a gauge named ``recovery_*``; see docs/METRICS.md for the list.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

_QUANTILES = (("p50", "0.5"), ("p95", "0.95"))


def exposition(dump: dict[str, Any]) -> str:
    """The text exposition of one dump."""
    out: list[str] = []

    def gauge(name: str, help_: str, samples: Sequence[tuple[dict[str, str], float]]) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} gauge")
        for labels, value in samples:
            out.append(f"{name}{_labels(labels)} {_value(value)}")

    log = {"log": str(dump.get("log", ""))}
    gauge("recovery_log_missing", "1 while the followed log does not exist (no verdict is given then).",
          [(log, int(bool(dump.get("log_missing"))))])
    gauge("recovery_events", "Lines applied or rejected.", [(log, dump["events"])])
    gauge("recovery_bad_lines", "Lines that are bad input.", [(log, len(dump["bad_lines"]))])
    gauge("recovery_rejected_events", "Events rejected as transitions that do not fit.", [(log, len(dump["rejected"]))])
    gauge("recovery_torn_tail", "1 when the log ends in an uncommitted partial line.", [(log, int(dump["torn_tail"]))])

    h = dump["handoffs"]
    gauge("recovery_handoffs", "Handoffs by state.",
          [({**log, "state": state}, n) for state, n in sorted(h["by_state"].items())])
    gauge("recovery_handoffs_total", "All handoffs.", [(log, h["total"])])
    gauge("recovery_handoff_failover_started", "Handoffs a local session picked up.", [(log, h["failover"]["started"])])
    gauge("recovery_handoff_failback_returned", "Handoffs verified back in the cloud.",
          [(log, h["failback"]["returned"])])
    gauge("recovery_handoff_not_returned", "Handoffs not returned, by reason.",
          [({**log, "reason": k}, n) for k, n in sorted(h["not_returned"].items())])
    gauge("recovery_handoff_pending", "Pending handoffs.", [(log, h["pending"]["count"])])
    oldest = h["pending"]["oldest_age_s"]
    gauge("recovery_handoff_pending_oldest_age_seconds", "Age of the oldest pending handoff.",
          [(log, oldest)] if oldest is not None else [])
    gauge("recovery_handoff_stale_claims", "Stale claims by kind.",
          [({**log, "kind": k}, len(ids)) for k, ids in sorted(h["stale_claims"].items())])
    latency = []
    for pair, summary in sorted(h["latency_s"].items()):
        for key, q in _QUANTILES:
            if summary[key] is not None:
                latency.append(({**log, "pair": pair, "quantile": q}, summary[key]))
    gauge("recovery_handoff_latency_seconds", "Nearest-rank percentiles of handoff durations.", latency)
    gauge("recovery_probes", "Probe results by outcome.",
          [({**log, "outcome": k}, n) for k, n in sorted(h["probes"].items())])
    gauge("recovery_watcher_late", "1 when the failback watcher's heartbeat is late.",
          [(log, int(bool(h["watcher"]["late"])))])

    checks = dump["lanes"]["checks"]
    lanes = []
    if checks:
        for r in checks[-1]["results"]:
            kind = r.get("kind") or r.get("reason") or ""
            lanes.append(({**log, "product": str(r["product"]), "kind": str(kind)}, int(bool(r["stalled"]))))
    gauge("recovery_lane_stalled", "1 when the lane's last check found it stalled (kind or reason).", lanes)

    c = dump["catchup"]
    gauge("recovery_catchup_candidates", "Skipped scheduled jobs to re-run now.", [(log, len(c["candidates"]))])
    gauge("recovery_catchup_circuit_open", "1 while the quota circuit is open.", [(log, int(c["circuit"] == "open"))])

    tally = Counter(
        (item["admission_state"], item["attention"] or "") for item in dump["sessions"]["items"].values()
    )
    gauge("recovery_sessions", "Sessions by admission state and attention.",
          [({**log, "admission_state": a, "attention": t}, n) for (a, t), n in sorted(tally.items())])
    return "\n".join(out) + "\n"


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return "{" + body + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _value(value: float) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))
