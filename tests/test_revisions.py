"""A stream's revision (spec section 2) is the number of its events that were applied.

A handoff and a session count their own (``projections.runner.EntityRevisions``), the runner
counts the other streams; here the count is made again from each fold's result, line by line.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from eventlog.events import KEY_FIELDS, Event
from eventlog.logs import FileLog
from eventlog.reader import validate_object
from eventlog.replay import Replay
from projections.base import NOT_APPLIED, FoldResult
from projections.runner import Runner

ROOT = Path(__file__).resolve().parent.parent


class Recording(Runner):
    """A runner that also counts, by key field and id, every event whose fold applied it."""

    def __init__(self) -> None:
        super().__init__()
        self.applied: dict[str, dict[str, int]] = {name: {} for name in KEY_FIELDS}

    def fold(self, ev: Event, line: int, at: datetime) -> FoldResult:
        result = super().fold(ev, line, at)
        if result is None:
            for name in KEY_FIELDS:  # the first key field the type has names its stream
                if name in ev.__struct_fields__:
                    counts = self.applied[name]
                    key = getattr(ev, name)
                    counts[key] = counts.get(key, 0) + 1
                    break
        return result


def recount(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, int]]]:
    runner = Recording()
    replay = FileLog(str(path)).replay(runner=runner)
    assert replay.bad_lines == [] or "bad_input" in path.name, (path.name, replay.bad_lines[:3])
    return {name: dict(counts) for name, counts in runner.revisions.items()}, runner.applied


def test_every_fixture_and_a_generated_log_count_applied_events(tmp_path: Path) -> None:
    from bench.generate import write_log as generate

    big = tmp_path / "gen.jsonl"
    generate(big, 20_000, 600)
    logs = [big, *sorted((ROOT / "fixtures").glob("*.jsonl"))]
    seen = {name: 0 for name in KEY_FIELDS}
    for log in logs:
        revisions, applied = recount(log)
        assert revisions == applied, log.name
        for name in KEY_FIELDS:
            seen[name] += len(applied[name])
    assert all(seen.values()), seen  # every kind of stream was met


def test_a_rejected_event_does_not_count(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    ts = "2026-08-01T09:00:00+09:00"
    log.write_text("\n".join([
        f'{{"type":"handoff_created","ts":"{ts}","handoff_id":"h1","account":"a"}}',
        f'{{"type":"verified","ts":"{ts}","handoff_id":"h1","attempt":1,"branch":"b","head":"h","dirty":false,'
        '"todos":"taken_over"}',  # not requested: rejected
        f'{{"type":"claimed","ts":"{ts}","handoff_id":"h1","watcher":"w","attempt":1}}',
        f'{{"type":"claimed","ts":"{ts}","handoff_id":"h1","watcher":"w","attempt":2}}',  # already claimed
        f'{{"type":"local_started","ts":"{ts}","handoff_id":"nope"}}',  # never created
    ]) + "\n")
    runner = Recording()
    replay = FileLog(str(log)).replay(runner=runner)
    assert replay.bad_lines == []
    assert [r["line"] for r in runner.rejected] == [2, 4, 5]
    assert dict(runner.revisions["handoff_id"]) == runner.applied["handoff_id"] == {"h1": 2}
    decoded = validate_object({"type": "skip", "ts": ts, "handoff_id": "h1", "reason": "x"})
    assert not isinstance(decoded, str), decoded
    assert runner.revision(decoded[0]) == 2
    decoded = validate_object({"type": "skip", "ts": ts, "handoff_id": "nope", "reason": "x"})
    assert not isinstance(decoded, str), decoded
    assert runner.revision(decoded[0]) == 0


def test_a_decision_on_a_session_never_seen_opens_no_stream() -> None:
    """A refused decision is recorded, not applied: its session stays at revision 0, in no stream."""
    ts = "2026-08-01T09:00:00+09:00"
    runner = Runner()
    decoded = validate_object({"type": "recovery_decision", "ts": ts, "session_id": "s9", "decision": "close",
                               "expected_revision": 4, "idempotency_key": "k", "reason": "r"})
    assert not isinstance(decoded, str), decoded
    ev, at = decoded
    assert runner.fold(ev, 1, at) is NOT_APPLIED  # stale: the session is at 0
    assert runner.sessions.sessions["s9"].revision == 0
    assert runner.revision(ev) == 0
    assert "s9" not in runner.revisions["session_id"]
    assert dict(runner.revisions["session_id"]) == {}


def test_a_copy_made_without_the_codec_counts_its_own_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """``snapshot.copy`` of a state msgpack cannot hold deep-copies the replay: the copy's revisions are its own.

    The JetStream log checks an append on such a copy (expect_revision, then the fold).
    """
    from eventlog import snapshot

    ts = "2026-08-01T09:00:00+09:00"
    replay = Replay(Runner(), None)
    for obj in ({"type": "handoff_created", "ts": ts, "handoff_id": "h1", "account": "a"},
                {"type": "worker_ready", "ts": ts, "session_id": "s1", "generation": 1}):
        decoded = validate_object(obj)
        assert not isinstance(decoded, str), decoded
        assert replay.apply(*decoded) is None

    def not_saved(replay: Replay, split: bool = True) -> bytes:
        raise snapshot.NotSaved("the state holds a value msgpack cannot")

    monkeypatch.setattr(snapshot, "encode_state", not_saved)
    copied = snapshot.copy(replay, Replay(Runner(), None))
    assert copied is not replay
    for obj in ({"type": "claimed", "ts": ts, "handoff_id": "h1", "watcher": "w", "attempt": 1},
                {"type": "worker_stopped", "ts": ts, "session_id": "s1", "generation": 1, "stop_kind": "drain"}):
        decoded = validate_object(obj)
        assert not isinstance(decoded, str), decoded
        assert copied.apply(*decoded) is None
        assert copied.folder.revision(decoded[0]) == 2, obj["type"]  # the copy's own event counts in the copy
        assert replay.folder.revision(decoded[0]) == 1, obj["type"]  # and not in the original
    assert {name: dict(r) for name, r in copied.folder.revisions.items()}["handoff_id"] == {"h1": 2}
