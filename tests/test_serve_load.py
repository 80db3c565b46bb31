"""``eventlog serve`` under load and abuse: concurrent decisions and appends against a real server process.

Bounded (a fixed number of requests, each with a timeout), loopback only.
"""

from __future__ import annotations

import json
import shutil
import threading
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
