"""How a lanes pass ended is in the log, and every live view names a pass that ended in error (seed 001).

A resume the lanes runner could not send (its enqueue command failed, timed out, could not start) left no trace:
the log held a ``lane_check`` as after any pass, so ``status``, ``explain``, ``serve`` and ``follow --prom`` looked
as if all had gone well. As failback's heartbeat does, the runner's ``lane_check`` says how its pass ended (one
written before its sends, and a second one after them when a send failed): ``exit: error`` and why; the views
name it, with commands that work pasted. A stall a resume covers says when it was sent and to which task. Real
processes throughout.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, run_cli, write_log
from tests.serving import start_server
from tests.test_follow import _wait_for, following

FAKE = ROOT / "tests" / "fakes" / "lanes_enqueue.py"


def ago(hours: float) -> str:
    return (datetime.now().astimezone() - timedelta(hours=hours)).isoformat()


def events(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def quiet_lane(tmp_path: Path) -> Path:
    return write_log(tmp_path / "lanes.jsonl", [
        {"type": "status_updated", "ts": ago(31), "product": "quiet", "state": "running"},
    ])


def lanes(log: Path, mode: str, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = shlex.join([sys.executable, str(FAKE), str(log.parent / "calls.jsonl"), mode])
    return run_cli("lanes", str(log), "--enqueue-cmd", cmd, *extra)


def status(log: Path) -> tuple[int, dict[str, Any]]:
    out = run_cli("status", str(log), "--json", "--all")
    return out.returncode, json.loads(out.stdout)


def items(view: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [i for g in view["groups"] if g["reason_code"] == code for i in g["items"]]


def lane_verdict(log: Path, product: str) -> dict[str, Any]:
    out = run_cli("explain", str(log), product, "--json")
    assert out.returncode == 0, out.stderr
    [verdict] = [v for v in json.loads(out.stdout)["verdicts"] if v["kind"] == "lane"]
    return verdict


def pasted(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """COMMAND as a person pastes it into bash, ``eventlog`` on PATH."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.parametrize(("mode", "extra", "said"), [
    ("fail", [], "quiet: status-quiet: --enqueue-cmd failed (exit 4)"),
])  # over --timeout, its outcome is unknown: tests/test_lanes_send_cut_short.py
def test_a_send_that_failed_is_recorded_and_named_until_a_pass_ends_ok(tmp_path: Path, mode: str, extra: list[str],
                                                                      said: str) -> None:
    log = quiet_lane(tmp_path)
    out = lanes(log, mode, *extra)
    assert out.returncode == 1 and said in out.stderr
    check = events(log)[-1]
    assert check["type"] == "lane_check" and check["exit"] == "error" and said in check["detail"]
    assert "resume_enqueued" not in [e["type"] for e in events(log)]

    code, view = status(log)
    assert code == 1
    [failed] = items(view, "lanes_error")
    assert failed["id"] == "lanes" and failed["since"] == check["ts"] and said in failed["reason"]
    [stall] = items(view, "status_quiet")
    assert f"no resume sent: the last lanes pass ({check['ts']}) ended in error" in stall["reason"]
    assert view["totals"]["lanes"]["last_pass"] == check["ts"]
    assert view["totals"]["lanes"]["last_pass_exit"] == "error"
    verdict = lane_verdict(log, "quiet")
    assert said in verdict["says"] and verdict["next"] == ["eventlog lanes --help"]
    for command in (failed["next"], stall["next"], *verdict["next"]):
        assert pasted(command, tmp_path).returncode == 0, command

    assert lanes(log, "ok").returncode == 0  # the next pass sends it and ends ok: nothing is named any more
    assert [e["exit"] for e in events(log) if e["type"] == "lane_check"][-1] == "sending"  # then its resume
    assert events(log)[-1]["type"] == "resume_enqueued"
    _code, view = status(log)
    assert items(view, "lanes_error") == []
    assert view["totals"]["lanes"]["last_pass_exit"] == "ok"


def test_follow_s_prometheus_file_says_the_last_lanes_pass_ended_in_error(tmp_path: Path) -> None:
    log = quiet_lane(tmp_path)
    assert lanes(log, "fail").returncode == 1
    line = f'recovery_lanes_last_pass_error{{log="{log}"}}'
    with following(log, tmp_path) as (_dump, prom):
        assert _wait_for(lambda: prom.exists() and f"{line} 1\n" in prom.read_text(), timeout=30), \
            prom.read_text() if prom.exists() else "no file"
        assert lanes(log, "ok").returncode == 0
        assert _wait_for(lambda: f"{line} 0\n" in prom.read_text(), timeout=30), prom.read_text()


def test_a_stall_a_resume_covers_says_when_and_to_which_task_and_what_next(tmp_path: Path) -> None:
    log = quiet_lane(tmp_path)
    assert lanes(log, "ok").returncode == 0
    resume = next(e for e in events(log) if e["type"] == "resume_enqueued")
    code, view = status(log)
    assert code == 1  # still stalled: it waits for that task
    [stall] = items(view, "status_quiet")
    assert stall["reason"].endswith(f"; a resume was enqueued for it at {resume['ts']} "
                                    "(task branch resume/quiet/status-quiet)")
    verdict = lane_verdict(log, "quiet")
    assert f"a resume was enqueued for it at {resume['ts']} (task branch resume/quiet/status-quiet)" in verdict["says"]
    assert "Next: look at that task" in verdict["says"]
    assert "a progress update ends the stall" in verdict["says"]
    assert "send another by hand with your enqueue command (quiet status-quiet as its last two arguments)" \
        in verdict["says"]
    assert verdict["facts"]["resume"] == {"line": resume["seq"], "ts": resume["ts"],
                                          "task_branch": "resume/quiet/status-quiet"}


def test_a_lanes_pass_over_a_log_with_no_lane_is_named_with_what_feeds_lanes(tmp_path: Path) -> None:
    log = write_log(tmp_path / "ledger.jsonl", [])
    out = lanes(log, "ok")
    assert out.returncode == 1 and "no lane in the log" in out.stderr and "eventlog observe lane" in out.stderr
    code, view = status(log)
    assert code == 1
    [failed] = items(view, "lanes_error")
    assert "no lane in the log" in failed["reason"] and failed["next"] == "eventlog observe lane --help"
    assert pasted(failed["next"], tmp_path).returncode == 0
    assert view["totals"]["lanes"]["products"] == 0  # the Lanes line is there, with its last pass
    text = run_cli("status", str(log)).stdout
    assert "Lanes: 0 products; stalled 0, moving 0, stopped 0, idle 0; last lanes pass " in text


def test_serve_names_the_lanes_pass_in_error_in_its_status_and_metrics(tmp_path: Path) -> None:
    log = quiet_lane(tmp_path)
    assert lanes(log, "fail").returncode == 1
    server = start_server(log, tmp_path)
    try:
        client = server.client("viewer")
        view = client.get("/v1/status").json()
        [failed] = items(view, "lanes_error")
        assert "quiet: status-quiet: --enqueue-cmd failed (exit 4)" in failed["reason"]
        assert f'recovery_lanes_last_pass_error{{log="{log}"}} 1' in client.get("/metrics").text.splitlines()
    finally:
        assert server.stop() == 0
