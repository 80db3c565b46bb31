"""The screen and the lanes runner agree on when a lane is stalled (the CLI in a subprocess, as a user runs it).

A lanes runner run with ``--unpicked 3h`` leaves a job that finished two hours ago alone: it sends no resume.
``status``, ``explain``, ``stalls`` and the dump must say the same, not judge the same log at the seed's
90 minutes and show a stall the runner deliberately ignores. The runner's ``lane_check`` states the
thresholds it judged with; without them the seed's 90 min / 8 h hold.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import run_cli, write_log
from test_lane_runner import enqueue_cmd, read

FINISHED = "2026-08-05T12:54:00+09:00"
T = "2026-08-05T14:54:00+09:00"          # two hours after the job finished: unpicked at 90 min, not at 3 h
QUIET_T = "2026-08-05T15:10:00+09:00"    # progress quiet for 3 h 10 min: quiet at 2 h, not at 8 h


def finished_two_hours_ago(tmp_path: Path) -> Path:
    return write_log(tmp_path / "lanes.jsonl", [
        {"type": "status_updated", "ts": "2026-08-05T14:30:00+09:00", "product": "repair", "state": "running"},
        {"type": "job_finished", "ts": FINISHED, "product": "repair", "job_id": "fix-42"},
    ])


def lanes_run(log: Path, record: Path, *flags: str) -> Any:
    out = run_cli("lanes", str(log), "--enqueue-cmd", enqueue_cmd(record), "--json", *flags)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def status_items(log: Path, at: str) -> tuple[int, list[tuple[str, str]]]:
    out = run_cli("status", str(log), "--at", at, "--json")
    assert out.returncode in (0, 1), out.stderr
    return out.returncode, [(i["id"], i["reason_code"]) for g in json.loads(out.stdout)["groups"] for i in g["items"]]


def explained(log: Path, at: str) -> dict[str, Any]:
    """The lane's verdict in ``explain --json``."""
    out = run_cli("explain", str(log), "repair", "--at", at, "--json")
    assert out.returncode == 0, out.stderr
    [verdict] = [v for v in json.loads(out.stdout)["verdicts"] if v["kind"] == "lane"]
    return dict(verdict)


def replayed(log: Path, at: str, *flags: str) -> dict[str, Any]:
    out = run_cli("replay", str(log), "--at", at, *flags)
    assert out.returncode == 0, out.stderr
    lanes: dict[str, Any] = json.loads(out.stdout)["lanes"]
    return lanes


def test_the_views_judge_unpicked_as_the_lanes_runner_did(tmp_path: Path) -> None:
    log, record = finished_two_hours_ago(tmp_path), tmp_path / "calls.jsonl"
    report = lanes_run(log, record, "--unpicked", "3h", "--at", T)
    assert report["enqueued"] == [] and not record.exists()  # the runner: not unpicked yet
    check = read(log)[-1]
    assert check["type"] == "lane_check" and check["unpicked_s"] == 3 * 3600 and check["quiet_s"] == 8 * 3600

    code, items = status_items(log, T)
    assert code == 0 and ("repair", "job_unpicked") not in items
    verdict = explained(log, T)
    assert verdict["code"] == "moving" and verdict["needs_person"] == []
    assert "is not unpicked yet (after 3 h)" in verdict["says"]
    lanes = replayed(log, T)
    assert [r["stalled"] for r in lanes["now"]["results"]] == [False]
    assert [r["stalled"] for r in lanes["checks"][-1]["results"]] == [False]  # what the runner's check found
    assert run_cli("stalls", str(log), "--at", T).returncode == 0

    # the thresholds the log states are folded state: a snapshot brings them back
    snap = str(tmp_path / "lanes.snap")
    saved = run_cli("replay", str(log), "--at", T, "--snapshot", snap)
    loaded = run_cli("replay", str(log), "--at", T, "--snapshot", snap)
    assert saved.returncode == loaded.returncode == 0 and loaded.stderr == ""
    assert json.loads(loaded.stdout)["lanes"] == lanes

    # an explicit threshold wins for the verdict now; the logged check keeps the thresholds it states
    strict = replayed(log, T, "--unpicked", "90m")
    assert [(r["stalled"], r.get("kind")) for r in strict["now"]["results"]] == [(True, "job-unpicked")]
    assert [r["stalled"] for r in strict["checks"][-1]["results"]] == [False]
    assert run_cli("stalls", str(log), "--at", T, "--unpicked", "90m").returncode == 1

    # past the runner's three hours: the screen names it, and the runner's next run sends the resume
    late = "2026-08-05T15:55:00+09:00"
    assert ("repair", "job_unpicked") in status_items(log, late)[1]
    assert [e["product"] for e in lanes_run(log, record, "--unpicked", "3h", "--at", late)["enqueued"]] == ["repair"]


def test_the_views_judge_quiet_as_the_lanes_runner_did(tmp_path: Path) -> None:
    """The reverse: a runner stricter than the seed sends a resume, and the screen shows the stall it acted on."""
    log = write_log(tmp_path / "lanes.jsonl", [
        {"type": "status_updated", "ts": "2026-08-05T12:00:00+09:00", "product": "repair", "state": "running"},
    ])
    record = tmp_path / "calls.jsonl"
    report = lanes_run(log, record, "--quiet", "2h", "--at", QUIET_T)
    assert [(e["product"], e["kind"]) for e in report["enqueued"]] == [("repair", "status-quiet")]
    assert ("repair", "status_quiet") in status_items(log, QUIET_T)[1]
    verdict = explained(log, QUIET_T)
    assert verdict["code"] == "status-quiet" and "(quiet after 2 h)" in verdict["says"]
    assert [r.get("kind") for r in replayed(log, QUIET_T)["now"]["results"]] == ["status-quiet"]


def test_without_stated_thresholds_the_seed_s_90_minutes_hold(tmp_path: Path) -> None:
    log = finished_two_hours_ago(tmp_path)
    with log.open("a") as f:  # a check that states no thresholds (an older runner, or appended by hand)
        f.write(json.dumps({"type": "lane_check", "ts": T}) + "\n")
    code, items = status_items(log, T)
    assert code == 1 and ("repair", "job_unpicked") in items
    verdict = explained(log, T)
    assert verdict["code"] == "job-unpicked" and "(unpicked after 1 h 30 min)" in verdict["says"]
    lanes = replayed(log, T)
    assert [r.get("kind") for r in lanes["now"]["results"]] == ["job-unpicked"]
    assert [r.get("kind") for r in lanes["checks"][-1]["results"]] == ["job-unpicked"]
    assert run_cli("stalls", str(log), "--at", T).returncode == 1
    # with an explicit threshold, a check that states none is judged with it
    relaxed = replayed(log, T, "--unpicked", "3h")
    assert [r["stalled"] for r in relaxed["checks"][-1]["results"]] == [False]


def test_a_stated_threshold_no_runner_writes_is_kept_and_ignored(tmp_path: Path) -> None:
    """``unpicked_s`` -1 (or 0: the runner's flags take more than 0 only) is another writer's field, not a
    threshold: the line is applied, the field kept as written, and the seed's 90 min hold."""
    log = finished_two_hours_ago(tmp_path)
    out = run_cli("append", str(log), stdin=json.dumps({"type": "lane_check", "ts": T, "unpicked_s": -1}) + "\n")
    assert out.returncode == 0, out.stderr
    assert read(log)[-1]["unpicked_s"] == -1
    lanes = replayed(log, T)
    assert [r.get("kind") for r in lanes["checks"][-1]["results"]] == ["job-unpicked"]



def test_the_thresholds_a_view_prints_paste_back_exactly(tmp_path: Path) -> None:
    """A stalled lane's next step repeats the runner's thresholds as options. Printed ``{:g}``, 5400.5 s came out
    ``5400.5s`` but 1234567 s as ``1.23457e+06s`` and 0.00001 s as ``1e-05s``: neither is a duration the options
    take, and the first is not even the same number. Each must paste back as the value the runner judged with."""
    log = finished_two_hours_ago(tmp_path)
    record = tmp_path / "calls.jsonl"
    late = "2026-08-20T12:00:00+09:00"  # past both thresholds
    with log.open("a") as f:  # as a runner run with these thresholds states them
        f.write(json.dumps({"type": "lane_check", "ts": T, "unpicked_s": 1234567, "quiet_s": 0.00001,
                            "exit": "error", "detail": "enqueue failed"}) + "\n")
    out = run_cli("explain", str(log), "repair", "--at", late, "--json")
    assert out.returncode == 0, out.stderr
    [verdict] = [v for v in json.loads(out.stdout)["verdicts"] if v["kind"] == "lane"]
    words = verdict["says"].split("--unpicked ", 1)[1].split(" (the thresholds", 1)[0]
    unpicked, quiet = words.split(" --quiet ")
    assert "e" not in unpicked + quiet, words
    # pasted into the runner, they are the thresholds its check states again
    assert lanes_run(log, record, "--unpicked", unpicked, "--quiet", quiet, "--at", late)["enqueued"]
    check = [e for e in read(log) if e["type"] == "lane_check"][-1]  # written before the resume it sent
    assert check["type"] == "lane_check" and check["unpicked_s"] == 1234567 and check["quiet_s"] == 0.00001
