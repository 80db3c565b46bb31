"""Catch-up is fed, and says when nothing feeds it (seed 002).

The quota guard writes its markers to the jobs' stderr files, never to the log: a catch-up pass imports the jobs,
the circuit and the markers first (``--import-launchd``, ``--import-circuit``, ``--import-quota-log``), and when a
guarded job's slot of today passed 2 h ago with no marker of today at all, every pass and every view says so
(``unfed``) instead of "no candidates" and "Nothing needs a person". Real processes throughout.
"""

from __future__ import annotations

import json
import os
import plistlib
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, run_cli, write_log
from tests.serving import start_server
from tests.test_prom import value

AT = "2026-08-21T11:30:00+09:00"  # a Friday; the 9:00 slot passed 2 h 30 min ago
TOKYO = {"TZ": "Asia/Tokyo"}


def said(day: str = "2026-08-21") -> str:
    """What a pass says of the job, its slot of ``day`` passed (the day of the zone it judged in)."""
    return f"com.lily.brief: nothing feeds its markers: its slot 09:00 of today ({day} in Asia/Tokyo) passed"
RUN = ("--kick-cmd", "/bin/true", "--probe-cmd", "echo PING_OK")


def registered(label: str = "com.lily.brief", **extra: Any) -> dict[str, Any]:
    return {"type": "job_registered", "ts": "2026-08-21T07:00:00+09:00", "label": label, "guarded": True,
            "calendar": [{"Hour": 9, "Minute": 0}], "interval_s": None, **extra}


def marker(kind: str, ts: str, label: str = "com.lily.brief") -> dict[str, Any]:
    if kind == "job_ran":
        return {"type": "job_ran", "ts": ts, "label": label, "exit": 3}
    return {"type": "job_skipped", "ts": ts, "label": label, "reason": "quota", "remaining_s": 60}


def retire(log: Path, label: str = "com.lily.brief", calendar: str = '[{"Hour": 9, "Minute": 0}]') -> str:
    """The command that retires a job (its registration with guarded false, its calendar kept), as printed."""
    return (f"printf '%s\\n' '{{\"type\": \"job_registered\", \"label\": \"{label}\", \"guarded\": false, "
            f"\"calendar\": {calendar}, \"interval_s\": null}}' | eventlog append {log}")


def catchup(log: Path, *extra: str, at: str = AT) -> Any:
    return run_cli("catchup", str(log), *extra, "--at", at, env=TOKYO)


def status(log: Path, at: str = AT) -> tuple[int, dict[str, Any]]:
    out = run_cli("status", str(log), "--at", at, "--json", "--all", env=TOKYO)
    return out.returncode, json.loads(out.stdout)


def items(triage: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(i["reason_code"], i["id"]): i for g in triage["groups"] for i in g["items"]}


# --- a guarded job with no marker of today ---------------------------------------------------------------


def test_a_guarded_job_with_no_marker_of_today_is_named_by_every_pass_and_view(tmp_path: Path) -> None:
    """The review's case: one registered guarded job, no marker at all. The pass printed "no candidates: no probe,
    nothing kicked" with exit 0 and status said "Nothing needs a person"."""
    log = write_log(tmp_path / "e.jsonl", [registered()])
    before = log.read_text()
    for extra in (RUN, ("--dry-run",)):
        out = catchup(log, *extra, "--json")
        assert out.returncode == 1, out.stderr
        assert said() + " 2 h 30 min ago" in out.stderr and "is `eventlog import quota-log` running" in out.stderr
        assert f"eventlog explain {log} com.lily.brief says how to import its markers, or to retire it" in out.stderr
        assert json.loads(out.stdout)["unfed"] == ["com.lily.brief"]
    assert log.read_text() == before  # nothing probed, kicked or written

    code, triage = status(log)
    assert code == 1
    item = items(triage)["unfed", "com.lily.brief"]
    assert item["domain"] == "catchup" and not item["needs_decision"]
    assert item["next"] == f"eventlog explain {log} com.lily.brief"
    assert item["since"] == "2026-08-21T07:00:00+09:00"  # no marker ever: since its registration
    assert "is `eventlog import quota-log` running" in item["reason"]
    assert triage["totals"]["catchup"]["unfed"] == 1
    text = run_cli("status", str(log), "--at", AT, env=TOKYO).stdout
    assert "Nothing needs a person" not in text and "no marker of today though their slot passed 1" in text

    got = json.loads(run_cli("explain", str(log), "com.lily.brief", "--at", AT, "--json", env=TOKYO).stdout)
    [verdict] = got["verdicts"]
    assert verdict["code"] == "unfed"
    assert verdict["next"] == ["eventlog import quota-log --help", retire(log)]
    assert verdict["says"].endswith("not a candidate, because the guard left no marker for it yet (neither "
                                    "skipped nor ran)")

    # the dump of the spec holds no such fact: unchanged
    dump = json.loads(run_cli("replay", "--at", AT, str(log), env=TOKYO).stdout)
    assert dump["catchup"] == {"candidates": [], "probe": False, "circuit": "closed"}

    server = start_server(log, tmp_path)
    try:
        with server.client() as c:
            served = c.get("/v1/status", params={"at": AT}).json()
            metrics = c.get("/metrics", params={"at": AT}).text
    finally:
        server.stop()
    assert items(served)["unfed", "com.lily.brief"]["next"] == item["next"]
    assert value(metrics, "recovery_catchup_unfed") == 1


def test_it_is_named_2_h_after_the_slot(tmp_path: Path) -> None:
    """The guard writes job_ran when a run ends, and a pass imports every 30 minutes: 2 h of room."""
    log = write_log(tmp_path / "e.jsonl", [registered(), marker("job_ran", "2026-08-20T09:20:00+09:00")])
    early = catchup(log, *RUN, at="2026-08-21T10:59:59+09:00")
    assert early.returncode == 0, early.stderr
    assert early.stdout == "no candidates today (2026-08-21 in Asia/Tokyo): no probe, nothing kicked\n"
    assert status(log, "2026-08-21T10:59:59+09:00")[0] == 0
    due = catchup(log, *RUN, at="2026-08-21T11:00:00+09:00")
    assert due.returncode == 1 and said() in due.stderr
    assert "(its latest is from 2026-08-20T09:20:00+09:00)" in due.stderr


def test_any_marker_of_today_ends_it(tmp_path: Path) -> None:
    for kind in ("job_ran", "job_skipped"):
        log = write_log(tmp_path / f"{kind}.jsonl", [registered(), marker(kind, "2026-08-21T00:10:00+09:00")])
        assert status(log)[0] == (1 if kind == "job_skipped" else 0)  # a skip of today is a candidate
        assert ("unfed", "com.lily.brief") not in items(status(log)[1])
        out = catchup(log, *RUN)
        assert out.returncode == 0 and said() not in out.stderr, out.stderr
    # a marker of another day, later or earlier, is none of today
    for ts in ("2026-08-20T23:59:59+09:00", "2026-08-22T00:00:00+09:00"):
        log = write_log(tmp_path / "other-day.jsonl", [registered(), marker("job_ran", ts)])
        assert ("unfed", "com.lily.brief") in items(status(log)[1]), ts


def test_only_a_guarded_job_with_a_known_slot_of_today_is_named(tmp_path: Path) -> None:
    log = write_log(tmp_path / "e.jsonl", [
        registered("fed"), marker("job_ran", "2026-08-21T09:30:00+09:00", "fed"),
        registered("unguarded", guarded=False),
        registered("interval", interval_s=1800),
        registered("no-calendar", calendar=None),
        registered("evening", calendar=[{"Hour": 18, "Minute": 0}]),
        registered("ten", calendar=[{"Hour": 10, "Minute": 0}]),  # 1 h 30 min ago: not yet
        registered("no-hour", calendar=[{"Hour": 9}, {"Minute": 30}]),
        registered("monday", calendar=[{"Weekday": 1, "Hour": 9}]),
        registered("two-slots", calendar=[{"Hour": 18}, {"Hour": 9}]),  # one passed 2 h 30 min ago is enough
    ])
    out = catchup(log, "--dry-run", "--json")
    assert (out.returncode, json.loads(out.stdout)["unfed"]) == (1, ["two-slots"]), out.stderr
    assert [key for key in items(status(log)[1]) if key[0] == "unfed"] == [("unfed", "two-slots")]


def test_a_pass_over_a_log_with_no_guarded_job_says_so(tmp_path: Path) -> None:
    """As the lanes check does for a log with no lane: nothing is judged, so nothing can ever be re-run."""
    unguarded = write_log(tmp_path / "a.jsonl", [registered(guarded=False)])
    nothing = write_log(tmp_path / "b.jsonl", [{"type": "circuit_closed", "ts": "2026-08-21T07:00:00+09:00"}])
    for log, which in ((unguarded, "none of its 1 registered job(s) is guarded"), (nothing, "no job_registered")):
        for extra in (RUN, ("--dry-run",)):
            out = catchup(log, *extra)
            assert out.returncode == 1
            assert f"{log}: no guarded job in the log ({which}" in out.stderr
            assert "`eventlog import launchd LOG DIR`" in out.stderr
            assert "where no quota-guarded job runs (none ever did, or each is retired)" in out.stderr
            assert "stop its timer" in out.stderr
        assert status(log)[0] == 0  # a log need not use catch-up: only the catch-up pass says it


# --- what feeds a pass ----------------------------------------------------------------------------------


def feeds(home: Path, skipped_at: int | None = None) -> None:
    """A Mac's home as seed 002 has it: a guarded 9:00 job's plist, its stderr file, the guard's circuit."""
    agents, logs = home / "Library" / "LaunchAgents", home / "Library" / "Logs"
    agents.mkdir(parents=True)
    logs.mkdir(parents=True)
    with (agents / "com.lily.brief.plist").open("wb") as f:
        plistlib.dump({"Label": "com.lily.brief", "StartCalendarInterval": {"Hour": 9, "Minute": 0},
                       "ProgramArguments": ["/usr/bin/python3", str(home / "bin" / "claude-quota-guard.py")]}, f)
    if skipped_at is not None:
        (logs / "com.lily.brief.err").write_text(
            f"CLAUDE_QUOTA_JOB_SKIPPED job=com.lily.brief reason=quota remaining=60s ts={skipped_at}\n")
    (home / ".claude-quota-guard").mkdir()
    (home / ".claude-quota-guard" / "state.json").write_text('{"open_until": null, "reason": "quota"}')


FED = ("--import-launchd", "~/Library/LaunchAgents", "--import-circuit", "~/.claude-quota-guard/state.json",
       "--import-quota-log", "~/Library/Logs/*.err")


def test_a_pass_imports_the_jobs_circuit_and_markers_first_and_re_runs_todays_skip(tmp_path: Path) -> None:
    feeds(tmp_path, skipped_at=1787270405)  # 2026-08-21T09:00:05+09:00
    log = tmp_path / "e.jsonl"
    log.touch()
    env = {**TOKYO, "HOME": str(tmp_path)}
    out = run_cli("catchup", str(log), *FED, *RUN, "--at", AT, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["imported first: launchd 1, circuit 0, quota-log 1",
                                       "com.lily.brief: exited (exit 0)", "1 re-run(s) done"]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["type"] for e in lines] == ["job_registered", "job_skipped", "catchup_kicked", "catchup_finished"]
    assert lines[1]["ts"] == "2026-08-21T09:00:05+09:00"
    again = run_cli("catchup", str(log), *FED, *RUN, "--at", AT, env=env)  # the next timer pass adds nothing
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[0] == "imported first: launchd 0, circuit 0, quota-log 0"
    assert len(log.read_text().splitlines()) == 4


def test_a_pass_is_not_failed_by_a_job_s_stderr_ending_without_a_newline(tmp_path: Path) -> None:
    """The glob matches every job's stderr, the unguarded ones' too: their last progress line, left without its
    newline, can never become a marker. It failed every pass (exit 1) until that job wrote again, maybe tomorrow."""
    feeds(tmp_path, skipped_at=1787270405)
    other = tmp_path / "Library" / "Logs" / "com.lily.unguarded.err"
    other.write_text("Downloading... 100%")
    os.utime(other, (time.time() - 120, time.time() - 120))
    log = tmp_path / "e.jsonl"
    log.touch()
    out = run_cli("catchup", str(log), *FED, *RUN, "--at", AT, env={**TOKYO, "HOME": str(tmp_path)})
    assert (out.returncode, out.stderr) == (0, "")
    assert out.stdout.splitlines()[0] == "imported first: launchd 1, circuit 0, quota-log 1"


def test_what_a_pass_cannot_import_is_said_and_the_pass_goes_on(tmp_path: Path) -> None:
    feeds(tmp_path)
    log = write_log(tmp_path / "e.jsonl", [registered(), marker("job_skipped", "2026-08-21T09:00:05+09:00")])
    env = {**TOKYO, "HOME": str(tmp_path)}
    out = run_cli("catchup", str(log), "--import-launchd", "~/nowhere", "--import-circuit", "~/Library",
                  "--import-quota-log", "~/Library/Logs/*.err", *RUN, "--at", AT, env=env)
    assert out.returncode == 1
    assert f"import launchd: {tmp_path}/nowhere is not a directory: nothing imported" in out.stderr
    assert f"import circuit: cannot read {tmp_path}/Library: Is a directory" in out.stderr
    assert "import quota-log: no file matches ~/Library/Logs/*.err: no marker is imported from it" in out.stderr
    assert "com.lily.brief: exited (exit 0)" in out.stdout  # the skip already in the log is re-run all the same

    dry = run_cli("catchup", str(log), *FED, "--dry-run", "--at", AT, env=env)
    assert dry.returncode == 0, dry.stderr
    assert "a dry run imports nothing (--import-*): judged on the log as it is" in dry.stderr
    empty = run_cli("catchup", str(log), "--import-launchd=", "--import-circuit=", "--import-quota-log=", *RUN,
                    "--at", AT, env=env)  # a unit's unset variable: not given
    assert empty.returncode == 0 and "import" not in empty.stdout + empty.stderr, empty.stderr


# --- what a person can end, and what needs no one ---------------------------------------------------------


def pasted(command: str) -> subprocess.CompletedProcess[str]:
    """COMMAND as a person pastes it into bash, ``eventlog`` on PATH."""
    env = {**os.environ, **TOKYO, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
                          check=False)


def job_plist(directory: Path, label: str) -> None:
    """A guarded 09:00 job's plist, as ``import launchd`` reads it."""
    directory.mkdir(exist_ok=True)
    with (directory / f"{label}.plist").open("wb") as f:
        plistlib.dump({"Label": label, "StartCalendarInterval": {"Hour": 9, "Minute": 0},
                       "ProgramArguments": ["/usr/bin/python3", "claude-quota-guard.py"]}, f)


def test_a_removed_job_is_retired_by_the_command_import_launchd_and_explain_print(tmp_path: Path) -> None:
    """The review's case: com.x.old's plist was removed; `import launchd` said "No event retires a job" (exit 0), and
    from 11:00 every catch-up pass exited 1 for ever ("nothing feeds the markers of com.x.old"): nothing a person
    could do ended it. Now both print the line that retires it, and it works pasted."""
    at = "2026-08-24T11:30:00+09:00"  # a Monday; com.lily.brief ran at 09:10, com.x.old last ran on Sunday
    agents = tmp_path / "LaunchAgents"
    job_plist(agents, "com.lily.brief")
    log = write_log(tmp_path / "e.jsonl", [
        registered("com.x.old", ts="2026-08-20T07:00:00+09:00"),
        marker("job_ran", "2026-08-23T09:10:00+09:00", "com.x.old"),
        registered(ts="2026-08-20T07:00:00+09:00"), marker("job_ran", "2026-08-24T09:10:00+09:00")])
    line = retire(log, "com.x.old")

    imported = run_cli("import", "launchd", str(log), str(agents), env=TOKYO)
    assert imported.returncode == 0, imported.stderr
    [note] = [x for x in imported.stderr.splitlines() if "com.x.old" in x]
    assert "no plist" in note and note.endswith(line)
    out = catchup(log, "--dry-run", at=at)
    assert out.returncode == 1 and "com.x.old: nothing feeds its markers" in out.stderr
    [verdict] = json.loads(run_cli("explain", str(log), "com.x.old", "--at", at, "--json", env=TOKYO).stdout)[
        "verdicts"]
    assert verdict["code"] == "unfed" and verdict["next"][-1] == line and "retire it" in verdict["says"]

    typed = pasted(line)
    assert typed.returncode == 0, typed.stderr
    retired = json.loads(log.read_text().splitlines()[-1])
    assert (retired["label"], retired["guarded"], retired["calendar"]) == ("com.x.old", False, [{"Hour": 9,
                                                                                                 "Minute": 0}])
    out = catchup(log, "--dry-run", at=at)
    assert out.returncode == 0 and "com.x.old" not in out.stderr, out.stderr
    assert status(log, at)[0] == 0
    again = run_cli("import", "launchd", str(log), str(agents), env=TOKYO)  # a retired job is no longer named
    assert again.returncode == 0 and "com.x.old" not in again.stderr, again.stderr

    job_plist(agents, "com.x.old")  # it comes back: its plist registers it anew
    assert run_cli("import", "launchd", str(log), str(agents), env=TOKYO).returncode == 0
    back = json.loads(log.read_text().splitlines()[-1])
    assert (back["label"], back["guarded"]) == ("com.x.old", True)


def test_every_command_explain_prints_for_a_job_nothing_feeds_works_pasted(tmp_path: Path) -> None:
    """explain printed `eventlog import quota-log LOG '<the file its guard writes its markers to>'`, which fails
    pasted: the file is in no line of the log, so explain says it in words and prints commands that work."""
    log = write_log(tmp_path / "e.jsonl", [registered()])
    [verdict] = json.loads(run_cli("explain", str(log), "com.lily.brief", "--at", AT, "--json", env=TOKYO).stdout)[
        "verdicts"]
    assert verdict["code"] == "unfed"
    assert "run eventlog import quota-log on this log with the file the job's guard writes its markers to" in \
        verdict["says"]
    assert verdict["next"][0] == "eventlog import quota-log --help"
    for command in verdict["next"]:
        typed = pasted(command)
        assert typed.returncode == 0, (command, typed.stderr)


def test_a_job_registered_after_its_slot_is_judged_from_its_next_slot(tmp_path: Path) -> None:
    """A job registered at 15:00 with a 09:00 slot was named at once ("slot 09:00 passed 6 h ago", exit 1, an alert
    until midnight): no marker of 09:00 could be, since it was not scheduled then."""
    log = write_log(tmp_path / "e.jsonl", [registered(ts="2026-08-21T15:00:00+09:00")])
    for at in ("2026-08-21T17:00:00+09:00", "2026-08-21T23:59:00+09:00"):
        out = catchup(log, "--dry-run", "--json", at=at)
        assert (out.returncode, json.loads(out.stdout)["unfed"]) == (0, []), out.stderr
        assert status(log, at)[0] == 0
    out = catchup(log, "--dry-run", at="2026-08-22T11:00:00+09:00")  # the next day's 09:00 is judged
    assert out.returncode == 1 and said("2026-08-22") + " 2 h ago" in out.stderr

    # of two slots today, the one after the registration is judged
    two = write_log(tmp_path / "two.jsonl", [registered(ts="2026-08-21T15:00:00+09:00",
                                                        calendar=[{"Hour": 9, "Minute": 0}, {"Hour": 16}])])
    assert catchup(two, "--dry-run", at="2026-08-21T17:59:00+09:00").returncode == 0
    late = catchup(two, "--dry-run", at="2026-08-21T18:00:00+09:00")
    assert late.returncode == 1 and "its slot 16:00 of today (2026-08-21 in Asia/Tokyo) passed 2 h ago" in late.stderr
    # a registration anew (a plist changed) does the same for the slots before it
    anew = write_log(tmp_path / "anew.jsonl", [registered(ts="2026-08-20T07:00:00+09:00"),
                                               registered(ts="2026-08-21T10:00:00+09:00")])
    assert catchup(anew, "--dry-run").returncode == 0
    # one dated after T (a writer's clock ahead, or T in the past) excuses nothing
    ahead = write_log(tmp_path / "ahead.jsonl", [registered(ts="2026-08-22T07:00:00+09:00")])
    out = catchup(ahead, "--dry-run")
    assert out.returncode == 1 and said() + " 2 h 30 min ago" in out.stderr


def test_a_pass_and_the_views_say_a_job_nothing_feeds_in_the_same_words(tmp_path: Path) -> None:
    """The pass and the views wrote the message twice, in different words: now one text, the pass adding the label
    and what is its own (whether it imports markers, where to read more)."""
    log = write_log(tmp_path / "e.jsonl", [registered()])
    reason = items(status(log)[1])["unfed", "com.lily.brief"]["reason"]
    out = catchup(log, "--dry-run")
    assert f"com.lily.brief: {reason}; this pass imports none (no --import-quota-log)" in out.stderr
    [verdict] = json.loads(run_cli("explain", str(log), "com.lily.brief", "--at", AT, "--json", env=TOKYO).stdout)[
        "verdicts"]
    assert verdict["says"].startswith(reason)


def test_a_circuit_state_file_that_cannot_be_read_is_not_shown_as_imported(tmp_path: Path) -> None:
    """`--import-circuit=/nonexistent/state.json --json` gave "imported": {"circuit": 0} beside the problem, and the
    text said "imported first: circuit 0"."""
    log = write_log(tmp_path / "e.jsonl", [registered(), marker("job_ran", "2026-08-21T09:10:00+09:00"),
                                           {"type": "circuit_closed", "ts": "2026-08-20T10:00:00+09:00"}])
    bad = tmp_path / "state.json"
    bad.write_text("{not json")
    for state, why in ((bad, "cannot read"), (tmp_path, "Is a directory"), (tmp_path / "gone.json", "does not exist")):
        out = catchup(log, f"--import-circuit={state}", *RUN, "--json")
        assert out.returncode == 1 and f"import circuit: cannot read {state}" in out.stderr and why in out.stderr
        assert json.loads(out.stdout)["imported"] == {}
        text = catchup(log, f"--import-circuit={state}", *RUN)
        assert "imported first" not in text.stdout and "circuit 0" not in text.stdout, text.stdout


def test_a_circuit_state_file_the_guard_has_not_written_yet_is_no_failure(tmp_path: Path) -> None:
    """The guard need not write its state file before its circuit first opens: while the log holds no circuit event,
    a file that does not exist is said (a note) and the pass does not fail; once it holds one, it is a problem."""
    state = tmp_path / ".claude-quota-guard" / "state.json"
    log = write_log(tmp_path / "e.jsonl", [registered(), marker("job_ran", "2026-08-21T09:10:00+09:00")])
    out = catchup(log, f"--import-circuit={state}", *RUN, "--json")
    assert out.returncode == 0, out.stderr
    assert f"import circuit: {state} does not exist: nothing imported" in out.stderr
    assert json.loads(out.stdout)["imported"] == {} and json.loads(out.stdout)["problems"] == []
    by_hand = run_cli("import", "circuit", str(log), str(state), env=TOKYO)
    assert by_hand.returncode == 0 and "does not exist" in by_hand.stderr
    assert len(log.read_text().splitlines()) == 2  # nothing written

    state.parent.mkdir()
    state.write_text('{"open_until": 1787274000, "reason": "quota"}')  # the guard trips: 2026-08-21T10:00+09:00
    assert catchup(log, f"--import-circuit={state}", *RUN).returncode == 0
    state.unlink()  # then its file is gone: moved, or the path is wrong
    out = catchup(log, f"--import-circuit={state}", *RUN)
    assert out.returncode == 1 and f"import circuit: cannot read {state}: it does not exist" in out.stderr
