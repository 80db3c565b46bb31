"""Issue 15, each numbered case run as written: refused with a clear error or handled, never a traceback,
and the log replays to the same state as before the attempt (spec section 1, "Ranges" and "What
``eventlog append`` writes is what a replay applies")."""

from __future__ import annotations

import fcntl
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from eventlog.appender import BadInput, EventLog
from eventlog.reader import MAX_LINE_BYTES
from tests.conftest import ROOT, run_cli, write_log

TS = "2026-08-03T01:00:00+09:00"
AT = ["--at", "2026-08-03T12:00:00+09:00"]


def created(hid: str = "h1", account: str = "a", ts: str = TS) -> dict[str, Any]:
    return {"type": "handoff_created", "ts": ts, "handoff_id": hid, "account": account}


def replayed(log: Path) -> str:
    out = run_cli("replay", str(log))
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    return out.stdout


def append(log: Path, *events: dict[str, Any] | str) -> subprocess.CompletedProcess[str]:
    text = "".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in events)
    out = run_cli("append", str(log), stdin=text)
    assert "Traceback" not in out.stderr, out.stderr
    return out


def refused_and_unchanged(log: Path, *events: dict[str, Any] | str, code: int = 2) -> str:
    """Append ``events``: refused with ``code``, the file byte for byte as before; the stderr."""
    before, state = log.read_bytes(), replayed(log)
    out = append(log, *events)
    assert out.returncode == code, (out.returncode, out.stderr)
    assert log.read_bytes() == before
    assert replayed(log) == state
    return out.stderr


def live_commands_run(log: Path) -> None:
    """Every reader of the log runs to its end: no exit 1 from a crash, no traceback."""
    for args in (["status", str(log), *AT], ["explain", str(log), "h1", *AT], ["stalls", str(log), *AT],
                 ["sessions", str(log), *AT], ["catchup", str(log), "--dry-run", *AT]):
        out = run_cli(*args)
        assert "Traceback" not in out.stderr, (args, out.stderr)
        assert out.returncode in (0, 1, 2), (args, out.returncode, out.stderr)


# -- 1. a line append accepts crashes every reader -----------------------------------------------------


@pytest.mark.parametrize("line", [
    {"type": "probe_result", "ts": "9999-12-31T23:59:59+00:00", "account": "a", "outcome": "transient"},
    {"type": "job_skipped", "ts": "0001-01-01T00:00:00Z", "label": "j", "reason": "quota", "remaining_s": 5},
    {"type": "startup_failed", "ts": "9999-12-31T23:59:59+00:00", "session_id": "s", "generation": 1,
     "reason": "boom"},
    {"type": "handoff_created", "ts": TS, "handoff_id": "h9", "account": "a", "deadline": "9999-12-31T00:00:00Z"},
])
def test_times_outside_1900_to_9000_are_refused_and_named_by_every_reader(tmp_path: Path,
                                                                          line: dict[str, Any]) -> None:
    log = write_log(tmp_path / "log.jsonl", [created()])
    err = refused_and_unchanged(log, line)
    assert "stdin line 1: bad_time:" in err and "outside the years 1900 to 9000" in err
    with log.open("a") as f:  # written by hand (or by an older appender): a bad line for every reader
        f.write(json.dumps(line) + "\n" + json.dumps({"type": "lane_check", "ts": "2026-08-03T01:00:00-05:00"})
                + "\n")
    dump = json.loads(replayed(log))
    assert [b["line"] for b in dump["bad_lines"]] == [2]
    assert dump["bad_lines"][0]["reason"].startswith("bad_time:")
    live_commands_run(log)
    assert append(log, {"type": "claimed", "ts": TS, "handoff_id": "h1", "watcher": "w", "attempt": 1}).returncode == 0


def test_a_launchd_hour_of_3000000000_is_no_time_of_day_and_crashes_nothing(tmp_path: Path) -> None:
    agents = tmp_path / "LaunchAgents"
    agents.mkdir()
    (agents / "job.plist").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<plist version="1.0"><dict>'
        "<key>Label</key><string>job</string>"
        "<key>ProgramArguments</key><array><string>claude-quota-guard</string></array>"
        "<key>StartCalendarInterval</key><array><dict><key>Hour</key><integer>3000000000</integer></dict>"
        f"<dict><key>Hour</key><integer>{2**70}</integer></dict></array>"
        "</dict></plist>\n")
    log = tmp_path / "jobs.jsonl"
    out = run_cli("import", "launchd", str(log), str(agents))
    assert out.returncode == 1  # 2**70 is no 64-bit integer: named, and the job is not registered
    assert f"StartCalendarInterval entry 2: Hour {2**70} is no 64-bit integer" in out.stderr
    assert not log.exists()
    (agents / "job.plist").write_text((agents / "job.plist").read_text().replace(
        f"<dict><key>Hour</key><integer>{2**70}</integer></dict>", ""))
    out = run_cli("import", "launchd", str(log), str(agents))
    assert out.returncode == 0, out.stderr
    registered = json.loads(log.read_text().splitlines()[0])
    assert registered["calendar"] == [{"Hour": 3000000000}]
    append(log, {"type": "job_skipped", "ts": "2026-08-03T09:00:00+09:00", "label": "job", "reason": "quota",
                 "remaining_s": 60})
    dump = json.loads(run_cli("replay", str(log), *AT).stdout)
    assert dump["catchup"]["candidates"] == []  # an hour that is no time of day never makes a candidate
    live_commands_run(log)


def test_a_fold_time_overflow_and_a_closed_stdin_exit_2_without_a_traceback(tmp_path: Path) -> None:
    """Issue 15, point 9: a fold that overflowed and a closed stdin printed a traceback (exit 1)."""
    log = write_log(tmp_path / "log.jsonl", [created()])
    err = refused_and_unchanged(log, {"type": "startup_failed", "ts": "9999-12-31T23:59:40+00:00",
                                      "session_id": "s", "generation": 1, "reason": "boom"})
    assert "bad_time" in err
    before = log.read_bytes()
    out = subprocess.run(f"{sys.executable} -m eventlog append {log} <&-", shell=True, cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2 and "stdin is closed" in out.stderr and "Traceback" not in out.stderr
    assert log.read_bytes() == before


def test_at_outside_the_years_is_bad_usage(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [created()])
    for args in (["status", str(log)], ["replay", str(log)], ["catchup", str(log), "--dry-run"]):
        out = run_cli(*args, "--at", "9999-12-31T23:59:59+00:00")
        assert out.returncode == 2 and "outside the years 1900 to 9000" in out.stderr, out.stderr


# -- 2. the appender writes lines the reader refuses ------------------------------------------------


def test_a_line_that_grows_past_1_mib_once_seq_and_ts_are_added_is_refused(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [created()])
    event = {"type": "lane_check", "pad": ""}
    base = len(json.dumps(event, separators=(",", ":")))
    event["pad"] = "x" * (MAX_LINE_BYTES - base)  # exactly 1 MiB as sent: ts and seq are not there yet
    raw = json.dumps(event, separators=(",", ":"))
    assert len(raw) == MAX_LINE_BYTES
    err = refused_and_unchanged(log, raw)
    assert "stdin line 1: too_long:" in err and "once seq and ts are added" in err
    # 1e5 is read as 100000.0 and written so: three bytes longer
    skipped = {"type": "job_skipped", "ts": TS, "label": "j", "reason": "q", "remaining_s": 0, "pad": ""}
    text = json.dumps(skipped, separators=(",", ":")).replace('"remaining_s":0', '"remaining_s":1e5')
    skipped["pad"] = "x" * (MAX_LINE_BYTES - len(text) - len(',"seq":2'))
    text = json.dumps(skipped, separators=(",", ":")).replace('"remaining_s":0', '"remaining_s":1e5')
    err = refused_and_unchanged(log, text)
    assert "too_long" in err


def test_nan_and_infinities_are_refused_by_the_api_and_the_quota_importer(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [created()])
    before = log.read_bytes()
    for value in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(BadInput) as err:
            EventLog(log).append([{"type": "job_skipped", "ts": TS, "label": "j", "reason": "q",
                                   "remaining_s": value}])
        assert "bad_value: remaining_s" in str(err.value) and "not JSON" in str(err.value)
        with pytest.raises(BadInput) as err:  # an unknown field too: it would be written as null
            EventLog(log).append([{"type": "lane_check", "ts": TS, "extra": {"deep": [1, value]}}])
        assert "bad_value: extra.deep[1]" in str(err.value)
    assert log.read_bytes() == before
    markers = tmp_path / "guard.err"
    markers.write_text(
        f"CLAUDE_QUOTA_JOB_SKIPPED job=j reason=quota remaining={'9' * 400}.5s ts=1785700000\n"
        "CLAUDE_QUOTA_JOB_SKIPPED job=j reason=quota remaining=12.5s ts=1785700060\n")
    out = run_cli("import", "quota-log", str(log), str(markers), "--json")
    assert out.returncode == 1 and "remaining=" in out.stderr and "out of range" in out.stderr
    written = [json.loads(x) for x in log.read_text().splitlines()[1:]]
    assert [e["remaining_s"] for e in written] == [12.5]  # the other marker, never a null
    assert "null" not in log.read_text()


def test_numbers_json_cannot_hold_are_bad_value_not_not_json(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('{"type":"job_skipped","ts":"' + TS + '","label":"j","reason":"q","remaining_s":1e400}\n')
    dump = json.loads(replayed(log))
    assert dump["bad_lines"][0]["reason"].startswith("bad_value: a number out of range")
    err = refused_and_unchanged(write_log(tmp_path / "other.jsonl", [created()]), log.read_text().strip())
    assert "stdin line 1: bad_value: a number out of range" in err


# -- 9. duplicate keys ------------------------------------------------------------------------------


def test_a_line_holding_a_key_twice_is_bad_value_for_replay_and_append(tmp_path: Path) -> None:
    twice = ('{"type":"claimed","ts":"' + TS + '","handoff_id":"h1","watcher":"w1","attempt":1,'
             '"watcher":"w2"}')
    nested = ('{"type":"job_registered","ts":"' + TS + '","label":"j","guarded":true,'
              '"calendar":[{"Hour":3,"Hour":4}],"interval_s":null}')
    escaped = '{"type":"lane_check","ts":"' + TS + '","t\\u0073":"' + TS + '"}'  # "ts" spelt another way
    log = write_log(tmp_path / "log.jsonl", [created()])
    for line, key in ((twice, "watcher"), (nested, "Hour"), (escaped, "ts")):
        err = refused_and_unchanged(log, line)
        assert f"stdin line 1: bad_value: duplicate key '{key}'" in err
    with log.open("a") as f:
        f.write(twice + "\n" + nested + "\n" + escaped + "\n")
    dump = json.loads(replayed(log))
    assert dump["bad_lines"] == [{"line": n, "reason": f"bad_value: duplicate key '{k}'"}
                                 for n, k in ((2, "watcher"), (3, "Hour"), (4, "ts"))]
    assert dump["handoffs"]["items"]["h1"]["state"] == "pending"
    # the same key in two objects of a list is no repeat
    ok = nested.replace('{"Hour":3,"Hour":4}', '{"Hour":3},{"Hour":4}')
    assert append(log, ok).returncode == 0


# -- 6. a log renamed over while append waits for the lock -------------------------------------------


def _waiting_for_lock(pid: int) -> bool:
    return any(" -> " in f" {x} " and f" {pid} " in x for x in Path("/proc/locks").read_text().splitlines())


def test_a_log_renamed_over_while_append_waits_for_the_lock_gets_the_event(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [created()])
    replacement = write_log(tmp_path / "new.jsonl", [created(), created("h2")])
    old = os.open(log, os.O_RDWR)
    fcntl.flock(old, fcntl.LOCK_EX)  # another writer holds the lock
    try:
        proc = subprocess.Popen([sys.executable, "-m", "eventlog", "append", str(log)], cwd=ROOT,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"type": "lane_check", "ts": TS}) + "\n")
        proc.stdin.close()
        proc.stdin = None  # written and closed: communicate() only reads
        deadline = time.monotonic() + 60
        while not _waiting_for_lock(proc.pid):
            assert time.monotonic() < deadline and proc.poll() is None, "append never waited for the lock"
            time.sleep(0.01)
        os.replace(replacement, log)  # the path names another file now
    finally:
        os.close(old)  # releases the lock on the old, now unlinked, file
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["last_seq"] == 3
    assert [json.loads(x)["type"] for x in log.read_text().splitlines()] == [
        "handoff_created", "handoff_created", "lane_check"]


# -- 8. append destroys a file that is not a log ----------------------------------------------------


def test_a_binary_file_without_a_newline_is_left_untouched(tmp_path: Path) -> None:
    rng = random.Random(15)
    blob = bytes(rng.choice([b for b in range(256) if b != 10]) for _ in range(99_624))
    binary = tmp_path / "image.bin"
    binary.write_bytes(blob)
    link = tmp_path / "log.jsonl"
    link.symlink_to(binary)
    for target in (binary, link):
        out = append(target, {"type": "lane_check", "ts": TS})
        assert out.returncode == 2 and "does not look like an event log" in out.stderr, out.stderr
        assert binary.read_bytes() == blob
    text = tmp_path / "notes.txt"  # lines, but none of them a JSON object
    text.write_text("shopping list\neggs\n")
    out = append(text, {"type": "lane_check", "ts": TS})
    assert out.returncode == 2 and "none of its 2 line(s) is a JSON object" in out.stderr
    assert text.read_text() == "shopping list\neggs\n"


def test_a_log_that_is_no_regular_file_is_refused_at_once(tmp_path: Path) -> None:
    # a FIFO made the appender wait forever for bytes, /dev/zero made it read forever, and /dev/null took the
    # event, answered exit 0 with seq 1 and kept nothing: an acknowledged append lost
    fifo = tmp_path / "log.jsonl"
    os.mkfifo(fifo)
    link = tmp_path / "null.jsonl"
    link.symlink_to(os.devnull)
    for target in (fifo, Path("/dev/zero"), Path(os.devnull), link):
        out = run_cli("append", str(target), stdin=json.dumps({"type": "lane_check", "ts": TS}) + "\n", timeout=30)
        assert out.returncode == 2, (target, out.returncode, out.stdout, out.stderr)
        assert f"{target} is not a regular file" in out.stderr and "nothing was written" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and out.stdout == ""
    assert not (tmp_path / "log.jsonl.sidecar").exists()


def test_more_than_a_line_of_torn_tail_is_never_cut(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [created()])
    with log.open("ab") as f:
        f.write(b'{"type":"lane_check","pad":"' + b"x" * (MAX_LINE_BYTES + 10))
    err = refused_and_unchanged(log, {"type": "lane_check", "ts": TS})
    assert "without a line end, more than any line (1 MiB)" in err


def test_a_refused_append_leaves_no_file_it_created(tmp_path: Path) -> None:
    log = tmp_path / "new.jsonl"
    out = append(log, {"type": "claimed", "ts": TS, "handoff_id": "h1", "watcher": "w", "attempt": 1})
    assert out.returncode == 3 and "never created" in out.stderr
    assert not log.exists()
    out = run_cli("append", str(log), "--expect-revision", "4", stdin=json.dumps(created()) + "\n")
    assert out.returncode == 3 and not log.exists()
    assert append(log, created()).returncode == 0 and log.exists()


# -- 5. a crash mid-batch leaves a partial batch committed -----------------------------------------


def test_a_batch_cut_at_any_line_is_not_applied_and_the_next_append_cuts_exactly_it(tmp_path: Path) -> None:
    whole = tmp_path / "whole.jsonl"
    EventLog(whole).append([created()])
    EventLog(whole).append([created(f"b{i}") for i in range(4)])
    data = whole.read_bytes()
    lines = data.splitlines(keepends=True)
    assert [json.loads(x).get("batch_end") for x in lines] == [None, 5, 5, 5, 5]
    for keep in range(1, 5):  # the first line and 0..3 lines of the batch, then maybe a torn piece
        for torn in (b"", lines[keep][:7]):
            log = tmp_path / f"cut{keep}{len(torn)}.jsonl"
            log.write_bytes(b"".join(lines[:keep]) + torn)
            dump = json.loads(replayed(log))
            assert dump["events"] == 1 and list(dump["handoffs"]["items"]) == ["h1"]
            assert dump["torn_tail"] is (keep > 1 or bool(torn)) and dump["bad_lines"] == []
            out = append(log, created("h2"))
            assert out.returncode == 0, out.stderr
            assert json.loads(out.stdout)["first_seq"] == 2
            if keep > 1:
                assert f"an unfinished batch of {keep - 1} complete line(s) (seq 2..{keep}, since line 2)" in out.stderr
            dump = json.loads(replayed(log))
            assert sorted(dump["handoffs"]["items"]) == ["h1", "h2"] and not dump["torn_tail"]
    interrupted = tmp_path / "interrupted.jsonl"  # a writer that does not take the lock wrote after it
    interrupted.write_bytes(b"".join(lines[:3]) + json.dumps({"type": "lane_check", "ts": TS, "seq": 9}).encode()
                            + b"\n")
    dump = json.loads(replayed(interrupted))
    assert [b["line"] for b in dump["bad_lines"]] == [2, 3]
    assert all(b["reason"].startswith("uncommitted: part of a batch that was to end at seq 5")
               for b in dump["bad_lines"])
    assert dump["events"] == 2 and not dump["torn_tail"]


# -- 7. a stale sidecar trusted --------------------------------------------------------------------


def _edited_in_the_middle(tmp_path: Path) -> tuple[Path, int]:
    """A log whose sidecar is saved, with h1 claimed by a line far from both ends; where that line's id is."""
    log = tmp_path / "log.jsonl"
    checks = [{"type": "lane_check", "ts": TS, "pad": "x" * 100}] * 100  # > 8 KiB each side of the claim
    EventLog(log).append([created(), created("h2"), *checks])
    EventLog(log).append([{"type": "claimed", "ts": TS, "handoff_id": "h1", "watcher": "w1", "attempt": 1}])
    EventLog(log).append(checks)
    assert (tmp_path / "log.jsonl.sidecar").exists()
    data = log.read_bytes()
    return log, data.index(b'"handoff_id":"h1","watcher"') + len('"handoff_id":"h')


def test_a_same_length_edit_before_the_sidecar_offset_is_noticed(tmp_path: Path) -> None:
    log, at = _edited_in_the_middle(tmp_path)
    inode = log.stat().st_ino
    with log.open("r+b") as f:  # the claim was of h2 after all: h1 is pending, h2 is claimed
        f.seek(at)
        f.write(b"2")
    assert log.stat().st_ino == inode
    truth = json.loads(replayed(log))["handoffs"]["items"]
    assert truth["h1"]["state"] == "pending" and truth["h2"]["state"] == "claimed"
    out = append(log, {"type": "claimed", "ts": TS, "handoff_id": "h1", "watcher": "w2", "attempt": 1})
    assert out.returncode == 0, out.stderr  # a valid claim: refused with exit 3 when the stale sidecar was trusted
    assert "(the log was edited before its offset); rebuilt it from the log" in out.stderr
    out = append(log, {"type": "claimed", "ts": TS, "handoff_id": "h2", "watcher": "w2", "attempt": 1})
    assert out.returncode == 3  # a claim replay rejects: accepted with exit 0 when the stale sidecar was trusted


def test_follow_notices_a_same_length_edit(tmp_path: Path) -> None:
    from eventlog.follow import Follower
    from projections.runner import Runner

    log, at = _edited_in_the_middle(tmp_path)
    follower = Follower(str(log), Runner)
    assert follower.start() is None
    assert follower.replay.folder.handoffs.items["h1"].state == "claimed"
    with log.open("r+b") as f:
        f.seek(at)
        f.write(b"2")
    note = follower.catch_up()  # what follow does on the change the edit makes
    assert note is not None and "edited before the lines already read" in note
    assert follower.replay.folder.handoffs.items["h1"].state == "pending"
    # an edit that also grows the file is seen by the periodic check of every byte
    with log.open("r+b") as f:
        f.seek(at)
        f.write(b"1")
    with log.open("a") as f:
        f.write(json.dumps({"type": "lane_check", "ts": TS}) + "\n")
    assert follower.catch_up() is None
    assert follower.replay.folder.handoffs.items["h1"].state == "pending"  # stale until the check
    note = follower.verify()
    assert note is not None and "edited" in note
    follower.catch_up()
    assert follower.replay.folder.handoffs.items["h1"].state == "claimed"
    assert follower.verify() is None
