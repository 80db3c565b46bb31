"""What can appear at the log's path while ``serve`` and ``follow`` run, as an operator meets it.

README: a LOG that goes away later is waited for (503 meanwhile, ``log_missing`` in follow's dump), and
SIGINT/SIGTERM end both cleanly. A FIFO, a directory or a device put at the path while they run is no log
either: it is said (why), waited for the same way, and the log is followed again once a file is back, never
read (a FIFO blocked every request and SIGTERM) and never a server that answers 503 for ever. Committed lines
that vanish (a truncated log, a log moved away and made again) are said in the live views until the process
restarts (docs/DECISIONS.md).
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, bound_by_permissions, write_log
from tests.serving import Server, start_server
from tests.test_follow import _metric, _wait_for
from tests.test_prom import promtool

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


def follow(log: Path, tmp_path: Path, *extra: str, via: Sequence[str] = ()) -> tuple[subprocess.Popen[str], Path, Path]:
    dump, prom = tmp_path / "dump.json", tmp_path / "m.prom"
    proc = subprocess.Popen(
        [*via, sys.executable, "-m", "eventlog", "follow", str(log), "--dump", str(dump), "--prom", str(prom), *extra],
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


# --- a log it may not read ------------------------------------------------------------------


def unreadable(log: Path) -> str:
    """The words serve and follow say for a log they may not read, while they wait."""
    return f"{log} cannot be read (Permission denied); waiting until it can"


def test_serve_waits_for_a_log_it_may_not_read_and_follows_it_once_it_can(tmp_path: Path) -> None:
    log = write_log(tmp_path / "calm.jsonl", LINES)
    server = start_server(log, tmp_path, via=bound_by_permissions())
    try:
        c = server.client("viewer", timeout=PROMPT_S)
        log.chmod(0o000)
        r = health_until(server, lambda r: r.status_code == 503)
        assert r.status_code == 503 and r.json()["code"] == "LOG_UNAVAILABLE", r.text
        assert r.json()["message"] == unreadable(log)
        status = c.get("/v1/status")
        assert status.status_code == 503 and unreadable(log) in status.json()["message"]
        time.sleep(1.0)  # several looks at the path: said once, not on every one
        assert server.stderr.read_text().count(unreadable(log)) == 1, server.output()
        log.chmod(0o644)
        r = health_until(server, lambda r: r.status_code == 200)
        assert r.status_code == 200 and r.json()["events"] == len(LINES), r.text
        assert c.get("/v1/status").status_code == 200
    finally:
        log.chmod(0o644)
        stop_promptly(server)
    assert f"{log} is there now; following it" in server.stderr.read_text()


def test_serve_says_on_healthz_and_at_start_that_it_may_not_write_its_log(tmp_path: Path) -> None:
    """The shipped serve unit may write only /var/lib/recovery-ledger (ReadWritePaths=), while ledger.env invited a
    log anywhere: every POST got 503 while /healthz said "following", and nothing said why. Now /healthz says it
    (still 200: it follows; reads go on) and so does stderr at start, until the log may be written."""
    log = write_log(tmp_path / "ledger.jsonl", LINES)
    log.chmod(0o444)
    new = json.dumps({**LINES[0], "handoff_id": "h-new"}) + "\n"
    try:
        server = start_server(log, tmp_path, via=bound_by_permissions())
        try:
            why = f"{log} may not be written by this user: every append and decision to it is refused"
            assert why in server.stderr.read_text()
            health = httpx.get(server.url + "/healthz")
            assert health.status_code == 200 and health.json()["status"] == "following", health.text
            assert health.json()["writable"] is False and health.json()["write_problem"] == why
            assert server.client().post("/v1/events", content=new).status_code == 503
            log.chmod(0o644)
            health = httpx.get(server.url + "/healthz")
            assert health.json()["writable"] is True and "write_problem" not in health.json(), health.text
            assert server.client().post("/v1/events", content=new).status_code == 200
        finally:
            stop_promptly(server)
    finally:
        log.chmod(0o644)


def test_serve_of_a_log_not_there_yet_says_when_its_directory_may_not_be_written(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o555)
    try:
        server = start_server(data / "ledger.jsonl", tmp_path, ready=False, via=bound_by_permissions())
        try:
            why = (f"{data / 'ledger.jsonl'}: its directory {data} may not be written by this user: every append "
                   "and decision to it is refused")
            assert why in server.stderr.read_text()
            assert health_until(server, lambda r: r.status_code == 503).json()["code"] == "LOG_UNAVAILABLE"
        finally:
            stop_promptly(server)
    finally:
        data.chmod(0o755)


def test_follow_says_a_log_it_may_not_read_is_missing_and_follows_it_once_it_can(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", LINES)
    proc, dump, prom = follow(log, tmp_path, via=bound_by_permissions())
    try:
        assert _wait_for(lambda: dump_of(dump)["events"] == len(LINES))
        log.chmod(0o000)
        assert _wait_for(lambda: dump_of(dump).get("log_missing") is True)
        assert _wait_for(lambda: _metric(prom, "recovery_log_missing") == 1)
        time.sleep(1.0)
        assert proc.poll() is None  # waiting, not ended
        log.chmod(0o644)
        assert _wait_for(lambda: dump_of(dump)["events"] == len(LINES) and "log_missing" not in dump_of(dump))
        assert _wait_for(lambda: _metric(prom, "recovery_log_missing") == 0)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=PROMPT_S * 2)
    finally:
        log.chmod(0o644)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    notes = err.splitlines()
    assert notes.count(f"eventlog: {unreadable(log)}") == 1, err
    assert f"eventlog: {log} is there now; following it" in notes, err


# --- committed lines that vanish -----------------------------------------------------------


def truncate_lines(log: Path, keep: int) -> None:
    """Cut the log to its first ``keep`` lines in place (same file, as ``truncate -s``)."""
    kept = b"".join(log.read_bytes().splitlines(keepends=True)[:keep])
    os.truncate(log, len(kept))


def check_metrics(text: str, tmp_path: Path) -> None:
    """promtool accepts the exposition."""
    path = tmp_path / "check.prom"
    path.write_text(text)
    with path.open("rb") as f:
        checked = subprocess.run([promtool(), "check", "metrics"], stdin=f, capture_output=True, text=True,
                                 timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_serve_says_committed_lines_vanished_until_it_restarts(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", LINES)
    server = start_server(log, tmp_path)
    try:
        c = server.client("viewer")
        metrics = c.get("/metrics").text
        assert 'recovery_vanished_lines_total{log="' + str(log) + '"} 0' in metrics
        truncate_lines(log, 12)
        assert _wait_for(lambda: c.get("/healthz").json()["events"] == 12)
        assert _wait_for(lambda: c.get("/v1/status").json()["totals"]["log"]["events"] == 12)  # a judgement is reused
        status = c.get("/v1/status").json()
        [group] = [g for g in status["groups"] if g["reason_code"] == "lines_vanished"]
        assert group["needs_decision"] is True and group["domain"] == "log" and group["count"] == 1
        [item] = group["items"]
        assert "28 committed lines vanished" in item["reason"] and "40" in item["reason"], item
        assert "12" in item["reason"] and "until the server restarts" in item["reason"], item
        assert item["since"] is not None and item["for_s"] is not None and item["for_s"] >= 0
        assert status["needs_person"] >= 1
        vanished = c.get("/v1/dump").json()["lines_vanished"]
        assert vanished == {"lines": 28, "times": 1, "first_at": item["since"], "last_at": item["since"],
                            "before": 40, "after": 12}
        metrics = c.get("/metrics").text
        assert 'recovery_vanished_lines_total{log="' + str(log) + '"} 28' in metrics
        check_metrics(metrics, tmp_path)
        # more lines after it do not clear it: it stays until the server restarts
        with log.open("a") as f:
            f.write(json.dumps(LINES[0] | {"handoff_id": "h-new"}) + "\n")
        assert _wait_for(lambda: c.get("/healthz").json()["events"] == 13)
        assert any(g["reason_code"] == "lines_vanished" for g in c.get("/v1/status").json()["groups"])
    finally:
        assert server.stop() == 0
    assert f"{log} was truncated; replaying it from the start" in server.stderr.read_text()
    again = start_server(log, tmp_path, server.keys)
    try:
        status = again.client("viewer").get("/v1/status").json()
        assert not [g for g in status["groups"] if g["reason_code"] == "lines_vanished"]
        assert "lines_vanished" not in again.client("viewer").get("/v1/dump").json()
    finally:
        assert again.stop() == 0


def test_follow_counts_committed_lines_that_vanished(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", LINES)
    proc, dump, prom = follow(log, tmp_path)
    try:
        assert _wait_for(lambda: _metric(prom, "recovery_events_total") == len(LINES))
        assert _metric(prom, "recovery_vanished_lines_total") == 0
        assert "lines_vanished" not in dump_of(dump)
        truncate_lines(log, 12)
        assert _wait_for(lambda: _metric(prom, "recovery_vanished_lines_total") == 28)
        written = dump_of(dump)
        assert written["events"] == 12
        assert written["lines_vanished"]["lines"] == 28 and written["lines_vanished"]["before"] == 40
        check_metrics(prom.read_text(), tmp_path)
        other = tmp_path / "other.jsonl"  # replaced by a file with fewer lines still: counted again
        write_log(other, LINES[:2])
        os.replace(other, log)
        assert _wait_for(lambda: _metric(prom, "recovery_vanished_lines_total") == 38)
        assert dump_of(dump)["lines_vanished"]["times"] == 2
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"eventlog: {log} was truncated; replaying it from the start" in err.splitlines()


def made_again(log: Path, lines: list[dict[str, Any]]) -> None:
    """A new log of ``lines`` at the path, whole at once (written beside it, renamed in)."""
    os.replace(write_log(log.with_name("new.tmp"), lines), log)


def test_serve_counts_the_committed_lines_of_a_log_moved_away_and_made_again(tmp_path: Path) -> None:
    """The soak review's case: the log renamed away, a new one made at its path (logrotate's rename + create, a
    writer that makes a new file). Serve said only "is gone" and "is there now" and fell to the new file's few
    lines, every pending handoff forgotten, all clear. Every verdict comes from the whole log: the committed
    lines the log no longer holds vanished, as when a shorter file takes its place with no gap (DECISIONS.md).
    A log moved away and put back whole is no vanishing."""
    log = write_log(tmp_path / "work.jsonl", LINES)
    server = start_server(log, tmp_path)
    try:
        c = server.client("viewer")
        log.rename(tmp_path / "saved.jsonl")  # away and back whole: nothing vanished
        assert health_until(server, lambda r: r.status_code == 503).status_code == 503
        (tmp_path / "saved.jsonl").rename(log)
        assert health_until(server, lambda r: r.status_code == 200).json()["events"] == len(LINES)
        assert not [g for g in c.get("/v1/status").json()["groups"] if g["reason_code"] == "lines_vanished"]
        log.rename(tmp_path / "work.jsonl.1")
        assert health_until(server, lambda r: r.status_code == 503).status_code == 503
        made_again(log, LINES[:3])
        assert health_until(server, lambda r: r.status_code == 200).json()["events"] == 3
        assert _wait_for(lambda: c.get("/v1/status").json()["totals"]["log"]["events"] == 3)
        status = c.get("/v1/status").json()
        [group] = [g for g in status["groups"] if g["reason_code"] == "lines_vanished"]
        assert group["needs_decision"] is True and group["domain"] == "log"
        [item] = group["items"]
        assert "37 committed lines vanished" in item["reason"], item
        assert status["needs_person"] >= 1
        vanished = c.get("/v1/dump").json()["lines_vanished"]
        assert {k: vanished[k] for k in ("lines", "times", "before", "after")} == \
            {"lines": 37, "times": 1, "before": 40, "after": 3}
        assert 'recovery_vanished_lines_total{log="' + str(log) + '"} 37' in c.get("/metrics").text
    finally:
        assert server.stop() == 0


def test_follow_counts_the_committed_lines_of_a_log_moved_away_and_made_again(tmp_path: Path) -> None:
    """The review's reproduction with follow: `mv L.jsonl L.jsonl.1`, then a new log at the path. The dump said
    `events 3`, no lines_vanished, recovery_vanished_lines_total 0; stderr only "is gone" and "is there now"."""
    log = write_log(tmp_path / "work.jsonl", LINES)
    proc, dump, prom = follow(log, tmp_path)
    try:
        assert _wait_for(lambda: _metric(prom, "recovery_events_total") == len(LINES))
        log.rename(tmp_path / "work.jsonl.1")
        assert _wait_for(lambda: dump_of(dump).get("log_missing") is True)
        made_again(log, LINES[:3])
        assert _wait_for(lambda: _metric(prom, "recovery_vanished_lines_total") == 37)
        written = dump_of(dump)
        assert written["events"] == 3 and "log_missing" not in written
        assert {k: written["lines_vanished"][k] for k in ("lines", "times", "before", "after")} == \
            {"lines": 37, "times": 1, "before": 40, "after": 3}
        check_metrics(prom.read_text(), tmp_path)
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"eventlog: {log} is there now, holding 37 committed lines fewer than it did (counted as vanished); " \
        "following it" in err.splitlines(), err


def test_a_log_made_after_follow_started_is_no_vanishing(tmp_path: Path) -> None:
    """A log that held no committed line before (none yet at start, or an empty one gone and made again) counts
    nothing when it comes: only lines once read can vanish."""
    log = tmp_path / "work.jsonl"
    proc, dump, prom = follow(log, tmp_path)
    try:
        assert _wait_for(lambda: dump_of(dump).get("log_missing") is True)
        log.touch()
        assert _wait_for(lambda: "log_missing" not in dump_of(dump))
        log.unlink()
        assert _wait_for(lambda: dump_of(dump).get("log_missing") is True)
        made_again(log, LINES[:3])
        assert _wait_for(lambda: dump_of(dump)["events"] == 3)
        time.sleep(0.5)  # a later look counts nothing either
        assert "lines_vanished" not in dump_of(dump)
        assert _metric(prom, "recovery_vanished_lines_total") == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


def test_a_stray_files_bad_lines_never_count_as_committed_lines(tmp_path: Path) -> None:
    """Only committed lines (events) count: a text file put over the log holds none, so when the log comes back
    nothing more vanished than the log's own line while the stray file stood there."""
    log = write_log(tmp_path / "work.jsonl", LINES[:1])
    original, stray = tmp_path / "original", tmp_path / "stray.txt"
    shutil.copy(log, original)
    stray.write_text("".join(f"not a log line {n}\n" for n in range(5)))
    server = start_server(log, tmp_path)
    try:
        c = server.client("viewer")
        assert _wait_for(lambda: c.get("/healthz").json()["events"] == 1)
        os.replace(stray, log)
        assert _wait_for(lambda: c.get("/v1/dump").json().get("lines_vanished") is not None)
        shutil.copy(original, tmp_path / "back")
        os.replace(tmp_path / "back", log)
        assert _wait_for(lambda: c.get("/healthz").json()["events"] == 1)
        time.sleep(1.5)  # a later look must not count the stray file's 5 bad lines as 4 vanished
        vanished = c.get("/v1/dump").json()["lines_vanished"]
        assert vanished["lines"] == 1 and vanished["before"] == 1 and vanished["after"] == 0, vanished
    finally:
        assert server.stop() == 0
