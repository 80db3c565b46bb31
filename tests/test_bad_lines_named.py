"""``sessions``, ``explain`` and ``decide`` name the log's bad lines, as every other reader does.

The log of the review: line 2 is s1's ``checkpoint_restore_failed`` with ``"generation": "1"`` (a string),
line 3 is s2's ``worker_claimed`` with ``"generation": "x"``. What line 2 said (an incompatible checkpoint:
recovery required) is left out of s1's state, so s1 reads as admitted; s2 is known to no domain.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli, write_log

T = "2026-08-03T09:00:00+09:00"
CLAIMED = {"type": "worker_claimed", "ts": T, "session_id": "s1", "generation": 1, "worker": "w", "restore": True}
BAD_S1 = {"type": "checkpoint_restore_failed", "ts": "2026-08-03T09:00:10+09:00", "session_id": "s1",
          "generation": "1", "reason": "incompatible_checkpoint"}
BAD_S2 = {**CLAIMED, "session_id": "s2", "generation": "x"}
REASON = "wrong_type: generation: expected int, got str"
AT = ("--at", "2026-08-03T10:00:00+09:00")


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return write_log(tmp_path / "sbad.jsonl", [CLAIMED, BAD_S1, BAD_S2])


def counted(log: Path) -> str:
    """The one line every reader prints on stderr for this log's bad lines."""
    return f"eventlog: {log}: 2 bad line(s) skipped: line 2: {REASON}; line 3: {REASON}"


def named(log: Path, ident: str, line: int) -> str:
    return (f"eventlog: {log}: 1 bad line(s) name {ident!r}, left out of every verdict: line {line}: {REASON} "
            f"(see it: sed -n '{line}p' {log})")


def only_named(log: Path, ident: str, line: int) -> str:
    return (f"eventlog: {log}: no applied line names {ident!r}, only 1 bad line(s), left out of every verdict: "
            f"line {line}: {REASON} (see it: sed -n '{line}p' {log})")


def decide(log: Path, sid: str, key: str, *more: str) -> subprocess.CompletedProcess[str]:
    return run_cli("decide", str(log), sid, "--decision", "close", "--expected-revision", "1", "--idempotency-key",
                   key, "--reason", "retired", "--actor", "ops", *more)


def printed_by(command: str) -> str:
    """What a command we print for a person to copy prints (run by a shell, as they would)."""
    return subprocess.run(command, shell=True, capture_output=True, text=True, check=True, timeout=30).stdout


# --- explain ---------------------------------------------------------------------------------------


def test_explain_an_id_only_a_bad_line_names_says_which_line_and_why(log: Path) -> None:
    for json_too in ([], ["--json"]):
        out = run_cli("explain", str(log), "s2", *AT, *json_too)
        assert (out.returncode, out.stdout) == (2, "")
        assert out.stderr == only_named(log, "s2", 3) + "\n"
    assert json.loads(printed_by(f"sed -n '3p' {log}")) == BAD_S2


def test_explain_lists_the_bad_lines_that_name_the_id_among_its_lines(log: Path) -> None:
    out = run_cli("explain", str(log), "s1", *AT)
    assert out.returncode == 0
    first, second, *_ = out.stdout.splitlines()
    assert first.startswith(f"{log}:1: ")
    assert second == f"{log}:2: a bad line, left out of every verdict: {REASON}   <- see it: sed -n '2p' {log}"
    assert out.stderr == counted(log) + "\n"
    got = json.loads(run_cli("explain", str(log), "s1", "--json", *AT).stdout)
    assert [x["line"] for x in got["lines"]] == [1]
    assert got["named_by_bad_lines"] == [{"line": 2, "reason": REASON, "next": f"sed -n '2p' {log}"}]
    assert got["bad_lines"]["count"] == 2


def test_explain_finds_an_id_as_a_value_not_as_a_key_and_in_escapes(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(CLAIMED) + "\n"
                   + '{"type": "bogus", "s3" : 1}\n'                          # s3 only as a key: not named
                   + '{"type": "worker_claimed", "session_id": "caf\\u00e9", "generation": "x"}\n',
                   encoding="utf-8")
    out = run_cli("explain", str(log), "s3", *AT)
    assert out.returncode == 2
    assert out.stderr.startswith(f"eventlog: {log}: no line or domain names 's3'; {log}: 2 bad line(s) skipped")
    out = run_cli("explain", str(log), "café", *AT)
    assert out.returncode == 2 and "only 1 bad line(s), left out of every verdict: line 3: " in out.stderr


