"""``eventlog follow``: only new complete lines, partial lines waited for, truncation and replacement."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pytest

from eventlog.follow import Follower
from projections.runner import Runner
from tests.conftest import ROOT, run_cli

LINE = '{"type":"lane_check","ts":"2026-08-08T10:0%d:00+09:00"}\n'


def test_partial_line_is_waited_for(tmp_path: Path) -> None:
    log = tmp_path / "w.jsonl"
    log.write_text(LINE % 0)
    f = Follower(str(log), Runner)
    assert f.start() is None
    assert f.dump()["events"] == 1
    with log.open("a") as out:
        out.write((LINE % 1)[:20])
    assert f.catch_up() is None
    assert f.dump()["events"] == 1 and f.dump()["torn_tail"] is True
    with log.open("a") as out:
        out.write((LINE % 1)[20:])
    f.catch_up()
    dump = f.dump()
    assert dump["events"] == 2 and dump["torn_tail"] is False
    assert dump["as_of"] == "2026-08-08T10:01:00+09:00"


def test_truncated_and_replaced_files_are_replayed_from_the_start(tmp_path: Path) -> None:
    log = tmp_path / "w.jsonl"
    log.write_text(LINE % 0 + LINE % 1)
    f = Follower(str(log), Runner)
    f.start()
    log.write_text(LINE % 2)  # same inode, shorter
    note = f.catch_up()
    assert note is not None and "truncated" in note
    assert f.dump()["events"] == 1 and f.dump()["as_of"] == "2026-08-08T10:02:00+09:00"
    other = tmp_path / "new.jsonl"
    other.write_text(LINE % 3 + LINE % 4)
    os.replace(other, log)
    note = f.catch_up()
    assert note is not None and "replaced" in note
    assert f.dump()["events"] == 2


def test_rewritten_bytes_before_the_offset_are_noticed(tmp_path: Path) -> None:
    log = tmp_path / "w.jsonl"
    log.write_text(LINE % 0)
    f = Follower(str(log), Runner)
    f.start()
    with log.open("r+") as out:  # same length, different bytes, then more
        out.write((LINE % 5) + LINE % 6)
    note = f.catch_up()
    assert note is not None and "rewritten" in note
    assert f.dump()["events"] == 2


def test_follow_command_updates_the_dump_and_stops_cleanly(tmp_path: Path) -> None:
    log = tmp_path / "w.jsonl"
    dump = tmp_path / "dump.json"
    prom = tmp_path / "m.prom"
    log.write_text(LINE % 0)
    started = datetime.now().astimezone()
    proc = subprocess.Popen(
        [sys.executable, "-m", "eventlog", "follow", str(log), "--dump", str(dump), "--prom", str(prom)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert _wait_for(lambda: dump.exists() and json.loads(dump.read_text())["events"] == 1)
        with log.open("a") as out:
            out.write(LINE % 1)
        assert _wait_for(lambda: json.loads(dump.read_text())["events"] == 2)
        written = json.loads(dump.read_text())
        # judged as of now when written: the dump `tools/replay --at NOW LOG` prints
        assert datetime.fromisoformat(written["as_of"]) >= started
        assert written == json.loads(run_cli("replay", "--at", written["as_of"], str(log)).stdout)
        assert "recovery_events" in prom.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err


def _wait_for(cond: object, timeout: float = 30.0) -> bool:
    """Whether ``cond()`` comes true within ``timeout`` s; a file not there yet, half-read or without the
    sample asked for (OSError, ValueError, AssertionError) is "not yet". Returns at once when it is true,
    so the long timeout costs only on a loaded machine or a failure."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if cond():  # type: ignore[operator]
                return True
        except (OSError, ValueError, AssertionError):
            pass
        time.sleep(0.02)
    return False


def test_follow_waits_for_a_missing_log_and_never_writes_an_all_clear(tmp_path: Path) -> None:
    log = tmp_path / "later.jsonl"
    dump = tmp_path / "dump.json"
    prom = tmp_path / "m.prom"
    proc = subprocess.Popen(
        [sys.executable, "-m", "eventlog", "follow", str(log), "--dump", str(dump), "--prom", str(prom)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert _wait_for(lambda: dump.exists() and prom.exists())  # the dump is written first, then the metrics
        missing = json.loads(dump.read_text())
        assert missing["log_missing"] is True and missing["events"] == 0
        assert "recovery_log_missing{" in prom.read_text() and _metric(prom, "recovery_log_missing") == 1
        log.write_text(LINE % 0)
        assert _wait_for(lambda: json.loads(dump.read_text())["events"] == 1)
        there = json.loads(dump.read_text())
        assert "log_missing" not in there
        assert _wait_for(lambda: _metric(prom, "recovery_log_missing") == 0)
        log.unlink()
        assert _wait_for(lambda: json.loads(dump.read_text()).get("log_missing") is True)
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    notes = err.splitlines()
    assert notes[0] == f"eventlog: {log} does not exist yet; waiting for it"
    assert f"eventlog: {log} is there now; following it" in notes
    assert f"eventlog: {log} is gone; waiting for it to come back" in notes


def _metric(prom: Path, name: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(prom.read_text()):
        for sample in family.samples:
            if sample.name == name:
                return sample.value
    raise AssertionError(f"{name} not in {prom}")


@contextmanager
def following(log: Path, tmp_path: Path, *extra: str) -> Iterator[tuple[Path, Path]]:
    """``eventlog follow LOG --dump DUMP --prom PROM --tick 1h`` (and ``extra``) running while the block runs;
    yields (DUMP, PROM).

    SIGTERM ends it after the block, and it must exit 0 (OUTPUTS.md: "end it cleanly with exit 0").
    """
    dump, prom = tmp_path / "dump.json", tmp_path / "m.prom"
    proc = subprocess.Popen(
        [sys.executable, "-m", "eventlog", "follow", str(log), "--dump", str(dump), "--prom", str(prom),
         "--tick", "1h", *extra], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        yield dump, prom
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err



@pytest.mark.parametrize("kind", ["a FIFO", "a directory", "a file in a directory that does not exist"])
def test_a_log_that_can_never_be_followed_is_refused_at_start(tmp_path: Path, kind: str) -> None:
    """follow --help: exit 2 for a log that cannot be followed, said on stderr in serve's words, at once (a FIFO
    blocked it in open() for good, deaf to SIGTERM); nothing is written."""
    log = tmp_path / "log.jsonl"
    if kind == "a FIFO":
        os.mkfifo(log)
        said = f"{log} is not a regular file (a FIFO), so it cannot hold a log; not following it"
    elif kind == "a directory":
        log.mkdir()
        said = f"{log} is a directory, not a log file; not following it"
    else:
        log = tmp_path / "nowhere" / "log.jsonl"
        said = f"{log}: its directory {tmp_path / 'nowhere'} does not exist; not following it"
    dump = tmp_path / "dump.json"
    started = time.monotonic()
    out = run_cli("follow", str(log), "--dump", str(dump), "--prom", str(tmp_path / "m.prom"), timeout=30)
    assert out.returncode == 2, out.stderr
    assert out.stderr == f"eventlog: {said}\n"
    assert time.monotonic() - started < 20
    assert not dump.exists()


@pytest.mark.parametrize("where", ["a directory that does not exist", "a file as its directory", "a directory",
                                   "/proc, which takes no new file"])
def test_a_dump_that_cannot_be_written_is_named_not_the_log(tmp_path: Path, where: str) -> None:
    """Exit 2, and the path that is wrong on stderr with the real reason: here the dump's, not the log that is
    fine. /proc/version is a file, so "No such file or directory" sent a person looking for one that is there:
    follow writes a new file beside the dump and renames it over it, and /proc takes no new file."""
    log = tmp_path / "work.jsonl"
    log.write_bytes((ROOT / "fixtures" / "handoffs_network_cut.jsonl").read_bytes())
    if where == "a directory that does not exist":
        dump = tmp_path / "no-such-dir" / "dump.json"
        why = f"its directory {tmp_path / 'no-such-dir'} does not exist"
    elif where == "a file as its directory":
        dump = log / "dump.json"
        why = f"{log} is not a directory"
    elif where == "a directory":
        dump = tmp_path
        why = "it is a directory"
    else:
        if not Path("/proc/version").is_file():
            pytest.skip("no /proc/version here (Linux has one)")
        dump = Path("/proc/version")
        why = "no file can be created in /proc (it takes no new file); it is written as a new file there, then " \
              "renamed over it"
    out = run_cli("follow", str(log), "--dump", str(dump))
    assert out.returncode == 2
    assert out.stderr == f"eventlog: cannot write {dump}: {why}\n"
    out = run_cli("follow", str(log), "--dump", str(tmp_path / "d.json"), "--prom", str(dump))  # the same for --prom
    assert (out.returncode, out.stderr) == (2, f"eventlog: cannot write {dump}: {why}\n")


def test_what_a_killed_follow_left_beside_its_outputs_is_removed_and_said(tmp_path: Path) -> None:
    """A follow killed mid-write (kill -9, a power cut) leaves its temporary file beside the dump, the metrics or
    the snapshot; every restart by the timer would leave more. The next follow removes its own leftovers (untouched
    for a minute) and says so; a file of the same shape written just now, and any other file, are left."""
    log = tmp_path / "work.jsonl"
    log.write_text(LINE % 1)
    old = time.time() - 3600
    left = [tmp_path / f".{name}.0123456789abcdef.tmp" for name in ("dump.json", "m.prom")]
    fresh, other = tmp_path / ".dump.json.fedcba9876543210.tmp", tmp_path / ".dump.json.notmine.tmp"
    for path in [*left, fresh, other]:
        path.write_text("{")
    for path in [*left, other]:
        os.utime(path, (old, old))
    dump, prom = tmp_path / "dump.json", tmp_path / "m.prom"
    proc = subprocess.Popen(
        [sys.executable, "-m", "eventlog", "follow", str(log), "--dump", str(dump), "--prom", str(prom),
         "--tick", "1h"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert _wait_for(lambda: dump.exists() and prom.exists())
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert not any(path.exists() for path in left) and fresh.exists() and other.exists()
    for path, output in zip(left, (dump, prom), strict=True):
        assert f"removed {path}, left by a writer stopped while writing {output}" in err


def test_what_a_killed_follow_left_a_moment_before_its_restart_is_removed_once_it_is_a_minute_old(
        tmp_path: Path) -> None:
    """The unit restarts a killed follow 5 s later (Restart=always, RestartSec=5s): what the killed one was writing
    is too young then to be taken for a leftover, and was left until the next restart, one more at every kill. The
    follow holding the output's lock removes it once it is a minute old (here 50 s old at the start: on the first
    tick 10 s on), and says so once; one written just now stays."""
    log = tmp_path / "work.jsonl"
    log.write_text(LINE % 1)
    dump, snap = tmp_path / "dump.json", tmp_path / "s.snap"
    killed = [tmp_path / ".s.snap.0123456789abcdef.tmp", tmp_path / ".dump.json.0123456789abcdef.tmp"]
    fresh = tmp_path / ".dump.json.fedcba9876543210.tmp"
    a_moment_ago = time.time() - 50
    for path in [*killed, fresh]:
        path.write_text("{")
    for path in killed:
        os.utime(path, (a_moment_ago, a_moment_ago))
    proc = subprocess.Popen(
        [sys.executable, "-m", "eventlog", "follow", str(log), "--dump", str(dump), "--snapshot", str(snap),
         "--tick", "0.2s"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert _wait_for(lambda: dump.exists())
        assert all(path.exists() for path in killed)  # too young at the start
        assert _wait_for(lambda: not any(path.exists() for path in killed), timeout=30)
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert fresh.exists()
    for path, output in zip(killed, (snap, dump), strict=True):
        assert err.count(f"removed {path}, left by a writer stopped while writing {output}") == 1, err
