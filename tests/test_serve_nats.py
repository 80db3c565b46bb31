"""``eventlog serve nats://...``: the same API over a JetStream stream (a real nats-server on loopback)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eventlog.jetstream import JetStreamLog
from tests import natsserver
from tests.conftest import ROOT, run_cli
from tests.serving import start_server
from tests.test_serve import N, read_events


@pytest.fixture(scope="module")
def nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[natsserver.Servers]:
    servers = natsserver.start(tmp_path_factory.mktemp("nats"), nodes=1)
    yield servers
    servers.stop()


def test_serve_a_stream(nats: natsserver.Servers, tmp_path: Path) -> None:
    url = nats.stream_url("SERVE", prefix="srv")
    lines = (ROOT / "fixtures" / "sessions_unknown_turn.jsonl").read_text("utf-8").splitlines()
    with JetStreamLog(url) as log:
        for line in lines:
            log.append([json.loads(line)])
    s = start_server(url, tmp_path)
    try:
        c = s.client("ops")
        status = c.get("/v1/status", params={"at": "log"}).json()
        cli = json.loads(run_cli("status", url, "--at", "log", "--json").stdout)
        assert status == cli
        assert c.get("/v1/sessions/s-early-gone").json()["revision"] == 3
        assert c.get("/v1/sessions/s-unk/turns/t2").json()["terminal_reason"] == "interrupt_unanswered"
        r = c.post("/v1/sessions/s-early-gone/recovery-decisions", headers={"Idempotency-Key": "n1"},
                   json={"decision": "close", "expected_revision": 3, "reason": "done"})
        assert r.status_code == 200 and r.json()["result"] == "accepted" and r.json()["line"] == N + 1
        assert r.json()["session"]["admission_state"] == "closed"
        stale = c.post("/v1/sessions/s-early-gone/recovery-decisions", headers={"Idempotency-Key": "n2"},
                       json={"decision": "close", "expected_revision": 3, "reason": "again"})
        assert (stale.status_code, stale.json()["code"]) == (409, "REQUEST_STALE")
        ok = c.post("/v1/events", content=b'{"type":"execution_gone","ts":"2026-08-03T15:00:00+09:00",'
                    b'"session_id":"s-x"}\n')
        assert ok.status_code == 200 and ok.json() == {"written": 1, "first_seq": N + 3, "last_seq": N + 3}
        with c.stream("GET", "/v1/events", params={"after": N}, timeout=20) as events:
            got = read_events(events, 3)
        assert [e.get("id") for e in got] == [str(N + 1), str(N + 2), str(N + 3)], got
        assert json.loads(got[0]["data"])["actor"] == "ops"
        assert c.get("/healthz").json()["last_seq"] == N + 3
    finally:
        assert s.stop() == 0
    with JetStreamLog(url) as log:
        dump = log.replay().dump(url)
    assert [r["result"] for r in dump["sessions"]["receipts"][-2:]] == ["accepted", "REQUEST_STALE"]


def test_serve_says_503_unreachable_as_soon_as_the_server_is_gone(tmp_path: Path) -> None:
    """No 200 from a state the server cannot confirm: unreachable first, then lost (never an all-clear)."""
    servers = natsserver.start(tmp_path / "nats")
    url = servers.stream_url("GONE", prefix="gone")
    try:
        with JetStreamLog(url) as log:
            log.append([{"type": "handoff_created", "handoff_id": "h1", "account": "a"}])
        s = start_server(url, tmp_path)
        try:
            c = s.client("ops")
            assert c.get("/healthz").status_code == 200
            servers.kill()
            deadline = time.monotonic() + 60
            while (health := c.get("/healthz")).status_code == 200:
                assert time.monotonic() < deadline, "healthz kept saying 200 with the server gone"
                time.sleep(0.05)
            assert health.status_code == 503 and "the server is unreachable" in health.json()["message"]
            status = c.get("/v1/status")
            assert status.status_code == 503 and status.json()["code"] == "LOG_UNAVAILABLE"
        finally:
            s.stop()
    finally:
        servers.stop()
