"""A stream's revision (spec section 2) is the number of its events that were applied.

A handoff and a session count their own (``projections.runner.EntityRevisions``), the runner
counts the other streams; here the count is made again from each fold's result, line by line.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from eventlog.events import KEY_FIELDS, Event
from eventlog.logs import FileLog
from eventlog.reader import validate_object
from projections.base import FoldResult
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
