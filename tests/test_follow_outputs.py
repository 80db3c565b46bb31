"""What ``follow`` and ``replay --snapshot`` write beside a log: never over the log (or a file eventlog keeps beside
it); a snapshot is a cache that may fail to save without stopping follow; the lines a snapshot saw committed that are
gone when follow starts again are counted as vanished, as those that vanish under a running follow are."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest

from eventlog import snapshot
from tests.conftest import ROOT, run_cli
from tests.test_follow import _metric, _wait_for

LINES = 600


def _log(path: Path, lines: int = LINES, hour: str = "09") -> Path:
    """A log of ``lines`` handoffs created, about 110 bytes a line."""
    path.write_text("".join(
        json.dumps({"type": "handoff_created", "ts": f"2026-08-03T{hour}:{i // 60 % 60:02d}:{i % 60:02d}+09:00",
                    "handoff_id": f"h{i}", "account": "a"}) + "\n" for i in range(lines)))
    return path


@contextmanager
def following(log: Path, *options: str) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """``eventlog follow LOG OPTIONS`` running while the block runs; yields it and, once it ended, its stderr lines.

    SIGTERM ends it after the block; it must exit 0 (stopped by SIGTERM, follow --help).
    """
    proc = subprocess.Popen([sys.executable, "-m", "eventlog", "follow", str(log), *options], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said: list[str] = []
    try:
        yield proc, said
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
        said += err.splitlines()
    assert proc.returncode == 0, err


def _alive(proc: subprocess.Popen[str], cond: Callable[[], Any]) -> Callable[[], Any]:
    """``cond``, failing at once when ``proc`` has ended (follow died: waiting on would only time out)."""
    def check() -> Any:
        if proc.poll() is not None:
            raise RuntimeError(f"follow ended with exit {proc.returncode}")
        return cond()
    return check


def _events(dump: Path) -> int:
    return int(json.loads(dump.read_text())["events"])


# --- an output that is the log ------------------------------------------------------------------------------


def _cases(t: Path) -> dict[str, tuple[list[str], str]]:
    """Each way to name the log ``T/l.jsonl`` (or a file eventlog keeps beside it) as an output: the command, what
    stderr says. ``T/link`` is a symbolic link to the log, ``T/hard`` a hard link."""
    log, dump, prom = t / "l.jsonl", str(t / "d.json"), str(t / "m.prom")
    later = t / "later.jsonl"
    refused = "it would be written over; not following it"
    return {
        "--dump the log by another path": (
            ["follow", str(log), "--dump", f"{t}/../T/l.jsonl", "--prom", prom, "--tick", "1s"],
            f"--dump {t}/../T/l.jsonl is the log {log} itself: {refused}"),
        "--prom the log": (
            ["follow", str(log), "--dump", dump, "--prom", str(log)],
            f"--prom {log} is the log {log} itself: {refused}"),
        "--snapshot a symbolic link to the log": (
            ["follow", str(log), "--dump", dump, "--snapshot", str(t / "link")],
            f"--snapshot {t / 'link'} is the log {log} itself: {refused}"),
        "--dump a hard link to the log": (
            ["follow", str(log), "--dump", str(t / "hard")], f"--dump {t / 'hard'} is the log {log} itself: {refused}"),
        "LOG a symbolic link, --dump the file": (
            ["follow", str(t / "link"), "--dump", str(log)], f"--dump {log} is the log {t / 'link'} itself: {refused}"),
        "a LOG not there yet, --dump its path": (
            ["follow", str(later), "--dump", f"{t}/./later.jsonl"],
            f"--dump {t}/./later.jsonl is the log {later} itself: {refused}"),
        "--dump the sidecar": (
            ["follow", str(log), "--dump", f"{log}.sidecar"],
            f"--dump {log}.sidecar is the sidecar of {log} (the state eventlog append keeps beside it): {refused}"),
        "--prom a runner's lock": (
            ["follow", str(log), "--dump", dump, "--prom", f"{log}.lanes.lock"],
            f"--prom {log}.lanes.lock is the lock file of the lanes runner of {log}: {refused}"),
        "--prom a follow's lock beside another output": (
            ["follow", str(log), "--dump", dump, "--prom", str(t / ".d.json.follow.lock")],
            f"--prom {t / '.d.json.follow.lock'} is the lock file a follow holds beside an output it writes: "
            f"{refused}"),
        "replay --snapshot a follow's lock": (
            ["replay", str(log), "--snapshot", str(t / ".s.snap.follow.lock")],
            f"--snapshot {t / '.s.snap.follow.lock'} is the lock file a follow holds beside an output it writes: "
            "it would be written over; nothing replayed"),
        "--dump and --snapshot one file": (
            ["follow", str(log), "--dump", dump, "--snapshot", dump],
            f"--dump {dump} and --snapshot {dump} are the same file: each would write over the other; "
            "not following it"),
        "replay --snapshot the log": (
            ["replay", str(log), "--snapshot", str(log)],
            f"--snapshot {log} is the log {log} itself: it would be written over; nothing replayed"),
    }


@pytest.mark.parametrize("case", list(_cases(Path("T"))))
def test_an_output_that_is_the_log_is_refused_before_anything_is_written(tmp_path: Path, case: str) -> None:
    """The review's case: `follow T/l.jsonl --dump ./T/../T/l.jsonl` exited 0 with every committed event gone (the
    log became the dump's one line), `replay --snapshot LOG` turned the log into msgpack. Exit 2 at once, the
    log's bytes as they were, and nothing else written beside it (the sidecar and the lock are the appender's and
    the runners': a lock renamed over lets two runners in at once)."""
    t = tmp_path / "T"
    t.mkdir()
    log = _log(t / "l.jsonl", 20)
    (t / "link").symlink_to("l.jsonl")
    os.link(log, t / "hard")
    before = log.read_bytes()
    args, said = _cases(t)[case]
    there = set(t.iterdir())
    out = run_cli(*args, timeout=20)
    assert (out.returncode, out.stderr, out.stdout) == (2, f"eventlog: {said}\n", "")
    assert log.read_bytes() == before
    assert set(t.iterdir()) == there


# --- a snapshot that cannot be saved --------------------------------------------------------------------------


def test_a_snapshot_that_cannot_be_saved_is_said_and_follow_goes_on(tmp_path: Path) -> None:
    """A --snapshot in a directory that does not exist made follow exit 2 with 'cannot follow LOG: No such file or
    directory' (the log was fine). The snapshot is a cache: it is named once with the reason, in the words of
    --dump's, and follow goes on following and ends cleanly on SIGTERM."""
    log, dump = _log(tmp_path / "l.jsonl", 3), tmp_path / "d.json"
    snap = tmp_path / "gone" / "s.snap"
    with following(log, "--dump", str(dump), "--snapshot", str(snap), "--tick", "1s") as (proc, said):
        assert _wait_for(_alive(proc, lambda: _events(dump) == 3))
        with log.open("a") as out:
            out.write(json.dumps({"type": "lane_check", "ts": "2026-08-03T10:00:00+09:00"}) + "\n")
        assert _wait_for(_alive(proc, lambda: _events(dump) == 4))
    assert said == [f"eventlog: snapshot {snap} not saved: its directory {tmp_path / 'gone'} does not exist"]
    assert not snap.parent.exists()


def test_a_snapshot_not_saved_is_said_once_shown_by_a_metric_and_said_again_when_saved(tmp_path: Path) -> None:
    """With the shipped unit (Restart=always) follow died every 10 s and replayed the whole log each time. Now the
    first failed save is said, the later ones are not (they fail every 10 s), recovery_snapshot_unsaved is 1 (the
    alert RecoverySnapshotUnsaved: every restart would replay the whole log), and once the directory is back the
    snapshot is saved, said, and the gauge is 0. Takes two saves: about 20 s."""
    log, dump, prom = _log(tmp_path / "l.jsonl", 3), tmp_path / "d.json", tmp_path / "m.prom"
    snap = tmp_path / "gone" / "s.snap"
    with following(log, "--dump", str(dump), "--prom", str(prom), "--snapshot", str(snap), "--tick", "1s") \
            as (proc, said):
        assert _wait_for(_alive(proc, lambda: _metric(prom, "recovery_snapshot_unsaved") == 0))
        assert _wait_for(_alive(proc, lambda: _metric(prom, "recovery_snapshot_unsaved") == 1), timeout=40)
        snap.parent.mkdir()
        assert _wait_for(_alive(proc, lambda: snap.exists() and _metric(prom, "recovery_snapshot_unsaved") == 0),
                         timeout=40)
    assert said == [f"eventlog: snapshot {snap} not saved: its directory {tmp_path / 'gone'} does not exist",
                    f"eventlog: snapshot {snap} saved again"]


# --- committed lines that vanished while follow was stopped ---------------------------------------------------


def _rewrite_snapshot(snap: Path, **fields: Any) -> None:
    envelope = msgspec.msgpack.decode(snap.read_bytes())
    envelope.update(fields)
    snap.write_bytes(msgspec.msgpack.encode(envelope))


WHILE_DOWN = {
    # what happens while follow is stopped: (counted as vanished, the note at start)
    "truncated": (True, "does not match the log's bytes (the log was truncated or rewritten)"),
    "a shorter file in its place": (True, "belongs to another file (the log was replaced)"),
    "truncated, the snapshot by another version": (True, "was written by another version"),
    "the same length edited, every line an event still": (False, "was edited before its offset"),
    "the snapshot is another log's": (False, "belongs to another file (the log was replaced)"),
}


@pytest.mark.parametrize("case", list(WHILE_DOWN))
def test_committed_lines_that_vanish_while_follow_is_stopped_are_counted(tmp_path: Path, case: str) -> None:
    """The review's case: follow --snapshot of 600 lines, SIGTERM, `truncate -s 30000`, start again: one stderr line
    and recovery_vanished_lines_total 0, the dump's lines_vanished null, no alert (the same cut while it ran fires
    RecoveryLinesVanished). The snapshot holds the committed lines that follow had read: fewer now is lines
    vanished, by the rule a running follow keeps (committed lines before and after a replay from the start, for the
    log at that path: a shorter file in its place counts, an edit that leaves every line an event does not). A
    snapshot that is not of this log (another path, another file) proves nothing. The dump is otherwise the one
    a full replay prints."""
    counted, note = WHILE_DOWN[case]
    log, dump, prom = _log(tmp_path / "l.jsonl"), tmp_path / "d.json", tmp_path / "m.prom"
    snap = tmp_path / "s.snap"
    first = log
    if case == "the snapshot is another log's":
        first = _log(tmp_path / "other.jsonl")
    with following(first, "--dump", str(dump), "--snapshot", str(snap), "--tick", "1h") as (proc, _said):
        assert _wait_for(_alive(proc, lambda: _events(dump) == LINES))
    assert snap.exists()
    if case.startswith("truncated"):
        os.truncate(log, 30000)
    elif case == "a shorter file in its place":
        _log(tmp_path / "new.jsonl", 100).replace(log)
    elif case.startswith("the same length"):
        log.write_bytes(log.read_bytes().replace(b'"h300"', b'"x300"', 1))  # far from both ends
    else:
        _log(tmp_path / "l.jsonl", 300)
    if case.endswith("by another version"):
        _rewrite_snapshot(snap, version="projections.runner.Runner/0123456789abcdef/tz=None/older")
    after = json.loads(run_cli("replay", str(log)).stdout)["events"]
    with following(log, "--dump", str(dump), "--prom", str(prom), "--snapshot", str(snap), "--tick", "1h") \
            as (proc, said):
        assert _wait_for(_alive(proc, lambda: prom.exists() and _events(dump) == after))
        written, metrics = dump.read_text(), prom.read_text()
    assert len(said) == 1 and said[0].startswith(f"eventlog: snapshot {snap} ") and note in said[0], said
    assert said[0].endswith("; replaying from the start")
    judged = json.loads(written)
    vanished = judged.pop("lines_vanished", None)
    full = run_cli("replay", "--at", judged["as_of"], str(log)).stdout
    if counted:
        assert after < LINES
        assert vanished is not None and {k: vanished[k] for k in ("lines", "times", "before", "after")} == \
            {"lines": LINES - after, "times": 1, "before": LINES, "after": after}
        assert f'recovery_vanished_lines_total{{log="{log}"}} {LINES - after}' in metrics
        assert json.loads(full) == judged
    else:
        assert vanished is None and f'recovery_vanished_lines_total{{log="{log}"}} 0' in metrics
        assert written == full


def test_a_log_rotated_away_while_follow_is_stopped_counts_once_a_new_one_is_made(tmp_path: Path) -> None:
    """Rotated while no follow ran (`mv l.jsonl l.jsonl.1`), follow started again before the new log is made: the
    snapshot held 600 committed lines of that path, the new log 100, so 500 vanished (the rule of a shorter file
    put in its place while follow was stopped). Before, a log missing at start was read from its start once made,
    the snapshot's lines forgotten: no lines_vanished, no alert. A log made with no snapshot behind it counts
    nothing (test_log_path_swaps)."""
    log, dump, prom, snap = _log(tmp_path / "l.jsonl"), tmp_path / "d.json", tmp_path / "m.prom", tmp_path / "s.snap"
    with following(log, "--dump", str(dump), "--snapshot", str(snap), "--tick", "1h") as (proc, _said):
        assert _wait_for(_alive(proc, lambda: _events(dump) == LINES))
    assert snap.exists()
    log.rename(tmp_path / "l.jsonl.1")
    with following(log, "--dump", str(dump), "--prom", str(prom), "--snapshot", str(snap), "--tick", "1h") \
            as (proc, said):
        assert _wait_for(_alive(proc, lambda: json.loads(dump.read_text()).get("log_missing") is True))
        _log(tmp_path / "new.jsonl", 100).replace(log)
        assert _wait_for(_alive(proc, lambda: _metric(prom, "recovery_vanished_lines_total") == LINES - 100))
        vanished = json.loads(dump.read_text())["lines_vanished"]
    assert {k: vanished[k] for k in ("lines", "times", "before", "after")} == \
        {"lines": LINES - 100, "times": 1, "before": LINES, "after": 100}
    assert f"eventlog: {log} is there now, holding {LINES - 100} committed lines fewer than it did (counted as " \
        "vanished); following it" in said, said


# --- how often the snapshot is written --------------------------------------------------------------------------


def test_an_idle_follow_leaves_its_snapshot_alone_and_saves_it_once_the_log_moves(tmp_path: Path) -> None:
    """follow rewrote its snapshot every 10 s with no new line (5.5 MB every 10 s on a 500k-line log: 95 GB a day
    written for nothing). It is written when the log moved past what it holds, as `replay --snapshot` does: an
    idle log's snapshot keeps its mtime across two 10 s periods; a new line is saved (here on SIGTERM). ~22 s."""
    log, dump, snap = _log(tmp_path / "l.jsonl", 50), tmp_path / "d.json", tmp_path / "s.snap"
    assert run_cli("replay", str(log), "--snapshot", str(snap)).returncode == 0
    before = snap.stat().st_mtime_ns, snap.read_bytes()
    with following(log, "--dump", str(dump), "--snapshot", str(snap), "--tick", "1s") as (proc, _said):
        assert _wait_for(_alive(proc, lambda: _events(dump) == 50))
        time.sleep(21)  # two periods of the snapshot's 10 s, idle
        assert proc.poll() is None
        assert (snap.stat().st_mtime_ns, snap.read_bytes()) == before
        with log.open("a") as f:
            f.write(json.dumps({"type": "handoff_created", "ts": "2026-08-03T10:00:00+09:00", "handoff_id": "h-new",
                                "account": "a"}) + "\n")
        assert _wait_for(_alive(proc, lambda: _events(dump) == 51))
    assert snap.stat().st_mtime_ns != before[0]
    kept, _why = snapshot.read(str(snap), snapshot.Snapshot, snapshot.FORMAT)
    assert kept is not None and kept.position.offset == log.stat().st_size  # the new line too


# --- a snapshot another version wrote --------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["replay", "follow"])
def test_a_snapshot_of_an_older_format_is_said_to_be_one_not_unreadable(tmp_path: Path, command: str) -> None:
    """A format 2 snapshot (no hash of the whole prefix) was reported as unreadable ("Object missing required field
    `prefix_xxh3`"): its format is read first, and it is named as written by another version."""
    log, snap, dump = _log(tmp_path / "l.jsonl", 5), tmp_path / "s.snap", tmp_path / "d.json"
    assert run_cli("replay", str(log), "--snapshot", str(snap)).returncode == 0
    envelope = msgspec.msgpack.decode(snap.read_bytes())
    del envelope["position"]["prefix_xxh3"]
    envelope["format"] = 2
    snap.write_bytes(msgspec.msgpack.encode(envelope))
    said = f"snapshot {snap} was written by another version (format 2: {envelope['version']}; this one reads " \
           f"format {snapshot.FORMAT}); replaying from the start"
    if command == "replay":
        out = run_cli("replay", str(log), "--snapshot", str(snap))
        assert (out.returncode, out.stderr) == (0, f"eventlog: {said}\n")
        assert out.stdout == run_cli("replay", str(log)).stdout
    else:
        with following(log, "--dump", str(dump), "--snapshot", str(snap), "--tick", "1h") as (proc, lines):
            assert _wait_for(_alive(proc, lambda: _events(dump) == 5))
        assert lines == [f"eventlog: {said}"]


# --- one follow per output -------------------------------------------------------------------------------------


SHARED = ["--dump", "--prom", "--snapshot"]


@pytest.mark.parametrize("shared", SHARED)
def test_a_follow_on_an_output_another_follow_writes_is_refused(tmp_path: Path, shared: str) -> None:
    """The review's case: `follow L.jsonl --dump d.json --prom m.prom` and `follow Old.jsonl --dump d.json --prom
    m.prom` both ran, both exit 0 on SIGTERM, nothing on stderr, d.json said L.jsonl 4 times in 12 and Old.jsonl 8
    times; with two versions m.prom flipped between two series sets (alerts' `for:` timers started again). The
    second follow, sharing any one output, is refused at once: exit 2, nothing written, the output and the first
    one's pid named; the first goes on writing its own log's dump."""
    log, old = _log(tmp_path / "L.jsonl", 3), _log(tmp_path / "Old.jsonl", 5)
    first = {"--dump": tmp_path / "d.json", "--prom": tmp_path / "m.prom", "--snapshot": tmp_path / "s.snap"}
    second = {"--dump": tmp_path / "d2.json", "--prom": tmp_path / "m2.prom", "--snapshot": tmp_path / "s2.snap"}
    second[shared] = first[shared]
    with following(log, *(str(a) for option, path in first.items() for a in (option, path)), "--tick", "0.2s") \
            as (proc, said):
        assert _wait_for(_alive(proc, lambda: _events(first["--dump"]) == 3 and first["--snapshot"].exists()))
        out = run_cli("follow", str(old), *(str(a) for option, path in second.items() for a in (option, path)),
                      "--tick", "0.2s", timeout=30)
        path = first[shared]
        lock = tmp_path / f".{path.name}.follow.lock"
        assert (out.returncode, out.stderr) == (
            2, f"eventlog: {shared} {path} is written by another follow (pid {proc.pid}, holding {lock}): stop it "
               "first, or give this one other outputs; not following it\n")
        assert not any(second[option].exists() for option in SHARED if option != shared)
        seen = set()
        for _ in range(10):  # a few of the first one's ticks: only its log
            seen.add(json.loads(first["--dump"].read_text())["log"])
            time.sleep(0.1)
        assert seen == {str(log)}
    assert said == []


def test_replay_snapshot_reads_the_snapshot_a_follow_keeps_and_never_writes_it(tmp_path: Path) -> None:
    """`replay LOG --snapshot SNAP` took no lock while `follow LOG --snapshot SNAP` kept SNAP: two writers of one
    cache, with other settings (a zone, thresholds: part of a snapshot's version) each replacing the other's work.
    Now replay takes follow's lock on SNAP, never waiting: held, it still reads SNAP when it matches, does not
    write it, and says so once, naming the follow's pid; its stdout and exit are a replay's."""
    log, dump, snap = _log(tmp_path / "l.jsonl", 3), tmp_path / "d.json", tmp_path / "s.snap"
    assert run_cli("replay", str(log), "--snapshot", str(snap)).returncode == 0
    lock = tmp_path / ".s.snap.follow.lock"
    with following(log, "--dump", str(dump), "--snapshot", str(snap), "--tick", "1h") as (proc, said):
        assert _wait_for(_alive(proc, lambda: _events(dump) == 3))
        held = (f"eventlog: --snapshot {snap} is written by another follow (pid {proc.pid}, holding {lock}): it is "
                "read if it matches the log, and not saved")
        with log.open("a") as f:
            f.write(json.dumps({"type": "handoff_created", "ts": "2026-08-03T10:00:00+09:00", "handoff_id": "h9",
                                "account": "a"}) + "\n")
        for zone in ([], ["--assume-tz", "Asia/Tokyo"]):  # the follow's settings, then a snapshot of others
            out = run_cli("replay", str(log), "--snapshot", str(snap), *zone)
            assert (out.returncode, out.stdout) == (0, run_cli("replay", str(log), *zone).stdout)
            notes = out.stderr.splitlines()
            assert notes.count(held) == 1, out.stderr
            if not zone:
                assert notes == [held]  # read: it matched
            kept, _why = snapshot.read(str(snap), snapshot.Snapshot, snapshot.FORMAT)
            assert kept is not None and "/tz=None/" in kept.version  # the follow's, never the replay's
            assert not list(tmp_path.glob(".s.snap.*.tmp"))
    assert said == []


def test_a_piped_log_says_only_that_the_snapshot_is_not_used_while_a_follow_keeps_it(tmp_path: Path) -> None:
    """`replay <(cat LOG) --snapshot SNAP` while a follow keeps SNAP said it would read SNAP "if it matches", then
    that it read none: a pipe never uses a snapshot, so only that is said."""
    log, dump, snap = _log(tmp_path / "l.jsonl", 3), tmp_path / "d.json", tmp_path / "s.snap"
    with following(log, "--dump", str(dump), "--snapshot", str(snap), "--tick", "1h") as (proc, said):
        assert _wait_for(_alive(proc, lambda: _events(dump) == 3))
        cmd = f"{sys.executable} -m eventlog replay --snapshot {snap} <(cat {log})"
        out = subprocess.run(["bash", "-c", cmd], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 0, out.stderr
        assert len(out.stderr.splitlines()) == 1, out.stderr
        assert "is not a file (a pipe?)" in out.stderr and "not read, not saved" in out.stderr
        assert json.loads(out.stdout)["events"] == 3
    assert said == []


def test_a_follow_is_refused_a_snapshot_a_replay_is_writing(tmp_path: Path) -> None:
    """The lock works both ways: while `replay LOG --snapshot SNAP` runs (here held up opening a pipe no one writes
    yet), a follow started on SNAP is refused, naming that replay; once the replay has ended, the follow starts."""
    pipe, log = tmp_path / "pipe", _log(tmp_path / "l.jsonl", 3)
    dump, snap = tmp_path / "d.json", tmp_path / "s.snap"
    os.mkfifo(pipe)
    replay = subprocess.Popen([sys.executable, "-m", "eventlog", "replay", str(pipe), "--snapshot", str(snap)],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lock = tmp_path / ".s.snap.follow.lock"
    try:
        assert _wait_for(lambda: lock.read_text().split()[2:] == ["replay"])
        out = run_cli("follow", str(log), "--dump", str(dump), "--snapshot", str(snap), timeout=30)
        assert (out.returncode, out.stderr) == (
            2, f"eventlog: --snapshot {snap} is written by another replay (pid {replay.pid}, holding {lock}): stop "
               "it first, or give this one other outputs; not following it\n")
        assert not dump.exists()
    finally:
        with pipe.open("w") as f:  # the replay goes on (a pipe is no log a snapshot can match: not looked at here)
            f.write(log.read_text())
        replay.communicate(timeout=30)
    with following(log, "--dump", str(dump), "--snapshot", str(snap), "--tick", "1h") as (proc, said):
        assert _wait_for(_alive(proc, lambda: _events(dump) == 3))
    assert said == []


@pytest.mark.parametrize("end", [signal.SIGTERM, signal.SIGKILL])
def test_an_outputs_lock_ends_with_its_follow(tmp_path: Path, end: signal.Signals) -> None:
    """The shipped unit restarts follow (Restart=always) after a crash or a kill, and on `systemctl restart`: the
    old process is gone, and the kernel released its locks, so the next follow on the same outputs starts (the lock
    files left beside them hold no one)."""
    log, dump, prom, snap = _log(tmp_path / "l.jsonl", 3), tmp_path / "d.json", tmp_path / "m.prom", tmp_path / "s"
    outputs = ["--dump", str(dump), "--prom", str(prom), "--snapshot", str(snap), "--tick", "0.2s"]
    proc = subprocess.Popen([sys.executable, "-m", "eventlog", "follow", str(log), *outputs], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_for(_alive(proc, lambda: _events(dump) == 3 and snap.exists()))
    finally:
        proc.send_signal(end)
        proc.communicate(timeout=30)
    assert (tmp_path / ".d.json.follow.lock").exists()
    dump.unlink()
    with following(log, *outputs) as (again, said):
        assert _wait_for(_alive(again, lambda: _events(dump) == 3))
    assert said == []


@pytest.mark.parametrize("at", ["--dump", "--snapshot"])
def test_a_symbolic_link_at_an_outputs_lock_is_never_followed(tmp_path: Path, at: str) -> None:
    """A link planted at an output's lock could make follow create a file anywhere, as one at a runner's lock could.
    The dump's is refused (exit 2, nothing written); the snapshot is a cache: kept without its lock, said."""
    log, dump, snap = _log(tmp_path / "l.jsonl", 3), tmp_path / "d.json", tmp_path / "s.snap"
    lock = tmp_path / f".{(dump if at == '--dump' else snap).name}.follow.lock"
    lock.symlink_to(tmp_path / "elsewhere")
    why = f"cannot open the lock file {lock}: it is a symbolic link (never followed): remove it"
    if at == "--dump":
        out = run_cli("follow", str(log), "--dump", str(dump), "--snapshot", str(snap), timeout=30)
        assert (out.returncode, out.stderr) == (2, f"eventlog: {why}; not following it\n")
        assert not dump.exists() and not snap.exists()
    else:
        with following(log, "--dump", str(dump), "--snapshot", str(snap), "--tick", "1h") as (proc, said):
            assert _wait_for(_alive(proc, lambda: _events(dump) == 3))
        assert said == [f"eventlog: snapshot {snap} kept without its lock: {why}"]
    assert not (tmp_path / "elsewhere").exists()
