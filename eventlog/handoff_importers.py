"""Importers for the failback domain (seed 000): the per-account limit ledger and the legacy handoff files.

**The ledger.** The failover handler writes one object per limit it read
(seed 000)::

    {"account": "cloud-account-a", "limitedAt": "2026-08-03T01:20:00+09:00",
     "resetAt": "2026-08-03T17:00:00+09:00", "source": "parsed-limit-message",
     "confidence": "explicit"}

A file holds one such object, a list of them, or one a line (JSON Lines);
``snake_case`` keys are read too, and a missing ``resetAt`` is null. Each
becomes a ``limit_recorded`` at its ``limitedAt``. :func:`new_limits` keeps
what the log does not hold: an entry already there (same account, instants,
confidence and source) is not appended again, nor one older than the
account's latest limit in the log not dated ahead of now (appended after it, it
would become the latest by log order), nor one whose ``limitedAt`` is dated
ahead of now itself (a limit not hit yet: a typo of the year), each named.

**The legacy handoff files.** The old watcher kept, per handoff, ``ID.json``
(the handoff, written at failover) and two markers: ``ID.resumed``, which it
placed *before* starting the cloud session, and ``ID.skip``. The seed's point
is that a ``.resumed`` marker proves nothing came back. The mapping
(:func:`read_handoff_dir`, :func:`handoff_events`):

- ``ID.json`` -> ``handoff_created`` (``handoffId`` or the file name;
  ``account``, or the account given; ``createdAt``, else the file's mtime;
  ``deadline``, ``importance``, ``repo``, ``branch``, ``head`` when there),
  and ``local_started`` when it says the local session started
  (``localStartedAt``, or ``localStarted: true`` at ``createdAt``), or
  ``local_start_failed`` with its ``localStartError``;
- ``ID.resumed`` -> ``needs_human`` with reason ``legacy_resumed_unverified``
  at the marker's mtime, for a handoff still ``pending``: a person checks
  whether the work came back (it was never verified), then requeues or skips
  it;
- ``ID.skip`` -> ``skip`` with the file's first line as the reason (or
  ``legacy .skip marker``), for a handoff ``pending`` or ``needs_human``.

A marker of a handoff the log has moved on (claimed, returned, skipped) is
left alone and counted as superseded: the log knows more than the file.

Each file is applied once (:class:`HandoffsKnown`): a ``.resumed`` whose
``needs_human`` the log holds (that handoff, reason ``legacy_resumed_unverified``,
``ts`` the marker's mtime as an instant) is already there whatever the handoff's
state, so a person's requeue is not undone by the next import. A ``.resumed``
of another mtime, of a handoff the log applied one of and that is pending again
(a person requeued it), is not applied: the same marker copied, touched, restored
or moved to another machine has another mtime too. It is named
(:class:`ResumedAgain`), and applied only when a person says the old watcher did
start the cloud session again (``apply``, ``--apply-resumed ID``). A second ``ID.json`` of one id
(``h01 (copy).json``) is a problem, left out with its markers
(:func:`one_file_per_id`). An ``ID.json`` of a handoff the log holds whose
fields say otherwise is named field by field (:func:`changed_fields`): the log
keeps its own, as no event changes a handoff once created.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any, NamedTuple

from eventlog.events import Event, LimitRecorded, NeedsHuman
from eventlog.importers import (
    EndedLines,
    ahead_edge,
    appendable,
    instant,
    json_value,
    not_ahead,
    not_utf8,
    open_file,
    time_text,
    unended_json,
    utf8,
)
from projections.handoffs import NEEDS_HUMAN, PENDING, SKIPPED, Handoff, Handoffs

#: The reason a legacy ``.resumed`` marker is handed to a person with.
LEGACY_RESUMED = "legacy_resumed_unverified"

CONFIDENCES = ("explicit", "estimated", "unknown")


def _get(obj: dict[str, Any], *names: str) -> Any:
    """The first of ``names`` present in ``obj`` (None: none)."""
    for name in names:
        if name in obj:
            return obj[name]
    return None


def mtime(path: str, tz: tzinfo | None) -> str:
    """A file's mtime as ISO 8601 with an offset (in ``tz``, else the local zone)."""
    value = datetime.fromtimestamp(os.stat(path).st_mtime, tz)
    return (value if tz is not None else value.astimezone()).isoformat()


# --- the ledger -------------------------------------------------------------------------------


class Unread(NamedTuple):
    """A line of a JSON Lines ledger that could not be read, and why (:func:`limit_event` names it)."""

    reason: str


def ledger_entries(data: bytes, source: str) -> tuple[list[tuple[str, Any]], int | None]:
    """The entries of the ledger file ``source`` (its bytes ``data``), each with where it is, in file order, and
    the number of a last line held back as not ended yet (None: none).

    One JSON value (an object or a list: ``SOURCE: entry N``), or JSON Lines
    (``SOURCE:LINE``), where a line that cannot be read is an :class:`Unread`
    saying why (:func:`~eventlog.importers.json_value`), in its place, but for
    a last line without its newline that opens an object or a list not whole yet:
    it is being written, and held back (:func:`~eventlog.importers.unended_json`).
    ValueError when the file is neither: no line of it is JSON.
    """
    try:
        value = json_value(data)
    except ValueError as err:
        whole = str(err)
    else:
        values = value if isinstance(value, list) else [value]
        return [(f"{source}: entry {number}", entry) for number, entry in enumerate(values, 1)], None
    entries: list[tuple[str, Any]] = []
    lines = EndedLines(data.splitlines(keepends=True), unended_json)
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                entries.append((f"{source}:{number}", json_value(line)))
            except ValueError as err:
                entries.append((f"{source}:{number}", Unread(str(err))))
    if entries and all(isinstance(entry, Unread) for _, entry in entries):
        raise ValueError(f"neither one JSON value nor JSON Lines: {whole}")
    return entries, lines.unfinished


def limit_event(entry: Any, tz: tzinfo | None) -> dict[str, Any]:
    """The ``limit_recorded`` of one ledger entry; ValueError saying what is wrong with it."""
    if isinstance(entry, Unread):
        raise ValueError(entry.reason)
    if not isinstance(entry, dict):
        raise ValueError("not a JSON object")
    account = entry.get("account")
    if not isinstance(account, str) or not account:
        raise ValueError("no account")
    limited = _get(entry, "limitedAt", "limited_at")
    if limited is None:
        raise ValueError("no limitedAt")
    reset = _get(entry, "resetAt", "reset_at")
    source = entry.get("source")
    if not isinstance(source, str):
        raise ValueError("no source")
    confidence = entry.get("confidence")
    if confidence not in CONFIDENCES:
        raise ValueError(f"confidence {confidence!r} is not explicit, estimated or unknown")
    limited_at = time_text(limited, tz)
    return {"type": "limit_recorded", "ts": limited_at, "account": account, "limited_at": limited_at,
            "reset_at": None if reset is None else time_text(reset, tz), "source": source,
            "confidence": confidence}


def _limit_key(account: str, limited_at: datetime, reset_at: datetime | None, confidence: str,
               source: str) -> tuple[Any, ...]:
    return (account, instant(limited_at), None if reset_at is None else instant(reset_at), confidence, source)


@dataclass
class LimitsKnown:
    """The limits a log holds: each one's key, and each account's latest ``limited_at`` not dated ahead of now (by log
    order; its instant and the time as written)."""

    keys: set[tuple[Any, ...]] = field(default_factory=set)
    latest: dict[str, tuple[int, str]] = field(default_factory=dict)


def limits_known(events: Iterable[tuple[Event, datetime]], now: datetime) -> LimitsKnown:
    """Fold a log's ``limit_recorded`` events into :class:`LimitsKnown`: a limit dated ahead of ``now``
    (:func:`~eventlog.importers.ahead_edge`) is never an account's latest."""
    out = LimitsKnown()
    edge = ahead_edge(now)
    for ev, _at in events:
        if isinstance(ev, LimitRecorded):
            limited = datetime.fromisoformat(ev.limited_at)
            reset = None if ev.reset_at is None else datetime.fromisoformat(ev.reset_at)
            out.keys.add(_limit_key(ev.account, limited, reset, ev.confidence, ev.source))
            if instant(limited) <= edge:
                out.latest[ev.account] = (instant(limited), ev.limited_at)
    return out


@dataclass
class LimitPlan:
    """Limits to append (in ``limited_at`` order), and how many were left out and why."""

    new: list[dict[str, Any]] = field(default_factory=list)
    already: int = 0
    #: The limits older than their account's latest in the log, each named (``WHERE: why``).
    older: list[str] = field(default_factory=list)
    #: The limits dated ahead of now, each named (:func:`~eventlog.importers.not_ahead`).
    ahead: list[str] = field(default_factory=list)


def new_limits(events: Iterable[tuple[str, dict[str, Any]]], log: LimitsKnown, now: datetime) -> LimitPlan:
    """The ledger's limits (each with where it is) the log does not hold, not older than their account's latest not
    dated ahead, and not dated ahead of ``now`` themselves."""
    plan = LimitPlan()
    timed = sorted(((datetime.fromisoformat(ev["limited_at"]), where, ev) for where, ev in events),
                   key=lambda p: instant(p[0]))
    for limited, where, ev in timed:
        if not not_ahead(where, plan.ahead, ev["limited_at"], limited, now):
            continue
        reset = None if ev["reset_at"] is None else datetime.fromisoformat(ev["reset_at"])
        key = _limit_key(ev["account"], limited, reset, ev["confidence"], ev["source"])
        if key in log.keys:
            plan.already += 1
            continue
        latest = log.latest.get(ev["account"])
        if latest is not None and instant(limited) < latest[0]:
            plan.older.append(f"{where}: the limit of account {ev['account']} at {ev['limited_at']} is older than "
                              f"the account's latest in the log ({latest[1]})")
            continue
        log.keys.add(key)
        log.latest[ev["account"]] = (instant(limited), ev["limited_at"])
        plan.new.append(ev)
    return plan


# --- the legacy handoff files ------------------------------------------------------------------


@dataclass
class Legacy:
    """One handoff as the old watcher's files hold it."""

    handoff_id: str
    #: Its files' path but the extension (``DIR/ID``), naming them in problems.
    files: str = ""
    #: The events its ``ID.json`` gives (``handoff_created`` first), or none when there is no file.
    record: list[dict[str, Any]] = field(default_factory=list)
    #: Whether ``ID.json`` gives ``createdAt`` (else its mtime stands in, and is not compared with the log's).
    dated: bool = False
    #: ``ts`` of the ``.resumed`` marker.
    resumed: str | None = None
    #: ``ts`` and reason of the ``.skip`` marker.
    skip: tuple[str, str] | None = None


def record_events(hid: str, obj: dict[str, Any], created_default: str, account: str | None,
                  tz: tzinfo | None) -> list[dict[str, Any]]:
    """The events of one ``ID.json``; ValueError saying what is wrong with it."""
    acc = obj.get("account", account)
    if not isinstance(acc, str) or not acc:
        raise ValueError("no account (give --account for files without one)")
    created_raw = _get(obj, "createdAt", "created_at")
    created = created_default if created_raw is None else time_text(created_raw, tz)
    ev: dict[str, Any] = {"type": "handoff_created", "ts": created, "handoff_id": hid, "account": acc}
    deadline = obj.get("deadline")
    if deadline is not None:
        ev["deadline"] = time_text(deadline, tz)
    importance = obj.get("importance")
    if importance is not None:
        if not isinstance(importance, int) or isinstance(importance, bool):
            raise ValueError(f"importance {importance!r} is not an integer")
        ev["importance"] = importance
    for name in ("repo", "branch", "head"):
        value = obj.get(name)
        if value is not None:
            ev[name] = str(value)
    out = [ev]
    started = _get(obj, "localStartedAt", "local_started_at")
    error = _get(obj, "localStartError", "local_start_error")
    flag = _get(obj, "localStarted", "local_started")
    if flag is not None and not isinstance(flag, bool):  # "true" in quotes: never read as either
        name = "localStarted" if "localStarted" in obj else "local_started"
        raise ValueError(f"{name} {flag!r} is not true or false")
    if started is not None or flag is True:
        out.append({"type": "local_started", "ts": created if started is None else time_text(started, tz),
                    "handoff_id": hid})
    elif error is not None:
        out.append({"type": "local_start_failed", "ts": created, "handoff_id": hid, "error": str(error)})
    return out


def read_handoff_dir(directory: str, account: str | None = None, tz: tzinfo | None = None
                     ) -> tuple[list[Legacy], list[str]]:
    """The legacy handoffs of ``directory`` (sorted by file name), and the files that could not be read.

    A file whose name or text is not UTF-8, whose JSON is nested deeper than the log allows (64 levels),
    or whose events the appender would refuse (a field of 2 MiB) is one of them; so is each ``ID.json``
    of a handoff id another one gives too, but the one kept (:func:`one_file_per_id`).
    """
    found: dict[str, Legacy] = {}
    problems: list[str] = []
    for name in sorted(os.listdir(directory)):
        stem, _, ext = name.rpartition(".")
        if ext not in ("json", "resumed", "skip") or not stem:
            continue
        path = os.path.join(directory, name)
        legacy = found.get(stem) or Legacy(stem, os.path.join(directory, stem))
        try:
            bad = not_utf8(name)  # os.listdir reads such a name with lone surrogates
            if bad is not None:
                raise ValueError(f"{bad} of its name")
            if ext == "json":
                with open_file(path) as f:
                    obj = json_value(f.read())
                if not isinstance(obj, dict):
                    raise ValueError("not a JSON object")
                legacy.handoff_id = str(_get(obj, "handoffId", "handoff_id") or stem)
                found[stem] = legacy
                record = record_events(legacy.handoff_id, obj, mtime(path, tz), account, tz)
                if appendable(path, problems, *record):
                    legacy.record = record
                    legacy.dated = _get(obj, "createdAt", "created_at") is not None
            elif ext == "resumed":
                legacy.resumed = mtime(path, tz)
            else:
                with open_file(path) as f:
                    first = next((utf8(line).strip() for line in f if line.strip()), "")
                legacy.skip = (mtime(path, tz), first or "legacy .skip marker")
            found[stem] = legacy
        except (OSError, ValueError) as err:
            problems.append(f"{path}: {getattr(err, 'strerror', None) or err}")
    return one_file_per_id([found[k] for k in sorted(found)], problems), problems


def one_file_per_id(legacy: list[Legacy], problems: list[str]) -> list[Legacy]:
    """``legacy`` with one ``ID.json`` per handoff id: the file named after the id (``h01.json``), else the first
    by name; every other file giving that id (``h01 (copy).json``) is named in ``problems`` with the one kept,
    and left out with its markers.

    Its ``handoff_created`` would be a second one of that id, which the log rejects; which file is meant is
    the person's to say.
    """
    kept: dict[str, Legacy] = {}
    for item in legacy:
        if item.record and (item.handoff_id not in kept or os.path.basename(item.files) == item.handoff_id):
            kept[item.handoff_id] = item
    for item in legacy:
        owner = kept.get(item.handoff_id)
        if item.record and owner is not None and owner is not item:
            problems.append(f"{item.files}.json: handoffId {item.handoff_id} is given by {owner.files}.json already: "
                            "left out, with its markers (remove the copy, or give it its own handoffId)")
    return [item for item in legacy if not item.record or kept.get(item.handoff_id) is item]


@dataclass
class HandoffsKnown:
    """What a log holds that an import of the legacy files must not repeat."""

    #: Its handoffs, as the projection folds them.
    handoffs: Handoffs = field(default_factory=Handoffs)
    #: The ``.resumed`` markers already applied, by handoff id: each one's mtime as an instant, and as the log wrote
    #: it, read off each applied ``needs_human`` of reason :data:`LEGACY_RESUMED` (its ``ts`` is the marker's mtime),
    #: in log order.
    resumed: dict[str, dict[int, str]] = field(default_factory=dict)


def handoffs_known(events: Iterable[tuple[Event, datetime]]) -> HandoffsKnown:
    """Fold a log's decoded events into :class:`HandoffsKnown`."""
    out = HandoffsKnown()
    h = out.handoffs
    for line, (ev, at) in enumerate(events, 1):
        handler = h.handlers.get(type(ev))
        if handler is not None and handler(h, ev, line, at) is None and isinstance(ev, NeedsHuman) \
                and ev.reason == LEGACY_RESUMED:
            out.resumed.setdefault(ev.handoff_id, {})[instant(at)] = ev.ts
    return out


class ResumedAgain(NamedTuple):
    """A ``.resumed`` of a pending handoff whose mtime is none the log applied, though the log applied one: not
    applied unless a person says so (a copy, a ``touch``, a restore from a backup or another machine change the
    mtime of the same marker; the old watcher placing it again, on starting the cloud session once more, too)."""

    handoff_id: str
    #: The marker file (``DIR/ID.resumed``).
    file: str
    #: Its mtime (ISO 8601), and the ``ts`` of the latest one the log applied.
    at: str
    applied: str

    def words(self) -> str:
        """``FILE: the marker's time is X, the log applied one at Y ...``, for people."""
        return (f"{self.file}: the marker's time is {self.at}, the log applied one at {self.applied}; "
                f"{self.handoff_id} is pending again since (a person requeued it): not applied")


@dataclass
class HandoffPlan:
    """What an import of legacy files appends, and what it left and why."""

    new: list[dict[str, Any]] = field(default_factory=list)
    created: int = 0
    markers: int = 0
    already: int = 0
    superseded: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: Each field of an ``ID.json`` that says other than the log's ``handoff_created`` (:func:`changed_fields`) ...
    changed: list[str] = field(default_factory=list)
    #: ... and each such handoff: its id, its ``ID.json``, its state in the log.
    changed_handoffs: list[tuple[str, str, str]] = field(default_factory=list)
    #: The ``.resumed`` markers of another mtime than the one the log applied, not applied (:class:`ResumedAgain`).
    resumed_again: list[ResumedAgain] = field(default_factory=list)
    #: The handoffs whose such marker was applied as a person said (``apply``).
    applied_again: list[str] = field(default_factory=list)

    def add(self, where: str, marker: dict[str, Any]) -> bool:
        """Add the event of the marker file ``where``, unless the appender would refuse it (then named in problems)."""
        if not appendable(where, self.problems, marker):
            return False
        self.new.append(marker)
        self.markers += 1
        return True


def _shown(value: Any) -> str:
    return "none" if value is None else json.dumps(value, ensure_ascii=False)


def changed_fields(item: Legacy, known: Handoff) -> list[str]:
    """Each field of ``item``'s ``handoff_created`` that differs from the log's (``known``), as ``FILE: field:
    the log has X, the file Y``: account, deadline (as instants), importance, repo, branch, head, and
    ``createdAt`` when the file gives one (an mtime standing in is no statement of the file's)."""
    ev = item.record[0]
    deadline = ev.get("deadline")
    pairs: list[tuple[str, Any, Any, bool]] = [
        ("account", known.account, ev["account"], known.account == ev["account"]),
        ("deadline", known.deadline_ts, deadline, known.deadline_us == (
            None if deadline is None else instant(datetime.fromisoformat(deadline)))),
        ("importance", known.importance, ev.get("importance", 0), known.importance == ev.get("importance", 0)),
        *((name, getattr(known, name), ev.get(name), getattr(known, name) == ev.get(name))
          for name in ("repo", "branch", "head")),
    ]
    if item.dated:
        pairs.append(("createdAt", known.created_ts, ev["ts"],
                      instant(known.created_at) == instant(datetime.fromisoformat(ev["ts"]))))
    return [f"{item.files}.json: {name}: the log has {_shown(held)}, the file {_shown(given)}"
            for name, held, given, same in pairs if not same]


def handoff_events(legacy: Iterable[Legacy], log: HandoffsKnown, apply: Collection[str] = ()) -> HandoffPlan:
    """The events the legacy handoffs add to what ``log`` holds (see the module docstring); ``apply``: the handoffs
    whose ``.resumed`` of another mtime is applied all the same (a person says the old watcher placed it again)."""
    plan = HandoffPlan()
    for item in legacy:
        hid = item.handoff_id
        known = log.handoffs.items.get(hid)
        state = None if known is None else known.state
        if item.record and known is None:
            plan.new += item.record
            plan.created += 1
            state = PENDING
        elif item.record and known is not None:
            started = [e for e in item.record if e["type"] == "local_started" and not known.local_started]
            plan.new += started
            changed = changed_fields(item, known)
            if changed:
                plan.changed += changed
                plan.changed_handoffs.append((hid, f"{item.files}.json", known.state))
            if not started and not changed:
                plan.already += 1
        if state is None:  # no ID.json read (one that could not be read is named already) and none in the log
            if item.resumed is not None or item.skip is not None:
                plan.problems.append(f"{hid}: a marker but no {hid}.json and no such handoff in the log")
            continue
        if item.resumed is not None:
            applied = log.resumed.get(hid, {})
            again = (ResumedAgain(hid, f"{item.files}.resumed", item.resumed, list(applied.values())[-1])
                     if applied and state == PENDING else None)
            if instant(datetime.fromisoformat(item.resumed)) in applied or state in (NEEDS_HUMAN, SKIPPED):
                plan.already += 1
            elif again is not None and hid not in apply:
                plan.resumed_again.append(again)
            elif state == PENDING:
                detail = (f"the old watcher left {hid}.resumed before it started the cloud session: nothing verified "
                          "that the work came back")
                if again is not None:
                    detail += (f" (placed again at {again.at}, after the one applied at {again.applied}, as a person "
                               "said: --apply-resumed)")
                if plan.add(f"{item.files}.resumed", {
                        "type": "needs_human", "ts": item.resumed, "handoff_id": hid, "reason": LEGACY_RESUMED,
                        "detail": detail}):
                    state = NEEDS_HUMAN
                    if again is not None:
                        plan.applied_again.append(hid)
            else:
                plan.superseded.append(f"{hid}.resumed: {hid} is {state} in the log")
        if item.skip is not None:
            if state in (PENDING, NEEDS_HUMAN):
                plan.add(f"{item.files}.skip", {"type": "skip", "ts": item.skip[0], "handoff_id": hid,
                                                "reason": item.skip[1]})
            elif state == SKIPPED:
                plan.already += 1
            else:
                plan.superseded.append(f"{hid}.skip: {hid} is {state} in the log")
    return plan


__all__ = ["LEGACY_RESUMED", "HandoffPlan", "HandoffsKnown", "Legacy", "LimitPlan", "LimitsKnown", "ResumedAgain",
           "Unread",
           "changed_fields", "handoff_events", "handoffs_known", "ledger_entries", "limit_event", "limits_known",
           "new_limits", "one_file_per_id", "read_handoff_dir", "record_events"]
