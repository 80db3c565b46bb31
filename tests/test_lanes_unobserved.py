"""A lane the lanes pass does not observe is named, in the pass and in every view (session 31, L1).

A review retired a lane as docs/OPERATIONS.md said ("move a retired lane's file out"): the next pass, 8 h on,
sent it a resume and exited 0, and no view said it was no longer watched. A lane whose directory moved read
``not stalled: moving`` in its own ``explain``; the failures of other lanes were lost in a ``lanes_error``
detail cut at 500 characters, with ``eventlog lanes --help`` as where to look. And on the seed's own sample
``status`` said both "no lanes pass since ..." and "no lanes pass in the log". Real processes throughout.
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

from tests.conftest import ROOT, run_cli, write_log
from tests.serving import start_server
from tests.test_lanes_observe_dir import a_lane, calls, lanes
from tests.test_lanes_pass import events, items, lane_verdict, status


def at(hours: float) -> str:
    """``hours`` from now, as ``--at`` takes it."""
    return (datetime.now().astimezone() + timedelta(hours=hours)).isoformat()


def two_lanes(tmp_path: Path) -> tuple[Path, Path]:
    """Two lanes of one directory, both observed once by a pass (moving); the directory and the log."""
    lanes_dir = a_lane(tmp_path, "alpha", "alpha", finished_h=0.1)
    a_lane(tmp_path, "beta", "beta", finished_h=0.1)
    for name in ("alpha", "beta"):
        (tmp_path / name / "worker.log").write_text("")  # no finished job: only the progress can go quiet
    log = tmp_path / "ledger.jsonl"
    first = lanes(log, "--observe", str(lanes_dir))
    assert first.returncode == 0, first.stderr
    assert "alpha: moving" in first.stdout and "beta: moving" in first.stdout
    return lanes_dir, log


def test_a_lane_whose_file_was_moved_out_is_named_and_sent_no_resume(tmp_path: Path) -> None:
    lanes_dir, log = two_lanes(tmp_path)
    retired = tmp_path / "retired"
    retired.mkdir()
    (lanes_dir / "beta.env").rename(retired / "beta.env")  # "move a retired lane's file out", as the doc said

    later = at(9)  # both lanes' progress is quiet by then
    out = lanes(log, "--observe", str(lanes_dir), "--at", later, "--json")
    assert out.returncode == 1
    assert calls(log) == [["alpha", "status-quiet"]]  # beta is judged from stale data: no resume for it
    said = f"lane beta: no NAME.env of {lanes_dir} names it (LANE_PRODUCT=beta): not observed"
    assert said in out.stderr and "eventlog append" in out.stderr  # both ways out: the file back, or its stop
    report = json.loads(out.stdout)
    assert report["not_observed"] == ["beta"] and said.removeprefix("lane beta: ") in report["unobserved"]["beta"]
    # its one lane_check, before the send, names beta and alpha's send (alpha's resume_enqueued closes that)
    check = [e for e in events(log) if e["type"] == "lane_check"][-1]
    assert check["exit"] == "sending" and check["sending"] == {"alpha": "status-quiet"}
    assert set(check["unobserved"]) == {"beta"}

    text = lanes(log, "--observe", str(lanes_dir), "--at", later)  # the report for people says it too
    assert "beta: status-quiet, not enqueued (NOT observed: no NAME.env" in text.stdout

    code, view = status(log)
    assert code == 1
    assert view["totals"]["lanes"]["last_pass_exit"] == "error"  # its sends closed, its problems stand
    assert items(view, "lanes_error") == []  # its one problem is beta's own item, counted once
    [item] = items(view, "lane_unobserved")
    assert item["id"] == "beta" and "could not observe it: no NAME.env" in item["reason"]
    assert item["next"] == f"eventlog explain {log} beta"
    verdict = lane_verdict(log, "beta")
    assert "could not observe it: no NAME.env" in verdict["says"]
    assert "lane_unobserved" in [i["reason_code"] for i in verdict["needs_person"]]
    [stop] = [cmd for cmd in verdict["next"] if "eventlog append" in cmd]

    # the command explain gives records the stop: pasted, the lane is retired and the next pass is clean
    pasted = subprocess.run(["bash", "-c", stop], capture_output=True, text=True, timeout=60,
                            env={"PATH": f"{ROOT / '.venv' / 'bin'}:/usr/bin:/bin"})
    assert pasted.returncode == 0, pasted.stderr
    assert items(status(log)[1], "lane_unobserved") == []  # a lane stopped on purpose needs no file
    clean = lanes(log, "--observe", str(lanes_dir), "--at", at(9.1))
    assert clean.returncode == 0, clean.stderr
    assert "beta: stopped-on-purpose" in clean.stdout


def test_retiring_as_operations_says_stop_then_move_is_clean(tmp_path: Path) -> None:
    lanes_dir, log = two_lanes(tmp_path)
    (tmp_path / "beta" / "STOP").write_text("")  # stop first: one pass observes it
    assert lanes(log, "--observe", str(lanes_dir)).returncode == 0
    (lanes_dir / "beta.env").unlink()  # then move its file out
    out = lanes(log, "--observe", str(lanes_dir), "--at", at(9))
    assert out.returncode == 0, out.stderr
    assert calls(log) == [["alpha", "status-quiet"]]
    assert "beta: stopped-on-purpose" in out.stdout and "NOT observed" not in out.stdout
    assert "move its `NAME.env` out" in (ROOT / "docs" / "OPERATIONS.md").read_text()


def test_a_lane_the_pass_could_not_observe_is_not_all_clear_in_its_own_view(tmp_path: Path) -> None:
    lanes_dir, log = two_lanes(tmp_path)
    (tmp_path / "beta").rename(tmp_path / "beta.moved")  # its directory moved
    out = lanes(log, "--observe", str(lanes_dir))
    assert out.returncode == 1
    said = f"lane beta ({lanes_dir / 'beta.env'}): cannot read the progress file"
    assert said in out.stderr

    verdict = lane_verdict(log, "beta")
    assert verdict["code"] == "moving"  # the seed's verdict, as of what was last read
    assert "but the last lanes pass" in verdict["says"] and "could not observe it: lane beta" in verdict["says"]
    assert said in verdict["says"]
    assert [i["reason_code"] for i in verdict["needs_person"]] == ["lane_unobserved"]
    assert any("eventlog append" in cmd for cmd in verdict["next"])
    text = run_cli("explain", str(log), "beta")
    assert "not stalled: moving" in text.stdout and "but the last lanes pass" in text.stdout

    server = start_server(log, tmp_path)  # serve's status is the same triage
    try:
        [item] = items(server.client("viewer").get("/v1/status").json(), "lane_unobserved")
        assert item["id"] == "beta" and said in item["reason"]
    finally:
        assert server.stop() == 0


def test_status_names_every_lane_and_file_it_could_not_observe_and_where_the_rest_is(tmp_path: Path) -> None:
    lanes_dir = a_lane(tmp_path, "alpha", "alpha")
    for name in ("c", "d", "e"):  # lanes whose files are gone: long problems, a detail cut short
        (lanes_dir / f"{name}.env").write_text(f"LANE_PRODUCT={name}\nLANE_PROGRESS={tmp_path / name / 'p.json'}\n"
                                               f"LANE_REPO={tmp_path / name / 'repo'}\n")
    (lanes_dir / "bom.env").write_bytes(b"\xef\xbb\xbfLANE_PRODUCT=bom\n")
    (lanes_dir / "dup.env").write_text(f"LANE_PRODUCT=alpha\nLANE_PROGRESS={tmp_path / 'x'}\n")
    log = tmp_path / "ledger.jsonl"
    out = lanes(log, "--observe", str(lanes_dir))
    assert out.returncode == 1
    check = [e for e in events(log) if e["type"] == "lane_check"][-1]
    assert "[cut: " in check["detail"]  # the detail holds only its first 500 characters

    code, view = status(log)
    assert code == 1
    unobserved = {i["id"]: i for i in items(view, "lane_unobserved")}
    assert set(unobserved) == {"c", "d", "e", str(lanes_dir / "bom.env"), str(lanes_dir / "dup.env")}
    assert f"{lanes_dir / 'bom.env'}:1: " in unobserved[str(lanes_dir / "bom.env")]["reason"]
    assert "is also" in unobserved[str(lanes_dir / "dup.env")]["reason"]
    # each problem is its lane's (or file's) own item, whole (the pass's lane_check states each in unobserved, and
    # none that belongs to no lane: general), so no lanes_error repeats them from the detail that was cut
    assert check["general"] == [] and items(view, "lanes_error") == []
    listed = run_cli("status", str(log), "--domain", "lanes", "--all")
    for ident in unobserved:
        assert f"  {ident} (" in listed.stdout


def test_one_judgement_of_is_there_a_lanes_pass(tmp_path: Path) -> None:
    """The seed's sample: its lane_check states no exit and no period; the stall's words agree with lanes_late."""
    log = ROOT / "fixtures" / "lanes_seed_sample.jsonl"
    code, view = status(log)
    assert code == 1
    [late] = items(view, "lanes_late")
    assert late["reason"].startswith("no lanes pass since 2026-08-08T10:40:01.288710+09:00")
    [quiet] = items(view, "status_quiet")
    assert "no lanes pass in the log" not in quiet["reason"]
    assert "no resume sent: no lanes pass since 2026-08-08T10:40:01.288710+09:00" in quiet["reason"]
    at_log = json.loads(run_cli("status", str(log), "--json", "--at", "log").stdout)
    [quiet] = items(at_log, "status_quiet")
    assert "no lanes pass in the log" not in quiet["reason"]
    assert "the last ran at 2026-08-08T10:40:01.288710+09:00" in quiet["reason"]
    empty = write_log(tmp_path / "none.jsonl", [json.loads(log.read_text().splitlines()[0])])
    [quiet] = items(status(empty)[1], "status_quiet")
    assert "no resume sent: no lanes pass in the log" in quiet["reason"]


def test_an_unobserved_of_another_writer_is_kept_and_ignored(tmp_path: Path) -> None:
    """A project field holding another value than the project writes is no bad line, and no view shows it."""
    first = {"type": "status_updated", "ts": at(-1), "product": "beta", "state": "running"}
    for value, shown in (({"beta": "its directory moved"}, ["beta"]), (["beta"], []), ({"beta": 5}, [])):
        log = write_log(tmp_path / "ledger.jsonl", [first, {"type": "lane_check", "ts": at(-0.5), "exit": "error",
                                                            "detail": "d", "period_s": 3600, "unobserved": value}])
        code, view = status(log)
        assert code == 1 and items(view, "bad_line") == []
        assert [i["id"] for i in items(view, "lane_unobserved")] == shown


def test_a_lane_not_observed_and_a_send_cut_short_are_both_journalled_and_both_named(tmp_path: Path) -> None:
    """Both branches' project fields in one pass's lane_checks, and a lane's explain naming both problems."""
    lanes_dir, log = two_lanes(tmp_path)
    (lanes_dir / "beta.env").rename(tmp_path / "beta.env")  # beta is no longer observed
    later = at(9)  # alpha's progress is quiet by then

    failed = lanes(log, "--observe", str(lanes_dir), "--at", later, mode="fail")
    assert failed.returncode == 1
    first, closing = [e for e in events(log) if e["type"] == "lane_check"][-2:]
    assert first["exit"] == "sending" and first["sending"] == {"alpha": "status-quiet"}  # before the send
    assert closing["exit"] == "error" and closing["unsent"] == {"alpha": "status-quiet"} and "sending" not in closing
    assert set(first["unobserved"]) == set(closing["unobserved"]) == {"beta"}

    timed_out = lanes(log, "--observe", str(lanes_dir), "--at", later, "--timeout", "1s", "--kill-grace", "1s",
                      mode="sleep")  # the next pass sends alpha's again: over its timeout, it may have gone out
    assert timed_out.returncode == 1 and "did it arrive?" in timed_out.stderr
    closing = events(log)[-1]
    assert closing["unsure"] == {"alpha": "status-quiet"} and set(closing["unobserved"]) == {"beta"}

    (tmp_path / "alpha").rename(tmp_path / "alpha.moved")  # now alpha cannot be observed either
    asked = lanes(log, "--observe", str(lanes_dir), "--at", later)
    assert asked.returncode == 1
    assert [c[0] for c in calls(log)] == ["alpha", "alpha"]  # never sent a third time on its own
    assert "alpha: status-quiet, did its resume arrive? unknown" in asked.stdout
    assert "(NOT observed in full: its problems are on stderr)" in asked.stdout

    out = run_cli("explain", str(log), "alpha", "--json", "--at", later)
    assert out.returncode == 0, out.stderr
    [verdict] = [v for v in json.loads(out.stdout)["verdicts"] if v["kind"] == "lane"]
    assert "find out whether that resume arrived" in verdict["says"]  # the send cut short
    assert "but the last lanes pass" in verdict["says"] and "could not observe it: lane alpha" in verdict["says"]
    assert {i["reason_code"] for i in verdict["needs_person"]} >= {"lane_unobserved", "status_quiet"}
    arrived, resend, stop = verdict["next"]
    assert '"resume_enqueued"' in arrived and resend.endswith("--resend alpha") and '"lane_stopped"' in stop

    view = json.loads(run_cli("status", str(log), "--json", "--all", "--at", later).stdout)
    assert items(view, "lanes_error") == []  # each problem is its lane's own item: alpha's stall asks, once
    assert {i["id"] for i in items(view, "lane_unobserved")} == {"alpha", "beta"}
    [quiet] = [i for i in items(view, "status_quiet") if i["id"] == "alpha"]
    assert "did it arrive?" in quiet["reason"] and quiet["next"] == f"eventlog explain {log} alpha"


def test_a_pass_without_observe_keeps_what_the_last_observing_pass_could_not_observe(tmp_path: Path) -> None:
    """The printed ``--resend`` command has no ``--observe``: that pass observes nothing, so it says nothing of what
    could not be observed, and ``lane_unobserved`` stays until a pass that observed says otherwise (X1 item 4)."""
    lanes_dir, log = two_lanes(tmp_path)
    (lanes_dir / "beta.env").rename(tmp_path / "beta.env")
    assert lanes(log, "--observe", str(lanes_dir)).returncode == 1
    assert {i["id"] for i in items(status(log)[1], "lane_unobserved")} == {"beta"}

    assert lanes(log).returncode == 0  # no --observe, as a pasted --resend command runs
    assert "unobserved" not in events(log)[-1]
    assert {i["id"] for i in items(status(log)[1], "lane_unobserved")} == {"beta"}

    (tmp_path / "beta.env").rename(lanes_dir / "beta.env")  # put back: a pass that observed it clears the item
    assert lanes(log, "--observe", str(lanes_dir)).returncode == 0
    assert events(log)[-1]["unobserved"] == {}
    assert items(status(log)[1], "lane_unobserved") == []


def test_the_last_lane_retired_as_the_doc_says_leaves_a_clean_pass_not_an_empty_directory(tmp_path: Path) -> None:
    """A review (session 33, R10) retired the only lane as docs/OPERATIONS.md says, "stop it first, then move its
    file out": the next hourly pass failed on the emptied directory ("holds no *.env file"), ``status`` named the
    directory as ``lane_unobserved`` with ``eventlog lanes --help``, and once the timer was disabled, as the doc
    says a retired lane allows, nothing ever cleared it (RecoveryLaneUnobserved for ever). A lane stopped on purpose
    needs no file, the last one too: with every lane of the log stopped, an empty directory is what retired looks
    like, and the pass says so and succeeds. While a lane runs, it stays a problem (the end of this test, and
    tests/test_lanes_observe_dir.py)."""
    lanes_dir = a_lane(tmp_path, "solo", "solo", finished_h=0.1)
    (tmp_path / "solo" / "worker.log").write_text("")
    log = tmp_path / "ledger.jsonl"
    assert lanes(log, "--observe", str(lanes_dir)).returncode == 0
    (tmp_path / "solo" / "STOP").write_text("")  # stop it first ...
    stopped = lanes(log, "--observe", str(lanes_dir))
    assert stopped.returncode == 0 and "solo: stopped-on-purpose" in stopped.stdout, stopped.stdout
    retired = tmp_path / "retired"
    retired.mkdir()
    (lanes_dir / "solo.env").rename(retired / "solo.env")  # ... then move its file out

    out = lanes(log, "--observe", str(lanes_dir))
    assert out.returncode == 0, out.stderr
    assert "every lane the log knows is stopped on purpose" in out.stderr
    check = [e for e in events(log) if e["type"] == "lane_check"][-1]
    assert check["exit"] == "ok" and check["unobserved"] == {}
    code, view = status(log)
    assert code == 0 and items(view, "lane_unobserved") == [] and items(view, "lanes_error") == []
    assert calls(log) == []

    # a pass that already failed on it (an earlier version) is cleared by the next one
    write_log(tmp_path / "other.jsonl", [e for e in events(log) if e["type"] != "lane_check"]
              + [{**check, "exit": "error", "detail": f"the lanes directory {lanes_dir} holds no *.env file",
                  "unobserved": {str(lanes_dir): "holds no *.env file"}}])
    assert items(status(tmp_path / "other.jsonl")[1], "lane_unobserved") != []
    assert lanes(tmp_path / "other.jsonl", "--observe", str(lanes_dir)).returncode == 0
    assert items(status(tmp_path / "other.jsonl")[1], "lane_unobserved") == []

    # a lane started again (its stop file gone) while its file is out: the empty directory is a problem again
    (tmp_path / "solo" / "STOP").unlink()
    (lanes_dir / "solo.env").write_text((retired / "solo.env").read_text())
    assert lanes(log, "--observe", str(lanes_dir)).returncode == 0
    (lanes_dir / "solo.env").unlink()
    again = lanes(log, "--observe", str(lanes_dir))
    assert again.returncode == 1 and "holds no *.env file" in again.stderr


def test_a_lanes_directory_it_could_not_read_is_named_with_a_command_that_shows_it(tmp_path: Path) -> None:
    """Review R10: a missing (or unreadable) lanes directory, or one with no NAME.env, gave ``eventlog lanes
    --help`` as its next command; it is a listing of that directory, quoted, alike in status (text and --json),
    explain of a lane it left unobserved, and serve's status."""
    lanes_dir, log = two_lanes(tmp_path)
    moved = tmp_path / "lanes  moved"  # two spaces: quoted, as every path in a command
    lanes_dir.rename(moved)
    lanes_dir.mkdir()  # the directory is there, but empty: no NAME.env
    assert lanes(log, "--observe", str(moved.parent / "gone dir")).returncode == 1
    listing = f"ls -ld '{moved.parent / 'gone dir'}'"
    code, view = status(log)
    found = {i["id"]: i for i in items(view, "lane_unobserved")}
    assert code == 1 and found[str(moved.parent / "gone dir")]["next"] == listing
    assert f"\n      {listing}\n" in run_cli("status", str(log), "--all").stdout
    assert listing in lane_verdict(log, "alpha")["next"]
    assert f"next: {listing}\n" in run_cli("explain", str(log), "alpha").stdout
    server = start_server(log, tmp_path)
    try:
        served = items(server.client("viewer").get("/v1/status").json(), "lane_unobserved")
        assert [i["next"] for i in served if i["id"] == str(moved.parent / "gone dir")] == [listing]
    finally:
        assert server.stop() == 0
    shown = subprocess.run(["bash", "-c", listing], capture_output=True, text=True, timeout=60)
    assert "No such file or directory" in shown.stderr  # as pasted, it shows the problem

    assert lanes(log, "--observe", str(lanes_dir)).returncode == 1
    [item] = [i for i in items(status(log)[1], "lane_unobserved") if i["id"] == str(lanes_dir)]
    assert "holds no *.env file" in item["reason"] and item["next"] == f"ls -la {lanes_dir}"
