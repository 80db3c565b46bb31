"""The interrupt timeline of seed 004 section 3 (issue 18 point 2): stages, budgets, late SDK, verdicts.

Every expected value comes from the seed's text: the normal order
control_received → sdk_interrupt_called → sdk_interrupt_answered → engine_terminal
→ capture_started → capture_finished → finalize_started → finalize_finished, a 5 s
grace for engine_terminal, a capture budget of budget_ms=30000, a late SDK answer
recorded apart, finalize_finished failed with CHECKPOINT_UNAVAILABLE, and a
control.result with effect_ms (0 for a no-op; unknown/deadline_exceeded).
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from typing import Any

import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from eventlog.cli.common import replay_log
from eventlog.prom import exposition
from projections.runner import Runner
from tests.conftest import ROOT, run_cli
from tests.test_sessions import Fold

FIXTURES = ROOT / "fixtures"
VERDICT_FIXTURES = {
    "clean": {"c-1": "clean", "c-2": "clean"},
    "late_sdk": {"c-late": "late_sdk", "c-after": "late_sdk"},
    "engine_timeout": {"c-eng": "engine_timeout"},
    "capture_timeout": {"c-cap": "capture_timeout"},
    "capture_failed": {"c-fail": "capture_failed"},
    "checkpoint_unavailable": {"c-ckpt": "checkpoint_unavailable"},
    "deadline_exceeded": {"c-dl": "deadline_exceeded"},
    "order": {"c-miss": "clean", "c-ooo": "clean", "c-open": None, "c-lost": "unexplained"},
}


def dump_of(name: str) -> dict[str, Any]:
    path = FIXTURES / f"sessions_interrupt_{name}.jsonl"
    return replay_log(str(path)).dump(str(path))


def controls(name: str) -> dict[str, Any]:
    result: dict[str, Any] = dump_of(name)["sessions"]["controls"]
    return result


@pytest.mark.parametrize("name", sorted(VERDICT_FIXTURES))
def test_each_fixture_names_its_verdict(name: str) -> None:
    got = controls(name)
    assert {cid: c["verdict"] for cid, c in got.items()} == VERDICT_FIXTURES[name]


def test_a_clean_interrupt_has_every_stage_in_order() -> None:
    c = controls("clean")["c-1"]
    assert [(s["stage"], s["elapsed_ms"]) for s in c["stages"]] == [
        ("control_received", 0), ("sdk_interrupt_called", 2), ("sdk_interrupt_answered", 180),
        ("engine_terminal", 240), ("capture_started", 250), ("capture_finished", 2100),
        ("finalize_started", 2110), ("finalize_finished", 2300)]
    assert (c["first_problem"], c["late_sdk_interrupt_answered"], c["budget_exceeded"]) == (None, False, [])
    assert (c["operation"], c["outcome"], c["effect_ms"]) == ("interrupt", "interrupted", 2350)


def test_a_no_op_on_a_finished_turn_has_effect_0() -> None:
    c = controls("clean")["c-2"]
    assert (c["stages"], c["outcome"], c["effect_ms"], c["verdict"]) == ([], "completed", 0, "clean")


def test_a_late_sdk_answer_is_recorded_apart_not_out_of_order() -> None:
    got = controls("late_sdk")
    for cid in ("c-late", "c-after"):  # the stage late_sdk_interrupt_answered, or the answer after engine_terminal
        assert got[cid]["late_sdk_interrupt_answered"] is True
        assert got[cid]["first_problem"] is None
    assert [s["stage"] for s in got["c-late"]["stages"]][3:5] == ["capture_started", "late_sdk_interrupt_answered"]


def test_engine_grace_of_5_s() -> None:
    dump = dump_of("engine_timeout")
    c = dump["sessions"]["controls"]["c-eng"]
    assert c["budget_exceeded"] == ["engine_grace"]
    assert c["stages"][-1] == {"stage": "engine_terminal", "elapsed_ms": 5004, "outcome": "timeout",
                               "reason_code": None, "budget_ms": None, "line": 6}
    assert c["first_problem"] is None  # no SDK answer is what a timeout means
    # the turn is outcome_unknown (interrupt_unanswered): the session waits for a person
    s = dump["sessions"]["items"]["s-engine"]
    assert (s["admission_state"], s["reason"], s["unknown_turns"]) == (
        "recovery_required", "interrupt_unanswered", ["t1"])


def test_capture_budget_of_30_s() -> None:
    c = controls("capture_timeout")["c-cap"]
    assert c["budget_exceeded"] == ["capture"]
    finished = c["stages"][-1]
    assert (finished["stage"], finished["outcome"], finished["budget_ms"]) == ("capture_finished", "timeout", 30000)
    # the result names the checkpoint, but the capture's timeout came first in the timeline
    assert (c["reason_code"], c["verdict"]) == ("interrupt_checkpoint_unavailable", "capture_timeout")


def test_finalize_checkpoint_unavailable_is_not_a_capture_failure() -> None:
    """The seed: capture finished, finalize_finished failed with CHECKPOINT_UNAVAILABLE: not a capture problem."""
    c = controls("checkpoint_unavailable")["c-ckpt"]
    assert c["budget_exceeded"] == []
    assert c["stages"][-1]["reason_code"] == "CHECKPOINT_UNAVAILABLE"
    assert c["verdict"] == "checkpoint_unavailable"


def test_deadline_exceeded_has_no_effect_time() -> None:
    c = controls("deadline_exceeded")["c-dl"]
    assert (c["outcome"], c["reason_code"], c["effect_ms"]) == ("unknown", "deadline_exceeded", None)


def test_first_missing_or_out_of_order_stage() -> None:
    got = controls("order")
    assert got["c-miss"]["first_problem"] == {"stage": "capture_started", "problem": "missing", "line": None}
    assert got["c-ooo"]["first_problem"] == {"stage": "capture_finished", "problem": "out_of_order", "line": 22}
    assert got["c-open"]["result_line"] is None and got["c-open"]["verdict"] is None
    assert got["c-open"]["first_problem"] is None  # still running: what has not come yet is not missing


def test_a_result_before_the_end_names_where_the_timeline_stopped() -> None:
    # closed by a result with outcome unknown after engine_terminal: the capture never started
    lost = controls("order")["c-lost"]
    assert [s["stage"] for s in lost["stages"]][-1] == "engine_terminal" and lost["verdict"] == "unexplained"
    assert lost["first_problem"] == {"stage": "capture_started", "problem": "missing", "line": None}
    # the receipt missed its deadline while the SDK had not answered
    dl = controls("deadline_exceeded")["c-dl"]
    assert dl["first_problem"] == {"stage": "sdk_interrupt_answered", "problem": "missing", "line": None}
    # a stage's own failure explains the stop: nothing after it is called missing
    for name, cid in (("engine_timeout", "c-eng"), ("capture_timeout", "c-cap"), ("capture_failed", "c-fail")):
        assert controls(name)[cid]["first_problem"] is None


def test_what_does_not_fit_a_control_is_rejected() -> None:
    rejected = {r["line"]: r["reason"] for r in dump_of("order")["rejected"]}
    assert rejected == {
        13: "control 'c-miss' already has its control_result (line 12)",
        14: "control 'c-miss' belongs to session 's-order', turn 't1' (line 4)",
        23: "stage capture_started of control 'c-ooo' is already recorded (line 20)",
    }


# --- precedence when several hold -------------------------------------------------------

T = "2026-08-06T10:00:00+09:00"
AT = datetime.fromisoformat(T)


def stage(name: str, ms: int, **kw: Any) -> dict[str, Any]:
    return {"type": "interrupt_stage", "ts": T, "session_id": "s", "turn_id": "t", "control_id": "c",
            "stage": name, "elapsed_ms": ms, **kw}


def result(outcome: str = "interrupted", **kw: Any) -> dict[str, Any]:
    return {"type": "control_result", "ts": T, "session_id": "s", "control_id": "c", "operation": "interrupt",
            "outcome": outcome, **kw}


@pytest.mark.parametrize(("objs", "want"), [
    # the earliest cause in the timeline wins over what follows from it
    ([stage("engine_terminal", 6000), stage("capture_finished", 40000, outcome="timeout"),
      result("unknown", reason_code="deadline_exceeded")], "engine_timeout"),
    ([stage("capture_started", 100), stage("capture_finished", 30200, outcome="failed"),
      stage("finalize_finished", 30300, outcome="failed", reason_code="CHECKPOINT_UNAVAILABLE")], "capture_timeout"),
    ([stage("capture_finished", 900, outcome="failed"),
      stage("finalize_finished", 1000, outcome="failed", reason_code="CHECKPOINT_UNAVAILABLE")], "capture_failed"),
    ([stage("finalize_finished", 1000, outcome="failed", reason_code="CHECKPOINT_UNAVAILABLE"),
      result("unknown", reason_code="deadline_exceeded")], "checkpoint_unavailable"),
    # a failure before the late answer wins over it; a late answer wins over clean
    ([stage("engine_terminal", 5001), stage("late_sdk_interrupt_answered", 5200), result()], "engine_timeout"),
    ([stage("engine_terminal", 300), stage("late_sdk_interrupt_answered", 400), result()], "late_sdk"),
    # measured, without the worker's word: the 5 s grace and the capture's own budget
    ([stage("engine_terminal", 5000), result()], "clean"),
    ([stage("capture_started", 100), stage("capture_finished", 10101, budget_ms=10000), result()], "capture_timeout"),
    ([stage("capture_started", 100), stage("capture_finished", 10100, budget_ms=10000), result()], "clean"),
    # the result's stable codes, when no stage says it
    ([result("outcome_unknown", reason_code="interrupt_unanswered")], "engine_timeout"),
    ([result("outcome_unknown", reason_code="interrupt_checkpoint_unavailable")], "checkpoint_unavailable"),
    ([result("outcome_unknown")], "unexplained"),
    ([stage("control_received", 0)], None),  # no result yet and nothing failed
])
def test_precedence(objs: list[dict[str, Any]], want: str | None) -> None:
    f = Fold().feed(*objs)
    assert f.runner.rejected == []
    assert f.sessions.view(AT)["controls"]["c"]["verdict"] == want


def test_the_timeline_survives_the_snapshot_codec() -> None:
    objs = [json.loads(x) for x in (FIXTURES / "sessions_interrupt_order.jsonl").read_text("utf-8").splitlines()]
    whole = Fold().feed(*objs)
    half = Fold().feed(*objs[:20])
    again = Runner()
    again.load_state(msgspec.msgpack.decode(msgspec.msgpack.encode(half.runner.save_state()), type=Runner.State))
    half.runner = again
    half.feed(*objs[20:])
    assert half.sessions.view(AT)["controls"] == whole.sessions.view(AT)["controls"]
    assert half.runner.rejected == whole.runner.rejected


# --- as a user sees it ---------------------------------------------------------------------


def test_explain_prints_the_timeline_with_elapsed_ms() -> None:
    out = run_cli("explain", str(FIXTURES / "sessions_interrupt_capture_timeout.jsonl"), "s-capture", "--at", "log")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert ("interrupt c-cap (turn t1, interrupt): capture_timeout; budget exceeded: capture; "
            "outcome outcome_unknown (interrupt_checkpoint_unavailable), effect 30260 ms (line 12)") in text
    stages = [line.split() for line in text.splitlines() if line.strip().split(" ")[0].isdigit() and " ms " in line]
    assert [(int(x[0]), x[2]) for x in stages] == [
        (0, "control_received"), (2, "sdk_interrupt_called"), (150, "sdk_interrupt_answered"),
        (200, "engine_terminal"), (210, "capture_started"), (30210, "capture_finished")]
    assert "outcome=timeout budget_ms=30000" in text
    js = json.loads(run_cli("explain", str(FIXTURES / "sessions_interrupt_capture_timeout.jsonl"), "s-capture",
                            "--at", "log", "--json").stdout)
    [session] = js["verdicts"]
    assert session["kind"] == "session" and session["facts"]["interrupts"]["c-cap"]["verdict"] == "capture_timeout"


def test_sessions_lists_the_interrupts_verdicts() -> None:
    out = run_cli("sessions", str(FIXTURES / "sessions_interrupt_late_sdk.jsonl"), "--at", "log", "--json")
    got = json.loads(out.stdout)["items"]["s-late"]["controls"]
    assert {cid: (c["verdict"], c["effect_ms"]) for cid, c in got.items()} == {
        "c-after": ("late_sdk", 3040), "c-late": ("late_sdk", 3650)}


def _families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_metrics_effect_histogram_and_verdict_counter() -> None:
    dumps = [dump_of(name) for name in sorted(VERDICT_FIXTURES)]
    every = {**dumps[0], "sessions": {**dumps[0]["sessions"], "controls": {
        f"{i}/{cid}": c for i, d in enumerate(dumps) for cid, c in d["sessions"]["controls"].items()}}}
    text = exposition(every)
    fams = _families(text)
    counts = {s.labels["verdict"]: s.value for s in fams["recovery_controls"].samples}
    assert counts == {"engine_timeout": 1, "capture_timeout": 1, "capture_failed": 1, "checkpoint_unavailable": 1,
                      "deadline_exceeded": 1, "unexplained": 1, "late_sdk": 2, "clean": 4}  # c-open has no result
    hist = {(s.name, s.labels.get("le")): s.value for s in fams["recovery_control_effect_seconds"].samples}
    # effect_ms of the fixtures: 2350 0 3650 3040 5040 30260 1875 2245 2120 1230 420 (deadline: none)
    assert hist[("recovery_control_effect_seconds_count", None)] == 11
    assert hist[("recovery_control_effect_seconds_sum", None)] == pytest.approx(52.23)
    assert hist[("recovery_control_effect_seconds_bucket", "0.1")] == 1
    assert hist[("recovery_control_effect_seconds_bucket", "2.5")] == 7
    assert hist[("recovery_control_effect_seconds_bucket", "5")] == 9
    assert hist[("recovery_control_effect_seconds_bucket", "30")] == 10  # 5.04 s is over the 5 s bucket
    assert hist[("recovery_control_effect_seconds_bucket", "60")] == 11
    assert hist[("recovery_control_effect_seconds_bucket", "+Inf")] == 11
    # promtool agrees with the names, types and units of these two families
    mine = [line for line in text.splitlines() if "recovery_control" in line]
    check = subprocess.run(["promtool", "check", "metrics"], input="\n".join(mine) + "\n", capture_output=True,
                           text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
