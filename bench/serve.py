"""``eventlog serve`` on a big log: requests/s and p50/p95 latency of a decision and of ``GET /v1/status``.

Run from the checkout (not a test; nothing asserts a timing)::

    .venv/bin/python -m bench.serve                      # 1,000,000 events, 100,000 entities
    .venv/bin/python -m bench.serve --events 100000 --entities 10000 --json

The log comes from :mod:`bench.generate` (cached in ``--out`` by name) and is
copied, since the decisions are appended to it. One server process (the
``eventlog serve`` command, access log off) on 127.0.0.1; ``--concurrency``
httpx clients in threads send the requests, each timed from send to the whole
answer read. Measured, in order:

- startup: from starting the process to the first ``/healthz`` 200 (the follower's replay);
- decisions: ``close`` of a different open session each, at its revision (all accepted; each
  is appended to the log, folded by the follower and its receipt read back), after one
  untimed warm-up decision (the appender's first append builds or loads its sidecar);
- status: ``GET /v1/status`` in a loop while nothing is written (a judgement as of now is
  reused for up to a second, so most answers reuse one);
- status judged for the request: ``GET /v1/status?at=T`` with a new T each time, so each
  answer is a judgement of its own (the dump and the triage over every entity): what a
  reader would wait for if no judgement were kept.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.generate import ensure_log
from eventlog.keys import add_key

ROOT = Path(__file__).resolve().parent.parent


def nearest_rank(values: list[float], p: float) -> float:
    """The p-th percentile, nearest rank."""
    ordered = sorted(values)
    k = max(1, -(-len(ordered) * p // 100))
    return ordered[int(k) - 1]


def summary(name: str, latencies: list[float], wall: float) -> dict[str, Any]:
    """requests/s and latency percentiles in ms."""
    ms = [x * 1000 for x in latencies]
    return {"measurement": name, "requests": len(ms), "wall_s": round(wall, 3),
            "requests_per_s": round(len(ms) / wall, 1) if wall else None,
            "p50_ms": round(nearest_rank(ms, 50), 2), "p95_ms": round(nearest_rank(ms, 95), 2),
            "p99_ms": round(nearest_rank(ms, 99), 2), "max_ms": round(max(ms), 2)}


def client(url: str, key: str) -> httpx.Client:
    """A client that sends small writes at once (TCP_NODELAY, as curl and browsers do)."""
    transport = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    return httpx.Client(base_url=url, timeout=120, headers={"Authorization": f"Bearer {key}"}, transport=transport)


def run(n: int, concurrency: int, url: str, key: str, request: Callable[[httpx.Client, int], None]) -> tuple[
        list[float], float]:
    """``n`` requests shared by ``concurrency`` threads, each with its own client; latencies and wall time."""
    latencies: list[float] = []
    lock = threading.Lock()
    counter = iter(range(n))

    def worker() -> None:
        with client(url, key) as c:
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                t = time.perf_counter()
                request(c, i)
                took = time.perf_counter() - t
                with lock:
                    latencies.append(took)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, time.perf_counter() - started


def measure(source: Path, out: Path, decisions: int, status_n: int, judged: int, concurrency: int) -> dict[str, Any]:
    """Serve a copy of ``source`` (scratch files in ``out``) and measure; the figures as :func:`main` prints them.

    ``result["rows"]``: decisions, status without writes, status judged for the request.
    """
    scratch = Path(tempfile.mkdtemp(prefix="bench-serve-", dir=out))
    proc = None
    try:
        log = scratch / "log.jsonl"
        shutil.copy(source, log)
        keys = scratch / "keys.json"
        key = add_key(str(keys), "bench", ["read", "sessions:recover"])
        started = time.perf_counter()
        err = (scratch / "serve.err").open("wb")
        proc = subprocess.Popen([sys.executable, "-m", "eventlog", "serve", str(log), "--keys", str(keys),
                                 "--port", "0", "--no-access-log"], stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)
        url = None
        while url is None:
            m = re.search(r"on (http://127\.0\.0\.1:\d+)/", (scratch / "serve.err").read_text())
            url = m.group(1) if m else None
            if proc.poll() is not None:
                raise RuntimeError((scratch / "serve.err").read_text())
            time.sleep(0.05)
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        startup = time.perf_counter() - started
        auth = {"Authorization": f"Bearer {key}"}
        dump = httpx.get(url + "/v1/dump", params={"at": "log"}, headers=auth, timeout=120).json()
        open_sessions = [(sid, item["revision"]) for sid, item in sorted(dump["sessions"]["items"].items())
                         if item["admission_state"] != "closed"]
        need = decisions + judged + 1
        if len(open_sessions) < need:
            raise RuntimeError(f"only {len(open_sessions)} open sessions; ask for fewer decisions")
        todo = iter(open_sessions)

        def close(c: httpx.Client, i: int) -> None:
            sid, revision = next(todo)
            r = c.post(f"/v1/sessions/{sid}/recovery-decisions", headers={"Idempotency-Key": f"bench-{sid}"},
                       json={"decision": "close", "expected_revision": revision, "reason": "bench"})
            if r.status_code != 200:
                raise RuntimeError(f"decision on {sid}: {r.status_code} {r.text}")

        t = time.perf_counter()
        with client(url, key) as c:
            close(c, -1)
        warm = time.perf_counter() - t
        rows = []
        lat, wall = run(decisions, concurrency, url, key, close)
        rows.append(summary(f"decision (close, accepted), {concurrency} clients", lat, wall))

        def status(c: httpx.Client, i: int) -> None:
            r = c.get("/v1/status")
            if r.status_code != 200:
                raise RuntimeError(f"status: {r.status_code} {r.text}")

        lat, wall = run(status_n, concurrency, url, key, status)
        rows.append(summary(f"GET /v1/status, {concurrency} clients, no writes", lat, wall))

        def judged_for_it(c: httpx.Client, i: int) -> None:
            at = datetime.now(UTC).isoformat()
            r = c.get("/v1/status", params={"at": at})
            if r.status_code != 200 or r.json()["as_of"] != at:
                raise RuntimeError(f"status at {at}: {r.status_code} {r.text[:200]}")

        lat, wall = run(judged, 1, url, key, judged_for_it)
        rows.append(summary("GET /v1/status?at=T, a new T each time (judged for the request), 1 client", lat, wall))
        result = {
            "log": {"bytes": log.stat().st_size},
            "startup_s": round(startup, 2), "warmup_decision_s": round(warm, 2), "rows": rows,
            "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                        "load_1m": round(os.getloadavg()[0], 2)},
        }
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(60)
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table (or JSON); exit 0."""
    p = argparse.ArgumentParser(prog="python -m bench.serve", description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--entities", type=int, default=100_000)
    p.add_argument("--out", default=str(ROOT / "bench-out"))
    p.add_argument("--decisions", type=int, default=400)
    p.add_argument("--status", type=int, default=2000)
    p.add_argument("--judged", dest="after_write", type=int, default=20)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    source, _made = ensure_log(Path(args.out), args.events, args.entities)
    try:
        result = measure(source, Path(args.out), args.decisions, args.status, args.after_write, args.concurrency)
    except RuntimeError as err:
        raise SystemExit(str(err)) from None
    result["log"]["events"], result["log"]["entities"] = args.events, args.entities
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"log: {args.events:,} events, {args.entities:,} entities; startup (replay until /healthz 200) "
          f"{result['startup_s']} s; warm-up decision {result['warmup_decision_s']} s")
    print("| measurement | requests | requests/s | p50 ms | p95 ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in result["rows"]:
        print(f"| {r['measurement']} | {r['requests']} | {r['requests_per_s']} | {r['p50_ms']} | {r['p95_ms']} | "
              f"{r['p99_ms']} | {r['max_ms']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
