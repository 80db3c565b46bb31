"""``eventlog import launchd`` and ``eventlog import quota-log`` (seed 002's plists and markers)."""

from __future__ import annotations

import json
import os
import plistlib
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from conftest import ROOT, run_cli

from eventlog import importers

GUARD = ["/usr/bin/python3", "/Users/lily/bin/claude-quota-guard.py", "--job"]


def epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def plist(directory: Path, name: str, body: dict[str, Any]) -> None:
    with open(directory / name, "wb") as f:
        plistlib.dump(body, f)


def agents(directory: Path) -> Path:
    directory.mkdir()
    plist(directory, "com.lily.daily-brief.plist", {
        "Label": "com.lily.daily-brief", "ProgramArguments": [*GUARD, "daily-brief"],
        "StartCalendarInterval": [{"Hour": 8, "Minute": 0}, {"Hour": 10, "Minute": 30}],
    })
    plist(directory, "com.lily.post.plist", {
        "Label": "com.lily.post", "ProgramArguments": [*GUARD, "post"],
        "StartCalendarInterval": {"Weekday": 1, "Hour": 9, "Minute": 0, "Second": 5},
    })
    plist(directory, "com.lily.replies.plist", {
        "Label": "com.lily.replies", "ProgramArguments": [*GUARD, "replies"], "StartInterval": 1800,
    })
    plist(directory, "com.lily.plain.plist", {
        "Label": "com.lily.plain", "ProgramArguments": ["/bin/echo", "hi"], "StartCalendarInterval": {"Hour": 7},
    })
    (directory / "README.txt").write_text("not a plist")
    return directory


# --- launchd -----------------------------------------------------------------------------------


def test_read_launchd(tmp_path: Path) -> None:
    plists, problems = importers.read_launchd(str(agents(tmp_path / "LaunchAgents")))
    assert problems == []
    events, unsettled = importers.registrations(plists)
    assert unsettled == []
    assert events == [
        {"type": "job_registered", "label": "com.lily.daily-brief", "guarded": True,
         "calendar": [{"Hour": 8, "Minute": 0}, {"Hour": 10, "Minute": 30}], "interval_s": None},
        {"type": "job_registered", "label": "com.lily.plain", "guarded": False,
         "calendar": [{"Hour": 7}], "interval_s": None},
        {"type": "job_registered", "label": "com.lily.post", "guarded": True,
         "calendar": [{"Weekday": 1, "Hour": 9, "Minute": 0}], "interval_s": None},  # unknown keys dropped
        {"type": "job_registered", "label": "com.lily.replies", "guarded": True,
         "calendar": None, "interval_s": 1800},
    ]


def test_guard_pattern_and_odd_plists(tmp_path: Path) -> None:
    d = tmp_path / "agents"
    d.mkdir()
    plist(d, "a.plist", {"Label": "a", "ProgramArguments": ["/opt/my-guard", "x"],
                         "StartCalendarInterval": [{"Hour": "9", "Minute": 30.0}]})
    plist(d, "b.plist", {"ProgramArguments": ["x"]})
    (d / "c.plist").write_bytes(b"garbage")
    plist(d, "d.plist", {"Label": "d", "StartCalendarInterval": ["9am", {"Hour": "9", "Minute": "half"}]})
    plists, problems = importers.read_launchd(str(d), "my-guard")
    # what int() reads is read as the seed reads it; a value it cannot read, or an entry that is no
    # dictionary, is named and its job left unregistered (written as {} it would say "every minute")
    assert plists == [
        importers.Plist("a", str(d / "a.plist"), {"type": "job_registered", "label": "a", "guarded": True,
                                                  "calendar": [{"Hour": 9, "Minute": 30}], "interval_s": None}),
        importers.Plist("d", str(d / "d.plist"), None),
    ]
    assert len(problems) == 3
    assert "b.plist: no Label" in problems[0]
    assert "c.plist" in problems[1]
    assert problems[2] == (f"{d / 'd.plist'}: StartCalendarInterval entry 1 '9am' is not a dictionary: "
                           "d is not registered")


def test_is_guarded_is_the_seeds_substring_test() -> None:
    """Seed 002's ``is_guarded``: any ``ProgramArguments`` item holding ``claude-quota-guard`` ("判定はProgramArguments
    の文字列一致だけ"), a guard installed under a directory of that name included; not a string for the list."""
    def guarded(*args: str) -> bool:
        return importers.is_guarded({"ProgramArguments": list(args)})

    assert guarded(*GUARD, "post") and guarded("claude-quota-guard", "post")
    assert guarded("/bin/sh", "-c", "exec python3 ~/bin/claude-quota-guard.py --job post 2>>~/Library/Logs/p.err")
    assert guarded("/usr/bin/python3", "/opt/claude-quota-guard/guard.py", "--job", "post")
    assert not guarded("/usr/bin/python3", "/Users/lily/bin/quota.py", "--job", "post")
    assert not importers.is_guarded({"ProgramArguments": "claude-quota-guard.py"})


def test_import_launchd_twice_adds_nothing(tmp_path: Path) -> None:
    d = agents(tmp_path / "LaunchAgents")
    log = tmp_path / "log.jsonl"
    out = run_cli("import", "launchd", str(log), str(d))
    assert out.returncode == 0, out.stderr
    assert [e["label"] for e in read(log)] == ["com.lily.daily-brief", "com.lily.plain", "com.lily.post",
                                               "com.lily.replies"]
    assert all(e["type"] == "job_registered" for e in read(log))
    out = run_cli("import", "launchd", str(log), str(d), "--json")
    assert out.returncode == 0
    assert json.loads(out.stdout)["registered"] == []
    assert len(read(log)) == 4
    # a changed schedule is registered again; the rest is unchanged
    plist(d, "com.lily.plain.plist", {"Label": "com.lily.plain", "ProgramArguments": ["/bin/echo"],
                                      "StartCalendarInterval": {"Hour": 8}})
    out = run_cli("import", "launchd", str(log), str(d), "--json")
    assert json.loads(out.stdout)["registered"] == ["com.lily.plain"]
    assert read(log)[-1]["calendar"] == [{"Hour": 8}]


def test_import_launchd_problems(tmp_path: Path) -> None:
    d = agents(tmp_path / "LaunchAgents")
    (d / "broken.plist").write_bytes(b"<plist")
    log = tmp_path / "log.jsonl"
    out = run_cli("import", "launchd", str(log), str(d))
    assert out.returncode == 1
    assert "broken.plist" in out.stderr
    assert len(read(log)) == 4  # the others are imported
    assert run_cli("import", "launchd", str(log), str(tmp_path / "nowhere")).returncode == 2
    assert run_cli("import", "launchd", str(d)).returncode == 2  # LOG and DIR are both needed
    old = run_cli("import", "launchd", str(d), "--log", str(log))  # the old grammar says what changed
    assert old.returncode == 2 and "LOG is now the first argument" in old.stderr


def test_import_launchd_of_a_directory_without_a_plist_says_so(tmp_path: Path) -> None:
    """Nothing to import is no error (exit 0 is "done"), but a person who named the wrong directory is told."""
    d = tmp_path / "empty"
    d.mkdir()
    (d / "README.txt").write_text("not a plist")
    log = tmp_path / "log.jsonl"
    out = run_cli("import", "launchd", str(log), str(d))
    assert out.returncode == 0, out.stderr
    assert out.stdout == "0 job(s) registered, 0 unchanged\n"
    assert f"{d} holds no *.plist file: nothing to import" in out.stderr
    report = json.loads(run_cli("import", "launchd", str(log), str(d), "--json").stdout)
    assert report["registered"] == [] and report["notes"] == [out.stderr.removeprefix("eventlog: ").strip()]
    full = run_cli("import", "launchd", str(log), str(agents(tmp_path / "LaunchAgents")))
    assert full.returncode == 0 and "nothing to import" not in full.stderr


# --- quota-guard markers --------------------------------------------------------------------------


def test_read_markers() -> None:
    skip = epoch("2026-08-21T09:00:05+09:00")
    lines = [
        f"CLAUDE_QUOTA_JOB_SKIPPED job=com.lily.test reason=quota remaining=1800s ts={skip}\n",
        "some other output\n",
        f"[stderr] CLAUDE_QUOTA_JOB_RAN job=com.lily.test exit=0 ts={skip + 3600}\n",
        f"CLAUDE_QUOTA_JOB_SKIPPED job=com.lily.x reason=rate limited remaining=12.5s ts={skip}.25\n",
        f"CLAUDE_QUOTA_JOB_RAN job=com.lily.y exit=-1 ts={skip}\n",
        "CLAUDE_QUOTA_JOB_RAN job=com.lily.y exit=0 ts=99999999999999999\n",
    ]
    found, problems = importers.read_markers(lines, "guard.err", ZoneInfo("Asia/Tokyo"))
    assert [where for where, _ in found] == ["guard.err:1", "guard.err:3", "guard.err:4", "guard.err:5"]
    assert [ev for _, ev in found] == [
        {"type": "job_skipped", "ts": "2026-08-21T09:00:05+09:00", "label": "com.lily.test", "reason": "quota",
         "remaining_s": 1800},
        {"type": "job_ran", "ts": "2026-08-21T10:00:05+09:00", "label": "com.lily.test", "exit": 0},
        {"type": "job_skipped", "ts": "2026-08-21T09:00:05.250000+09:00", "label": "com.lily.x",
         "reason": "rate limited", "remaining_s": 12.5},
        {"type": "job_ran", "ts": "2026-08-21T09:00:05+09:00", "label": "com.lily.y", "exit": -1},
    ]
    assert problems == ["guard.err:6: ts=99999999999999999 is out of range (years 1900 to 9000)"]
    utc, _ = importers.read_markers(lines[:1], "guard.err", UTC)
    assert utc[0][1]["ts"] == "2026-08-21T00:00:05+00:00"


def test_a_marker_that_cannot_be_read_is_a_problem_not_a_silent_drop(tmp_path: Path) -> None:
    """The guard prints ``remaining={status['remaining_seconds']}s`` (seed 002): a status without it prints
    ``remaining=Nones``. Such a skip is not imported, and says so (exit 1), naming the file and line."""
    skip = epoch("2026-08-21T09:00:05+09:00")
    err = write_markers(tmp_path / "guard.err",
                        f"CLAUDE_QUOTA_JOB_SKIPPED job=a reason=quota remaining=Nones ts={skip}\n"
                        f"CLAUDE_QUOTA_JOB_RAN job=b exit=0 ts={skip}\n"
                        "some other output\n")
    log = tmp_path / "log.jsonl"
    out = run_cli("import", "quota-log", str(log), str(err), "--assume-tz", "Asia/Tokyo")
    assert out.returncode == 1
    assert f"{err}:1: " in out.stderr and "CLAUDE_QUOTA_JOB_SKIPPED" in out.stderr, out.stderr
    assert [e["label"] for e in read(log)] == ["b"]  # the rest is imported


def write_markers(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_import_quota_log_local_zone_and_twice(tmp_path: Path) -> None:
    skip = epoch("2026-08-21T09:00:05+09:00")
    stderr_log = write_markers(tmp_path / "a.err",
                               f"CLAUDE_QUOTA_JOB_SKIPPED job=a reason=quota remaining=5s ts={skip}\n")
    other = write_markers(tmp_path / "b.err", f"CLAUDE_QUOTA_JOB_RAN job=b exit=0 ts={skip - 60}\n")
    log = tmp_path / "log.jsonl"
    env = {**os.environ, "TZ": "Asia/Tokyo"}
    cmd = [sys.executable, "-m", "eventlog", "import", "quota-log", str(log), str(stderr_log), str(other)]
    out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    # in time order (b's marker is a minute earlier), ts in the local zone
    assert [(e["type"], e["label"], e["ts"]) for e in read(log)] == [
        ("job_ran", "b", "2026-08-21T08:59:05+09:00"),
        ("job_skipped", "a", "2026-08-21T09:00:05+09:00"),
    ]
    out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0
    assert "0 marker(s) imported, 2 already in the log" in out.stdout
    # another zone writes the same instants: still nothing new
    out = run_cli("import", "quota-log", str(log), str(stderr_log), str(other), "--assume-tz", "UTC", "--json")
    assert json.loads(out.stdout) == {"imported": 0, "already": 2, "older": 0, "problems": [], "unfinished": [],
                                      "bad_lines": {"count": 0, "first": []}, "left": [], "dated_ahead": 0,
                                      "notes": []}
    assert len(read(log)) == 2


def test_older_markers_are_not_appended_after_newer(tmp_path: Path) -> None:
    now = epoch("2026-08-21T09:00:05+09:00")
    log = tmp_path / "log.jsonl"
    newer = write_markers(tmp_path / "new.err", f"CLAUDE_QUOTA_JOB_SKIPPED job=a reason=quota remaining=5s ts={now}\n")
    older = write_markers(tmp_path / "old.err", f"CLAUDE_QUOTA_JOB_RAN job=a exit=0 ts={now - 86400}\n")
    assert run_cli("import", "quota-log", str(log), str(newer), "--assume-tz", "Asia/Tokyo").returncode == 0
    out = run_cli("import", "quota-log", str(log), str(older), "--assume-tz", "Asia/Tokyo", "--json")
    assert json.loads(out.stdout)["older"] == 1
    assert [e["type"] for e in read(log)] == ["job_skipped"]


def test_import_quota_log_bad_usage(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    assert run_cli("import", "quota-log", str(log), str(tmp_path / "x"), "--assume-tz", "Mars/Base").returncode == 2
    out = run_cli("import", "quota-log", str(log), str(tmp_path / "missing.err"))
    assert out.returncode == 1
    assert "cannot read" in out.stderr


# --- end to end: the seed's tests, through the importers and the replay -------------------------------


def candidates(log: Path, at: str) -> list[str]:
    out = run_cli("replay", str(log), "--at", at)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["catchup"]["candidates"]  # type: ignore[no-any-return]


def test_seed_stories_end_to_end(tmp_path: Path) -> None:
    d = tmp_path / "LaunchAgents"
    d.mkdir()
    for label in ("com.lily.test", "com.lily.mixed", "com.lily.old"):
        plist(d, f"{label}.plist", {"Label": label, "ProgramArguments": [*GUARD, label],
                                    "StartCalendarInterval": [{"Hour": 9, "Minute": 0}, {"Hour": 18, "Minute": 0}]})
    plist(d, "com.lily.interval.plist", {"Label": "com.lily.interval", "ProgramArguments": [*GUARD],
                                         "StartCalendarInterval": {"Hour": 9}, "StartInterval": 1800})
    log = tmp_path / "log.jsonl"
    assert run_cli("import", "launchd", str(log), str(d)).returncode == 0
    today = epoch("2026-08-21T13:00:00+09:00")
    text = (
        f"CLAUDE_QUOTA_JOB_SKIPPED job=com.lily.test reason=quota remaining=1s ts={today - 4 * 3600}\n"
        f"CLAUDE_QUOTA_JOB_SKIPPED job=com.lily.mixed reason=quota remaining=1s ts={today - 1}\n"
        f"CLAUDE_QUOTA_JOB_RAN job=com.lily.mixed exit=0 ts={today}\n"
        f"CLAUDE_QUOTA_JOB_SKIPPED job=com.lily.old reason=quota remaining=1s ts={today - 3 * 86400}\n"
        f"CLAUDE_QUOTA_JOB_SKIPPED job=com.lily.interval reason=quota remaining=1s ts={today - 3600}\n"
    )
    markers = write_markers(tmp_path / "guard.err", text)
    assert run_cli("import", "quota-log", str(log), str(markers), "--assume-tz", "Asia/Tokyo").returncode == 0
    # 13:00: the 9:00 slot passed (18:00 still to come); RAN after SKIPPED; a skip 3 days old; StartInterval
    assert candidates(log, "2026-08-21T13:00:00+09:00") == ["com.lily.test"]
    assert candidates(log, "2026-08-22T13:00:00+09:00") == []
    assert datetime.fromisoformat(read(log)[-1]["ts"]).utcoffset() == timedelta(hours=9)


def test_a_marker_whose_ts_is_no_epoch_is_named_not_read_as_1970(tmp_path: Path) -> None:
    """Seed 002's guard writes ``ts=EPOCH``; a marker written with an ISO time read as its first digits, 2026 seconds
    after 1970, and was imported as a skip of 1970. It is a marker not in the guard's format, named with its line."""
    src = tmp_path / "quota.log"
    src.write_text("CLAUDE_QUOTA_JOB_SKIPPED job=com.lily.iso reason=quota remaining=1800s "
                   "ts=2026-12-02T09:00:05+09:00\n"
                   "CLAUDE_QUOTA_JOB_RAN job=com.lily.epoch exit=0 ts=1796100000.5\n")
    log = tmp_path / "log.jsonl"
    out = run_cli("import", "quota-log", str(log), str(src), "--json")
    assert out.returncode == 1, out.stderr
    written = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(w["type"], w["label"]) for w in written] == [("job_ran", "com.lily.epoch")]
    assert f"{src}:1: a CLAUDE_QUOTA_JOB_SKIPPED marker not in the guard's format" in out.stderr
