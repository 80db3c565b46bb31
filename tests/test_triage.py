"""The triage as a pure function: words for durations, natural order, filters, and verdicts that move with T."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from eventlog.replay import Replay
from projections.runner import Runner
from projections.triage import LogFacts, duration_words, explain, natural_key, triage
from tests.conftest import write_log


@pytest.mark.parametrize(("seconds", "words"), [
    (0, "0 s"), (40, "40 s"), (59.9, "59 s"), (60, "1 min"), (61, "1 min 1 s"), (7500, "2 h 5 min"),
    (7200 + 30, "2 h"), (3 * 86400, "3 d"), (3 * 86400 + 300, "3 d"), (86400 + 3600, "1 d 1 h"),
    (-300, "in 5 min"), (1e308, "more than 7100 years (never)"), (-1e308, "in more than 7100 years (never)"),
])
def test_duration_words(seconds: float, words: str) -> None:
    assert duration_words(seconds) == words


def test_natural_key_counts_digit_runs_as_numbers() -> None:
    ids = ["h-10004", "h-1010", "h-2", "h-10", "a", "h-010", "s-9", "h-9x", "h-9"]
    assert sorted(ids, key=natural_key) == ["a", "h-2", "h-9", "h-9x", "h-010", "h-10", "h-1010", "h-10004", "s-9"]


def _fold(tmp_path: Path, events: list[dict[str, object]]) -> Replay:
    log = write_log(tmp_path / "t.jsonl", events)
    replay = Replay(Runner())
    with open(log, "rb") as f:
        replay.feed(f)
    return replay


SESSION = [
    {"type": "worker_claimed", "ts": "2026-08-03T09:00:00+09:00", "session_id": "s1", "generation": 1,
     "worker": "w", "restore": True},
    {"type": "checkpoint_restore_failed", "ts": "2026-08-03T09:00:10+09:00", "session_id": "s1", "generation": 1,
     "reason": "restore_refused"},
]


def test_a_retry_becomes_due_with_time_alone(tmp_path: Path) -> None:
    """Judged at T, not at the last line: 30 s after the failure the retry is due, with no new line."""
    replay = _fold(tmp_path, SESSION)
    runner = replay.folder
    assert isinstance(runner, Runner)
    facts = LogFacts(name="t.jsonl", events=replay.events)
    before = datetime.fromisoformat("2026-08-03T09:00:39+09:00")
    after = datetime.fromisoformat("2026-08-03T09:00:41+09:00")
    assert triage(runner, before, before.isoformat(), facts).needs_person == 0
    due = triage(runner, after, after.isoformat(), facts)
    [group] = due.groups
    assert (group.reason_code, [i.id for i in group.items]) == ("retry_due", ["s1"])
    [item] = group.items
    assert item.since == "2026-08-03T09:00:40+09:00" and item.for_s == 1 and not item.needs_decision
    [verdict] = explain(runner, "s1", after, after.isoformat(), facts)
    assert verdict.code == "backoff" and "due now" in verdict.says and verdict.needs_person == [item]


def test_filters_and_the_first_few_keep_the_counts(tmp_path: Path) -> None:
    events = [*SESSION, {"type": "checkpoint_restore_failed", "ts": "2026-08-03T09:01:00+09:00", "session_id": "s1",
                         "generation": 1, "reason": "incompatible_checkpoint"}]
    events += [{"type": "handoff_created", "ts": "2026-08-03T09:02:00+09:00", "handoff_id": f"h{n}", "account": "a"}
               for n in range(5)]
    events += [{"type": "needs_human", "ts": "2026-08-03T09:03:00+09:00", "handoff_id": f"h{n}", "reason": "look"}
               for n in range(5)]
    replay = _fold(tmp_path, events)
    runner = replay.folder
    assert isinstance(runner, Runner)
    at = datetime.fromisoformat("2026-08-03T09:05:00+09:00")
    whole = triage(runner, at, at.isoformat(), LogFacts(name="t.jsonl", events=replay.events))
    assert [(g.reason_code, g.count) for g in whole.groups] == [("needs_human", 5), ("restore_failed", 1)]
    shown = whole.shown(2)
    assert [len(g.items) for g in shown.groups] == [2, 1] and [g.count for g in shown.groups] == [5, 1]
    sessions = whole.only(["sessions"])
    assert sessions.needs_person == 1 and sessions.totals.handoffs is None and sessions.totals.sessions is not None
    [restore] = whole.only(needs_decision=True).groups[1].items
    assert restore.next == ("eventlog decide t.jsonl s1 --decision retry_restore --expected-revision 3 "
                            "--idempotency-key retry_restore-r3 --reason '<why>'")
