"""What needs a person now, and the headline numbers: the ``status`` view of a dump.

One function for every front end: ``eventlog status`` prints :func:`status_view`,
``eventlog serve`` answers ``GET /v1/status`` and feeds the console with it.
(The triage is due to become a pure function of the projections; this module
is the one place to swap it in.)
"""

from __future__ import annotations

from typing import Any


def needs_person(dump: dict[str, Any]) -> list[str]:
    """What needs a person in a dump, one line each."""
    out: list[str] = []
    h = dump["handoffs"]
    for hid, item in sorted(h["items"].items()):
        if item["state"] == "needs_human":
            out.append(f"handoff {hid} ({item['account']}): handed to a person")
    for hid in h["stale_claims"]["unknown_effect"]:
        out.append(f"handoff {hid}: resume requested and silent since; effect unknown, never retried automatically")
    if h["watcher"]["late"]:
        out.append(f"failback watcher is late (last run {h['watcher']['last_run'] or 'never'})")
    for name, beat in h["watchers"].items():
        if beat["exit"] == "error":
            out.append(f"failback watcher {name}: its last pass ({beat['last_run']}) ended in error: "
                       f"{beat['detail'] or 'no detail given'}")
    checks = dump["lanes"]["checks"]
    if checks:
        for r in checks[-1]["results"]:
            if r["stalled"]:
                out.append(f"lane {r['product']}: {r['kind']}: {r['detail']} (checked {checks[-1]['checked_at']})")
    for sid, item in sorted(dump["sessions"]["items"].items()):
        if item["admission_state"] == "recovery_required":
            turns = f", unknown turns {', '.join(item['unknown_turns'])}" if item["unknown_turns"] else ""
            out.append(f"session {sid}: recovery required ({item['attention']}: {item['reason']}{turns})")
        elif item["attention"] == "CONTEXT_GAP":
            out.append(f"session {sid}: stopped with a context gap; start_fresh or close")
    if dump["bad_lines"]:
        first = dump["bad_lines"][0]
        out.append(f"{len(dump['bad_lines'])} bad line(s), first at line {first['line']}: {first['reason']}")
    return out


def headline(dump: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers: failover, failback, return time."""
    h = dump["handoffs"]
    ret = h["latency_s"]["created_to_returned"]
    return {
        "failover": f"{h['failover']['started']}/{h['failover']['total']}",
        "failback": f"{h['failback']['returned']}/{h['failback']['total']}",
        "return_p50_s": ret["p50"],
        "return_p95_s": ret["p95"],
        "pending": h["pending"]["count"],
        "rejected": len(dump["rejected"]),
    }


def status_view(log: str, dump: dict[str, Any]) -> dict[str, Any]:
    """``status --json``: ``log``, ``as_of``, ``needs_person`` (lines) and ``headline``."""
    return {"log": log, "as_of": dump["as_of"], "needs_person": needs_person(dump), "headline": headline(dump)}


__all__ = ["headline", "needs_person", "status_view"]
