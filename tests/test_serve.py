"""``eventlog serve``: the operators' HTTP API, as a client sees it (a real server process, httpx).

The expectations come from the spec's table (Operator HTTP API) and seed 004,
and from the CLI: the API and the CLI are two shells over the same functions,
so what the API answers is compared with what the CLI prints on the same log.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from eventlog.cli.common import replay_log
from eventlog.prom import of_replay
from tests.conftest import ROOT, run_cli, write_log
from tests.serving import Server, make_keys, start_server, wait_healthy
from tests.test_prom import promtool

FIXTURES = ROOT / "fixtures"
UNKNOWN_TURN = FIXTURES / "sessions_unknown_turn.jsonl"
#: Lines of the fixture: what is appended gets seq N + 1 on.
N = len(UNKNOWN_TURN.read_text(encoding="utf-8").splitlines())
HANDOFF = {"type": "handoff_created", "ts": "2026-08-03T09:00:00+09:00", "handoff_id": "h1", "account": "acct-a"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A server on a copy of the unknown-turn fixture (seed 004)."""
    log = tmp_path / "log.jsonl"
    shutil.copy(UNKNOWN_TURN, log)
    s = start_server(log, tmp_path)
    yield s
    s.stop()


def lines(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in Path(path).read_text(encoding="utf-8").splitlines()]


def cli_json(*args: str) -> Any:
    done = run_cli(*args)
    assert done.returncode in (0, 1, 3), done.stderr
    return json.loads(done.stdout)


# --- keys ------------------------------------------------------------------------------


def test_keys_add_prints_the_key_once_and_stores_only_its_hash(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    done = run_cli("keys", "add", str(path), "alice", "--scope", "read", "--scope", "sessions:recover")
    assert done.returncode == 0, done.stderr
    key = done.stdout.strip()
    assert len(key) > 40 and "\n" not in key
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    stored = path.read_text()
    assert key not in stored and key not in done.stderr
    (entry,) = json.loads(stored)["keys"]
    assert entry["name"] == "alice" and entry["scopes"] == ["read", "sessions:recover"]
    again = run_cli("keys", "add", str(path), "bob", "--scope", "read")
    assert again.stdout.strip() != key
    assert [k["name"] for k in json.loads(path.read_text())["keys"]] == ["alice", "bob"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    dup = run_cli("keys", "add", str(path), "alice", "--scope", "read")
    assert dup.returncode == 2 and "already has a key named 'alice'" in dup.stderr and dup.stdout == ""
    bad = run_cli("keys", "add", str(path), "carol", "--scope", "write")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_keys_list_gives_names_and_scopes_never_the_keys(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    made = make_keys(path, {"alice": ["read", "sessions:recover"], "bob": ["read"]})
    listed = run_cli("keys", "list", str(path))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == ["alice  read, sessions:recover", "bob  read"]
    as_json = run_cli("keys", "list", str(path), "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout) == {
        "file": str(path), "keys": [{"name": "alice", "scopes": ["read", "sessions:recover"]},
                                    {"name": "bob", "scopes": ["read"]}]}
    hashes = [k["sha256"] for k in json.loads(path.read_text())["keys"]]
    for secret in [*made.values(), *hashes]:
        assert secret not in listed.stdout + listed.stderr + as_json.stdout + as_json.stderr
    missing = run_cli("keys", "list", str(tmp_path / "none.json"))
    assert missing.returncode == 2 and "cannot read key file" in missing.stderr and missing.stdout == ""


def test_keys_remove_names_an_absent_key_and_leaves_the_file(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    make_keys(path, {"alice": ["read"], "bob": ["read"]})
    done = run_cli("keys", "remove", str(path), "alice")
    assert done.returncode == 0, done.stderr
    assert [k["name"] for k in json.loads(path.read_text())["keys"]] == ["bob"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    before = path.read_bytes()
    again = run_cli("keys", "remove", str(path), "alice")
    assert again.returncode == 2 and "has no key named 'alice'" in again.stderr and again.stdout == ""
    assert path.read_bytes() == before
    assert run_cli("keys", "remove", str(tmp_path / "none.json"), "bob").returncode == 2
    # the last key goes too: the file stays, with no key, and says what that means
    assert run_cli("keys", "remove", str(path), "bob").returncode == 0
    empty = run_cli("keys", "list", str(path), "--json")
    assert json.loads(empty.stdout)["keys"] == [] and "every request but /healthz is refused" in empty.stderr


def test_a_key_file_edit_waits_for_the_one_in_progress(tmp_path: Path) -> None:
    """Two edits at once run one after the other (an add beside a remove cannot bring the removed key back):
    each holds the file's directory locked (flock) from reading the file to renaming the new one."""
    path = tmp_path / "keys.json"
    make_keys(path, {"alice": ["read"], "bob": ["read"]})
    before = path.read_bytes()
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another edit in progress
        waiting = subprocess.Popen([sys.executable, "-m", "eventlog", "keys", "remove", str(path), "bob"],
                                   cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2)
        assert waiting.poll() is None and path.read_bytes() == before
    finally:
        os.close(fd)
    _, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    assert [k["name"] for k in json.loads(path.read_text())["keys"]] == ["alice"]


def test_keys_that_cannot_be_written_are_exit_2_not_a_traceback(tmp_path: Path) -> None:
    where = str(tmp_path / "no-such-dir" / "keys.json")
    done = run_cli("keys", "add", where, "alice", "--scope", "read")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"eventlog: cannot write key file {where}: No such file or directory\n"


def test_a_removed_key_is_refused_at_once(server: Server, tmp_path: Path) -> None:
    viewer = server.client("viewer")
    assert viewer.get("/v1/status").status_code == 200
    with viewer.stream("GET", "/v1/events", params={"after": N}, timeout=20) as open_stream:
        assert open_stream.status_code == 200
        done = run_cli("keys", "remove", str(tmp_path / "keys.json"), "viewer")
        assert done.returncode == 0, done.stderr
        refused = viewer.get("/v1/status")
        assert refused.status_code == 401 and refused.json()["code"] == "UNAUTHORIZED"
        assert server.client("ops").get("/v1/status").status_code == 200  # the others still work
        # a stream opened with it ends, at the latest at the next tick (no line of the log reaches it)
        server.client("writer").post("/v1/events", content=b'{"type":"execution_gone",'
                                     b'"ts":"2026-08-03T15:00:00+09:00","session_id":"s-early-gone"}\n')
        assert read_events(open_stream, 1) == []


def test_status_all_takes_the_values_the_readme_gives_and_400s_any_other(tmp_path: Path) -> None:
    """README: `?all=1` (or `true`, `yes`) every item, `?all=0` (or `false`, `no`) the first 3, any other `all`
    is 400; against a real server, on a log with 5 bad lines (a group of 5 items)."""
    row = next(line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| `GET /v1/status` |"))
    assert "`?all=1` (or `true`, `yes`) every item" in row and "`?all=0` (or `false`, `no`) the first 3" in row
    assert "any other `all` is `400`" in row
    log = tmp_path / "log.jsonl"
    shutil.copy(FIXTURES / "sessions_close.jsonl", log)
    with log.open("a") as f:
        f.writelines(f"not json {n}\n" for n in range(5))
    server = start_server(log, tmp_path)
    try:
        c = server.client("viewer")

        def shown(**params: str) -> int:
            got = c.get("/v1/status", params=params)
            assert got.status_code == 200, (params, got.text)
            [group] = [g for g in got.json()["groups"] if g["reason_code"] == "bad_line"]
            assert group["count"] == 5
            return len(group["items"])

        assert shown() == 3
        assert [shown(all=v) for v in ("1", "true", "yes", "TRUE")] == [5, 5, 5, 5]
        assert [shown(all=v) for v in ("0", "false", "no")] == [3, 3, 3]
        for other in ("2", "maybe", "", "all"):
            wrong = c.get("/v1/status", params={"all": other})
            assert wrong.status_code == 400 and wrong.json()["code"] == "BAD_REQUEST", (other, wrong.text)
    finally:
        server.stop()


def test_serve_refuses_an_unusable_key_file(tmp_path: Path) -> None:
    (tmp_path / "keys.json").write_text("{not json")
    done = run_cli("serve", str(UNKNOWN_TURN), "--keys", str(tmp_path / "keys.json"), "--port", "0")
    assert done.returncode == 2 and "is not a key file" in done.stderr
    done = run_cli("serve", str(UNKNOWN_TURN), "--keys", str(tmp_path / "none.json"), "--port", "0")
    assert done.returncode == 2 and "cannot read key file" in done.stderr


# --- reads: the same views as the CLI -----------------------------------------------------


def test_reads_answer_what_the_cli_prints(server: Server) -> None:
    c = server.client("viewer")
    health = httpx.get(server.url + "/healthz")
    assert health.status_code == 200 and health.json()["events"] == N

    status = c.get("/v1/status", params={"at": "log"})
    assert status.status_code == 200
    assert status.json() == cli_json("status", server.log, "--at", "log", "--json")

    dump = c.get("/v1/dump", params={"at": "log"})
    assert dump.json() == cli_json("replay", server.log)

    at = "2026-08-03T13:30:00+09:00"
    sid = "s-early-gone"
    got = c.get(f"/v1/sessions/{sid}", params={"at": at}).json()
    want = cli_json("sessions", server.log, sid, "--at", at, "--json")
    needs = [i for g in cli_json("status", server.log, "--at", at, "--json", "--all")["groups"] for i in g["items"]
             if i["id"] == sid]  # what status says about the session, with its next command
    assert [i["reason_code"] for i in needs] == ["outcome_unknown"]
    assert want["items"][sid]["needs"] == needs  # sessions --json says it too, as the API's session view
    assert got == {"log": want["log"], "as_of": at, "session_id": sid, **want["items"][sid], "needs": needs,
                   "bad_lines": want["bad_lines"], "named_by_bad_lines": want["named_by_bad_lines"]}
    assert got["would_accept"] == [{"decision": "close", "expected_revision": 3}]

    # the default is now: as_of is the time of the request, not the last line
    now = c.get("/v1/status").json()
    assert now["as_of"] != status.json()["as_of"]
    assert c.get("/v1/status", params={"at": "yesterday"}).status_code == 400


def test_turn_gives_outcome_and_terminal_reason(server: Server) -> None:
    c = server.client("viewer")
    t2 = c.get("/v1/sessions/s-unk/turns/t2").json()
    # the fixture's line 7: outcome_unknown, terminal_reason interrupt_unanswered; line 14 abandons it (seed 004)
    assert (t2["outcome"], t2["terminal_reason"]) == ("outcome_unknown", "interrupt_unanswered")
    assert (t2["resolution"], t2["resolved_line"], t2["unknown"]) == ("cancelled", 14, False)
    u1 = c.get("/v1/sessions/s-early-gone/turns/u1").json()
    assert (u1["outcome"], u1["terminal_reason"], u1["unknown"]) == ("outcome_unknown", None, True)
    assert c.get("/v1/sessions/s-unk/turns/nope").status_code == 404
    assert c.get("/v1/sessions/nope/turns/t2").status_code == 404
    missing = c.get("/v1/sessions/nope")
    assert missing.status_code == 404 and missing.json()["code"] == "NOT_FOUND"


def test_metrics_are_the_follow_prom_exposition(server: Server) -> None:
    c = server.client("viewer")
    text = c.get("/metrics", params={"at": "log"})
    assert text.status_code == 200 and text.headers["content-type"].startswith("text/plain")
    replay = replay_log(server.log)
    assert text.text == of_replay(replay, replay.dump(server.log), 5.0)  # follow --prom's, with serve's --tick
    families = {f.name: f for f in text_string_to_metric_families(text.text)}
    assert families["recovery_events"].samples[0].value == N
    checked = subprocess.run([promtool(), "check", "metrics"], input=text.text, capture_output=True, text=True,
                             timeout=60)
    assert checked.returncode == 0 and checked.stdout + checked.stderr == "", checked.stdout + checked.stderr


# --- decisions --------------------------------------------------------------------------


def decide(c: httpx.Client, sid: str, key: str, **body: Any) -> httpx.Response:
    return c.post(f"/v1/sessions/{sid}/recovery-decisions", json=body, headers={"Idempotency-Key": key})


@pytest.mark.parametrize("decision", [
    {"decision": "close", "expected_revision": 3, "reason": "nothing left to do"},          # accepted
    {"decision": "close", "expected_revision": 2, "reason": "an old revision"},             # REQUEST_STALE
    {"decision": "abandon", "expected_revision": 3, "reason": "looks gone", "target_turn_id": "u1"},  # RECOVERY_REQ.
])
def test_api_receipt_equals_the_cli_receipt(tmp_path: Path, decision: dict[str, Any]) -> None:
    by_cli, by_api = tmp_path / "cli.jsonl", tmp_path / "api.jsonl"
    shutil.copy(UNKNOWN_TURN, by_cli)
    shutil.copy(UNKNOWN_TURN, by_api)
    args = ["decide", str(by_cli), "s-early-gone", "--decision", decision["decision"], "--expected-revision",
            str(decision["expected_revision"]), "--idempotency-key", "k-1", "--reason", decision["reason"], "--json"]
    if "target_turn_id" in decision:
        args += ["--target-turn", decision["target_turn_id"]]
    done = run_cli(*args)
    cli = json.loads(done.stdout)
    s = start_server(by_api, tmp_path)
    try:
        r = decide(s.client("ops"), "s-early-gone", "k-1", **decision)
    finally:
        assert s.stop() == 0
    api = r.json() if r.status_code == 200 else r.json()["receipt"]
    differ = ("actor", "ts", "next")  # who wrote the line and when, and the command that names each one's log
    assert {k: v for k, v in api.items() if k not in differ} == {k: v for k, v in cli.items() if k not in differ}
    for receipt, log in ((api, by_api), (cli, by_cli)):
        assert receipt.get("next") == (None if done.returncode == 0 else f"eventlog sessions {log} s-early-gone")
    if done.returncode == 0:
        assert r.status_code == 200 and api["result"] == "accepted"
    else:
        assert done.returncode == 3 and r.status_code == 409
        assert r.json()["code"] == cli["result"] and r.json()["message"]
    # the same line in the log, but the API's says who decided: the key's name
    written_cli, written_api = lines(by_cli)[-1], lines(by_api)[-1]
    assert written_api.pop("actor") == "ops"
    written_cli.pop("actor", None)
    assert {k: v for k, v in written_api.items() if k != "ts"} == {k: v for k, v in written_cli.items() if k != "ts"}


def test_seed_004_refusal_codes(server: Server) -> None:
    c = server.client("ops")
    extra = [
        '{"type":"turn_started","ts":"2026-08-03T14:00:00+09:00","session_id":"s-cc","turn_id":"x1"}',
        '{"type":"turn_finished","ts":"2026-08-03T14:01:00+09:00","session_id":"s-cc","turn_id":"x1",'
        '"outcome":"outcome_unknown","terminal_reason":"interrupt_checkpoint_unavailable"}',
        '{"type":"execution_gone","ts":"2026-08-03T14:02:00+09:00","session_id":"s-cc"}',
    ]
    assert c.post("/v1/events", content="\n".join(extra) + "\n").status_code == 200
    # no checkpoint covers x1: seed 004 says confirm_completed is 409 CHECKPOINT_UNAVAILABLE
    r = decide(c, "s-cc", "a", decision="confirm_completed", expected_revision=3, reason="r", target_turn_id="x1",
               evidence_ref="ticket-1")
    assert (r.status_code, r.json()["code"]) == (409, "CHECKPOINT_UNAVAILABLE")
    assert r.json()["receipt"]["result"] == "CHECKPOINT_UNAVAILABLE"
    # the refusal is in the audit trail, with who sent it
    last = lines(server.log)[-1]
    assert (last["type"], last["idempotency_key"], last["actor"]) == ("recovery_decision", "a", "ops")
    # retry_restore of a session that did not fail restoring: REQUEST_STALE (a refusal moves no revision)
    r = decide(c, "s-cc", "b", decision="retry_restore", expected_revision=3, reason="r")
    assert (r.status_code, r.json()["code"]) == (409, "REQUEST_STALE")
    r = decide(c, "s-cc", "c", decision="abandon", expected_revision=3, reason="no effect", target_turn_id="x1")
    assert r.status_code == 200 and r.json()["result"] == "accepted"
    assert r.json()["session"]["admission_state"] == "stopped"
    # the same key again: the first receipt, nothing changes
    again = decide(c, "s-cc", "c", decision="abandon", expected_revision=3, reason="no effect", target_turn_id="x1")
    assert again.status_code == 200 and again.json()["replayed"] is True
    assert again.json()["session"] == r.json()["session"]
    # the same key for another request: IDEMPOTENCY_KEY_REUSED, nothing changes (spec section 6)
    reused = decide(c, "s-cc", "c", decision="close", expected_revision=4, reason="other")
    assert (reused.status_code, reused.json()["code"]) == (409, "IDEMPOTENCY_KEY_REUSED")
    assert reused.json()["receipt"]["session"] == r.json()["session"]


def test_bad_decisions_write_nothing(server: Server) -> None:
    c = server.client("ops")
    before = Path(server.log).read_bytes()
    unknown = decide(c, "s-early-gone", "k", decision="close", expected_revision=3, reason="r", force=True)
    assert (unknown.status_code, unknown.json()["code"]) == (400, "BAD_REQUEST")
    assert "force" in unknown.json()["message"]
    missing = decide(c, "s-early-gone", "k", decision="close", reason="r")
    assert (missing.status_code, missing.json()["code"]) == (400, "BAD_REQUEST")
    assert "expected_revision" in missing.json()["message"]
    no_key = c.post("/v1/sessions/s-early-gone/recovery-decisions",
                    json={"decision": "close", "expected_revision": 3, "reason": "r"})
    assert no_key.status_code == 400 and "Idempotency-Key" in no_key.json()["message"]
    bad = decide(c, "s-early-gone", "k", decision="reboot", expected_revision=3, reason="r")
    assert bad.status_code == 400 and "reboot" in bad.json()["message"]
    assert c.post("/v1/sessions/s-early-gone/recovery-decisions", content=b"[1,",
                  headers={"Idempotency-Key": "k"}).status_code == 400
    nobody = decide(c, "nobody", "k", decision="close", expected_revision=0, reason="r")
    assert (nobody.status_code, nobody.json()["code"]) == (404, "NOT_FOUND")
    assert Path(server.log).read_bytes() == before


def test_a_decision_the_log_cannot_hold_is_a_bad_request_as_in_the_cli(server: Server) -> None:
    # the appender refuses these lines as bad input (the CLI's exit 2): the API answered 503 LOG_UNAVAILABLE,
    # telling the client the server had lost its log
    c = server.client("ops")
    before = Path(server.log).read_bytes()
    huge = decide(c, "s-early-gone", "k1", decision="close", expected_revision=2**63, reason="r")
    assert (huge.status_code, huge.json()["code"]) == (400, "BAD_REQUEST"), huge.text
    assert "expected_revision" in huge.json()["message"]
    cli = run_cli("decide", server.log, "s-early-gone", "--decision", "close", "--expected-revision", str(2**63),
                  "--idempotency-key", "k1", "--reason", "r")
    assert cli.returncode == 2 and "expected_revision" in cli.stderr  # the same decision through the CLI
    # a body under 1 MiB whose line passes 1 MiB once seq, ts and actor are added (spec section 1)
    long = decide(c, "s-early-gone", "k2", decision="close", expected_revision=3, reason="r" * ((1 << 20) - 100))
    assert (long.status_code, long.json()["code"]) == (400, "BAD_REQUEST"), long.text
    assert "too_long" in long.json()["message"]
    # a strict schema: a field given twice is no decision (the log's own rule: bad_value: duplicate key)
    twice = c.post("/v1/sessions/s-early-gone/recovery-decisions", headers={"Idempotency-Key": "k3"},
                   content=b'{"decision":"close","expected_revision":3,"reason":"r","expected_revision":2}')
    assert (twice.status_code, twice.json()["code"]) == (400, "BAD_REQUEST"), twice.text
    assert "duplicate key 'expected_revision'" in twice.json()["message"]
    assert Path(server.log).read_bytes() == before
    assert httpx.get(server.url + "/healthz").status_code == 200


def test_unknown_routes_and_methods_answer_json(server: Server) -> None:
    c = server.client("ops")
    for method, path, code, name in [("GET", "/v1/nope", 404, "NOT_FOUND"), ("GET", "/console/nope.js", 404,
                                                                             "NOT_FOUND"),
                                     ("DELETE", "/v1/status", 405, "METHOD_NOT_ALLOWED"),
                                     ("GET", "/v1/sessions/s-unk/recovery-decisions", 405, "METHOD_NOT_ALLOWED")]:
        r = c.request(method, path)
        assert r.status_code == code and r.headers["content-type"] == "application/json", (path, r.text)
        assert r.json()["code"] == name and r.json()["message"], r.text
    assert set(c.delete("/v1/status").headers["allow"].split(", ")) == {"GET", "HEAD"}


# --- keys and scopes -----------------------------------------------------------------------

PROTECTED = [
    ("GET", "/v1/status", "read", None), ("GET", "/v1/dump", "read", None),
    ("GET", "/v1/sessions/s-early-gone", "read", None), ("GET", "/v1/sessions/s-unk/turns/t2", "read", None),
    ("GET", "/metrics", "read", None), ("GET", "/v1/events?after=0", "read", None),
    ("POST", "/v1/sessions/s-early-gone/recovery-decisions", "sessions:recover",
     b'{"decision":"close","expected_revision":3,"reason":"r"}'),
    ("POST", "/v1/events", "events:append",
     b'{"type":"execution_gone","ts":"2026-08-03T15:00:00+09:00","session_id":"s-early-gone"}\n'),
]


def test_a_request_without_the_right_key_reaches_no_rule(server: Server) -> None:
    before = Path(server.log).read_bytes()
    wrong = {"read": "decider", "sessions:recover": "viewer", "events:append": "viewer"}
    for method, path, scope, body in PROTECTED:
        headers = {"Idempotency-Key": "k"}
        for name, auth, code in [("none", None, 401), ("unknown", "Bearer rlk_not-a-key", 401),
                                 ("basic", f"Basic {server.keys['ops']}", 401),
                                 ("wrong scope", f"Bearer {server.keys[wrong[scope]]}", 403)]:
            h = dict(headers, **({"Authorization": auth} if auth else {}))
            r = httpx.request(method, server.url + path, content=body, headers=h, timeout=10)
            assert r.status_code == code, (method, path, name, r.text)
            assert r.json()["code"] == ("UNAUTHORIZED" if code == 401 else "FORBIDDEN")
            if code == 401:
                assert r.headers["www-authenticate"].startswith("Bearer")
    assert Path(server.log).read_bytes() == before  # nothing appended, nothing judged into the log
    for key in server.keys.values():
        assert key not in server.output()


def test_healthz_and_console_need_no_key(server: Server) -> None:
    assert httpx.get(server.url + "/healthz").status_code == 200
    page = httpx.get(server.url + "/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert httpx.get(server.url + "/console/console.js").status_code == 200
    assert httpx.get(server.url + "/sessions/s-unk").status_code == 200


def test_a_key_added_while_serving_works_without_a_restart(server: Server, tmp_path: Path) -> None:
    new = make_keys(tmp_path / "keys.json", {"late": ["read"]})["late"]
    r = httpx.get(server.url + "/v1/status", headers={"Authorization": f"Bearer {new}"})
    assert r.status_code == 200


# --- appending over HTTP -------------------------------------------------------------------


def test_post_events_is_append_over_http(server: Server) -> None:
    c = server.client("writer")
    ok = c.post("/v1/events", content=b'{"type":"execution_gone","ts":"2026-08-03T15:00:00+09:00",'
                b'"session_id":"s-early-gone"}\n\n{"type":"worker_claimed","ts":"2026-08-03T15:01:00+09:00",'
                b'"session_id":"s-2","generation":1,"worker":"w","restore":false}\n')
    assert ok.status_code == 200 and ok.json() == {"written": 2, "first_seq": N + 1, "last_seq": N + 2}
    assert [x["seq"] for x in lines(server.log)[-2:]] == [N + 1, N + 2]
    before = Path(server.log).read_bytes()
    bad = c.post("/v1/events", content=b'{"type":"execution_gone"}\nnot json\n{"type":"nope","ts":"x"}\n')
    assert bad.status_code == 400
    assert bad.json()["message"] == "3 bad line(s); nothing was written"
    first, second, third = bad.json()["problems"]  # each bad line named, as append names stdin's
    assert first.startswith("body line 1: missing_field: session_id")
    assert second.startswith("body line 2: not_json: ") and third.startswith("body line 3: unknown_type: ")
    refused_later = c.post("/v1/events", content=b'\n{"type":"claimed","ts":"2026-08-03T15:03:00+09:00",'
                           b'"handoff_id":"nope","watcher":"w","attempt":1}\n')
    assert refused_later.status_code == 409 and refused_later.json()["problems"][0].startswith("body line 2: ")
    invalid = c.post("/v1/events", content=b'{"type":"execution_gone"}\n{"type":"nope","ts":"x"}\n')
    assert invalid.status_code == 400
    assert [p.split(":")[0] for p in invalid.json()["problems"]] == ["body line 1", "body line 2"]
    assert "missing_field" in invalid.json()["problems"][0] and "unknown_type" in invalid.json()["problems"][1]
    stale = c.post("/v1/events", headers={"Expect-Revision": "0"},
                   content=b'{"type":"worker_ready","ts":"2026-08-03T15:02:00+09:00","session_id":"s-2",'
                           b'"generation":1}\n')
    assert stale.status_code == 409 and stale.json()["code"] == "CONFLICT"
    assert "expected revision 0, stream is at 1" in stale.json()["problems"][0]
    right = c.post("/v1/events", headers={"Expect-Revision": "1"},
                   content=b'{"type":"worker_ready","ts":"2026-08-03T15:02:00+09:00","session_id":"s-2",'
                           b'"generation":1}\n')
    assert right.status_code == 200 and right.json()["first_seq"] == N + 3
    refused = c.post("/v1/events", content=b'{"type":"claimed","ts":"2026-08-03T15:03:00+09:00",'
                     b'"handoff_id":"nope","watcher":"w","attempt":1}\n')
    assert refused.status_code == 409 and "rejected" in refused.json()["problems"][0]
    assert len(Path(server.log).read_bytes()) > len(before)
    assert lines(server.log)[-1]["seq"] == N + 3  # the refused and bad ones wrote nothing
    # what was written is in the next read at once
    status = server.client("viewer").get("/v1/sessions/s-2").json()
    assert status["revision"] == 2


def test_a_body_over_1_mib_is_refused_with_413(server: Server) -> None:
    c = server.client("ops")
    before = Path(server.log).read_bytes()
    big = b"x" * (2 << 20)
    r = c.post("/v1/events", content=big)
    assert r.status_code == 413 and r.json()["code"] == "PAYLOAD_TOO_LARGE"

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it comes, refused past 1 MiB
        for _ in range(32):
            yield b"y" * (64 << 10)

    r = server.client("ops").post("/v1/sessions/s-early-gone/recovery-decisions", content=chunks(),
                                  headers={"Idempotency-Key": "k"})
    assert r.status_code == 413
    assert Path(server.log).read_bytes() == before
    assert c.get("/v1/status").status_code == 200  # still serving


# --- streams ----------------------------------------------------------------------------------


def read_events(response: httpx.Response, want: int) -> list[dict[str, str]]:
    """The first ``want`` events of a text/event-stream response."""
    out: list[dict[str, str]] = []
    frame: dict[str, str] = {}
    for line in response.iter_lines():
        if not line:
            if frame:
                out.append(frame)
                frame = {}
                if len(out) >= want:
                    return out
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(": ")
        frame[name] = value
    return out


def test_events_stream_holds_a_batch_until_its_last_line(tmp_path: Path) -> None:
    # issue 15: a reader never sees half of a batch still being written. The stream sent each line of a batch
    # as it came, so a remote follower got lines of a batch whose writer then died (never applied by a replay)
    log = tmp_path / "log.jsonl"
    shutil.copy(UNKNOWN_TURN, log)
    s = start_server(log, tmp_path, None, "--tick", "1s")

    def line(seq: int, batch_end: int | None = None) -> str:
        mark = {} if batch_end is None else {"batch_end": batch_end}
        return json.dumps({"type": "lane_check", "ts": "2026-08-03T15:00:00+09:00", "seq": seq, **mark}) + "\n"

    def first_frames(texts: Iterator[str], want: int, alive: bool = False) -> list[str]:
        """The next ``want`` events (and ``alive`` comments when asked) of a stream's lines."""
        out: list[str] = []
        frame: list[str] = []
        for text in texts:
            if text == ": alive" and alive:
                out.append("alive")
            elif text.startswith(("event: ", "id: ", "data: ")):
                frame.append(text)
                if text.startswith("data: "):
                    out.append(" ".join(frame))
                    frame = []
            if len(out) >= want:
                return out
        return out

    try:
        c = s.client("viewer")
        with log.open("a") as f:
            f.write(line(N + 1, N + 2))  # the first line of a batch of two: its writer is still writing
        while not c.get("/v1/dump", params={"at": "log"}).json()["torn_tail"]:  # the server has read it
            threading.Event().wait(0.05)
        with c.stream("GET", "/v1/events", params={"after": N}, timeout=20) as response:
            r = response.iter_lines()
            assert first_frames(r, 1, alive=True) == ["alive"]  # nothing of the batch while it is unfinished
            with log.open("a") as f:
                f.write(line(N + 2, N + 2))
            got = first_frames(r, 2)
            assert [g.split(" ", 3)[:3] for g in got] == [["event:", "line", "id:"]] * 2, got
            assert [json.loads(g.split("data: ", 1)[1])["seq"] for g in got] == [N + 1, N + 2]
            # a batch another line interrupts never came whole: its line is a bad line, as a replay says
            with log.open("a") as f:
                f.write(line(N + 3, N + 9) + line(N + 4))
            bad, ok = first_frames(r, 2)
            assert bad.startswith("event: bad_line") and "uncommitted" in bad, bad
            assert ok.startswith("event: line") and json.loads(ok.split("data: ", 1)[1])["seq"] == N + 4
        dump = cli_json("replay", str(log))
        assert [b["line"] for b in dump["bad_lines"]] == [N + 3] and dump["events"] == N + 3
    finally:
        assert s.stop() == 0


def test_events_stream_new_lines(server: Server) -> None:
    c = server.client("viewer")
    with c.stream("GET", "/v1/events", params={"after": N - 2}, timeout=20) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        got: list[dict[str, str]] = []

        def write_later() -> None:
            server.client("writer").post("/v1/events", content=b'{"type":"execution_gone",'
                                         b'"ts":"2026-08-03T15:00:00+09:00","session_id":"s-early-gone"}\n')

        threading.Timer(0.5, write_later).start()
        got = read_events(r, 3)
    assert [(e["event"], e["id"]) for e in got] == [("line", str(N - 1)), ("line", str(N)), ("line", str(N + 1))]
    assert json.loads(got[2]["data"])["type"] == "execution_gone" and json.loads(got[2]["data"])["seq"] == N + 1
    assert json.loads(got[0]["data"]) == lines(server.log)[N - 2]
    # a dashboard that reconnects says where it was
    with c.stream("GET", "/v1/events", headers={"Last-Event-ID": str(N)}, timeout=20) as r:
        (again,) = read_events(r, 1)
    assert again["id"] == str(N + 1)


def test_status_stream_for_the_console(server: Server) -> None:
    c = server.client("viewer")
    with c.stream("GET", "/v1/status", headers={"Accept": "text/event-stream"}, timeout=20) as r:
        tick, first = read_events(r, 2)
        assert tick["event"] == "tick" and json.loads(tick["data"]) == {  # how often a view comes, what to paste
            "tick_s": 5.0, "commands": {"status": f"eventlog status {server.log}",
                                        "all": f"eventlog status {server.log} --all"}}
        payload = json.loads(first["data"])
        assert first["event"] == "status" and payload["problem"] is None
        assert payload["commands"] == {"status": f"eventlog status {server.log}",
                                       "all": f"eventlog status {server.log} --all"}
        assert [w["session_id"] for w in payload["waiting"]] == ["s-early-gone"]
        again = c.get("/v1/status").json()  # judged a moment later: the same items (their for_s may have grown)

        def items(status: dict[str, Any]) -> list[tuple[str, int, list[str]]]:
            return [(g["reason_code"], g["count"], [i["id"] for i in g["items"]]) for g in status["groups"]]

        assert items(payload["status"]) == items(again) and payload["status"]["needs_person"] > 0


def leave_early(server: Server, path: str, *, abort: bool = False, read: int = 5000) -> None:
    """A raw client of an event stream: send the request, read ``read`` bytes, close (``abort``: with a reset)."""
    host, _, port = server.url.removeprefix("http://").rpartition(":")
    with socket.create_connection((host, int(port)), timeout=20) as c:
        c.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {server.keys['viewer']}\r\n"
                  "Accept: text/event-stream\r\n\r\n".encode())
        got = 0
        while got < read:
            data = c.recv(read - got)
            assert data, f"{path}: the stream ended after {got} bytes"
            got += len(data)
        if abort:
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def test_a_stream_client_that_leaves_is_let_go_without_a_word(tmp_path: Path) -> None:
    # R8: a client that read a little of a long backlog and closed left serve writing the rest of the batch to the
    # dead socket, asyncio saying "socket.send() raised exception." on stderr for each line (2,000 a client; 2.56 M
    # lines in 25 minutes on the night run, enough for journald to drop serve's real notes). A client leaving is
    # normal: the stream ends at once and nothing is said (docs/DECISIONS.md)
    log = write_log(tmp_path / "log.jsonl", [{**HANDOFF, "handoff_id": f"h{i}", "seq": i + 1} for i in range(3000)])
    s = start_server(log, tmp_path)
    try:
        said = len(s.stderr.read_text(errors="replace").splitlines())
        for path, abort in [("/v1/events?after=1000", False), ("/v1/events?after=0", True),
                            ("/v1/status?all=1", False), ("/v1/status?all=1", True)]:
            leave_early(s, path, abort=abort)
        c = s.client("viewer")
        for _ in range(2):  # the streams' writes come first on the server's loop: they are done once this answers
            assert c.get("/v1/status").status_code == 200
        after = s.stderr.read_text(errors="replace").splitlines()[said:]
        assert len(after) < 10, f"{len(after)} lines on stderr: {after[:3]}"
        # the streams still serve a client that stays
        with c.stream("GET", "/v1/events", params={"after": 2998}, timeout=20) as r:
            assert [e["id"] for e in read_events(r, 2)] == ["2999", "3000"]
    finally:
        assert s.stop() == 0


# --- losing the log, stopping -------------------------------------------------------------


def test_a_server_that_loses_its_log_answers_503(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    shutil.copy(UNKNOWN_TURN, log)
    s = start_server(log, tmp_path)
    try:
        log.unlink()
        c = s.client("ops")
        deadline = 200
        while httpx.get(s.url + "/healthz").status_code == 200 and deadline:
            threading.Event().wait(0.05)
            deadline -= 1
        health = httpx.get(s.url + "/healthz")
        assert health.status_code == 503 and health.json()["code"] == "LOG_UNAVAILABLE"
        assert "does not exist" in health.json()["message"]
        assert c.get("/v1/status").status_code == 503
        with c.stream("GET", "/v1/status", headers={"Accept": "text/event-stream"}, timeout=20) as stream:
            _tick, said = read_events(stream, 2)  # the console's view says it, as status does: never a 503 page
        view = json.loads(said["data"])
        assert view["problem"]["message"] == health.json()["message"] and view["problem"]["since"]
        assert view["status"]["log_missing"] and view["status"]["needs_person"] == 1 and view["waiting"] is None
        assert [g["reason_code"] for g in view["status"]["groups"]] == ["missing"]
        r = decide(c, "s-early-gone", "k", decision="close", expected_revision=3, reason="r")
        assert r.status_code == 503 and not log.exists()
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("kind", ["a directory", "a FIFO", "a file in a directory that does not exist"])
def test_a_log_that_can_never_be_followed_is_refused_at_start(tmp_path: Path, kind: str) -> None:
    """serve --help: exit 2 for an unusable LOG, said on stderr, before it listens (not a server that answers
    503 for ever)."""
    log = tmp_path / "log.jsonl"
    if kind == "a directory":
        log.mkdir()
        said = f"{log} is a directory, not a log file"
    elif kind == "a FIFO":
        os.mkfifo(log)
        said = f"{log} is not a regular file (a FIFO)"
    else:
        log = tmp_path / "nowhere" / "log.jsonl"
        said = f"its directory {tmp_path / 'nowhere'} does not exist"
    make_keys(tmp_path / "keys.json", {"viewer": ["read"]})
    done = run_cli("serve", str(log), "--keys", str(tmp_path / "keys.json"), "--port", "0", timeout=30)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "not serving it" in done.stderr
    assert "serving" not in done.stderr.replace("not serving it", "")  # it never listened


def test_a_log_that_does_not_exist_yet_is_waited_for(tmp_path: Path) -> None:
    """... while a LOG that is not there yet (its directory is) is waited for, as serve --help says."""
    log = tmp_path / "later.jsonl"
    s = start_server(log, tmp_path, ready=False)
    try:
        deadline = time.monotonic() + 30
        health = httpx.get(s.url + "/healthz")
        while "still reading" in health.text and time.monotonic() < deadline:
            time.sleep(0.05)
            health = httpx.get(s.url + "/healthz")
        assert health.status_code == 503 and "does not exist" in health.json()["message"]
        assert s.proc.poll() is None
        shutil.copy(UNKNOWN_TURN, log)
        wait_healthy(s)
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_stop_it_cleanly_after_requests_in_flight(server: Server, sig: int) -> None:
    c = server.client("viewer")
    answers: list[int | str] = []

    def ask() -> None:
        try:
            answers.append(c.get("/v1/dump").status_code)
        except httpx.ConnectError:  # refused once it stopped listening
            answers.append("refused")
        except httpx.RemoteProtocolError as err:  # a kept-alive connection closed before the request: not a cut
            answers.append("closed before" if "without sending a response" in str(err) else str(err))
        except httpx.ReadError as err:  # the request written to a kept-alive socket the server had just closed
            answers.append("closed before" if "reset" in str(err) else str(err))

    stream = c.stream("GET", "/v1/events", timeout=20)
    r = stream.__enter__()
    assert r.status_code == 200
    threads = [threading.Thread(target=ask) for _ in range(20)]
    for t in threads[:10]:
        t.start()
    server.proc.send_signal(sig)
    for t in threads[10:]:
        t.start()
    for t in threads:
        t.join(30)
    assert all(a in (200, "refused", "closed before") for a in answers), answers
    assert 200 in answers
    assert list(r.iter_lines()) is not None  # the open event stream ends (the server closes it)
    stream.__exit__(None, None, None)
    assert server.proc.wait(30) == 0
    assert "Traceback" not in server.output()


def test_a_relative_log_is_named_in_full_in_every_command_served(tmp_path: Path) -> None:
    """``eventlog serve work.jsonl`` (the README's way) printed ``next: eventlog explain work.jsonl h1`` into the
    console: pasted anywhere but serve's own directory, ``cannot read work.jsonl``, exit 2. The person reading the
    console is almost never there; each command must work pasted (OUTPUTS.md: one shell command to copy)."""
    from tests.test_next_runs import typed

    home = tmp_path / "served"
    home.mkdir()
    (home / "work.jsonl").write_text("".join(json.dumps(e) + "\n" for e in [  # handed to a person
        {"type": "handoff_created", "ts": "2026-08-03T09:00:00+09:00", "handoff_id": "h1", "account": "acct-a"},
        {"type": "needs_human", "ts": "2026-08-03T09:05:00+09:00", "handoff_id": "h1", "reason": "conflict"},
    ]))
    server = start_server("work.jsonl", tmp_path, cwd=home)
    try:
        status = server.client().get("/v1/status").json()
    finally:
        assert server.stop() == 0
    commands = [i["next"] for g in status["groups"] for i in g["items"]]
    assert commands, status
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    full = str(home / "work.jsonl")
    assert any(full in command for command in commands), commands
    for command in commands:
        assert "work.jsonl" not in command.replace(full, ""), command
        done = typed(command, elsewhere)
        assert done.returncode in (0, 1), (command, done.stderr)


def test_an_event_stream_step_holds_a_bounded_number_of_bytes(tmp_path: Path) -> None:
    """A step of `/v1/events` read up to 2,000 lines, however long: lines near the 1 MiB a line may hold made one
    stream hold about 2 GB until they were sent (V2's note). A step now also stops once it read 4 MiB; every line
    still comes, in order, over the following steps."""
    from eventlog.serve.served import Cursor, _file_lines

    log = tmp_path / "big.jsonl"
    write_log(log, [{"type": "handoff_created", "ts": "2026-08-03T09:00:00+09:00", "handoff_id": f"h{i}",
                     "account": "a", "branch": "b" * 400_000} for i in range(30)])
    cursor, seqs, steps = Cursor(after=0), [], 0
    while True:
        step = _file_lines(str(log), cursor)
        if not step:
            break
        steps += 1
        assert sum(len(data) for _kind, _seq, data in step) <= 5 << 20  # 4 MiB, and the block that reached it
        seqs += [seq for _kind, seq, _data in step]
    assert seqs == list(range(1, 31)) and steps > 1


def test_an_event_stream_step_of_short_lines_holds_about_2000_of_them(tmp_path: Path) -> None:
    """R11: a step stopped only at the end of a 1 MiB block, some 8,000 short lines, and a client that stopped
    reading held them all (2.7 MB of serve's memory per stalled reader; 120 of them 447 MB) where DECISIONS says
    2,000. A step now reads 64 KiB blocks: it holds 2,000 lines and the rest of the block that reached them; every
    line still comes, in order."""
    from eventlog.serve.served import TAIL_BATCH, Cursor, _file_lines

    log = tmp_path / "short.jsonl"
    write_log(log, [{"type": "execution_gone", "ts": "2026-08-03T15:00:00+09:00", "session_id": f"s-{i}"}
                    for i in range(20_000)])
    cursor, seqs, biggest = Cursor(after=0), [], 0
    while step := _file_lines(str(log), cursor):
        biggest = max(biggest, len(step))
        seqs += [seq for _kind, seq, _data in step]
    assert seqs == list(range(1, 20_001))
    assert TAIL_BATCH <= biggest <= TAIL_BATCH + 1000, biggest  # a 64 KiB block holds some 600 of these lines


def test_lines_written_through_serve_never_read_as_an_edit_of_the_log(tmp_path: Path) -> None:
    """serve's follow loop re-reads every folded byte every 5 s (an edit before the lines read is replayed from
    the start). It read the folded offset, hashed the file up to it, then read the hash of what was folded: a
    decision or a POSTed line folded by its request's thread in between made the two disagree, so serve said
    "was edited before the lines already read" of a log nobody edited and replayed all of it while every request
    waited (4 s on the bench's 1M-event log). Lines are POSTed for two verify periods on a log big enough for the
    hash to take a while; serve never says so."""
    log = tmp_path / "big.jsonl"
    write_log(log, [{"type": "watcher_run", "ts": "2026-08-03T09:00:00+09:00", "watcher": f"w{i % 50}",
                     "exit": "ok", "period_s": 60, "note": "x" * 400} for i in range(60_000)])
    server = start_server(log, tmp_path)
    stop = time.monotonic() + 12  # two verify periods (VERIFY_EVERY_S, 5 s)
    posted: list[int] = []

    def post() -> None:
        c = server.client("writer")
        while time.monotonic() < stop:
            r = c.post("/v1/events", content=b'{"type":"watcher_run","ts":"2026-08-03T09:01:00+09:00",'
                                             b'"watcher":"w1","exit":"ok","period_s":60}\n')
            posted.append(r.status_code)

    try:
        threads = [threading.Thread(target=post) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert posted and set(posted) == {200}
        assert "edited" not in server.stderr.read_text(errors="replace")
    finally:
        assert server.stop() == 0
