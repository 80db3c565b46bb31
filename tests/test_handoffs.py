"""The handoffs projection (spec section 3, seed 000): every expected value here is derived by hand."""

from __future__ import annotations

import copy
import json
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog import snapshot
from eventlog.cli.common import replay_log
from eventlog.clock import LAST_LINE, parse_at
from eventlog.reader import validate_object
from eventlog.replay import Replay
from projections.base import Rejected
from projections.handoffs import Handoffs, backoff_s
from projections.runner import Runner

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
J = "+09:00"


def dump(name: str, at: str | None = None, **runner: Any) -> dict[str, Any]:
    """The dump of a fixture, as ``tools/replay [--at AT]`` prints it."""
    path = str(FIX / f"{name}.jsonl")
    replay = replay_log(path, runner=Runner(**runner), show_progress=False)
    when = parse_at(at, default=LAST_LINE)
    return replay.dump(path, *when.resolve(replay.last_at, replay.last_ts))


def handoffs(name: str, at: str | None = None, **runner: Any) -> dict[str, Any]:
    return dump(name, at, **runner)["handoffs"]  # type: ignore[no-any-return]


def fold(events: list[dict[str, Any]], **kw: Any) -> tuple[Handoffs, list[Any]]:
    """Fold events (dicts as on the wire) into a fresh projection; the fold results in order."""
    h = Handoffs(**kw)
    results = []
    for line, obj in enumerate(events, 1):
        checked = validate_object(dict(obj))
        assert not isinstance(checked, str), checked
        ev, at = checked
        results.append(h.handlers[type(ev)](h, ev, line, at))
    return h, results


def t(clock: str, day: str = "2026-08-03") -> str:
    return f"{day}T{clock}{J}"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def created(hid: str, ts: str, account: str = "a", **kw: Any) -> dict[str, Any]:
    return {"type": "handoff_created", "ts": ts, "handoff_id": hid, "account": account, **kw}


def ev(type_: str, ts: str, **kw: Any) -> dict[str, Any]:
    return {"type": type_, "ts": ts, **kw}


# --- the seed's story: 98 handoffs, 86 started locally, 0 returned --------------------------------


def test_seed_98_failover_and_failback_are_counted_apart() -> None:
    h = handoffs("handoffs_seed_98")
    assert h["total"] == 98
    assert h["failover"] == {"started": 86, "total": 98}
    assert h["failback"] == {"returned": 0, "total": 98}
    assert h["by_state"] == {"skipped": 98}
    # 69 expired, 29 skipped as the backlog from before the mechanism: counted by reason.
    assert h["skip_reasons"] == {"expired": 69, "pre_mechanism_backlog": 29}
    assert h["not_returned"] == {"expired": 69, "pre_mechanism_backlog": 29}
    assert h["pending"] == {"count": 0, "oldest_age_s": None}
    assert h["latency_s"]["created_to_returned"] == {"n": 0, "p50": None, "p95": None}
    # No pending work: no probe, and no heartbeat is not late.
    assert h["probe_plan"] == {"cloud-account-a": {"probe": False, "reason": "nothing_pending", "next_probe_at": None}}
    assert h["watcher"] == {"last_run": None, "late": False}


# --- the seed's seven fault points ----------------------------------------------------------------


def test_probe_just_before_and_just_after_the_reset() -> None:
    h = handoffs("handoffs_reset_boundary")  # T = 16:59:59, the quota probe of account a
    assert h["probe_plan"]["cloud-account-a"] == {
        "probe": False, "reason": "waiting_reset", "next_probe_at": t("17:00:00"),
    }
    # Account b's reset (16:59:00) had passed when it was probed (16:59:01): ok, claimed, verified.
    assert h["items"]["hb1"] == {"state": "returned", "account": "cloud-account-b", "attempt": 1, "stale": None}
    assert h["probe_plan"]["cloud-account-b"]["reason"] == "nothing_pending"
    assert h["probes"] == {"ok": 1, "quota_limited": 1}
    # created 01:30:00 -> verified 16:59:30; claimed 16:59:02 -> requested 16:59:03 -> verified 16:59:30.
    assert h["latency_s"]["created_to_returned"] == {"n": 1, "p50": 55770, "p95": 55770}
    assert h["latency_s"]["claimed_to_requested"] == {"n": 1, "p50": 1, "p95": 1}
    assert h["latency_s"]["requested_to_verified"] == {"n": 1, "p50": 27, "p95": 27}
    # ha1 created 01:25:00, T 16:59:59.
    assert h["pending"] == {"count": 1, "oldest_age_s": 15 * 3600 + 34 * 60 + 59}
    # At the reset itself "reset_at after T" no longer holds: probe now, next_probe_at = T as written.
    at_reset = handoffs("handoffs_reset_boundary", t("17:00:00"))["probe_plan"]["cloud-account-a"]
    assert at_reset == {"probe": True, "reason": "due", "next_probe_at": t("17:00:00")}
    just_before = handoffs("handoffs_reset_boundary", t("16:59:59.999"))["probe_plan"]["cloud-account-a"]
    assert just_before["reason"] == "waiting_reset"


def test_two_watchers_on_one_handoff_the_second_claim_is_rejected() -> None:
    d = dump("handoffs_two_watchers")
    assert [(r["line"], r["type"]) for r in d["rejected"]] == [(6, "claimed")]
    assert "watcher-a" in d["rejected"][0]["reason"]
    h = d["handoffs"]
    assert h["items"]["h1"]["state"] == "returned"
    assert h["failback"] == {"returned": 1, "total": 1}
    assert h["latency_s"]["created_to_returned"] == {"n": 1, "p50": 3663, "p95": 3663}


def test_watcher_killed_right_after_its_claim_is_stale_retryable() -> None:
    h = handoffs("handoffs_killed_after_claim")  # T 10:45:00
    # h1 claimed 10:00:01, nothing since: 2699 s > 1800. h2 claimed 10:15:00: exactly 1800, not longer.
    assert h["stale_claims"] == {"retryable": ["h1"], "unknown_effect": []}
    assert h["items"]["h1"]["stale"] == "retryable"
    assert h["items"]["h2"]["stale"] is None
    # Two live claims fill max_inflight 2: no slot for h3.
    assert h["next_claims"] == []
    assert h["pending"] == {"count": 1, "oldest_age_s": 5700}
    later = handoffs("handoffs_killed_after_claim", t("10:45:01"))
    assert later["stale_claims"]["retryable"] == ["h1", "h2"]
    assert handoffs("handoffs_killed_after_claim", stale_after_s=3600)["stale_claims"]["retryable"] == []
    assert handoffs("handoffs_killed_after_claim", max_inflight=3)["next_claims"] == ["h3"]


def test_network_cut_after_the_cloud_side_started_is_unknown_effect() -> None:
    h = handoffs("handoffs_network_cut")
    assert h["stale_claims"] == {"retryable": [], "unknown_effect": ["h1"]}
    assert h["items"]["h1"] == {"state": "resume_requested", "account": "cloud-account-a", "attempt": 1,
                                "stale": "unknown_effect"}
    # resume_failed with effect unknown goes to a person.
    assert h["items"]["h2"]["state"] == "needs_human"
    assert h["not_returned"] == {"needs_human": 1, "resume_requested": 1}
    assert h["latency_s"]["claimed_to_requested"] == {"n": 2, "p50": 1, "p95": 1}


def test_working_tree_changed_is_a_conflict_for_a_person() -> None:
    d = dump("handoffs_tree_changed")
    h = d["handoffs"]
    assert h["items"]["h1"]["state"] == "needs_human"
    assert h["by_state"] == {"needs_human": 1}
    assert h["failback"] == {"returned": 0, "total": 1}
    # A verified after the conflict does not fit: only resume_requested can be verified.
    assert [(r["line"], r["type"]) for r in d["rejected"]] == [(7, "verified")]


def test_weekly_limit_without_a_time_backs_off_and_widens() -> None:
    h = handoffs("handoffs_weekly_limit")  # T 2026-08-04T09:30:01
    plan = h["probe_plan"]
    # Estimated reset 09:00 passed; quota_limited at 09:00 and 09:30: second in a row -> 1 h from 09:30.
    assert plan["cloud-account-a"] == {"probe": False, "reason": "backoff_estimate",
                                       "next_probe_at": t("10:30:00", "2026-08-04")}
    # transient 09:00, network_timeout 09:15, transient 09:28: third in a row -> 240 s from 09:28.
    assert plan["cloud-account-b"] == {"probe": False, "reason": "backoff_transient",
                                       "next_probe_at": t("09:32:00", "2026-08-04")}
    # An explicit reset that has passed: a quota_limited probe does not back off.
    assert plan["cloud-account-c"] == {"probe": True, "reason": "due", "next_probe_at": t("09:30:01", "2026-08-04")}
    assert h["probes"] == {"network_timeout": 1, "quota_limited": 3, "transient": 2}
    # Between the two quota probes the first backoff (30 min from 09:00) was in force.
    mid = handoffs("handoffs_weekly_limit", t("09:15:00", "2026-08-04"))["probe_plan"]["cloud-account-a"]
    assert mid["reason"] == "backoff_estimate"
    # When the wait is over the account is due again.
    over = handoffs("handoffs_weekly_limit", t("10:30:00", "2026-08-04"))["probe_plan"]
    assert over["cloud-account-a"]["reason"] == "due"
    assert over["cloud-account-b"]["reason"] == "due"


def test_watcher_periodic_run_stopping_is_late() -> None:
    h = handoffs("handoffs_watcher_stopped")  # last run 09:45:00 (period 900), T 10:15:01
    assert h["watcher"] == {"last_run": t("09:45:00"), "late": True}
    assert handoffs("handoffs_watcher_stopped", t("10:15:00"))["watcher"]["late"] is False


# --- rejections ------------------------------------------------------------------------------------


def test_rejected_transitions_fixture() -> None:
    d = dump("handoffs_rejected")
    assert [(r["line"], r["type"]) for r in d["rejected"]] == [
        (2, "handoff_created"), (3, "claimed"), (4, "local_started"), (5, "resume_requested"),
        (6, "verified"), (7, "resume_failed"), (8, "conflict"), (9, "released"), (11, "claimed"),
        (12, "verified"), (13, "resume_failed"), (15, "verified"), (16, "skip"), (17, "needs_human"),
        (18, "released"), (19, "claimed"), (25, "skip"), (26, "needs_human"), (27, "released"),
        (31, "conflict"), (33, "conflict"),
    ]
    reasons = {r["line"]: r["reason"] for r in d["rejected"]}
    assert "unknown handoff" in reasons[3] and "unknown handoff" in reasons[4]
    assert "already created" in reasons[2]
    assert "live claim" in reasons[11]
    h = d["handoffs"]
    assert {k: v["state"] for k, v in h["items"].items()} == {"h1": "skipped", "h2": "returned", "h3": "pending"}
    assert h["items"]["h1"]["attempt"] == 1  # the attempt-2 claim of the skipped h1 was rejected
    assert h["failover"] == {"started": 1, "total": 3}  # local_started applies even to a skipped handoff
    assert h["not_returned"] == {"no longer needed": 1, "pending": 1}
    assert h["pending"] == {"count": 1, "oldest_age_s": 300}
    assert h["watcher"] == {"last_run": None, "late": True}  # none at all while h3 is pending


def test_a_rejection_leaves_state_and_times_untouched() -> None:
    h, results = fold([
        created("h1", t("10:00:00")),
        ev("claimed", t("10:00:00"), handoff_id="h1", watcher="w1", attempt=1),
        ev("claimed", t("10:20:00"), handoff_id="h1", watcher="w2", attempt=1),
    ])
    assert isinstance(results[2], Rejected)
    # Stale counts from the last APPLIED event (10:00), not the rejected one (10:20).
    assert h.stale("h1", at(t("10:30:01"))) == "retryable"
    assert h.items["h1"].watcher == "w1"


def test_any_applied_event_of_the_handoff_refreshes_staleness() -> None:
    h, _ = fold([
        created("h1", t("10:00:00")),
        ev("claimed", t("10:00:00"), handoff_id="h1", watcher="w1", attempt=1),
        ev("local_started", t("10:20:00"), handoff_id="h1"),
    ])
    assert h.stale("h1", at(t("10:31:00"))) is None
    assert h.stale("h1", at(t("10:50:01"))) == "retryable"


def test_a_claim_past_max_inflight_is_applied() -> None:
    events = [created(f"h{i}", t("09:00:00")) for i in range(3)]
    events += [ev("claimed", t("10:00:00"), handoff_id=f"h{i}", watcher="w", attempt=1) for i in range(3)]
    h, results = fold(events, max_inflight=2)
    assert results == [None] * 6
    assert h.live == 3
    assert h.next_claims() == []


def test_released_from_needs_human_and_resume_failed_none_make_it_pending() -> None:
    h, results = fold([
        created("h1", t("09:00:00")),
        ev("needs_human", t("09:01:00"), handoff_id="h1", reason="check with owner"),
        ev("released", t("09:02:00"), handoff_id="h1", reason="owner says go"),
        ev("claimed", t("09:03:00"), handoff_id="h1", watcher="w", attempt=1),
        ev("resume_requested", t("09:04:00"), handoff_id="h1", attempt=1),
        ev("resume_failed", t("09:05:00"), handoff_id="h1", attempt=1, error="ENOENT", effect="none"),
    ])
    assert results == [None] * 6
    assert h.items["h1"].state == "pending"
    assert h.items["h1"].attempt == 1
    assert h.live == 0


# --- claim order and latency ------------------------------------------------------------------------


def test_claim_order_deadline_importance_attempts_age_line() -> None:
    h = handoffs("handoffs_claim_order")
    # c4 deadline 11:00; c3 and c2 the same instant 12:00+09:00 (03:00Z), c3 more important;
    # then no deadline: c5 (importance 3), c1 and c7 (same created time, c1 first in the log),
    # c6 last (one attempt already) although it is the oldest. c8 is claimed: one slot left.
    assert h["next_claims"] == ["c4"]
    assert handoffs("handoffs_claim_order", max_inflight=5)["next_claims"] == ["c4", "c3", "c2", "c5"]
    assert handoffs("handoffs_claim_order", max_inflight=1)["next_claims"] == []
    replay = replay_log(str(FIX / "handoffs_claim_order.jsonl"), show_progress=False)
    order = replay.folder.handoffs.claim_order()  # type: ignore[attr-defined]
    assert order == ["c4", "c3", "c2", "c5", "c1", "c7", "c6"]
    # The oldest pending is c6 (created 08:00), T 09:45.
    assert h["pending"] == {"count": 7, "oldest_age_s": 6300}


def test_latency_nearest_rank_from_first_times() -> None:
    h = handoffs("handoffs_latency")
    # created->returned: 3730, 6930, 13265, 18602, 19233.5 -> p50 rank 3, p95 rank 5.
    assert h["latency_s"]["created_to_returned"] == {"n": 5, "p50": 13265, "p95": 19233.5}
    # claimed->requested from the FIRST claim: 10, 30, 3605 (h3 re-claimed), 20, 3, 7 (h6 not verified yet)
    # sorted 3, 7, 10, 20, 30, 3605 -> p50 rank 3 = 10, p95 rank 6 = 3605.
    assert h["latency_s"]["claimed_to_requested"] == {"n": 6, "p50": 10, "p95": 3605}
    # requested->verified from the FIRST request: 120, 300, 60, 2382 (h4 failed once), 30.5.
    assert h["latency_s"]["requested_to_verified"] == {"n": 5, "p50": 120, "p95": 2382}


def test_oldest_age_may_be_negative_before_creation() -> None:
    h = handoffs("handoffs_watcher_stopped", t("08:00:00"))
    assert h["pending"] == {"count": 2, "oldest_age_s": -3600}


# --- the probe plan and its backoff -------------------------------------------------------------------


def probes(account: str, outcomes: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [ev("probe_result", ts, account=account, outcome=o) for ts, o in outcomes]


def limit(ts: str, reset: str | None, confidence: str, account: str = "a") -> dict[str, Any]:
    return ev("limit_recorded", ts, account=account, limited_at=ts, reset_at=reset, source="test",
              confidence=confidence)


def test_backoff_doubles_and_is_capped() -> None:
    assert [backoff_s(60, n, 3600) for n in range(1, 8)] == [60, 120, 240, 480, 960, 1920, 3600]
    assert [backoff_s(1800, n, 86400) for n in range(1, 8)] == [1800, 3600, 7200, 14400, 28800, 57600, 86400]
    assert backoff_s(60, 500, 3600) == 3600


def test_transient_backoff_is_capped_at_one_hour() -> None:
    outcomes = [(t(f"10:{m:02d}:00"), "transient") for m in range(8)]
    h, _ = fold([created("h1", t("09:00:00")), *probes("a", outcomes)])
    # 8 in a row: 60 * 2**7 = 7680 s, capped at 3600 s from the last one (10:07).
    assert h.plan("a", at(t("10:08:00"))) == {"probe": False, "reason": "backoff_transient",
                                              "next_probe_at": t("11:07:00")}
    assert h.plan("a", at(t("11:07:00")))["reason"] == "due"


def test_unknown_limit_without_reset_backs_off_after_a_quota_probe() -> None:
    h, _ = fold([created("h1", t("09:00:00")), limit(t("09:00:00"), None, "unknown"),
                 *probes("a", [(t("09:10:00"), "quota_limited")])])
    assert h.plan("a", at(t("09:00:00")))["reason"] != "waiting_reset"
    assert h.plan("a", at(t("09:20:00"))) == {"probe": False, "reason": "backoff_estimate",
                                              "next_probe_at": t("09:40:00")}


def test_estimate_backoff_is_capped_at_24_hours_and_reset_by_a_new_limit() -> None:
    outcomes = [(t(f"{10 + i}:00:00"), "quota_limited") for i in range(8)]
    events = [created("h1", t("09:00:00")), limit(t("09:00:00"), t("09:30:00"), "estimated"), *probes("a", outcomes)]
    h, _ = fold(events)
    assert h.plan("a", at(t("18:00:00")))["next_probe_at"] == t("17:00:00", "2026-08-04")
    # A new limit starts again: its reset is in the future -> waiting_reset.
    h, _ = fold([*events, limit(t("17:00:01"), t("18:00:00"), "estimated")])
    assert h.plan("a", at(t("17:30:00")))["reason"] == "waiting_reset"
    # ...and after it, with no probe since, probe now.
    assert h.plan("a", at(t("18:00:00")))["reason"] == "due"


def test_estimate_backoff_needs_a_quota_probe_after_the_limit_and_a_passed_reset() -> None:
    base = [created("h1", t("09:00:00")), *probes("a", [(t("09:05:00"), "quota_limited")]),
            limit(t("09:06:00"), t("10:00:00"), "estimated")]
    h, _ = fold(base)
    assert h.plan("a", at(t("09:30:00")))["reason"] == "waiting_reset"
    assert h.plan("a", at(t("10:00:00")))["reason"] == "due"  # the quota probe came before the limit


def test_ok_or_other_outcomes_end_a_run() -> None:
    h, _ = fold([created("h1", t("09:00:00")), limit(t("09:00:00"), None, "estimated"),
                 *probes("a", [(t("09:10:00"), "quota_limited"), (t("09:11:00"), "ok")])])
    assert h.plan("a", at(t("09:12:00")))["reason"] == "due"
    h, _ = fold([created("h1", t("09:00:00")),
                 *probes("a", [(t("09:10:00"), "transient"), (t("09:11:00"), "quota_limited"),
                               (t("09:12:00"), "network_timeout")])])
    # The run of transient outcomes restarted at 09:12: 60 s.
    assert h.plan("a", at(t("09:12:30")))["next_probe_at"] == t("09:13:00")


def test_plan_accounts_and_nothing_pending() -> None:
    h, _ = fold([created("h1", t("09:00:00"), account="a"), limit(t("09:00:00"), t("17:00:00"), "explicit", "b"),
                 *probes("c", [(t("09:01:00"), "ok")]),
                 ev("skip", t("09:02:00"), handoff_id="h1", reason="obsolete")])
    plan = h.probe_plan(at(t("09:03:00")))
    assert list(plan) == ["a", "b", "c"]
    assert all(p == {"probe": False, "reason": "nothing_pending", "next_probe_at": None} for p in plan.values())
    assert h.due_accounts(at(t("09:03:00"))) == []


def test_waiting_reset_prints_reset_at_as_written() -> None:
    h, _ = fold([created("h1", t("09:00:00")), limit(t("09:00:00"), "2026-08-03T08:00:00Z", "explicit")])
    assert h.plan("a", at("2026-08-03T07:59:59+00:00"))["next_probe_at"] == "2026-08-03T08:00:00Z"


# --- the view and the log ------------------------------------------------------------------------------


def test_state_goes_through_the_codec_and_gives_the_same_view() -> None:
    replay = replay_log(str(FIX / "handoffs_weekly_limit.jsonl"), show_progress=False)
    h = replay.folder.handoffs  # type: ignore[attr-defined]
    when = at(t("09:31:00", "2026-08-04"))
    again = Handoffs()
    again.state = msgspec.msgpack.decode(msgspec.msgpack.encode(h.state), type=Handoffs.State)
    assert again.view(when) == h.view(when)
    assert again.plan("cloud-account-a", when, "T") == h.plan("cloud-account-a", when, "T")


_HIDS = st.sampled_from(["h1", "h2"])
_TS = st.integers(0, 7200).map(lambda s: f"2026-08-03T{9 + s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}{J}")
_EVENTS = st.one_of(
    st.builds(lambda h, ts: created(h, ts, deadline=ts), _HIDS, _TS),
    st.builds(lambda h, ts: ev("local_started", ts, handoff_id=h), _HIDS, _TS),
    st.builds(lambda h, ts, n: ev("claimed", ts, handoff_id=h, watcher="w", attempt=n), _HIDS, _TS, st.integers(1, 3)),
    st.builds(lambda h, ts: ev("released", ts, handoff_id=h, reason="r"), _HIDS, _TS),
    st.builds(lambda h, ts: ev("resume_requested", ts, handoff_id=h, attempt=1), _HIDS, _TS),
    st.builds(lambda h, ts, e: ev("resume_failed", ts, handoff_id=h, attempt=1, error="x", effect=e),
              _HIDS, _TS, st.sampled_from(["none", "unknown"])),
    st.builds(lambda h, ts: ev("verified", ts, handoff_id=h, attempt=1, branch="m", head="x", dirty=False,
                               todos="taken_over"), _HIDS, _TS),
    st.builds(lambda h, ts: ev("conflict", ts, handoff_id=h, detail="d"), _HIDS, _TS),
    st.builds(lambda h, ts: ev("needs_human", ts, handoff_id=h, reason="r"), _HIDS, _TS),
    st.builds(lambda h, ts: ev("skip", ts, handoff_id=h, reason="r"), _HIDS, _TS),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_EVENTS, max_size=25))
def test_rejections_change_nothing_and_counts_stay_consistent(events: list[dict[str, Any]]) -> None:
    h = Handoffs()
    when = at(t("12:00:00"))
    for line, obj in enumerate(events, 1):
        checked = validate_object(dict(obj))
        assert not isinstance(checked, str)
        e, ts = checked
        before = copy.deepcopy(h.state)
        result = h.handlers[type(e)](h, e, line, ts)
        if isinstance(result, Rejected):
            assert h.state == before
        view = h.view(when)
        assert sum(view["by_state"].values()) == view["total"]
        assert h.live == view["by_state"].get("claimed", 0) + view["by_state"].get("resume_requested", 0)
        assert sum(view["not_returned"].values()) == view["total"] - view["failback"]["returned"]
        assert view["pending"]["count"] == sum(acc.pending for acc in h.accounts.values())


@pytest.mark.parametrize("name", sorted(p.stem for p in FIX.glob("handoffs_*.jsonl")))
def test_fixture_has_its_expected_dump(name: str) -> None:
    import json

    expected = json.loads((FIX / f"{name}.expected.json").read_text(encoding="utf-8"))
    actual = dump(name)
    assert actual["handoffs"] == expected["handoffs"]
    assert actual["rejected"] == expected["rejected"]


def test_durations_with_an_assumed_zone_are_real_time_across_dst(tmp_path: Path) -> None:
    """New York springs forward at 02:00 on 2026-03-08: 01:50 to 03:10 is 20 minutes, not 80."""
    log = tmp_path / "dst.jsonl"
    lines = [
        {"type": "handoff_created", "ts": "2026-03-08T01:40:00", "handoff_id": "h1", "account": "a"},
        {"type": "claimed", "ts": "2026-03-08T01:50:00", "handoff_id": "h1", "watcher": "w", "attempt": 1},
        {"type": "watcher_run", "ts": "2026-03-08T01:55:00", "watcher": "w", "exit": "ok", "period_s": 600},
        {"type": "lane_check", "ts": "2026-03-08T03:10:00"},
    ]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    replay = replay_log(str(log), assume_tz=ZoneInfo("America/New_York"), show_progress=False)
    got = replay.dump(str(log))["handoffs"]
    assert got["items"]["h1"]["stale"] is None  # 20 min < stale_after 30 min
    assert got["watcher"]["late"] is False  # 15 min since the run, not more than 2 x 10 min
    restored = snapshot.copy(replay, Replay(Runner(), replay.reader.assume_tz))  # a snapshot judges the same
    assert restored.dump(str(log))["handoffs"] == got


def test_latencies_with_an_assumed_zone_are_real_time_across_dst_and_a_snapshot(tmp_path: Path) -> None:
    """Created 01:40, claimed 01:50, requested 03:05, verified 03:10 in New York on 2026-03-08 (clocks spring
    forward at 02:00): 30, 15 and 5 minutes of real time, not 90, 75 and 5 on the wall clock. The same when the
    handoff's first times come back from a snapshot (in UTC) and the later ones are read in the zone."""
    first = [
        {"type": "handoff_created", "ts": "2026-03-08T01:40:00", "handoff_id": "h1", "account": "a"},
        {"type": "claimed", "ts": "2026-03-08T01:50:00", "handoff_id": "h1", "watcher": "w", "attempt": 1},
    ]
    then = [
        {"type": "resume_requested", "ts": "2026-03-08T03:05:00", "handoff_id": "h1", "attempt": 1},
        {"type": "verified", "ts": "2026-03-08T03:10:00", "handoff_id": "h1", "attempt": 1, "branch": "main",
         "head": "abc", "dirty": False, "todos": "taken_over"},
    ]
    log = tmp_path / "dst.jsonl"
    log.write_text("".join(json.dumps(x) + "\n" for x in first))
    zone = ZoneInfo("America/New_York")
    replay = replay_log(str(log), assume_tz=zone, show_progress=False)
    restored = snapshot.copy(replay, Replay(Runner(), zone))
    with log.open("a") as f:
        f.write("".join(json.dumps(x) + "\n" for x in then))
    expected = {"created_to_returned": {"n": 1, "p50": 1800, "p95": 1800},
                "claimed_to_requested": {"n": 1, "p50": 900, "p95": 900},
                "requested_to_verified": {"n": 1, "p50": 300, "p95": 300}}
    for r in (replay, restored):
        with log.open("rb") as f:
            r.feed(f)
        assert r.dump(str(log))["handoffs"]["latency_s"] == expected


# --- issue 17: attempt fencing, a request that went unconfirmed, probe classes ------------------------


def claimed(hid: str, ts: str, watcher: str, attempt: int) -> dict[str, Any]:
    return ev("claimed", ts, handoff_id=hid, watcher=watcher, attempt=attempt)


def verified(hid: str, ts: str, attempt: int) -> dict[str, Any]:
    return ev("verified", ts, handoff_id=hid, attempt=attempt, branch="main", head="abc", dirty=False,
              todos="taken_over")


def test_attempt_fencing_refuses_the_answer_of_a_claim_that_was_given_back() -> None:
    # Issue 17: "claimed w1/attempt 1 -> released -> claimed w2/attempt 2, then w1's resume_requested attempt:1 is
    # accepted and w2's attempt:2 refused". Fenced: the other way round.
    h, results = fold([
        created("h1", t("09:00:00")),
        claimed("h1", t("09:01:00"), "w1", 1),
        ev("released", t("09:40:00"), handoff_id="h1", reason="stale claim"),
        claimed("h1", t("09:45:00"), "w2", 2),
        ev("resume_requested", t("09:46:00"), handoff_id="h1", attempt=1),
        ev("resume_requested", t("09:46:01"), handoff_id="h1", attempt=2),
        verified("h1", t("09:50:00"), 1),
        ev("resume_failed", t("09:50:01"), handoff_id="h1", attempt=1, error="x", effect="unknown"),
        ev("conflict", t("09:50:02"), handoff_id="h1", attempt=1, detail="x"),
        verified("h1", t("09:51:00"), 2),
    ])
    reasons = [r.reason if isinstance(r, Rejected) else None for r in results]
    fenced = "of attempt 1 is fenced off: the live claim of h1 is attempt 2 (by w2)"
    assert reasons == [None, None, None, None, f"resume_requested {fenced}", None, f"verified {fenced}",
                       f"resume_failed {fenced}", f"conflict {fenced}", None]
    assert h.items["h1"].state == "returned" and h.items["h1"].attempt == 2


def test_a_conflict_without_attempt_answers_the_live_claim_as_the_spec_says() -> None:
    h, results = fold([
        created("h1", t("09:00:00")), claimed("h1", t("09:01:00"), "w1", 3),
        ev("resume_requested", t("09:02:00"), handoff_id="h1", attempt=3),
        ev("conflict", t("09:03:00"), handoff_id="h1", detail="HEAD moved"),
    ])
    assert results == [None] * 4 and h.items["h1"].state == "needs_human"


def test_the_answer_a_request_went_unconfirmed_for_is_still_taken() -> None:
    base = [
        created("h1", t("09:00:00")), claimed("h1", t("09:01:00"), "w1", 1),
        ev("resume_requested", t("09:02:00"), handoff_id="h1", attempt=1),
        ev("needs_human", t("09:40:00"), handoff_id="h1", reason="resume_unconfirmed"),
    ]
    h, results = fold([*base, verified("h1", t("09:50:00"), 1)])
    assert results[-1] is None and h.items["h1"].state == "returned" and h.live == 0
    assert h.durations()["requested_to_verified"] == [48 * 60]
    h, results = fold([*base, ev("resume_failed", t("09:50:00"), handoff_id="h1", attempt=1, error="x",
                                 effect="none")])
    assert results[-1] is None and h.items["h1"].state == "pending"
    # ... of that attempt only, and only for that reason: any other needs_human refuses it, as the spec says.
    h, results = fold([*base, verified("h1", t("09:50:00"), 2)])
    assert isinstance(results[-1], Rejected) and "fenced off" in results[-1].reason
    h, results = fold([*base[:3], ev("needs_human", t("09:40:00"), handoff_id="h1", reason="owner asked"),
                       verified("h1", t("09:50:00"), 1)])
    assert isinstance(results[-1], Rejected)
    assert results[-1].reason == "verified applies only to a resume_requested handoff; h1 is needs_human"
    # The reason alone opens nothing: a needs_human resume_unconfirmed that no request led to takes no answer.
    h, results = fold([*base[:2], ev("released", t("09:30:00"), handoff_id="h1", reason="x"),
                       ev("needs_human", t("09:40:00"), handoff_id="h1", reason="resume_unconfirmed"),
                       verified("h1", t("09:50:00"), 1)])
    assert isinstance(results[-1], Rejected) and h.items["h1"].state == "needs_human"
    # A person who requeued it got a new claim: the old session's late answer is fenced off.
    h, results = fold([*base, ev("released", t("09:45:00"), handoff_id="h1", reason="requeued"),
                       claimed("h1", t("09:46:00"), "w2", 2), verified("h1", t("09:50:00"), 1)])
    assert isinstance(results[-1], Rejected) and h.items["h1"].state == "claimed"


def test_auth_error_needs_a_person_until_a_probe_says_anything_else() -> None:
    base = [created("h1", t("09:00:00")), *probes("a", [(t("09:10:00"), "auth_error")])]
    h, _ = fold(base)
    for when in ("09:10:01", "12:00:00", "23:59:00"):  # no wait ends it
        assert h.plan("a", at(t(when))) == {"probe": False, "reason": "needs_person", "next_probe_at": None}
    # A limit does not prove the login works; nothing pending hides it (no probe would be made anyway).
    h, _ = fold([*base, limit(t("09:11:00"), t("09:30:00"), "explicit")])
    assert h.plan("a", at(t("10:00:00")))["reason"] == "needs_person"
    h, _ = fold([*base, ev("skip", t("09:11:00"), handoff_id="h1", reason="obsolete")])
    assert h.plan("a", at(t("10:00:00")))["reason"] == "nothing_pending"
    # The person's probe by hand: quota_limited proves the login works (the limit now rules), ok is due.
    h, _ = fold([*base, *probes("a", [(t("10:00:00"), "quota_limited")])])
    assert h.plan("a", at(t("10:00:01")))["reason"] == "due"
    h, _ = fold([*base, *probes("a", [(t("10:00:00"), "ok")])])
    assert h.plan("a", at(t("10:00:01")))["reason"] == "due"


def test_unexpected_backs_off_like_transient_and_is_named() -> None:
    h, _ = fold([created("h1", t("09:00:00")), *probes("a", [(t("09:10:00"), "unexpected")])])
    assert h.plan("a", at(t("09:10:30"))) == {"probe": False, "reason": "backoff_unexpected",
                                                "next_probe_at": t("09:11:00")}
    assert h.plan("a", at(t("09:11:00")))["reason"] == "due"
    # Passing trouble of either kind in a row doubles the wait; the reason names the latest.
    h, _ = fold([created("h1", t("09:00:00")),
                 *probes("a", [(t("09:10:00"), "transient"), (t("09:12:00"), "unexpected")])])
    assert h.plan("a", at(t("09:12:30"))) == {"probe": False, "reason": "backoff_unexpected",
                                                "next_probe_at": t("09:14:00")}
    h, _ = fold([created("h1", t("09:00:00")),
                 *probes("a", [(t("09:10:00"), "unexpected"), (t("09:12:00"), "network_timeout")])])
    assert h.plan("a", at(t("09:12:30")))["reason"] == "backoff_transient"
