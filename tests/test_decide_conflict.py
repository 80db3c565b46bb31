"""A refused decision names its exact reason, who moved the session and what to type next; the API names its own
fields (a user review, seed 004).

``decide`` (a subprocess) and a real ``eventlog serve`` with a real HTTP client, as a person and a client use them.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import run_cli, write_log
from tests.serving import make_keys, start_server

T = "2026-08-03T09:00:00+09:00"
#: s-x stopped by an incompatible checkpoint (recovery_required, RESTORE_FAILED, revision 2); s-due in backoff after
#: a startup failure (revision 2).
EVENTS = [
    {"type": "worker_claimed", "ts": T, "session_id": "s-x", "generation": 1, "worker": "w", "restore": True},
    {"type": "checkpoint_restore_failed", "ts": T, "session_id": "s-x", "generation": 1,
     "reason": "incompatible_checkpoint"},
    {"type": "worker_claimed", "ts": T, "session_id": "s-due", "generation": 1, "worker": "w", "restore": False},
    {"type": "startup_failed", "ts": T, "session_id": "s-due", "generation": 1, "reason": "repo_gone"},
]
BOB = "retired: the runtime that wrote the checkpoint is gone"


def decide(log: Path | str, sid: str, decision: str, revision: int, key: str, actor: str, *more: str) -> Any:
    return run_cli("decide", str(log), sid, "--decision", decision, "--expected-revision", str(revision),
                   "--idempotency-key", key, "--reason", "my reason", "--actor", actor, *more)


def pasted(command: str, cwd: Path) -> Any:
    """Run a printed ``eventlog ...`` command as pasted in ``cwd`` (the project's CLI in place of ``eventlog``)."""
    args = shlex.split(command)
    assert args[0] == "eventlog", command
    done = run_cli(*args[1:], cwd=cwd)
    assert done.returncode != 2, done.stderr  # 2: bad usage, no such log or session
    return done


def would_refuse(log: Path | str, sid: str, decision: str) -> str:
    shown = json.loads(run_cli("sessions", str(log), sid, "--json", "--at", "log").stdout)["items"][sid]
    [why] = [e["why"] for e in shown["would_refuse"] if e["decision"] == decision]
    return str(why)


def test_decide_refused_names_who_moved_the_session_and_the_command_to_paste(tmp_path: Path) -> None:
    log = write_log(tmp_path / "con.jsonl", EVENTS)
    bob = run_cli("decide", str(log), "s-x", "--decision", "close", "--expected-revision", "2",
                  "--idempotency-key", "b1", "--reason", BOB, "--actor", "bob")
    assert bob.returncode == 0, bob.stderr  # line 5
    alice = decide(log, "s-x", "retry_restore", 2, "a1", "alice")
    assert alice.returncode == 3
    out = alice.stdout
    assert "why: it was decided on revision 2, and the session is at revision 3 now" in out
    assert "moved by: line 5: close by bob at " in out and repr(BOB) in out, out
    assert "the session's revision or state does not allow" not in out  # no generic sentence
    [command] = [line.split("next: ", 1)[1] for line in out.splitlines() if line.startswith("  next: ")]
    assert command == f"eventlog sessions {log} s-x"
    shown = pasted(command, tmp_path)
    assert "decided at line 5: close by bob: accepted; at " in shown.stdout and repr(BOB) in shown.stdout

    receipt = json.loads(decide(log, "s-x", "retry_restore", 2, "a2", "alice", "--json").stdout)
    assert receipt["result"] == "REQUEST_STALE" and receipt["next"] == command
    assert receipt["why"] == "it was decided on revision 2, and the session is at revision 3 now"
    moved = {k: receipt["decided_since"][k] for k in ("line", "type", "decision", "actor", "reason", "revision")}
    assert moved == {"line": 5, "type": "recovery_decision", "decision": "close", "actor": "bob", "reason": BOB,
                     "revision": 2}
    assert receipt["last_change"] == receipt["decided_since"]
    # the dump's receipts are the spec's and the project's, nothing more
    dump = json.loads(run_cli("replay", str(log)).stdout)
    assert set(dump["sessions"]["receipts"][-1]) == {"line", "session_id", "decision", "result", "replayed",
                                                     "first_line", "actor"}


def test_decide_refused_by_the_state_says_the_rule_sessions_gives(tmp_path: Path) -> None:
    log = write_log(tmp_path / "con.jsonl", EVENTS)
    refused = decide(log, "s-due", "start_fresh", 2, "a1", "alice", "--json")
    assert refused.returncode == 3
    receipt = json.loads(refused.stdout)
    # the revision matches: the state rule refused it, in the words `sessions` uses (one function for both)
    assert receipt["why"] == would_refuse(log, "s-due", "start_fresh")
    assert "(it is backoff, attention STARTUP_FAILED)" in receipt["why"]
    assert receipt["last_change"] is None and receipt["decided_since"] is None
    text = decide(log, "s-due", "start_fresh", 2, "a2", "alice").stdout
    assert f"  why: {receipt['why']}" in text and "moved by" not in text
    assert f"  next: eventlog sessions {log} s-due" in text


def test_the_api_refusal_names_who_moved_it_and_the_session_view_lists_decisions(tmp_path: Path) -> None:
    log = write_log(tmp_path / "con.jsonl", EVENTS)
    keys = make_keys(tmp_path / "keys.json", {"alice": ["read", "sessions:recover"]})
    server = start_server(log, tmp_path, keys)
    try:
        c = server.client("alice")
        assert run_cli("decide", str(log), "s-x", "--decision", "close", "--expected-revision", "2",
                       "--idempotency-key", "b1", "--reason", BOB, "--actor", "bob").returncode == 0
        refused = post(c, "s-x", "k1", decision="retry_restore", expected_revision=2, reason="storage is back")
        assert (refused.status_code, refused.json()["code"]) == (409, "REQUEST_STALE")
        message = refused.json()["message"]
        command = f"eventlog sessions {log} s-x"  # LOG in full, as every command serve prints
        assert message.startswith("why: it was decided on revision 2, and the session is at revision 3 now; ")
        assert "moved by: line 5: close by bob at " in message and repr(BOB) in message
        assert message.endswith(f"; next: {command}")
        receipt = refused.json()["receipt"]
        assert (receipt["decided_since"]["actor"], receipt["decided_since"]["line"]) == ("bob", 5)
        assert receipt["next"] == command
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        assert "close by bob: accepted" in pasted(command, elsewhere).stdout

        # the session view has every decision: who, when, what, the result, the reason
        made = c.get("/v1/sessions/s-x").json()["decisions"]
        assert [(d["line"], d["actor"], d["decision"], d["result"], d["reason"]) for d in made] == [
            (5, "bob", "close", "accepted", BOB), (6, "alice", "retry_restore", "REQUEST_STALE", "storage is back")]
        assert all(d["ts"] for d in made) and made[1]["why"] == receipt["why"]

        # the revision matches and the state forbids it: the rule's own words, as the session view gives them
        state = post(c, "s-due", "k2", decision="start_fresh", expected_revision=2, reason="repo is back")
        view = c.get("/v1/sessions/s-due").json()
        [why] = [e["why"] for e in view["would_refuse"] if e["decision"] == "start_fresh"]
        assert state.json()["message"] == f"why: {why}; next: eventlog sessions {log} s-due"
    finally:
        assert server.stop() == 0


def post(c: httpx.Client, sid: str, key: str, **body: Any) -> httpx.Response:
    return c.post(f"/v1/sessions/{sid}/recovery-decisions", json=body, headers={"Idempotency-Key": key})


def test_a_bad_field_is_named_as_the_api_takes_it_and_as_the_cli_takes_it(tmp_path: Path) -> None:
    log = write_log(tmp_path / "con.jsonl", EVENTS)
    server = start_server(log, tmp_path)
    try:
        c = server.client("ops")
        before = log.read_bytes()
        for body, said in [
            ({"reason": ""}, 'the body\'s "reason" is empty: say why'),
            ({"reason": "   "}, 'the body\'s "reason" is empty: say why'),
            ({"reason": "<why>"}, 'the body\'s "reason" \'<why>\' is the placeholder of a copied command'),
            ({"reason": "r", "evidence_ref": ""}, 'the body\'s "evidence_ref" is empty: say why'),
        ]:
            r = post(c, "s-x", "k", decision="close", expected_revision=2, **body)
            assert (r.status_code, r.json()["code"]) == (400, "BAD_REQUEST")
            assert r.json()["message"].startswith(said) and "--" not in r.json()["message"], r.json()
        assert log.read_bytes() == before
    finally:
        server.stop()
    done = run_cli("decide", str(log), "s-x", "--decision", "close", "--expected-revision", "2",
                   "--idempotency-key", "k", "--reason", "")
    assert done.returncode == 2 and done.stderr == "eventlog: --reason is empty: say why\n"
    done = run_cli("decide", str(log), "s-x", "--decision", "close", "--expected-revision", "2",
                   "--idempotency-key", "", "--reason", "r")
    assert done.returncode == 2 and done.stderr == "eventlog: --idempotency-key must not be empty\n"
    assert log.read_bytes() == before


def test_a_restart_both_waits_for_a_worker_and_names_who_moved_the_session(tmp_path: Path) -> None:
    """Two views of the same accepted decisions: the latest restart (``start_fresh``) is what a worker should claim
    (``worker_wait``: ``decision_unclaimed``), the latest decision of any kind is who moved the session (a refusal's
    ``decided_since``); a later ``close`` moves the session and leaves no wait."""
    log = write_log(tmp_path / "con.jsonl", EVENTS)
    assert decide(log, "s-x", "start_fresh", 2, "b1", "bob").returncode == 0  # line 5
    refused = json.loads(decide(log, "s-x", "retry_restore", 2, "a1", "alice", "--json").stdout)  # line 6
    assert refused["result"] == "REQUEST_STALE"
    assert (refused["decided_since"]["line"], refused["decided_since"]["decision"]) == (5, "start_fresh")
    wait = json.loads(run_cli("sessions", str(log), "s-x", "--json", "--at", "log").stdout)["items"]["s-x"]
    assert {k: wait["worker_wait"][k] for k in ("kind", "line", "what")} == {
        "kind": "decision_unclaimed", "line": 5, "what": "start_fresh"}

    assert decide(log, "s-x", "close", 3, "b2", "bob").returncode == 0  # line 7
    refused = json.loads(decide(log, "s-x", "abandon", 3, "a2", "alice", "--json").stdout)
    assert (refused["decided_since"]["line"], refused["decided_since"]["decision"]) == (7, "close")
    shown = json.loads(run_cli("sessions", str(log), "s-x", "--json", "--at", "log").stdout)["items"]["s-x"]
    assert shown["admission_state"] == "closed" and shown["worker_wait"] is None
