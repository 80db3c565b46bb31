"""A resume whose send was cut short is never sent again on its own, and every view asks whether it arrived.

A review (session 31): an enqueue command that records the send, then takes 3 s; ``eventlog lanes`` killed with
``kill -9`` 1.2 s in; the next pass sent the same resume again. In between, ``status`` said "no resume sent yet: the
next lanes pass sends one" and "last lanes pass ... (ok)": the log held only the ``lane_check`` written before the
send, ``exit: ok``. Now that first ``lane_check`` names the resumes it is about to send (``sending``, ``exit:
sending``); one no ``resume_enqueued`` closes has an unknown outcome (spec section 3's rule for a stale
``resume_requested``; seed 001: "then a resume task sent"): no pass sends it again, and ``lanes``, ``status``,
``explain``, ``serve`` and ``follow --prom`` name it with the two commands to type. Real processes throughout.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

from tests.conftest import ROOT, run_cli
from tests.serving import start_server
from tests.test_follow import _wait_for, following
from tests.test_lanes_pass import FAKE, events, items, lane_verdict, lanes, pasted, quiet_lane, status


def calls(log: Path) -> list[dict[str, object]]:
    path = log.parent / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@contextmanager
def killed_while_sending(log: Path) -> Iterator[None]:
    """``eventlog lanes LOG`` killed with SIGKILL once its enqueue command has recorded the send (and sleeps on);
    the command is stopped after the block."""
    cmd = shlex.join([sys.executable, str(FAKE), str(log.parent / "calls.jsonl"), "sleep"])
    proc = subprocess.Popen([sys.executable, "-m", "eventlog", "lanes", str(log), "--enqueue-cmd", cmd], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert _wait_for(lambda: bool(calls(log)), timeout=30)
        proc.kill()
        proc.wait(timeout=30)
        yield
    finally:
        proc.kill()
        proc.wait(timeout=30)
        for call in calls(log):
            try:
                os.kill(int(str(call["pid"])), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_pass_killed_while_sending_never_sends_again_and_every_view_asks_whether_it_arrived(tmp_path: Path) -> None:
    log = quiet_lane(tmp_path)
    with killed_while_sending(log):
        check = events(log)[-1]
        assert check["type"] == "lane_check" and check["exit"] == "sending" and check["sending"] == {
            "quiet": "status-quiet"}
        assert (check["timeout_s"], check["kill_grace_s"]) == (300, 5)  # what bounds its send
        # Judged now, the pass may still be sending (a send takes seconds): under way, no error and no page.
        code, view = status(log)
        assert view["totals"]["lanes"]["last_pass_exit"] == "sending" and items(view, "lanes_error") == []
        [stall] = items(view, "status_quiet")
        assert f"a lanes pass ({check['ts']}) is sending its resume now" in stall["reason"]
        line = f'recovery_lanes_last_pass_error{{log="{log}"}}'
        with following(log, tmp_path) as (_dump, prom):
            assert _wait_for(lambda: prom.exists() and f"{line} 0\n" in prom.read_text(), timeout=30)

        # Once its time is up (--timeout and the kill grace, and a margin), it was cut short: every view asks.
        later = (datetime.fromisoformat(check["ts"]) + timedelta(seconds=300 + 5 + 61)).isoformat()
        out = run_cli("status", str(log), "--json", "--all", "--at", later)
        assert out.returncode == 1
        view = json.loads(out.stdout)
        assert view["totals"]["lanes"]["last_pass_exit"] == "error"
        assert items(view, "lanes_error") == [] and view["needs_person"] == 1  # one problem: the stall's item asks
        [stall] = items(view, "status_quiet")
        assert f"a lanes pass ({check['ts']}) stopped while sending its resume" in stall["reason"]
        assert "did it arrive?" in stall["reason"] and "the next lanes pass sends one" not in stall["reason"]
        (tmp_path / "later").mkdir()
        stalled = f'recovery_lane_stalled{{log="{log}",product="quiet",kind="status-quiet"}} 1\n'
        with following(log, tmp_path / "later", "--at", later) as (_dump, prom):  # the stall's gauge, as its item
            assert _wait_for(lambda: prom.exists() and stalled in prom.read_text(), timeout=30)
            assert f"{line} 0\n" in prom.read_text()  # status has no lanes_error: nothing else pages

        again = lanes(log, "ok")  # the next pass (it holds the lock: the killed one is over): asks, sends nothing
        assert again.returncode == 1
        assert len(calls(log)) == 1
        assert "resume_enqueued" not in [e["type"] for e in events(log)]
        assert "quiet: status-quiet: " in again.stderr and "did it arrive?" in again.stderr
        assert "quiet: status-quiet, did its resume arrive? unknown" in again.stdout
        assert "eventlog append" in again.stderr and "--resend quiet" in again.stderr
        assert events(log)[-1]["unsure"] == {"quiet": "status-quiet"}  # carried: an answer closes it
        code, view = status(log)  # judged now: that pass is over, so the send is cut short at once
        assert code == 1 and items(view, "lanes_error") == [] and view["needs_person"] == 1
        assert view["totals"]["lanes"]["last_pass_exit"] == "error"
        assert [i["next"] for i in items(view, "status_quiet")] == [f"eventlog explain {log} quiet"]

        verdict = lane_verdict(log, "quiet")
        assert "find out whether that resume arrived" in verdict["says"]
        arrived, resend = verdict["next"]
        assert arrived.startswith("printf ") and " | eventlog append " in arrived
        assert "--enqueue-cmd '<your enqueue command>'" in resend and resend.endswith("--resend quiet")
        server = start_server(log, tmp_path)
        try:
            [stall] = items(server.client("viewer").get("/v1/status").json(), "status_quiet")
            assert "did it arrive?" in stall["reason"]
        finally:
            assert server.stop() == 0

        # It arrived: the printed line, pasted, clears every view at once (not at the next hourly pass).
        assert pasted(arrived, tmp_path).returncode == 0
        code, view = status(log)
        assert items(view, "lanes_error") == [] and view["totals"]["lanes"]["last_pass_exit"] == "ok"
        assert "a resume was enqueued for it at" in items(view, "status_quiet")[0]["reason"]
        assert "did it arrive?" not in lane_verdict(log, "quiet")["says"]
        assert lanes(log, "ok").returncode == 0
        assert len(calls(log)) == 1


def test_resend_sends_a_resume_cut_short_once_a_person_knows_it_did_not_arrive(tmp_path: Path) -> None:
    log = quiet_lane(tmp_path)
    with killed_while_sending(log):
        assert lanes(log, "ok").returncode == 1 and len(calls(log)) == 1
        out = lanes(log, "ok", "--resend", "quiet")
        assert out.returncode == 0, out.stderr
        assert [c["mode"] for c in calls(log)] == ["sleep", "ok"]
        assert events(log)[-1]["type"] == "resume_enqueued"
        assert lanes(log, "ok").returncode == 0 and len(calls(log)) == 2  # covered: never a third
        _code, view = status(log)
        assert items(view, "lanes_error") == []


def test_a_send_over_its_timeout_or_stopped_by_sigterm_may_have_gone_out_and_is_not_repeated(tmp_path: Path) -> None:
    log = quiet_lane(tmp_path)
    out = lanes(log, "sleep", "--timeout", "1s", "--kill-grace", "1s")
    assert out.returncode == 1 and "did it arrive?" in out.stderr
    closing = events(log)[-1]  # the pass is over: its send's outcome is unknown (unsure), not under way
    assert closing["exit"] == "sending" and closing["unsure"] == {"quiet": "status-quiet"}
    assert "sending" not in closing and "unsent" not in closing
    assert status(log)[1]["totals"]["lanes"]["last_pass_exit"] == "error"
    assert lanes(log, "ok").returncode == 1 and len(calls(log)) == 1

    (tmp_path / "b").mkdir()
    log2 = quiet_lane(tmp_path / "b")
    cmd = shlex.join([sys.executable, str(FAKE), str(log2.parent / "calls.jsonl"), "sleep"])
    proc = subprocess.Popen([sys.executable, "-m", "eventlog", "lanes", str(log2), "--enqueue-cmd", cmd], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert _wait_for(lambda: bool(calls(log2)), timeout=30)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "did it arrive?" in err
    assert lanes(log2, "ok").returncode == 1 and len(calls(log2)) == 1


def test_a_send_killed_by_a_signal_not_the_runners_may_have_gone_out_and_is_not_repeated(tmp_path: Path) -> None:
    """Review R9: an enqueue command killed by SIGKILL from outside (the OOM killer, a person) said nothing of its
    send, yet the pass called it failed (``unsent``, "the next run retries") and the next pass sent the resume
    again. Only an exit status says the command did not send; a signal's death is an unknown outcome, as it is to
    failback (``resume_failed``, effect unknown)."""
    log = quiet_lane(tmp_path)
    out = lanes(log, "killed")
    assert out.returncode == 1 and "did it arrive?" in out.stderr and "killed by SIGKILL" in out.stderr
    closing = events(log)[-1]
    assert closing["exit"] == "sending" and closing["unsure"] == {"quiet": "status-quiet"}
    assert "unsent" not in closing
    assert lanes(log, "ok").returncode == 1 and len(calls(log)) == 1  # never sent again on its own
    out = lanes(log, "ok", "--resend", "quiet")  # the command the pass printed, once a person knows
    assert out.returncode == 0, out.stderr
    assert [c["mode"] for c in calls(log)] == ["killed", "ok"]


def test_a_send_that_failed_is_unsent_and_the_next_pass_sends_it(tmp_path: Path) -> None:
    log = quiet_lane(tmp_path)
    assert lanes(log, "fail").returncode == 1
    closing = events(log)[-1]
    assert closing["unsent"] == {"quiet": "status-quiet"} and "sending" not in closing
    assert lanes(log, "ok").returncode == 0 and len(calls(log)) == 2
    assert run_cli("stalls", str(log)).returncode == 1  # still stalled, now covered


def test_a_send_cut_short_for_an_id_no_command_can_name_is_said_in_words(tmp_path: Path) -> None:
    """A product with a NUL, in a log written before the appender refused such ids, whose send was cut short: the
    runner said it with a traceback (exit 1, no lane_check); now it says why no command can name it, and how to
    list its lines, as the views do (X1 item 3)."""
    from tests.conftest import write_log
    from tests.test_lanes_pass import ago

    product = "a\u0000b"
    log = write_log(tmp_path / "lanes.jsonl", [
        {"type": "status_updated", "ts": ago(31), "product": product, "state": "running"},
        {"type": "lane_check", "ts": ago(2), "exit": "sending", "sending": {product: "status-quiet"}},
    ])
    out = run_cli("lanes", str(log), "--enqueue-cmd", "true")
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert "did it arrive?" in out.stderr and "no command can name this id" in out.stderr
    assert "grep -n -F" in out.stderr
    check = events(log)[-1]
    assert check["type"] == "lane_check" and check["unsure"] == {product: "status-quiet"}
    code, view = status(log)
    assert items(view, "lanes_error") == []  # the stall's own item asks
    [stall] = items(view, "status_quiet")
    assert code == 1 and "did it arrive?" in stall["reason"]
    assert stall["next"].startswith("no command can name this id")
