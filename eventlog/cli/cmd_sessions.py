"""``eventlog decide`` and ``eventlog sessions``: operator decisions with receipts (seed 004).

``decide`` appends one ``recovery_decision`` to the log, accepted or not (a
refused decision is part of the audit trail), and prints its receipt. The
receipt is the judgement of the projection that folds the appended line under
the log's exclusive lock: two ``decide`` calls with the same expected revision
are folded one after the other, so the second sees the revision the first one
moved and is refused with ``REQUEST_STALE`` (it is still written). No
``expect_revision`` is passed to the appender on purpose: the decision carries
its own ``expected_revision`` and the projection checks it in the spec's order,
after the idempotency key, so a repeated key still gets its first receipt back.
The receipt is then read back by the ``seq`` the appender gave the line.

``sessions`` shows each session's state, why it stopped, when it retries, and
which decisions would be accepted now.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from eventlog.appender import AppendError, EventLog
from eventlog.cli.common import UsageError, append_failed, dumps, error, judging, replay_log
from eventlog.logs import Log, LogUnavailable, open_log
from eventlog.replay import BadLine
from projections.sessions import (
    CLOSED,
    CONTEXT_GAP,
    DECISIONS,
    RECOVERY_REQUIRED_STATE,
    Session,
    Sessions,
)


def register(sub: Any) -> None:
    """Add ``decide`` and ``sessions``."""
    p = sub.add_parser(
        "decide",
        help="apply an operator's recovery decision and print its receipt",
        description="Append a recovery_decision to LOG (accepted or not) and print its receipt. "
        "Exit 0 accepted, 3 refused (the code is in the receipt), 2 bad input.",
    )
    p.add_argument("log", metavar="LOG")
    p.add_argument("session", metavar="SESSION")
    p.add_argument("--decision", required=True, choices=DECISIONS)
    p.add_argument("--expected-revision", required=True, type=int, metavar="N",
                   help="the session revision the decision was made on")
    p.add_argument("--idempotency-key", required=True, metavar="K", help="the same key returns the first receipt")
    p.add_argument("--reason", required=True, metavar="TEXT", help="why (kept in the log)")
    p.add_argument("--target-turn", metavar="T", help="the unknown turn (abandon, confirm_completed)")
    p.add_argument("--evidence-ref", metavar="E", help="what shows the turn completed (confirm_completed)")
    p.add_argument("--json", action="store_true", help="print the receipt as one line of JSON")
    p.set_defaults(run=run_decide)

    p = sub.add_parser(
        "sessions",
        help="each session's state, why it stopped, when it retries, what decisions would be accepted",
        description="Show sessions of LOG. Exit 1 when a shown session waits for an operator's decision.",
    )
    p.add_argument("log", metavar="LOG")
    p.add_argument("session", metavar="SESSION", nargs="?")
    p.add_argument("--at", metavar="TIME", help="judge as of TIME instead of the last event's ts")
    p.add_argument("--assume-tz", metavar="ZONE", help="zone for times written without an offset")
    p.add_argument("--json", action="store_true", help="one JSON object for machines")
    p.set_defaults(run=run_sessions)


# --- decide ---------------------------------------------------------------------------


def decide(
    log: Log | EventLog,
    session_id: str,
    decision: str,
    *,
    expected_revision: int,
    idempotency_key: str,
    reason: str,
    target_turn_id: str | None = None,
    evidence_ref: str | None = None,
) -> tuple[dict[str, Any], Session]:
    """Append one decision under the log's lock; its receipt and the session after it.

    Raises :class:`AppendError` (or its subclasses) when nothing was written.
    """
    event: dict[str, Any] = {
        "type": "recovery_decision",
        "session_id": session_id,
        "decision": decision,
        "expected_revision": expected_revision,
        "idempotency_key": idempotency_key,
        "reason": reason,
    }
    if target_turn_id is not None:
        event["target_turn_id"] = target_turn_id
    if evidence_ref is not None:
        event["evidence_ref"] = evidence_ref
    written = log.append([event])
    sessions: Sessions = log.state().folder.sessions  # type: ignore[attr-defined]
    receipt = sessions.receipt_of(written.first_seq)
    if receipt is None:  # the log was replaced between the append and the read-back
        raise AppendError([f"the receipt of seq {written.first_seq} is not in the log any more"])
    return receipt, sessions.session(session_id)


def run_decide(args: argparse.Namespace) -> int:
    """``eventlog decide``: exit 0 accepted, 3 refused, 2 bad input."""
    try:
        log = open_log(args.log)
        there = log.exists()
    except LogUnavailable as err:
        error(str(err))
        return 2
    with log:
        if not there:
            error(f"{args.log}: no such log file")
            return 2
        if not args.idempotency_key or not args.reason.strip():
            error("--idempotency-key and --reason must not be empty")
            return 2
        return _decide(log, args)


def _decide(log: Log, args: argparse.Namespace) -> int:
    try:
        before = log.state().folder.sessions  # type: ignore[attr-defined]
        if args.session not in before.sessions:
            error(f"{args.log}: no session {args.session!r} (no event of it yet)")
            return 2
        receipt, s = decide(
            log,
            args.session,
            args.decision,
            expected_revision=args.expected_revision,
            idempotency_key=args.idempotency_key,
            reason=args.reason,
            target_turn_id=args.target_turn,
            evidence_ref=args.evidence_ref,
        )
    except AppendError as err:
        return append_failed(err)
    accepted = receipt["result"] == "accepted"
    if args.json:
        print(dumps({**receipt, "session": s.item()}))
    else:
        word = "accepted" if accepted else f"refused: {receipt['result']}"
        again = " (repeated idempotency key: the first receipt)" if receipt["replayed"] else ""
        print(f"{word}{again}: {receipt['decision']} of {receipt['session_id']} at line {receipt['line']}")
        if not accepted and not receipt["replayed"]:
            print(f"  why: {WHY[receipt['result']]}")
        print(f"  now: {_state_line(s)}")
        print(f"  receipt: {dumps(receipt)}")
    return 0 if accepted else 3


# --- sessions -------------------------------------------------------------------------


def run_sessions(args: argparse.Namespace) -> int:
    """``eventlog sessions``: exit 1 when a shown session waits for an operator's decision."""
    try:
        tz, at = judging(args)
        replay = replay_log(args.log, assume_tz=tz)
    except UsageError as err:
        error(str(err))
        return 2
    except (OSError, BadLine) as err:
        error(f"cannot read {args.log}: {getattr(err, 'strerror', None) or err}")
        return 2
    sessions: Sessions = replay.folder.sessions  # type: ignore[attr-defined]
    as_of, as_of_text = at if at is not None else (replay.last_at, replay.last_ts)
    ids = sorted(sessions.sessions)
    if args.session is not None:
        if args.session not in sessions.sessions:
            error(f"{args.log}: no session {args.session!r}")
            return 2
        ids = [args.session]
    shown = {sid: describe(sessions, sid, as_of) for sid in ids}
    if args.json:
        print(dumps({"log": args.log, "as_of": as_of_text, "items": shown}))
    else:
        print(f"{args.log}: {len(ids)} session(s) as of {as_of_text}")
        for sid, d in shown.items():
            _print_person(sid, d)
    return 1 if any(d["needs_decision"] for d in shown.values()) else 0


def describe(sessions: Sessions, session_id: str, as_of: datetime | None) -> dict[str, Any]:
    """The dump item plus ``retry_due``, ``needs_decision``, ``would_accept`` and ``would_refuse``."""
    s = sessions.sessions[session_id]
    out = s.item()
    due = None
    if s.retry_at is not None and as_of is not None:
        due = as_of >= datetime.fromisoformat(s.retry_at)
    out["retry_due"] = due
    out["needs_decision"] = s.admission_state == RECOVERY_REQUIRED_STATE or (
        s.admission_state != CLOSED and s.attention == CONTEXT_GAP
    )
    accept: list[dict[str, Any]] = []
    refuse: list[dict[str, Any]] = []
    for decision, turn, j in sessions.options(session_id):
        entry: dict[str, Any] = {"decision": decision, "expected_revision": s.revision}
        if turn is not None:
            entry["target_turn_id"] = turn
        if decision == "confirm_completed":
            entry["needs"] = "evidence_ref"
        if j.accepted:
            accept.append(entry)
        else:
            refuse.append({**entry, "result": j.result, "why": j.why})
    out["would_accept"] = accept
    out["would_refuse"] = refuse
    return out


#: What a refusal code means, for people.
WHY = {
    "REQUEST_STALE": "the session's revision or state does not allow this decision now (see `eventlog sessions`)",
    "RECOVERY_REQUIRED": "the previous execution has not been confirmed gone after that turn (wait for execution_gone)",
    "CHECKPOINT_UNAVAILABLE": "confirm_completed needs --evidence-ref and a committed checkpoint covering the turn",
}


def _state_line(s: Session) -> str:
    parts = [s.admission_state, f"revision {s.revision}", f"generation {s.generation}", f"failures {s.failures}"]
    if s.attention:
        parts.append(f"attention {s.attention}")
    if s.admission_state == "stopped":
        parts.append("resumable" if s.resumable else "not resumable")
    return ", ".join(parts)


def _print_person(sid: str, d: dict[str, Any]) -> None:
    print(f"\n{sid}: {d['admission_state']}" + (f" ({d['attention']})" if d["attention"] else ""))
    print(f"  revision {d['revision']}, generation {d['generation']}, failures {d['failures']}")
    if d["reason"] is not None:
        print(f"  last reason: {d['reason']}")
    if d["retry_at"] is not None:
        when = {True: "due now", False: "not yet", None: ""}[d["retry_due"]]
        print(f"  retries at {d['retry_at']} ({when})" if when else f"  retries at {d['retry_at']}")
    if d["unknown_turns"]:
        print(f"  unknown turns (never re-run on their own): {', '.join(d['unknown_turns'])}")
    if d["admission_state"] == "stopped":
        print("  resumable: " + ("yes" if d["resumable"] else "no (context gap: start_fresh or close)"))
    if d["would_accept"]:
        print("  would accept now:")
        for e in d["would_accept"]:
            turn = f" --target-turn {e['target_turn_id']}" if "target_turn_id" in e else ""
            extra = " --evidence-ref E" if e["decision"] == "confirm_completed" else ""
            print(f"    --decision {e['decision']} --expected-revision {e['expected_revision']}{turn}{extra}")
    else:
        print("  would accept now: nothing")
    if d["would_refuse"]:
        print("  would refuse now:")
    for e in d["would_refuse"]:
        turn = f" {e['target_turn_id']}" if "target_turn_id" in e else ""
        print(f"    {e['decision']}{turn}: {e['result']} ({e['why']})")
