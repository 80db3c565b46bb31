"""``sessions``, ``explain`` and ``decide`` name the log's bad lines, as every other reader does.

The log of the review: line 2 is s1's ``checkpoint_restore_failed`` with ``"generation": "1"`` (a string),
line 3 is s2's ``worker_claimed`` with ``"generation": "x"``. What line 2 said (an incompatible checkpoint:
recovery required) is left out of s1's state, so s1 reads as admitted; s2 is known to no domain.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, run_cli, write_log
from tests.serving import start_server

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


# --- sessions --------------------------------------------------------------------------------------


def test_sessions_names_the_bad_lines_and_exits_1(log: Path) -> None:
    out = run_cli("sessions", str(log), *AT)
    assert out.returncode == 1
    assert "s1: admitted" in out.stdout
    assert out.stderr == counted(log) + "\n"
    got = json.loads(run_cli("sessions", str(log), "--json", *AT).stdout)
    assert got["bad_lines"] == {"count": 2, "first": [{"line": 2, "reason": REASON}, {"line": 3, "reason": REASON}]}


def test_sessions_of_one_session_names_the_bad_lines_that_name_it(log: Path) -> None:
    out = run_cli("sessions", str(log), "s1", *AT)
    assert out.returncode == 1
    assert out.stderr.splitlines() == [counted(log), named(log, "s1", 2)]
    got = json.loads(run_cli("sessions", str(log), "s1", "--json", *AT).stdout)
    assert got["named_by_bad_lines"] == [{"line": 2, "reason": REASON, "next": f"sed -n '2p' {log}"}]
    assert json.loads(printed_by(got["named_by_bad_lines"][0]["next"])) == BAD_S1


def test_sessions_of_a_session_only_a_bad_line_names(log: Path) -> None:
    out = run_cli("sessions", str(log), "s2", *AT)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == only_named(log, "s2", 3) + "\n"


def test_sessions_of_a_clean_log_says_nothing_on_stderr(tmp_path: Path) -> None:
    ready = {"type": "worker_ready", "ts": "2026-08-03T09:00:20+09:00", "session_id": "s1", "generation": 1}
    clean = write_log(tmp_path / "clean.jsonl", [CLAIMED, ready])  # ready: a worker not ready after 1 h is named
    out = run_cli("sessions", str(clean), *AT)
    assert (out.returncode, out.stderr) == (0, "")
    assert json.loads(run_cli("sessions", str(clean), "--json", *AT).stdout)["bad_lines"] == {"count": 0, "first": []}


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


# --- decide ----------------------------------------------------------------------------------------


def warned(log: Path) -> str:
    """What decide says of s1's bad line before its receipt: the line, why it is bad, how to see it."""
    return (named(log, "s1", 2) + "; this decision was judged without them, on a session that may not be what "
            "happened: look at them")


def test_decide_on_a_session_a_bad_line_names_writes_it_and_warns_before_the_receipt(log: Path) -> None:
    """The spec's rules judge the decision (written, receipt, exit 0); stderr names s1's bad line first."""
    merged = subprocess.run([sys.executable, "-m", "eventlog", "decide", str(log), "s1", "--decision", "close",
                             "--expected-revision", "1", "--idempotency-key", "k1", "--reason", "retired",
                             "--actor", "ops"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=60, cwd=ROOT, check=False)
    assert merged.returncode == 0, merged.stdout
    lines = merged.stdout.splitlines()
    assert lines[:3] == [counted(log), warned(log), "accepted: close of s1 by ops at line 4"], lines
    assert json.loads(log.read_text().splitlines()[3])["type"] == "recovery_decision"
    assert json.loads(printed_by(f"sed -n '2p' {log}")) == BAD_S1


def test_decide_json_receipt_holds_the_bad_lines_and_a_retry_warns_again(log: Path) -> None:
    out = decide(log, "s1", "k1", "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert (got["result"], got["line"]) == ("accepted", 4)
    assert got["bad_lines"] == {"count": 2, "first": [{"line": 2, "reason": REASON}, {"line": 3, "reason": REASON}]}
    assert got["named_by_bad_lines"] == [{"line": 2, "reason": REASON, "next": f"sed -n '2p' {log}"}]
    assert out.stderr.splitlines() == [counted(log), warned(log)]
    # The same request with its key again (a retry) gets its first receipt back, and the same warning.
    again = decide(log, "s1", "k1", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["replayed"] is True
    assert again.stderr.splitlines() == [counted(log), warned(log)]


def test_decide_has_no_override_for_bad_lines(log: Path) -> None:
    """Nothing to override: a decision is never refused for bad lines, so there is no --despite-bad-lines."""
    out = decide(log, "s1", "k1", "--despite-bad-lines")
    assert out.returncode == 2 and "unrecognized arguments: --despite-bad-lines" in out.stderr
    assert "despite" not in run_cli("decide", "--help").stdout


def test_decide_on_a_session_no_bad_line_names_warns(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [CLAIMED, BAD_S2])
    out = decide(log, "s1", "k1")
    assert out.returncode == 0 and out.stdout.startswith("accepted: close of s1 by ops at line 3")
    assert out.stderr == f"eventlog: {log}: 1 bad line(s) skipped: line 2: {REASON}\n"


def test_decide_on_a_session_only_a_bad_line_names(log: Path) -> None:
    before = log.read_bytes()
    out = decide(log, "s2", "k1")
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == only_named(log, "s2", 3) + "\n"
    assert log.read_bytes() == before


# --- the API and its session view ------------------------------------------------------------------------


def test_the_api_decides_as_decide_does_and_its_answers_carry_the_bad_lines(log: Path, tmp_path: Path) -> None:
    """OUTPUTS.md lists the decision's answers (200, 409 with four codes, 400 BAD_REQUEST, 404): a bad line
    naming the session changes none of them; the receipt (a 409's too) and the session view name the line."""
    server = start_server(log, tmp_path)
    try:
        c = server.client("ops")
        view = c.get("/v1/sessions/s1").json()
        assert view["bad_lines"]["count"] == 2
        assert view["named_by_bad_lines"] == [{"line": 2, "reason": REASON, "next": f"sed -n '2p' {log}"}]
        unknown = c.get("/v1/sessions/s2")
        assert unknown.status_code == 404
        assert "eventlog: " + unknown.json()["message"] == only_named(log, "s2", 3)

        def send(key: str, **more: Any) -> Any:
            return c.post("/v1/sessions/s1/recovery-decisions", headers={"Idempotency-Key": key},
                          json={"decision": "close", "expected_revision": 1, "reason": "retired", **more})

        done = send("k1")
        assert done.status_code == 200 and done.json()["result"] == "accepted" and done.json()["line"] == 4
        assert done.json()["bad_lines"]["count"] == 2
        assert done.json()["named_by_bad_lines"] == view["named_by_bad_lines"]
        stale = send("k2")  # revision 1 is gone: the spec's 409, with the same fields in its receipt
        assert stale.status_code == 409 and stale.json()["code"] == "REQUEST_STALE"
        assert stale.json()["receipt"]["named_by_bad_lines"] == view["named_by_bad_lines"]
        assert stale.json()["receipt"]["bad_lines"]["count"] == 2
        extra = send("k3", despite_bad_lines=True)  # no such body field: the spec's 400 for an unknown field
        assert extra.status_code == 400 and extra.json()["code"] == "BAD_REQUEST"
    finally:
        server.stop()
