"""``eventlog serve`` under load and abuse: concurrent decisions and appends against a real server process.

Bounded (a fixed number of requests, each with a timeout), loopback only.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import ROOT
from tests.serving import start_server

UNKNOWN_TURN = ROOT / "fixtures" / "sessions_unknown_turn.jsonl"
N = len(UNKNOWN_TURN.read_text(encoding="utf-8").splitlines())


def together(n: int, work: Any) -> list[Any]:
    """Run ``work(i)`` in ``n`` threads released at once; their results in order."""
    barrier = threading.Barrier(n)
    out: list[Any] = [None] * n

    def run(i: int) -> None:
        barrier.wait(30)
        out[i] = work(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return out


def test_50_concurrent_decisions_on_one_revision_one_accepted_all_audited(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    shutil.copy(UNKNOWN_TURN, log)
    s = start_server(log, tmp_path)
    try:
        def send(i: int) -> tuple[int, dict[str, Any]]:
            with httpx.Client(base_url=s.url, timeout=60,
                              headers={"Authorization": f"Bearer {s.keys['ops']}"}) as c:
                r = c.post("/v1/sessions/s-early-gone/recovery-decisions", headers={"Idempotency-Key": f"k-{i}"},
                           json={"decision": "close", "expected_revision": 3, "reason": f"operator {i}"})
                return r.status_code, r.json()

        answers = together(50, send)
    finally:
        assert s.stop() == 0
    codes = sorted(code for code, _ in answers)
    assert codes == [200] + [409] * 49
    assert {a["code"] for code, a in answers if code == 409} == {"REQUEST_STALE"}
    (accepted,) = [a for code, a in answers if code == 200]
    assert accepted["session"]["admission_state"] == "closed" and accepted["session"]["revision"] == 4
    written = [json.loads(x) for x in log.read_text().splitlines()]
    decided = [x for x in written if x["type"] == "recovery_decision" and x["idempotency_key"].startswith("k-")]
    assert sorted(x["idempotency_key"] for x in decided) == sorted(f"k-{i}" for i in range(50))  # all 50 audited
    assert all(x["actor"] == "ops" for x in decided)
    assert [x["seq"] for x in written[N:]] == list(range(N + 1, N + 51))
    assert accepted["line"] in {i + 1 for i, x in enumerate(written) if x.get("idempotency_key", "").startswith("k-")}


def test_8_clients_x_250_appends_contiguous_nothing_lost(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    shutil.copy(UNKNOWN_TURN, log)
    s = start_server(log, tmp_path)
    clients, each = 8, 250
    try:
        def write(i: int) -> list[tuple[int, int]]:
            got = []
            with httpx.Client(base_url=s.url, timeout=60,
                              headers={"Authorization": f"Bearer {s.keys['writer']}"}) as c:
                for n in range(each):
                    body = json.dumps({"type": "execution_gone", "ts": "2026-08-03T15:00:00+09:00",
                                       "session_id": f"load-{i}-{n}"}) + "\n"
                    r = c.post("/v1/events", content=body)
                    assert r.status_code == 200, r.text
                    got.append((r.json()["first_seq"], r.json()["last_seq"]))
            return got

        results = together(clients, write)
        status = s.client("viewer").get("/healthz").json()
    finally:
        assert s.stop() == 0
    seqs = sorted(first for got in results for first, last in got)
    assert seqs == list(range(N + 1, N + 1 + clients * each))  # every answer a different seq, none skipped
    written = [json.loads(x) for x in log.read_text().splitlines()]
    assert [x.get("seq", i + 1) for i, x in enumerate(written)] == list(range(1, N + 1 + clients * each))
    ids = {x["session_id"] for x in written[N:]}
    assert ids == {f"load-{i}-{n}" for i in range(clients) for n in range(each)}
    # each client's answers name the line it wrote
    by_seq = {x["seq"]: x["session_id"] for x in written[N:]}
    for i, got in enumerate(results):
        assert [by_seq[first] for first, _ in got] == [f"load-{i}-{n}" for n in range(each)]
    assert status["last_seq"] == N + clients * each


def open_stream(url: str, key: str, path: str) -> socket.socket:
    """A raw client of an event stream: the request sent, nothing read yet."""
    host, _, port = url.removeprefix("http://").rpartition(":")
    c = socket.create_connection((host, int(port)), timeout=60)
    c.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
              "Accept: text/event-stream\r\n\r\n".encode())
    return c


def open_fds(pid: int) -> int:
    """How many files the process holds open."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_120_open_streams_do_not_starve_a_decision_and_are_let_go(tmp_path: Path) -> None:
    # R11: event-stream clients come and go (console tabs, followers that reconnect, readers that stall). With 120
    # streams open, 40 of them a whole backlog that is never read, a decision still answers; once the clients
    # leave (closed or reset), serve holds none of their connections (its open files are back to what they were)
    log = tmp_path / "log.jsonl"
    lines = UNKNOWN_TURN.read_text(encoding="utf-8").splitlines()
    lines += [json.dumps({"type": "execution_gone", "ts": "2026-08-03T15:00:00+09:00", "seq": N + 1 + i,
                          "session_id": f"backlog-{i}"}) for i in range(20_000)]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    s = start_server(log, tmp_path)
    streams: list[socket.socket] = []
    try:
        c = s.client("ops")
        assert c.get("/v1/status").status_code == 200
        before = open_fds(s.proc.pid)
        key = s.keys["viewer"]
        for i in range(120):
            path = ("/v1/status", "/v1/events", "/v1/events?after=0")[i % 3]
            streams.append(open_stream(s.url, key, path))
        for each in streams:  # each stream's first byte (a tick, a comment): every request has reached its route
            assert each.recv(1)
        r = c.post("/v1/sessions/s-early-gone/recovery-decisions", headers={"Idempotency-Key": "k-busy"},
                   json={"decision": "close", "expected_revision": 3, "reason": "while 120 streams are open"})
        assert r.status_code == 200, r.text
        assert r.json()["session"]["admission_state"] == "closed"
        assert open_fds(s.proc.pid) >= before + 120  # every stream was still open meanwhile
        for i, each in enumerate(streams):
            if i % 2:
                each.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            each.close()
        streams.clear()
        deadline = time.monotonic() + 60
        while open_fds(s.proc.pid) > before and time.monotonic() < deadline:
            threading.Event().wait(0.1)
        assert open_fds(s.proc.pid) <= before, sorted(os.readlink(f"/proc/{s.proc.pid}/fd/{fd}")
                                                      for fd in os.listdir(f"/proc/{s.proc.pid}/fd"))
        assert c.get("/v1/status").status_code == 200
    finally:
        for each in streams:
            each.close()
        assert s.stop() == 0
