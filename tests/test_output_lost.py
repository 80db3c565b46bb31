"""Output that cannot be written: a full disk (``/dev/full``), a reader that went away, a closed stdout.

What the CLI's help and README promise: exit 4, no traceback; a reader that went
away is no news (nothing on stderr); any other failure is one line on stderr; and a
command that wrote to the log says so, with its seq or line, so that nobody writes
it twice because its receipt never came.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, write_log

FULL = "/dev/full"
EVENT = '{"type":"handoff_created","ts":"2026-08-03T09:00:00+09:00","handoff_id":"h1","account":"a"}\n'
CLAIMED = {"type": "claimed", "ts": "2026-08-03T10:00:00+09:00", "handoff_id": "h1", "watcher": "w1", "attempt": 1}
#: Written with and without a buffer: the write fails in print() or in the last flush.
BUFFERING = {"unbuffered": "1", "buffered": None}


@pytest.fixture
def full() -> str:
    if not os.path.exists(FULL):
        pytest.skip(f"{FULL.upper()} IS MISSING (not Linux?): the disk-full output checks did not run")
    return FULL


@pytest.fixture(params=list(BUFFERING))
def env(request: pytest.FixtureRequest) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if BUFFERING[request.param] is not None:
        out["PYTHONUNBUFFERED"] = "1"
    return out


@pytest.fixture
def closed_pipe() -> Iterator[int]:
    """The write end of a pipe whose reader is gone."""
    r, w = os.pipe()
    os.close(r)
    yield w
    os.close(w)


def run(stdout: str | int, *args: str, stdin: str | None = None, env: dict[str, str] | None = None,
        argv: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """``eventlog ARGS`` with stdout to a path or an fd; stderr captured."""
    out = open(stdout, "w") if isinstance(stdout, str) else stdout
    try:
        return subprocess.run(argv or [sys.executable, "-m", "eventlog", *args], input=stdin, stdout=out,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env, timeout=120, check=False)
    finally:
        if isinstance(stdout, str):
            out.close()


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def log_lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines()]


def test_append_to_a_full_disk_says_the_event_was_written(tmp_path: Path, full: str, env: dict[str, str]) -> None:
    log = tmp_path / "log.jsonl"
    out = run(full, "append", str(log), stdin=EVENT, env=env)
    assert out.returncode == 4
    line = one_line(out.stderr)
    assert line.startswith("eventlog: cannot write to stdout (")
    assert f"{log}: 1 event(s) written (seq 1): do not append them again" in line
    assert [e["seq"] for e in log_lines(log)] == [1]  # written once, and said so
    again = run(full, "append", str(log), stdin=EVENT.replace("h1", "h2") + EVENT.replace("h1", "h3"), env=env)
    assert again.returncode == 4 and "2 event(s) written (seq 2 to 3)" in one_line(again.stderr)


def test_append_whose_reader_went_away_still_says_what_it_wrote(tmp_path: Path, closed_pipe: int) -> None:
    log = tmp_path / "log.jsonl"
    out = run(closed_pipe, "append", str(log), stdin=EVENT)
    assert out.returncode == 4
    line = one_line(out.stderr)
    assert line.startswith("eventlog: stdout was closed by its reader") and "1 event(s) written (seq 1)" in line
    assert len(log_lines(log)) == 1


def test_append_to_a_closed_stdout(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    out = run(subprocess.DEVNULL, stdin=EVENT,
              argv=["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-m", "eventlog", "append", str(log)])
    assert out.returncode == 4
    line = one_line(out.stderr)
    assert "stdout is closed" in line and "1 event(s) written (seq 1)" in line
    assert len(log_lines(log)) == 1


def test_a_failed_append_is_not_exit_4(tmp_path: Path, full: str) -> None:
    """Nothing written, nothing printed: the append's own status (2 bad input), not the output's."""
    out = run(full, "append", str(tmp_path / "log.jsonl"), stdin='{"type":"nope"}\n')
    assert out.returncode == 2 and "unknown_type" in out.stderr and not (tmp_path / "log.jsonl").exists()


def test_decide_to_a_full_disk_names_the_line_and_the_key(tmp_path: Path, full: str, env: dict[str, str]) -> None:
    log = tmp_path / "log.jsonl"
    shutil.copy(ROOT / "fixtures" / "sessions_unknown_turn.jsonl", log)
    n = len(log_lines(log))
    args = ["decide", str(log), "s-early-gone", "--decision", "close", "--expected-revision", "3",
            "--idempotency-key", "k-full", "--reason", "gone", "--actor", "ops"]
    out = run(full, *args, env=env)
    assert out.returncode == 4
    line = one_line(out.stderr)
    assert f"{log}: the decision is written at line {n + 1} (accepted)" in line and "--idempotency-key k-full" in line
    written = log_lines(log)[n:]
    assert [e["type"] for e in written] == ["recovery_decision"]
    receipt = subprocess.run([sys.executable, "-m", "eventlog", *args, "--json"], capture_output=True, text=True,
                             cwd=ROOT, check=False)
    assert json.loads(receipt.stdout)["replayed"] is True, receipt.stderr  # the key gives the first receipt


def test_a_persons_handoff_action_to_a_full_disk(tmp_path: Path, full: str) -> None:
    log = write_log(tmp_path / "log.jsonl", [json.loads(EVENT), CLAIMED])
    out = run(full, "handoff", "release", str(log), "h1", "--reason", "dead", "--actor", "ops",
              "--at", "2026-08-03T11:00:00+09:00")
    assert out.returncode == 4
    assert "h1: released appended (release by ops); claimed -> pending" in one_line(out.stderr)
    assert log_lines(log)[-1]["type"] == "released"


def test_keys_add_to_a_full_disk_says_the_key_was_never_shown(tmp_path: Path, full: str) -> None:
    keys = tmp_path / "keys.json"
    out = run(full, "keys", "add", str(keys), "alice", "--scope", "read")
    assert out.returncode == 4
    assert "key 'alice' added to" in out.stderr and "never shown" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("args", [
    ["replay", "{fixture}"],
    ["replay", "--check", "{fixture}"],
    ["status", "{fixture}", "--at", "log"],
    ["status", "{fixture}", "--at", "log", "--json"],
    ["export", "{fixture}"],
    ["schema"],
    ["--version"],
    ["replay", "--help"],
])
def test_a_command_whose_output_cannot_be_written_exits_4_in_one_line(args: list[str], full: str,
                                                                     env: dict[str, str]) -> None:
    fixture = str(ROOT / "fixtures" / "handoffs_seed_98.jsonl")
    out = run(full, *[a.format(fixture=fixture) for a in args], env=env)
    assert out.returncode == 4
    assert one_line(out.stderr).startswith("eventlog: cannot write to stdout (")


def test_replay_into_a_closed_pipe_is_quiet(closed_pipe: int) -> None:
    out = run(closed_pipe, "replay", str(ROOT / "fixtures" / "handoffs_seed_98.jsonl"))
    assert out.returncode == 4 and out.stderr == ""


@pytest.mark.parametrize("buffering", list(BUFFERING))
def test_tools_replay_into_head_is_quiet(buffering: str) -> None:
    """``tools/replay fixtures/*.jsonl | head -c 10``: the reader takes 10 bytes and goes away."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if BUFFERING[buffering] is not None:
        env["PYTHONUNBUFFERED"] = "1"
    fixtures = sorted(str(p) for p in (ROOT / "fixtures").glob("*.jsonl"))
    proc = subprocess.Popen([str(ROOT / "tools" / "replay"), *fixtures], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    head = os.read(proc.stdout.fileno(), 10)
    proc.stdout.close()  # more than a pipe holds is still to come (checked below)
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(120) == 4
    assert head.startswith(b'{"log":') and stderr == ""
    whole = subprocess.run([str(ROOT / "tools" / "replay"), *fixtures], capture_output=True, cwd=ROOT, check=True)
    assert len(whole.stdout) > (64 << 10) + 10  # more than a pipe holds
