"""What ``follow`` and ``replay --snapshot`` write beside a log: never over the log (or a file eventlog keeps beside
it); a snapshot is a cache that may fail to save without stopping follow; the lines a snapshot saw committed that are
gone when follow starts again are counted as vanished, as those that vanish under a running follow are."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, run_cli

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
