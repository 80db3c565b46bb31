"""What can appear at the log's path while ``serve`` and ``follow`` run, as an operator meets it.

README: a LOG that goes away later is waited for (503 meanwhile, ``log_missing`` in follow's dump), and
SIGINT/SIGTERM end both cleanly. A FIFO, a directory or a device put at the path while they run is no log
either: it is said (why), waited for the same way, and the log is followed again once a file is back, never
read (a FIFO blocked every request and SIGTERM) and never a server that answers 503 for ever.
Real processes: serve on 127.0.0.1 with an HTTP client, follow as a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, write_log
from tests.serving import Server, start_server
from tests.test_follow import _metric, _wait_for

LINES = [{"type": "handoff_created", "ts": f"2026-08-03T09:{i:02d}:00+09:00", "handoff_id": f"h{i}",
          "account": "cloud-account-a"} for i in range(40)]
#: How long a request or a stop may take on a loaded 2-core machine; a blocked one never ends.
PROMPT_S = 15.0


def swap_in(log: Path, kind: str) -> None:
    """Put ``kind`` at the log's path: a FIFO at once (``mkfifo T; mv T LOG``), a directory as ``rm LOG; mkdir
    LOG`` (a directory cannot be renamed over a file)."""
    if kind == "a FIFO":
        fifo = log.with_name("fifo.tmp")
        os.mkfifo(fifo)
        os.replace(fifo, log)
    else:
        log.unlink()
        log.mkdir()


def swap_out(log: Path, kind: str, saved: Path) -> None:
    """Take ``kind`` away and put the log file back."""
    if kind == "a FIFO":
        log.unlink()
    else:
        log.rmdir()
    shutil.copy(saved, log)


def said(log: Path, kind: str) -> str:
    """The words for ``kind`` at the path (the appender's, as serve and follow say them at start)."""
    if kind == "a FIFO":
        return f"{log} is not a regular file (a FIFO), so it cannot hold a log"
    return f"{log} is a directory, not a log file"


def health_until(server: Server, cond: Any, timeout: float = 30.0) -> httpx.Response:
    """Poll /healthz until ``cond(response)``; the last answer (each request must answer within PROMPT_S)."""
    deadline = time.monotonic() + timeout
    while True:
        r = httpx.get(server.url + "/healthz", timeout=PROMPT_S)
        if cond(r) or time.monotonic() > deadline:
            return r
        time.sleep(0.05)


def stop_promptly(server: Server) -> None:
    """SIGTERM ends it with exit 0 within PROMPT_S, without a traceback."""
    started = time.monotonic()
    assert server.stop(timeout=PROMPT_S * 2) == 0, server.output()
    assert time.monotonic() - started < PROMPT_S, server.output()
    assert "Traceback" not in server.output()


@pytest.mark.parametrize("kind", ["a FIFO", "a directory"])
def test_serve_says_what_is_at_the_path_and_follows_the_log_once_it_is_back(tmp_path: Path, kind: str) -> None:
    log = write_log(tmp_path / "calm.jsonl", LINES)
    saved = tmp_path / "saved.jsonl"
    shutil.copy(log, saved)
    server = start_server(log, tmp_path)
    try:
        c = server.client("viewer", timeout=PROMPT_S)
        stream = c.stream("GET", "/v1/events", timeout=PROMPT_S)
        events = stream.__enter__()
        assert events.status_code == 200
        swap_in(log, kind)
        r = health_until(server, lambda r: r.status_code == 503)
        assert r.status_code == 503 and r.json()["code"] == "LOG_UNAVAILABLE"
        assert r.json()["message"] == f"{said(log, kind)}; waiting for a log file there"
        status = c.get("/v1/status")
        assert status.status_code == 503 and said(log, kind) in status.json()["message"]
        # an open event stream ends, told why, instead of hanging on the path (a directory may be seen as the
        # log gone, before it is made)
        ended = "\n".join(events.iter_lines())
        assert "event: reset" in ended and (said(log, kind) in ended or kind == "a directory"), ended
        stream.__exit__(None, None, None)
        swap_out(log, kind, saved)
        r = health_until(server, lambda r: r.status_code == 200)
        assert r.status_code == 200 and r.json()["events"] == len(LINES), r.text
        assert c.get("/v1/status").status_code == 200
        swap_in(log, kind)  # and again, now to stop it while it is there
        assert health_until(server, lambda r: r.status_code == 503).status_code == 503
    finally:
        stop_promptly(server)
    err = server.stderr.read_text()
    assert f"{said(log, kind)}; waiting for a log file there" in err
    assert f"{log} is there now; following it" in err


def follow(log: Path, tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], Path, Path]:
    dump, prom = tmp_path / "dump.json", tmp_path / "m.prom"
    proc = subprocess.Popen(
        [sys.executable, "-m", "eventlog", "follow", str(log), "--dump", str(dump), "--prom", str(prom), *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    return proc, dump, prom


def dump_of(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


@pytest.mark.parametrize("kind", ["a FIFO", "a directory"])
def test_follow_says_the_log_is_missing_and_stops_on_sigterm(tmp_path: Path, kind: str) -> None:
    log = write_log(tmp_path / "work.jsonl", LINES)
    saved = tmp_path / "saved.jsonl"
    shutil.copy(log, saved)
    proc, dump, prom = follow(log, tmp_path)
    try:
        assert _wait_for(lambda: dump_of(dump)["events"] == len(LINES))
        swap_in(log, kind)
        assert _wait_for(lambda: dump_of(dump).get("log_missing") is True)
        assert _wait_for(lambda: _metric(prom, "recovery_log_missing") == 1)
        assert proc.poll() is None  # waiting, not ended
        swap_out(log, kind, saved)
        assert _wait_for(lambda: dump_of(dump)["events"] == len(LINES) and "log_missing" not in dump_of(dump))
        assert _wait_for(lambda: _metric(prom, "recovery_log_missing") == 0)
        swap_in(log, kind)
        assert _wait_for(lambda: dump_of(dump).get("log_missing") is True)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=PROMPT_S * 2)
        assert time.monotonic() - started < PROMPT_S
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    notes = err.splitlines()
    assert notes.count(f"eventlog: {said(log, kind)}; waiting for a log file there") == 2, err
    assert f"eventlog: {log} is there now; following it" in notes, err
