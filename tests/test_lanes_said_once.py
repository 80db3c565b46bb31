"""Each lanes problem is one item, saying the right thing; a ``--resend`` that matches nothing is said (session 32,
X5).

Reviews of "a send cut short" and "lanes not observed" found, on logs the runner wrote: ``lanes_error`` sent the
person to the explain of a lane that had moved since its send was cut short, and lost the hint of the send that
failed; a lane that stalled after the last pass read "no resume sent: the last lanes pass ... ended in error" for
another lane's problem; a send cut short was named in ``lanes_error`` and in its stall's item, a lane not observed
in ``lanes_error`` and in ``lane_unobserved``, so ``needs_person`` counted one problem twice; and ``eventlog lanes
--resend NAME`` naming no open send did what a pass without it does, in silence. The runner now states which of
its problems belong to no lane (``lane_check.general``). Real processes throughout: the runner writes the log.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import run_cli, write_log
from tests.test_lanes_observe_dir import calls
from tests.test_lanes_observe_dir import lanes as observing
from tests.test_lanes_pass import ago, events, items, lane_verdict, lanes, status
from tests.test_lanes_unobserved import at, two_lanes


def codes(view: dict[str, Any]) -> dict[str, list[str]]:
    return {g["reason_code"]: [i["id"] for i in g["items"]] for g in view["groups"]}


def killed_pass(product: str, kind: str, hours: float) -> dict[str, Any]:
    """The first lane_check of a pass killed while it sent ``product``'s resume, ``hours`` ago (as the runner writes
    it; nothing closed it)."""
    return {"type": "lane_check", "ts": ago(hours), "unpicked_s": 5400, "quiet_s": 28800, "period_s": 3600,
            "exit": "sending", "sending": {product: kind}, "timeout_s": 300, "kill_grace_s": 5}


def test_lanes_error_names_the_send_that_failed_and_no_lane_that_moved_since_its_send_was_cut_short(
        tmp_path: Path) -> None:
    log = write_log(tmp_path / "ledger.jsonl", [
        {"type": "status_updated", "ts": ago(3), "product": "A", "state": "running"},
        {"type": "job_finished", "ts": ago(2.8), "product": "A"},
        killed_pass("A", "job-unpicked", 1.2),
        {"type": "repo_commit", "ts": ago(1), "product": "A", "head": "abc"},  # A moves again
        {"type": "status_updated", "ts": ago(3), "product": "B", "state": "running"},
        {"type": "job_finished", "ts": ago(2), "product": "B"},
    ])
    out = lanes(log, "fail")  # B's send fails; A is not stalled, so nothing is asked of it
    assert out.returncode == 1 and "B: job-unpicked: --enqueue-cmd failed (exit 4)" in out.stderr
    assert events(log)[-1]["general"] == [
        "B: job-unpicked: --enqueue-cmd failed (exit 4); no resume_enqueued, the next run retries"]

    code, view = status(log)
    assert code == 1
    assert codes(view) == {"lanes_error": ["lanes"], "job_unpicked": ["B"]} and view["needs_person"] == 2
    [error] = items(view, "lanes_error")
    assert "B: job-unpicked: --enqueue-cmd failed (exit 4)" in error["reason"]
    assert "the stalls it did not resume stay uncovered, and its next pass tries them again" in error["reason"]
    assert "(A)" not in error["reason"] and "cut short" not in error["reason"]
    assert error["next"] == "eventlog lanes --help"
    [stall] = items(view, "job_unpicked")
    assert "no resume sent: the last lanes pass" in stall["reason"] and "without sending it" in stall["reason"]
    assert lane_verdict(log, "A")["code"] == "moving"


def test_a_lane_that_stalled_after_a_pass_in_error_for_another_lane_is_sent_by_the_next_pass(tmp_path: Path) -> None:
    log = write_log(tmp_path / "ledger.jsonl", [
        {"type": "status_updated", "ts": ago(10), "product": "lane-b", "state": "running"},  # quiet for 10 h
        {"type": "status_updated", "ts": ago(2), "product": "lane-a", "state": "running"},
        {"type": "job_finished", "ts": ago(1.6), "product": "lane-a"},  # unpicked 6 min ago: after the pass
    ])
    out = lanes(log, "fail", "--at", ago(0.5))  # the pass half an hour ago: lane-b's send failed
    assert out.returncode == 1 and "lane-a: moving" in out.stdout

    code, view = status(log)
    assert code == 1
    [unpicked] = items(view, "job_unpicked")
    assert unpicked["id"] == "lane-a"
    assert "no resume sent yet: the next lanes pass sends one" in unpicked["reason"]
    assert "ended in error" not in unpicked["reason"]
    verdict = lane_verdict(log, "lane-a")
    assert "ended in error" not in verdict["says"] and "--enqueue-cmd failed" not in verdict["says"]
    [quiet] = items(view, "status_quiet")  # the lane the pass did not send: its error is why
    assert quiet["id"] == "lane-b" and "ended in error without sending it" in quiet["reason"]
    assert "--enqueue-cmd failed (exit 4)" in lane_verdict(log, "lane-b")["says"]

    assert lanes(log, "ok").returncode == 0  # and the next pass does send it
    assert {product for product, _kind in calls(log)} == {"lane-a", "lane-b"}


def test_a_send_cut_short_and_a_lane_not_observed_are_each_one_item_counted_once(tmp_path: Path) -> None:
    lanes_dir, log = two_lanes(tmp_path)
    (lanes_dir / "beta.env").rename(tmp_path / "beta.env")  # beta is no longer observed
    later = at(9)  # both lanes' progress is quiet by then
    out = observing(log, "--observe", str(lanes_dir), "--at", later, "--timeout", "1s", "--kill-grace", "1s",
                    mode="sleep")  # alpha's send goes over its timeout: it may have gone out
    assert out.returncode == 1 and "did it arrive?" in out.stderr and "lane beta: " in out.stderr
    assert events(log)[-1]["general"] == []  # each of its problems is a lane's

    judged = run_cli("status", str(log), "--json", "--all", "--at", later)
    assert judged.returncode == 1
    view = json.loads(judged.stdout)
    assert codes(view) == {"lane_unobserved": ["beta"], "status_quiet": ["alpha", "beta"]}
    assert view["needs_person"] == 3 and view["totals"]["lanes"]["last_pass_exit"] == "error"
    alpha, beta = items(view, "status_quiet")
    assert "did it arrive?" in alpha["reason"] and alpha["next"] == f"eventlog explain {log} alpha"
    assert "could not observe it (lane_unobserved)" in beta["reason"]
    text = run_cli("status", str(log), "--at", later).stdout
    assert "Needs a person: 3 (2 reasons)" in text

    # what belongs to no lane (a bad line new since the last pass) is one lanes_error, without the lanes' own
    with log.open("a", encoding="utf-8") as f:
        f.write("not json\n")
    assert observing(log, "--observe", str(lanes_dir), "--at", later).returncode == 1
    view = json.loads(run_cli("status", str(log), "--json", "--all", "--at", later).stdout)
    [error] = items(view, "lanes_error")
    assert "bad line(s)" in error["reason"] and "new since the last pass" in error["reason"]
    assert "lane beta: " not in error["reason"] and "did it arrive?" not in error["reason"]
    assert error["next"] == "eventlog lanes --help"  # never this screen again
    assert codes(view)["lanes_error"] == ["lanes"] and codes(view)["lane_unobserved"] == ["beta"]


def test_an_older_runner_s_error_line_is_still_named_whole(tmp_path: Path) -> None:
    """A ``lane_check`` with no ``general`` (a runner from before it) does not say what belongs to a lane: all of
    its detail is the pass's own, as before, and its stalls read as not sent for it."""
    log = write_log(tmp_path / "ledger.jsonl", [
        {"type": "status_updated", "ts": ago(10), "product": "quiet", "state": "running"},
        {"type": "lane_check", "ts": ago(0.5), "period_s": 3600, "exit": "error", "detail": "something failed"},
    ])
    code, view = status(log)
    assert code == 1 and codes(view) == {"lanes_error": ["lanes"], "status_quiet": ["quiet"]}
    [error] = items(view, "lanes_error")
    assert "ended in error: something failed; " in error["reason"] and error["next"] == "eventlog lanes --help"
    [quiet] = items(view, "status_quiet")
    assert quiet["reason"].endswith(") ended in error")
    assert "something failed" in lane_verdict(log, "quiet")["says"]


def test_a_resend_that_names_no_open_send_is_refused_and_says_what_is_open(tmp_path: Path) -> None:
    log = write_log(tmp_path / "ledger.jsonl", [
        {"type": "status_updated", "ts": ago(10), "product": "quiet", "state": "running"},
        killed_pass("quiet", "status-quiet", 2),
    ])
    before = log.read_bytes()
    typo = lanes(log, "ok", "--resend", "qiet")
    assert typo.returncode == 2, typo.stderr
    assert "--resend qiet: " in typo.stderr and "the products with one are quiet" in typo.stderr
    assert log.read_bytes() == before and calls(log) == []  # nothing sent or written

    (tmp_path / "answered").mkdir()
    answered = write_log(tmp_path / "answered" / "ledger.jsonl", [
        {"type": "status_updated", "ts": ago(10), "product": "quiet", "state": "running"},
        killed_pass("quiet", "status-quiet", 2),
        {"type": "resume_enqueued", "ts": ago(1), "product": "quiet", "kind": "status-quiet"},
    ])
    before = answered.read_bytes()
    again = lanes(answered, "ok", "--resend", "quiet")
    assert again.returncode == 2
    assert "--resend quiet: " in again.stderr and "no product has one" in again.stderr
    assert answered.read_bytes() == before and calls(answered) == []

    sent = lanes(log, "ok", "--resend", "quiet")  # the one that is open: sent
    assert sent.returncode == 0, sent.stderr
    assert events(log)[-1]["type"] == "resume_enqueued" and len(calls(log)) == 1


def test_a_send_whose_bound_no_date_holds_is_said_to_have_none(tmp_path: Path) -> None:
    """D2: a pass sending with a `timeout_s` past what a date holds is under way until a line closes it; status said
    "cut short if not recorded by 9999-12-31T23:59:59.999999+00:00", a year no log can write (spec section 1)."""
    sending = {**killed_pass("A", "job-unpicked", 0.1), "timeout_s": 1e15}
    log = write_log(tmp_path / "ledger.jsonl", [
        {"type": "status_updated", "ts": ago(3), "product": "A", "state": "running"},
        {"type": "job_finished", "ts": ago(2.8), "product": "A"},
        sending,
    ])
    out = run_cli("status", str(log), "--all")
    assert "is sending its resume now (no bound: under way until a line closes it)" in out.stdout, out.stdout
    assert "9999" not in out.stdout
