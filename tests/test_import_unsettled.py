"""What ``eventlog import`` cannot settle is named, never written as a guess (a user's review of
``import launchd`` and ``import ledger``, seeds 002 and 000).

- a ``Label`` in two plists: neither registered, both files named, exit 1, and a rerun adds nothing;
- a job the log registers whose plist is gone: named with the line that retires it, nothing written;
- a calendar value ``int()`` cannot read: the plist, the key and the value named, the job not registered;
- ``localStarted`` that is not a boolean in a handoff file: the file, the field and the value named;
- a ledger file with no entry: said;
- LOG a directory: exit 2 ("LOG cannot be read") for every import.
"""

from __future__ import annotations

import json
import plistlib
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

GUARD = ["/usr/bin/python3", "/Users/lily/bin/claude-quota-guard.py", "--job"]


def plist(directory: Path, name: str, label: str, **keys: Any) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / name
    with open(path, "wb") as f:
        plistlib.dump({"Label": label, "ProgramArguments": [*GUARD, label], **keys}, f)
    return path


def lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []


def launchd(log: Path, d: Path, *more: str) -> Any:
    return run_cli("import", "launchd", str(log), str(d), *more)


# --- launchd: one Label, two plists -----------------------------------------------------------------------


def test_a_label_in_two_plists_is_named_registers_neither_and_a_rerun_adds_nothing(tmp_path: Path) -> None:
    d = tmp_path / "LaunchAgents"
    first = plist(d, "com.lily.dup.plist", "com.lily.dup", StartCalendarInterval={"Hour": 7})
    copy = plist(d, "com.lily.dup-copy.plist", "com.lily.dup", StartCalendarInterval={"Hour": 19})
    plist(d, "com.lily.ok.plist", "com.lily.ok", StartCalendarInterval={"Hour": 9})
    log = tmp_path / "jobs.jsonl"
    for _ in range(3):
        out = launchd(log, d)
        assert out.returncode == 1, out.stderr  # an input that could not be turned into an event
        said = [x for x in out.stderr.splitlines() if "com.lily.dup" in x]
        assert len(said) == 1 and str(first) in said[0] and str(copy) in said[0], out.stderr
        assert [e["label"] for e in lines(log)] == ["com.lily.ok"]  # neither calendar is guessed
    report = json.loads(launchd(log, d, "--json").stdout)
    assert report["registered"] == [] and report["unchanged"] == 1
    assert any(str(first) in p and str(copy) in p for p in report["problems"])


def test_a_label_registered_before_its_plist_was_copied_keeps_its_registration(tmp_path: Path) -> None:
    d = tmp_path / "LaunchAgents"
    plist(d, "com.lily.dup.plist", "com.lily.dup", StartCalendarInterval={"Hour": 7})
    log = tmp_path / "jobs.jsonl"
    assert launchd(log, d).returncode == 0
    plist(d, "com.lily.dup-copy.plist", "com.lily.dup", StartCalendarInterval={"Hour": 19})
    for _ in range(2):
        out = launchd(log, d)
        assert out.returncode == 1 and "com.lily.dup-copy.plist" in out.stderr
        assert [e["calendar"] for e in lines(log)] == [[{"Hour": 7}]]  # no flip to 19:00 and back


# --- launchd: a plist removed ------------------------------------------------------------------------------


def test_a_job_whose_plist_is_gone_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    d = tmp_path / "LaunchAgents"
    gone = plist(d, "com.lily.gone.plist", "com.lily.gone", StartCalendarInterval={"Hour": 9})
    plist(d, "com.lily.ok.plist", "com.lily.ok", StartCalendarInterval={"Hour": 9})
    log = tmp_path / "jobs.jsonl"
    assert launchd(log, d).returncode == 0
    before = log.read_bytes()
    gone.unlink()
    out = launchd(log, d)
    assert out.returncode == 0, out.stderr  # nothing failed: whether the job is retired is the person's to say
    said = [x for x in out.stderr.splitlines() if "com.lily.gone" in x]
    assert len(said) == 1 and "no plist" in said[0] and "| eventlog append" in said[0], out.stderr
    assert "com.lily.ok" not in out.stderr
    assert json.loads(launchd(log, d, "--json").stdout)["gone"] == ["com.lily.gone"]
    assert log.read_bytes() == before


# --- launchd: a calendar value that cannot be read -----------------------------------------------------------


@pytest.mark.parametrize(("keys", "named"), [
    ({"StartCalendarInterval": {"Hour": "nine"}}, ["Hour", "'nine'"]),
    ({"StartCalendarInterval": [{"Hour": 9}, {"Hour": 18, "Minute": "half"}]}, ["entry 2", "Minute", "'half'"]),
    ({"StartCalendarInterval": ["9am"]}, ["entry 1", "'9am'", "not a dictionary"]),
    ({"StartCalendarInterval": "9am"}, ["StartCalendarInterval", "'9am'"]),
    ({"StartInterval": "often"}, ["StartInterval", "'often'"]),
])
def test_a_calendar_value_that_cannot_be_read_is_named_and_the_job_not_registered(
        tmp_path: Path, keys: dict[str, Any], named: list[str]) -> None:
    d = tmp_path / "LaunchAgents"
    bad = plist(d, "com.lily.bad.plist", "com.lily.bad", **keys)
    plist(d, "com.lily.ok.plist", "com.lily.ok", StartCalendarInterval={"Hour": 9})
    log = tmp_path / "jobs.jsonl"
    out = launchd(log, d)
    assert out.returncode == 1
    said = [x for x in out.stderr.splitlines() if str(bad) in x]
    assert len(said) == 1 and all(word in said[0] for word in named), out.stderr
    assert [e["label"] for e in lines(log)] == ["com.lily.ok"]  # not registered with a calendar it does not have
    assert "no plist" not in out.stderr  # its plist is there


def test_a_plist_broken_after_its_registration_leaves_the_registration_and_says_so(tmp_path: Path) -> None:
    d = tmp_path / "LaunchAgents"
    plist(d, "com.lily.job.plist", "com.lily.job", StartCalendarInterval={"Hour": 9})
    log = tmp_path / "jobs.jsonl"
    assert launchd(log, d).returncode == 0
    plist(d, "com.lily.job.plist", "com.lily.job", StartCalendarInterval={"Hour": "nine"})
    out = launchd(log, d)
    assert out.returncode == 1 and "'nine'" in out.stderr
    assert [e["calendar"] for e in lines(log)] == [[{"Hour": 9}]]


# --- handoff-files: localStarted ---------------------------------------------------------------------------


def test_local_started_that_is_not_a_boolean_is_named(tmp_path: Path) -> None:
    d = tmp_path / "handoffs"
    d.mkdir()
    record = d / "h1.json"
    record.write_text(json.dumps({"handoffId": "h1", "account": "a", "createdAt": "2026-08-03T01:20:00+09:00",
                                  "localStarted": "true"}))
    log = tmp_path / "work.jsonl"
    out = run_cli("import", "handoff-files", str(log), str(d))
    assert out.returncode == 1, out.stderr
    said = [x for x in out.stderr.splitlines() if str(record) in x]
    assert len(said) == 1 and "localStarted" in said[0] and "'true'" in said[0], out.stderr


# --- ledger: a file with no entry ----------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "\n  \n"])
def test_an_empty_ledger_is_said(tmp_path: Path, text: str) -> None:
    ledger = tmp_path / "account-ledger.json"
    ledger.write_text(text)
    log = tmp_path / "work.jsonl"
    out = run_cli("import", "ledger", str(log), str(ledger))
    assert out.returncode == 0  # nothing could not be read: a ledger with no limit yet (the help's exit codes)
    said = "empty (no line)" if not text else "2 line(s) read, no ledger entry among them"  # blank lines are lines
    assert f"{ledger}: {said}" in out.stderr, out.stderr
    assert json.loads(run_cli("import", "ledger", str(log), str(ledger), "--json").stdout)["notes"] == [
        out.stderr.strip().removeprefix("eventlog: ")]


# --- every import: LOG a directory ---------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["launchd", "quota-log", "worker-log", "ledger", "handoff-files", "circuit"])
def test_log_a_directory_is_exit_2_for_every_import(tmp_path: Path, source: str) -> None:
    agents = tmp_path / "agents"
    plist(agents, "com.lily.ok.plist", "com.lily.ok", StartCalendarInterval={"Hour": 9})
    handoffs = tmp_path / "handoffs"
    handoffs.mkdir()
    (handoffs / "h1.json").write_text('{"account": "a", "createdAt": "2026-08-03T01:20:00+09:00"}')
    inputs = {
        "launchd": agents,
        "quota-log": tmp_path / "guard.err",
        "worker-log": tmp_path / "worker.log",
        "ledger": tmp_path / "ledger.json",
        "handoff-files": handoffs,
        "circuit": tmp_path / "state.json",
    }
    (tmp_path / "guard.err").write_text("CLAUDE_QUOTA_JOB_RAN job=a exit=0 ts=1787270405\n")
    (tmp_path / "worker.log").write_text("{}\n")
    (tmp_path / "ledger.json").write_text('{"account": "a", "limitedAt": "2026-08-03T01:20:00+09:00", '
                                          '"resetAt": null, "source": "s", "confidence": "unknown"}')
    (tmp_path / "state.json").write_text('{"open_until": "2026-08-03T05:00:00+09:00", "reason": "quota"}')
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    out = run_cli("import", source, str(logdir), str(inputs[source]))
    assert out.returncode == 2, out.stderr
    assert f"{logdir} is a directory, not a log file" in out.stderr
    assert list(logdir.iterdir()) == []
