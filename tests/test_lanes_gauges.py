"""``follow --prom`` and ``serve``'s ``/metrics`` name each lanes problem ``status`` names, and none it does not
(session 32, G4).

A review (R7) on main: ``recovery_lanes_last_pass_error`` followed the last ``lane_check``'s exit, so a pass
without ``--observe`` (the pasted ``eventlog lanes LOG --enqueue-cmd CMD --resend PRODUCT``, say) wrote ``ok``, set it
to 0 and resolved ``RecoveryLanesErrored`` while ``status`` still named the lane the last observing pass could not
observe: Prometheus all clear for up to an hour while that lane got no resume. The other way round, a send cut
short for a lane that has moved since needs nobody, yet the gauge read the pass as in error until the next pass.
Real processes throughout (the runner writes the log, ``follow`` the file, promtool checks it).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import run_cli, write_log
from tests.opskit import follow_file
from tests.serving import start_server
from tests.test_lanes_observe_dir import lanes
from tests.test_lanes_pass import ago, events
from tests.test_lanes_said_once import codes, killed_pass
from tests.test_lanes_unobserved import two_lanes
from tests.test_prom import promtool, value

ERROR, UNOBSERVED = "recovery_lanes_last_pass_error", "recovery_lanes_unobserved"


def named(log: Path, tmp_path: Path) -> tuple[dict[str, list[str]], dict[str, float], str]:
    """What ``status`` names now (reason code -> ids), the two lanes-pass gauges of the file a real ``follow`` writes
    now (promtool checks it), which must say what ``status`` says, and that file."""
    text = follow_file(log, tmp_path)
    checked = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0 and checked.stdout + checked.stderr == "", checked.stdout + checked.stderr
    said = codes(json.loads(run_cli("status", str(log), "--json", "--all").stdout))
    gauges = {name: value(text, name) for name in (ERROR, UNOBSERVED)}
    assert gauges == {ERROR: len(said.get("lanes_error", [])), UNOBSERVED: len(said.get("lane_unobserved", []))}
    return said, gauges, text


def test_a_lane_not_observed_stays_named_after_a_pass_without_observe(tmp_path: Path) -> None:
    lanes_dir, log = two_lanes(tmp_path)
    (lanes_dir / "beta.env").rename(tmp_path / "beta.env")  # beta is no longer observed
    assert lanes(log, "--observe", str(lanes_dir)).returncode == 1
    assert named(log, tmp_path)[:2] == ({"lane_unobserved": ["beta"]}, {ERROR: 0, UNOBSERVED: 1})

    plain = lanes(log)  # a pass without --observe, as the pasted --resend command runs: it keeps beta unobserved
    assert plain.returncode == 0, plain.stderr
    assert events(log)[-1]["exit"] == "ok" and "unobserved" not in events(log)[-1]
    assert named(log, tmp_path)[:2] == ({"lane_unobserved": ["beta"]}, {ERROR: 0, UNOBSERVED: 1})
    server = start_server(log, tmp_path)  # serve's /metrics says the same
    try:
        lines = server.client("viewer").get("/metrics").text.splitlines()
        assert f'{ERROR}{{log="{log}"}} 0' in lines and f'{UNOBSERVED}{{log="{log}"}} 1' in lines
    finally:
        assert server.stop() == 0

    (tmp_path / "beta.env").rename(lanes_dir / "beta.env")  # its file back: the next observing pass reads it
    assert lanes(log, "--observe", str(lanes_dir)).returncode == 0
    assert named(log, tmp_path)[:2] == ({}, {ERROR: 0, UNOBSERVED: 0})


def test_a_send_cut_short_is_its_stall_s_while_it_stands_and_nobody_s_once_the_lane_moved(tmp_path: Path) -> None:
    lines = [
        {"type": "status_updated", "ts": ago(3), "product": "A", "state": "running"},
        {"type": "job_finished", "ts": ago(2.8), "product": "A"},
        killed_pass("A", "job-unpicked", 1.2),  # its send's time is long up: cut short
    ]
    log = write_log(tmp_path / "ledger.jsonl", lines)
    said, gauges, text = named(log, tmp_path)  # still stalled: the stall's item asks, and its gauge pages
    assert said == {"job_unpicked": ["A"]} and gauges == {ERROR: 0, UNOBSERVED: 0}
    assert value(text, "recovery_lane_stalled", product="A", kind="job-unpicked") == 1

    moved = write_log(tmp_path / "ledger.jsonl", [*lines, {"type": "repo_commit", "ts": ago(1), "product": "A",
                                                           "head": "abc"}])
    assert run_cli("status", str(moved)).returncode == 0  # nobody is needed: no alert either
    assert named(moved, tmp_path)[:2] == ({}, {ERROR: 0, UNOBSERVED: 0})


def test_a_pass_in_error_for_no_lane_is_named_by_the_error_gauge(tmp_path: Path) -> None:
    log = write_log(tmp_path / "ledger.jsonl", [])
    assert lanes(log).returncode == 1  # no lane in the log: the pass's own problem
    assert named(log, tmp_path)[:2] == ({"lanes_error": ["lanes"]}, {ERROR: 1, UNOBSERVED: 0})


def test_an_error_line_that_names_no_lane_s_problem_is_named_with_its_detail(tmp_path: Path) -> None:
    """D2: a `lane_check` written by another tool with `"general": []` (every problem a lane's own) but no lane's
    problem in it (no lane it could not observe, no send) said its detail in no view: status exit 0, the gauge 0,
    `last_pass_exit` "error". All that it said belongs to no lane, as on a line without `general`."""
    lines = [{"type": "status_updated", "ts": ago(0.5), "product": "A", "state": "running"},
             {"type": "lane_check", "ts": ago(0.2), "exit": "error", "detail": "boom", "general": []}]
    log = write_log(tmp_path / "ledger.jsonl", lines)
    said, gauges, _text = named(log, tmp_path)
    assert said == {"lanes_error": ["lanes"]} and gauges == {ERROR: 1, UNOBSERVED: 0}
    out = run_cli("status", str(log))
    assert out.returncode == 1 and "boom" in out.stdout
