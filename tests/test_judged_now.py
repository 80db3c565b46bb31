"""Every time-based verdict is in the dump, judged at its ``as_of``: ``lanes.now``, ``sessions.retry_due``,
``handoffs.watchers`` (one heartbeat per watcher), and ``needs_human_reasons``. Values derived by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eventlog.cli.common import replay_log
from eventlog.clock import LAST_LINE, parse_at
from eventlog.reader import Reader
from projections.runner import Runner
from tests.conftest import ROOT, run_cli

FIX = ROOT / "fixtures"


def dump(log: str | Path, at: str | None = None) -> dict[str, Any]:
    """The dump ``tools/replay [--at AT] LOG`` prints."""
    path = str(log if isinstance(log, Path) else FIX / f"{log}.jsonl")
    replay = replay_log(path, show_progress=False)
    return replay.dump(path, *parse_at(at, default=LAST_LINE).resolve(replay.last_at, replay.last_ts))


def fold(events: list[dict[str, Any]]) -> Runner:
    runner, reader = Runner(), Reader()
    for line, obj in enumerate(events, 1):
        decoded = reader.decode(json.dumps(obj).encode(), line)
        assert not isinstance(decoded, str), decoded
        runner.fold(decoded[0], line, decoded[1])
    return runner


# --- lanes.now --------------------------------------------------------------------------------


def test_lanes_now_judges_every_lane_at_t_without_a_lane_check() -> None:
    # sashiko-repair finished at 12:54 and nothing picked it up; the only lane_check (13:00) found it moving
    at_log = dump("lanes_stalled_unchecked")
    assert at_log["lanes"]["checks"][0]["results"] == [{"product": "sashiko-repair", "stalled": False,
                                                         "reason": "moving"}]
    now = at_log["lanes"]["now"]
    assert now["schema"] == "impl-lane-watch/v1" and now["checked_at"] == at_log["as_of"] == "2026-08-05T14:30:00+09:00"
    assert now["results"] == [
        {"product": "kumihimo", "stalled": False, "reason": "moving"},
        {"product": "sashiko-repair", "stalled": True, "kind": "job-unpicked",
         "detail": "作業は1時間36分前に終わっていますが、その成果がまだ取り込まれていません",
         "finished_at": "2026-08-05T12:54:00+09:00"},
    ]
    # the seed's threshold is ">= 90 minutes": 14:24:00 is stalled, a second before is not
    before = dump("lanes_stalled_unchecked", "2026-08-05T14:23:59+09:00")["lanes"]["now"]
    assert before["results"][1]["stalled"] is False
    at_90 = dump("lanes_stalled_unchecked", "2026-08-05T14:24:00+09:00")["lanes"]["now"]
    assert at_90["results"][1]["stalled"] is True and at_90["checked_at"] == "2026-08-05T14:24:00+09:00"


def test_lanes_now_is_the_record_stalls_prints_at_the_same_time() -> None:
    t = "2026-08-05T20:00:00+09:00"
    out = run_cli("stalls", str(FIX / "lanes_stalled_unchecked.jsonl"), "--at", t)
    assert out.returncode == 1  # a lane is stalled
    assert json.loads(out.stdout) == dump("lanes_stalled_unchecked", t)["lanes"]["now"]


def test_lanes_now_of_a_log_without_events_has_no_time_and_no_lane() -> None:
    empty = dump("log_empty")
    assert empty["as_of"] is None
    assert empty["lanes"]["now"] == {"schema": "impl-lane-watch/v1", "checked_at": None, "results": []}


# --- sessions.retry_due ----------------------------------------------------------------------------


def test_retry_due_lists_backoff_sessions_whose_retry_at_has_come() -> None:
    # s-due: restore failed at 09:00:10 -> backoff, retry_at 09:00:40 (30 s); s-wait: startup failed at
    # 09:00:25 -> retry_at 09:00:55. The log's last line is at 09:00:40.
    d = dump("sessions_retry_due")
    assert d["sessions"]["items"]["s-due"]["retry_at"] == "2026-08-03T09:00:40+09:00"
    assert d["sessions"]["retry_due"] == ["s-due"]  # retry_at <= T: due at that very instant
    assert dump("sessions_retry_due", "2026-08-03T09:00:39+09:00")["sessions"]["retry_due"] == []
    assert dump("sessions_retry_due", "2026-08-03T09:00:55+09:00")["sessions"]["retry_due"] == ["s-due", "s-wait"]
    # compared as instants, whatever the offsets: 00:00:55Z is 09:00:55+09:00
    assert dump("sessions_retry_due", "2026-08-03T00:00:54+00:00")["sessions"]["retry_due"] == ["s-due"]


def test_retry_due_only_for_sessions_in_backoff() -> None:
    runner = fold([
        {"type": "checkpoint_restore_failed", "ts": "2026-08-03T09:00:00+09:00", "session_id": "a", "generation": 1,
         "reason": "x"},
        {"type": "worker_ready", "ts": "2026-08-03T09:00:31+09:00", "session_id": "a", "generation": 2},
        {"type": "checkpoint_restore_failed", "ts": "2026-08-03T09:00:00+09:00", "session_id": "b", "generation": 1,
         "reason": "incompatible_checkpoint"},
    ])
    later = parse_at("2026-08-04T00:00:00+09:00").time
    assert later is not None
    view = runner.sessions.view(later)
    assert view["items"]["a"]["admission_state"] == "admitted" and view["items"]["a"]["retry_at"] is None
    assert view["items"]["b"]["admission_state"] == "recovery_required"
    assert view["retry_due"] == []


# --- handoffs.watchers -------------------------------------------------------------------------------


def test_each_watcher_keeps_its_last_heartbeat_and_the_spec_watcher_stays_the_last_line() -> None:
    d = dump("handoffs_watcher_error")
    h = d["handoffs"]
    assert h["watcher"] == {"last_run": "2026-08-03T08:15:06+09:00", "late": False}  # watcher-b, the last line
    assert h["watchers"] == {
        "watcher-a": {"last_run": "2026-08-03T08:15:05+09:00", "period_s": 900, "exit": "error",
                      "detail": "probe command cannot start: [Errno 2] No such file or directory: 'claude'",
                      "late": False},
        "watcher-b": {"last_run": "2026-08-03T08:15:06+09:00", "period_s": 300, "exit": "ok", "detail": None,
                      "late": False},
    }
    # late: strictly older than twice its own period. watcher-b: 08:15:06 + 600 s; watcher-a: 08:15:05 + 1800 s
    at = dump("handoffs_watcher_error", "2026-08-03T08:25:06+09:00")["handoffs"]["watchers"]
    assert (at["watcher-a"]["late"], at["watcher-b"]["late"]) == (False, False)
    at = dump("handoffs_watcher_error", "2026-08-03T08:25:07+09:00")["handoffs"]
    assert (at["watchers"]["watcher-a"]["late"], at["watchers"]["watcher-b"]["late"]) == (False, True)
    assert at["watcher"]["late"] is True
    at = dump("handoffs_watcher_error", "2026-08-03T08:45:06+09:00")["handoffs"]["watchers"]
    assert (at["watcher-a"]["late"], at["watcher-b"]["late"]) == (True, True)


def test_watcher_run_detail_is_in_the_schema() -> None:
    schema = json.loads(run_cli("schema").stdout)
    props = schema["$defs"]["WatcherRun"]["properties"]
    assert props["detail"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert "detail" not in schema["$defs"]["WatcherRun"]["required"]


def test_status_names_a_watcher_whose_last_pass_ended_in_error_with_its_detail() -> None:
    out = run_cli("status", str(FIX / "handoffs_watcher_error.jsonl"), "--at", "log")
    assert out.returncode == 1
    assert ("  watcher-a (for 1 s): its last pass (2026-08-03T08:15:05+09:00) ended in error: probe command "
            "cannot start: [Errno 2] No such file or directory: 'claude'") in out.stdout
    assert "watcher-b" not in out.stdout


# --- needs_human_reasons ---------------------------------------------------------------------------------


def test_needs_human_handoffs_are_counted_by_reason() -> None:
    created = [{"type": "handoff_created", "ts": "2026-08-03T09:00:00+09:00", "handoff_id": h, "account": "a"}
               for h in ("h1", "h2", "h3", "h4", "h5")]
    claim = [{"type": "claimed", "ts": "2026-08-03T09:01:00+09:00", "handoff_id": h, "watcher": "w", "attempt": 1}
             for h in ("h1", "h3")]
    runner = fold([
        *created, *claim,
        {"type": "conflict", "ts": "2026-08-03T09:02:00+09:00", "handoff_id": "h1", "detail": "tree changed"},
        {"type": "needs_human", "ts": "2026-08-03T09:02:00+09:00", "handoff_id": "h2", "reason": "ask the owner"},
        {"type": "resume_requested", "ts": "2026-08-03T09:03:00+09:00", "handoff_id": "h3", "attempt": 1},
        {"type": "resume_failed", "ts": "2026-08-03T09:04:00+09:00", "handoff_id": "h3", "attempt": 1,
         "error": "exit 1", "effect": "unknown"},
        {"type": "needs_human", "ts": "2026-08-03T09:05:00+09:00", "handoff_id": "h4", "reason": "ask the owner"},
        {"type": "needs_human", "ts": "2026-08-03T09:05:00+09:00", "handoff_id": "h5", "reason": "gone"},
        {"type": "released", "ts": "2026-08-03T09:06:00+09:00", "handoff_id": "h5", "reason": "owner answered"},
    ])
    view = runner.handoffs.view(parse_at("2026-08-03T10:00:00+09:00").time)  # type: ignore[arg-type]
    assert view["needs_human_reasons"] == {"ask the owner": 2, "conflict": 1, "resume_failed_unknown_effect": 1}
    assert view["not_returned"]["needs_human"] == 4
