"""Lines written by the contract (spec/EVENTS.md) read as the contract says, the same in the replay and the appender.

Run as a user runs them: ``tools/replay`` (``eventlog replay``) and ``eventlog append`` in a subprocess.

- The project adds optional fields to contract types (``watcher_run.detail``, ``watcher_run.stale_after_s``,
  ``lane_check.unpicked_s``, ``lane_check.quiet_s``). Another writer may use those names for something else:
  such a line is contract-valid (unknown extra fields are kept and ignored, spec section 1), so a value of
  another type or range than the project writes is kept and ignored exactly as an unknown field would be.
- ``"seq": null`` is a wrong type (spec section 2: an integer >= 1, or left out), on every path.
- An unknown field holding a number no reader can hold (``1e400``, an integer of 5001 digits) is
  ``bad_value`` for the replay (named, and the replay goes on) and for the appender alike.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, write_log

#: At T: a handoff whose resume request is silent for 1 h 45 min, a job of ``repair`` finished 1 h 40 min ago
#: with nothing committed, and the progress of ``docs`` quiet for 3 h 50 min. Each verdict turns on a threshold
#: the line under test may state: stale at 30 min, not at 2 h; unpicked at 90 min, not at 3 h; quiet at 2 h,
#: not at 8 h.
SCENE: list[dict[str, Any]] = [
    {"type": "handoff_created", "ts": "2026-08-03T09:00:00+09:00", "handoff_id": "h1", "account": "a"},
    {"type": "claimed", "ts": "2026-08-03T09:04:00+09:00", "handoff_id": "h1", "watcher": "w1", "attempt": 1},
    {"type": "resume_requested", "ts": "2026-08-03T09:05:00+09:00", "handoff_id": "h1", "attempt": 1},
    {"type": "status_updated", "ts": "2026-08-03T07:00:00+09:00", "product": "docs", "state": "running"},
    {"type": "status_updated", "ts": "2026-08-03T10:00:00+09:00", "product": "repair", "state": "running"},
    {"type": "job_finished", "ts": "2026-08-03T09:10:00+09:00", "product": "repair"},
]
T = "2026-08-03T10:50:00+09:00"
HEARTBEAT = {"type": "watcher_run", "ts": T, "watcher": "w1", "exit": "error", "period_s": 900}
CHECK = {"type": "lane_check", "ts": T}

#: (the event, the project's field, a value as the project writes it, values of another type or range).
PROJECT_FIELDS: list[tuple[dict[str, Any], str, Any, list[Any]]] = [
    (HEARTBEAT, "detail", "disk full", [{"errno": 5}, 5, True, ["disk full"]]),
    (HEARTBEAT, "stale_after_s", 7200, ["2h", -1, True, [7200], {"s": 7200}, 10**400]),
    (CHECK, "unpicked_s", 10800, ["3h", 0, -60, False, [10800]]),
    (CHECK, "quiet_s", 7200, ["2h", 0, -1.5, {"h": 2}]),
]
FOREIGN = [(event, field, value) for event, field, _, values in PROJECT_FIELDS for value in values]


def replayed(log: Path, *flags: str) -> dict[str, Any]:
    out = run_cli("replay", str(log), *flags)
    assert out.returncode == 0, out.stderr
    dump: dict[str, Any] = json.loads(out.stdout)
    dump.pop("log")
    return dump


def appended(log: Path, *lines: str) -> Any:
    return run_cli("append", str(log), stdin="".join(line + "\n" for line in lines))


def scene_with(tmp_path: Path, name: str, event: dict[str, Any]) -> Path:
    return write_log(tmp_path / f"{name}.jsonl", [*SCENE, event])


@pytest.mark.parametrize(("event", "field", "value"), FOREIGN, ids=lambda v: json.dumps(v)[:24])
def test_a_project_field_holding_another_value_is_kept_and_ignored_as_an_unknown_field(
        tmp_path: Path, event: dict[str, Any], field: str, value: Any) -> None:
    unknown = replayed(scene_with(tmp_path, "unknown", {**event, f"x_{field}": value}))
    dump = replayed(scene_with(tmp_path, "foreign", {**event, field: value}))
    assert dump["bad_lines"] == [] and dump["events"] == len(SCENE) + 1
    assert dump == unknown  # no verdict changes, and no view shows anything of it

    # the appender takes the line too, keeps the field as given, and what it wrote replays the same
    log = write_log(tmp_path / "appended.jsonl", SCENE)
    out = appended(log, json.dumps({**event, field: value}))
    assert out.returncode == 0, out.stderr
    assert json.loads(log.read_text().splitlines()[-1])[field] == value
    assert replayed(log) == dump


@pytest.mark.parametrize(("event", "field", "value"), [(e, f, v) for e, f, v, _ in PROJECT_FIELDS],
                         ids=lambda v: json.dumps(v)[:24])
def test_a_project_field_as_the_project_writes_it_keeps_its_meaning(
        tmp_path: Path, event: dict[str, Any], field: str, value: Any) -> None:
    unknown = replayed(scene_with(tmp_path, "unknown", {**event, f"x_{field}": value}))
    dump = replayed(scene_with(tmp_path, "stated", {**event, field: value}))
    assert dump["bad_lines"] == [] and dump != unknown


def test_a_threshold_stated_in_another_form_leaves_the_last_one_stated_in_force(tmp_path: Path) -> None:
    """A check whose ``unpicked_s`` is no threshold states none: the lanes runner's earlier one still holds."""
    earlier = {**CHECK, "ts": "2026-08-03T10:40:00+09:00", "unpicked_s": 10800}
    log = write_log(tmp_path / "lanes.jsonl", [*SCENE, earlier, {**CHECK, "unpicked_s": "90m"}])
    dump = replayed(log)
    assert dump["bad_lines"] == []
    for record in (dump["lanes"]["now"], dump["lanes"]["checks"][-1]):
        assert [(r["product"], r["stalled"]) for r in record["results"]] == [("docs", False), ("repair", False)]
    stated = write_log(tmp_path / "stated.jsonl", [*SCENE, earlier, CHECK])
    assert replayed(stated)["lanes"] == dump["lanes"]


def test_a_zero_threshold_in_a_check_is_judged_by_the_default_and_never_offered_as_a_command(tmp_path: Path) -> None:
    """``--unpicked 0s``/``--quiet 0s`` are refused by ``lanes`` and ``stalls``: a check stating 0 states none."""
    log = scene_with(tmp_path, "zero", {**CHECK, "unpicked_s": 0, "quiet_s": 0})
    out = run_cli("explain", str(log), "repair", "--at", T)
    assert out.returncode == 0, out.stderr
    assert "(unpicked after 1 h 30 min)" in out.stdout
    assert "--unpicked 90m --quiet 8h" in out.stdout and "--unpicked 0" not in out.stdout
    assert run_cli("stalls", str(log), "--at", T, "--unpicked", "0s").returncode == 2  # why 0 is no threshold
    docs, repair = replayed(log)["lanes"]["checks"][-1]["results"]
    assert not docs["stalled"]  # 3 h 50 min: within the seed's 8 h
    assert repair["stalled"] and repair["kind"] == "job-unpicked"  # 1 h 40 min: past the seed's 90 min


def test_stale_after_zero_is_a_threshold_as_the_failback_flag_takes_it(tmp_path: Path) -> None:
    """``failback --stale-after 0`` is taken (every live claim is stale at once), so a heartbeat stating 0 states it."""
    log = scene_with(tmp_path, "zero", {**HEARTBEAT, "stale_after_s": 0})
    assert replayed(log)["handoffs"]["stale_claims"]["unknown_effect"] == ["h1"]
    both = write_log(tmp_path / "both.jsonl", [*SCENE, {**HEARTBEAT, "stale_after_s": 7200},
                                               {**HEARTBEAT, "ts": T, "stale_after_s": 0}])
    assert replayed(both)["handoffs"]["stale_claims"]["unknown_effect"] == ["h1"]


# --- the line paths of the replay -----------------------------------------------------------------------


def _ordinary(n: int, seq: bool, first: int = 1) -> list[str]:
    """``n`` ordinary lines (the replay reads a block of them at once), each with its ``seq`` or none."""
    return [json.dumps({"type": "status_updated", "ts": f"2026-08-03T10:{(first + k) % 60:02d}:00+09:00",
                        "product": "p", "state": "running", **({"seq": first + k} if seq else {})})
            for k in range(n)]


def _paths(line: str, seq: bool) -> dict[str, list[str]]:
    """Logs holding ``line`` as line 101: after 100 ordinary lines (the block path), and after 100 lines each
    of a type no reader knows (line by line); 20 ordinary lines after it."""
    odd = [json.dumps({"type": "not_a_type", "ts": "2026-08-03T10:00:00+09:00"})] * 100
    return {"block": [*_ordinary(100, seq), line, *_ordinary(20, seq, 102)],
            "line by line": [*odd, line, *_ordinary(20, seq, 102)]}


def replay_lines(tmp_path: Path, lines: list[str]) -> dict[str, Any]:
    log = tmp_path / "log.jsonl"
    log.write_text("".join(line + "\n" for line in lines))
    return replayed(log)


@pytest.mark.parametrize("seq", [True, False], ids=["seq given", "hand-written"])
@pytest.mark.parametrize("event", [{"type": "lane_check"},
                                   {"type": "status_updated", "product": "p", "state": "idle"}],
                         ids=["optional fields", "no optional field"])
def test_seq_null_is_a_wrong_type_on_every_path_of_the_replay(tmp_path: Path, seq: bool, event: dict[str, Any]) -> None:
    line = json.dumps({**event, "ts": "2026-08-03T11:41:00+09:00", "seq": None})
    for path, lines in _paths(line, seq).items():
        dump = replay_lines(tmp_path, lines)
        bad = [b for b in dump["bad_lines"] if b["line"] == 101]
        assert [b["reason"] for b in bad] == ["wrong_type: seq: expected int, got null"], path
        assert dump["events"] == (100 if path == "block" else 0) + 20, path  # named, and the replay goes on


def test_seq_null_on_append_s_input_is_refused_like_any_bad_line(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", SCENE)
    before = log.read_bytes()
    for given, reason in ((None, "wrong_type: seq: expected int, got null"),
                          ("7", "wrong_type: seq: expected int, got str"),
                          (0, "bad_value: seq: expected int >= 1")):
        out = appended(log, json.dumps(CHECK), json.dumps({**CHECK, "seq": given}))
        assert out.returncode == 2 and f"stdin line 2: {reason}" in out.stderr, out.stderr
        assert log.read_bytes() == before  # nothing written
    out = appended(log, json.dumps({**CHECK, "seq": 99}))  # a good seq given is the appender's to set
    assert out.returncode == 0 and json.loads(log.read_text().splitlines()[-1])["seq"] == len(SCENE) + 1


HUGE = "9" * 5001  # past the 4300 digits Python reads an integer of


def noted(number: str, seq: int | None = None, ts: str = T) -> str:
    """A ``lane_check`` line whose unknown field ``note`` holds ``number`` exactly as written."""
    given = "" if seq is None else f', "seq": {seq}'
    return '{"type": "lane_check", "ts": "' + ts + '"' + given + ', "note": ' + number + "}"

OUT_OF_RANGE = ["1e400", "-1e400", "[1e400]", HUGE, '{"a": [-' + HUGE + "]}"]


@pytest.mark.parametrize("value", OUT_OF_RANGE, ids=lambda v: v[:12])
def test_an_unknown_field_with_a_number_out_of_range_is_bad_value_for_replay_and_append_alike(
        tmp_path: Path, value: str) -> None:
    reason = "bad_value: a number out of range"
    for seq in (True, False):
        line = noted(value, 101 if seq else None, "2026-08-03T11:41:00+09:00")
        for path, lines in _paths(line, seq).items():
            dump = replay_lines(tmp_path, lines)
            bad = [b["reason"] for b in dump["bad_lines"] if b["line"] == 101]
            assert len(bad) == 1 and bad[0].startswith(reason), (path, seq, bad)
            assert dump["events"] == (100 if path == "block" else 0) + 20, path
    log = write_log(tmp_path / "append.jsonl", SCENE)
    out = appended(log, noted(value))
    assert out.returncode == 2 and f"stdin line 1: {reason}" in out.stderr and "not_json" not in out.stderr, out.stderr
    assert len(log.read_text().splitlines()) == len(SCENE)


@pytest.mark.parametrize("value", ["1e308", "9" * 4300, "-1e-400"], ids=lambda v: v[:12])
def test_an_unknown_field_with_a_number_a_double_or_python_holds_is_applied_by_both(tmp_path: Path, value: str) -> None:
    line = noted(value)
    for lines in _paths(line, False).values():
        assert 101 not in [b["line"] for b in replay_lines(tmp_path, lines)["bad_lines"]]
    log = write_log(tmp_path / "append.jsonl", SCENE)
    out = appended(log, line)
    assert out.returncode == 0, out.stderr


def test_a_replay_judges_as_of_its_last_applied_or_rejected_line(tmp_path: Path) -> None:
    """T is the ``ts`` of the last line applied or rejected: not the largest ``ts``, nor a bad last line's."""
    log = write_log(tmp_path / "log.jsonl", [
        {"type": "lane_check", "ts": "2026-08-03T12:00:00+09:00"},
        {"type": "claimed", "ts": "2026-08-03T09:00:00+09:00", "handoff_id": "none", "watcher": "w", "attempt": 1},
        {"type": "lane_check", "ts": "2026-08-03T13:00:00+09:00", "seq": None},
    ])
    dump = replayed(log)
    assert [r["line"] for r in dump["rejected"]] == [2] and [b["line"] for b in dump["bad_lines"]] == [3]
    assert dump["as_of"] == "2026-08-03T09:00:00+09:00"


@pytest.mark.parametrize(("field", "value"), [("timeout_s", "45m"), ("timeout_s", 0), ("kill_grace_s", -30),
                                              ("kill_grace_s", {"s": 30})], ids=str)
def test_a_catchup_kick_with_a_foreign_bound_is_applied_and_judged_by_the_spec_default(
        tmp_path: Path, field: str, value: Any) -> None:
    """``catchup_kicked``'s ``timeout_s``/``kill_grace_s`` are the project's: another value is no bad line, and
    the live views judge the re-run as if none was stated (the spec's 2700 s and 30 s)."""
    kicked = {"type": "catchup_kicked", "ts": "2026-08-03T09:50:00+09:00", "label": "com.x.job"}
    for name, line in (("unknown", {**kicked, f"x_{field}": value}), ("foreign", {**kicked, field: value})):
        log = write_log(tmp_path / "log.jsonl", [*SCENE, line])  # one path: the commands name it
        dump = replayed(log)
        assert dump["bad_lines"] == [] and dump["events"] == len(SCENE) + 1
        status = run_cli("status", str(log), "--json", "--at", T)
        assert status.returncode in (0, 1), status.stderr
        items = json.loads(status.stdout)
        items.pop("log")
        if name == "unknown":
            expected = items
    assert items == expected
    assert "rerun_no_end" in {group["reason_code"] for group in items["groups"]}  # 60 min: past 45 + 1 + 5


@pytest.mark.parametrize(("event", "field", "value"), [
    ({**HEARTBEAT, "ts": "2026-08-03T06:00:00+09:00", "watcher": "w-old", "exit": "ok"}, "retired", "yes"),
    ({**HEARTBEAT, "ts": "2026-08-03T06:00:00+09:00", "watcher": "w-old", "exit": "ok"}, "retired", 1),
    ({"type": "resume_failed", "ts": T, "handoff_id": "h1", "attempt": 1, "error": "x", "effect": "none"},
     "actor", {"name": "ops"}),
], ids=str)
def test_a_views_only_project_field_holding_another_value_changes_no_view(
        tmp_path: Path, event: dict[str, Any], field: str, value: Any) -> None:
    """``watcher_run.retired`` and ``resume_failed.actor`` are read by the views only: another value is no bad
    line, and ``status`` says what it says of the same line with an unknown field instead."""
    seen = []
    for line in ({**event, f"x_{field}": value}, {**event, field: value}):
        log = write_log(tmp_path / "log.jsonl", [*SCENE, line])  # one path: the commands name it
        assert replayed(log)["bad_lines"] == []
        status = run_cli("status", str(log), "--json", "--at", T)
        assert status.returncode in (0, 1), status.stderr
        seen.append(json.loads(status.stdout))
    assert seen[0] == seen[1]
