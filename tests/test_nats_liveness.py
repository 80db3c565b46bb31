"""A NATS server that hangs or goes away (docs/JETSTREAM.md, "Every request is bounded", "Reading, following"):
every command says so in one line within the URL's ``timeout``; ``serve`` answers 503 saying why and ``follow``'s
views name it (``log_unreachable``, ``recovery_log_unreachable``) for as long as it lasts, however long; both
resume once the server is back. Against a real nats-server stopped (SIGSTOP), killed and started again; the CLI,
``follow`` and ``serve`` as real processes, ``serve`` asked over HTTP."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests import natsserver
from tests.conftest import ROOT, run_cli
from tests.serving import Server, start_server

#: The URL's timeout the tests give: every request, and the time a hung server goes unnoticed, are bounded by it.
TIMEOUT = 1
#: What the tests allow on top of it on this shared machine (a process starting, a tick, a busy CPU).
SLACK_S = 6.0
#: An outage longer than the 10 reconnect tries of 1 s each a follower used to give up after.
OUTAGE_S = 13.0


def created(hid: str) -> str:
    return json.dumps({"type": "handoff_created", "handoff_id": hid, "account": "a"}) + "\n"


def wait_for(what: Callable[[], Any], limit: float = 60.0, why: Callable[[], str] = lambda: "") -> Any:
    deadline = time.monotonic() + limit
    while True:
        got = what()
        if got:
            return got
        assert time.monotonic() < deadline, f"not within {limit} s: {why()}"
        time.sleep(0.05)


def read_json(path: Path) -> dict[str, Any]:
    try:
        value: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value


def metric(path: Path, name: str) -> float | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def one_line(stderr: str) -> str:
    """The one line a failed command says: no traceback, no asyncio noise."""
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("eventlog: ") and "Traceback" not in stderr, stderr
    return lines[0]


def health(server: Server) -> httpx.Response | None:
    try:
        return httpx.get(server.url + "/healthz", timeout=10)
    except httpx.TransportError:
        return None


@contextmanager
def following(url: str, tmp: Path, *more: str) -> Iterator[tuple[subprocess.Popen[str], Path, Path]]:
    """``eventlog follow URL --dump --prom --tick 1s MORE...`` running until the block ends (SIGTERM, then exit 0)."""
    dump, prom = tmp / "dump.json", tmp / "m.prom"
    proc = subprocess.Popen([sys.executable, "-m", "eventlog", "follow", url, "--dump", str(dump), "--prom", str(prom),
                             "--tick", "1s", *more], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_for(lambda: read_json(dump) or proc.poll() is not None)
        assert proc.poll() is None, proc.communicate()
        yield proc, dump, prom
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_a_hung_server_is_said_within_the_timeout_everywhere_and_left_behind_when_it_answers(tmp_path: Path) -> None:
    servers = natsserver.start(tmp_path / "nats")
    url = servers.stream_url("HUNG", prefix="hung", timeout=TIMEOUT)
    address = servers.urls[0]
    try:
        assert run_cli("append", url, stdin=created("h1")).returncode == 0
        s = start_server(url, tmp_path)
        try:
            c = s.client("ops")
            with following(url, tmp_path) as (proc, dump, prom):
                servers.procs[0].send_signal(signal.SIGSTOP)
                try:
                    # at once (serve's own requests time out) or once serve noticed: 503 saying why, never a 500
                    started = time.monotonic()
                    posted = c.post("/v1/events", content=created("h3").encode())
                    assert posted.status_code == 503 and posted.json()["code"] == "LOG_UNAVAILABLE", posted.text
                    assert address in posted.json()["message"]
                    assert time.monotonic() - started < TIMEOUT + SLACK_S

                    started = time.monotonic()
                    out = run_cli("append", url, stdin=created("h2"))
                    took = time.monotonic() - started
                    assert out.returncode == 1 and took < TIMEOUT + SLACK_S, (took, out.stderr)
                    line = one_line(out.stderr)
                    assert address in line and f"no answer in {TIMEOUT} s" in line and "nothing was written" in line

                    started = time.monotonic()
                    out = run_cli("status", url)
                    took = time.monotonic() - started
                    assert out.returncode == 2 and took < TIMEOUT + SLACK_S, (took, out.stderr)
                    assert one_line(out.stderr) == (f"eventlog: cannot read {url}: cannot connect to {address}: "
                                                    f"no answer in {TIMEOUT} s")

                    # serve noticed it within the timeout (a ping every half of it): 503 saying why, never a 200
                    started = time.monotonic()
                    hung = wait_for(lambda: (r := health(s)) is not None and r.status_code == 503 and r,
                                    TIMEOUT + SLACK_S, lambda: s.output())
                    assert "the server is unreachable" in hung.json()["message"] and address in hung.json()["message"]
                    assert time.monotonic() - started < TIMEOUT + SLACK_S
                    status = c.get("/v1/status")
                    assert status.status_code == 503 and status.json()["code"] == "LOG_UNAVAILABLE"
                    posted = c.post("/v1/events", content=created("h3").encode())
                    assert posted.status_code == 503 and "the server is unreachable" in posted.json()["message"]
                    assert "Traceback" not in s.output()

                    # follow's views name it, with the seq they stay as of
                    down = wait_for(lambda: read_json(dump).get("log_unreachable"), TIMEOUT + SLACK_S)
                    assert down["seq"] == 1 and address in down["reason"] and down["since"]
                    assert read_json(dump)["events"] == 1
                    wait_for(lambda: metric(prom, "recovery_log_unreachable") == 1, TIMEOUT + SLACK_S)
                finally:
                    servers.procs[0].send_signal(signal.SIGCONT)

                wait_for(lambda: (r := health(s)) is not None and r.status_code == 200, 30, lambda: s.output())
                wait_for(lambda: "log_unreachable" not in read_json(dump), 30)
                wait_for(lambda: metric(prom, "recovery_log_unreachable") == 0, 30)
                assert run_cli("append", url, stdin=created("h4")).returncode == 0
                wait_for(lambda: read_json(dump).get("events") == 2, 30)
                wait_for(lambda: c.get("/healthz").json()["last_seq"] == 2, 30)
                assert proc.poll() is None
            assert proc.returncode == 0
            err = proc.stderr.read() if proc.stderr else ""
            assert [line.split(": ", 2)[2].split(";")[0] for line in err.splitlines()] == [
                "the server is unreachable", "the server is back"], err
        finally:
            assert s.stop() == 0
    finally:
        servers.stop()


def test_an_outage_longer_than_ten_seconds_is_ridden_out_by_follow_and_serve(tmp_path: Path) -> None:
    """A NATS upgrade needs no person: both keep trying for ever, saying so, and resume once it is back. follow's
    --snapshot (saved every 10 s) is not said unsaved meanwhile (the outage is said once), and is saved once it is
    back: a follow started from it again starts there."""
    servers = natsserver.start(tmp_path / "nats")
    snap = tmp_path / "stream.snap"
    url = servers.stream_url("OUT", prefix="out", timeout=TIMEOUT)
    try:
        assert run_cli("append", url, stdin=created("h1")).returncode == 0
        s = start_server(url, tmp_path)
        try:
            c = s.client("ops")
            with following(url, tmp_path, "--snapshot", str(snap)) as (proc, dump, prom):
                servers.kill()
                gone = time.monotonic()
                wait_for(lambda: read_json(dump).get("log_unreachable"), TIMEOUT + SLACK_S)
                wait_for(lambda: metric(prom, "recovery_log_unreachable") == 1, TIMEOUT + SLACK_S)
                wait_for(lambda: (r := health(s)) is not None and r.status_code == 503, TIMEOUT + SLACK_S)
                time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - gone)))
                assert proc.poll() is None, proc.communicate()
                still = health(s)
                assert still is not None and still.status_code == 503
                assert "the server is unreachable" in still.json()["message"]
                assert read_json(dump).get("log_unreachable") and metric(prom, "recovery_log_unreachable") == 1
                assert metric(prom, "recovery_snapshot_unsaved") == 0
                servers.restart()
                assert run_cli("append", url, stdin=created("h2")).returncode == 0
                wait_for(lambda: read_json(dump).get("events") == 2 and "log_unreachable" not in read_json(dump), 60)
                wait_for(lambda: metric(prom, "recovery_log_unreachable") == 0, 30)
                wait_for(lambda: (r := health(s)) is not None and r.status_code == 200, 60, lambda: s.output())
                assert c.get("/healthz").json()["last_seq"] == 2
                assert c.get("/v1/status").status_code == 200
                ok = c.post("/v1/events", content=created("h3").encode())
                assert ok.status_code == 200 and ok.json()["last_seq"] == 3, ok.text
                wait_for(lambda: read_json(dump).get("events") == 3, 30)
                assert proc.poll() is None
            assert proc.returncode == 0
            err = proc.stderr.read() if proc.stderr else ""
            lines = err.splitlines()
            assert lines and all(line.startswith("eventlog: ") for line in lines), err
            assert "the server is unreachable" in lines[0] and "the server is back" in lines[-1], err
            assert not [line for line in lines if "snapshot" in line], err
            assert snap.is_file()
            again = run_cli("replay", url, "--snapshot", str(snap))
            assert again.returncode == 0 and again.stderr == "", again.stderr
            assert json.loads(again.stdout)["events"] == 3
        finally:
            assert s.stop() == 0
    finally:
        servers.stop()


def test_a_server_down_when_follow_and_serve_start_is_waited_for(tmp_path: Path) -> None:
    """As a log file that does not exist yet is: said, the dump's log_unreachable, 503; then followed once it is up."""
    servers = natsserver.start(tmp_path / "nats")
    url = servers.stream_url("LATE", prefix="late", timeout=TIMEOUT)
    try:
        assert run_cli("append", url, stdin=created("h1")).returncode == 0
        servers.kill()
        s = start_server(url, tmp_path, ready=False)
        try:
            with following(url, tmp_path) as (proc, dump, prom):
                down = read_json(dump)
                assert down["events"] == 0 and down["log_unreachable"]["seq"] == 0, down
                assert "cannot connect to" in down["log_unreachable"]["reason"]
                wait_for(lambda: metric(prom, "recovery_log_unreachable") == 1, 10)
                answer = wait_for(lambda: health(s), 30, lambda: s.output())
                assert answer.status_code == 503 and "the server is unreachable" in answer.json()["message"]
                servers.restart()
                wait_for(lambda: read_json(dump).get("events") == 1 and "log_unreachable" not in read_json(dump), 60)
                wait_for(lambda: (r := health(s)) is not None and r.status_code == 200, 60, lambda: s.output())
                assert run_cli("append", url, stdin=created("h2")).returncode == 0
                wait_for(lambda: read_json(dump).get("events") == 2, 30)
            assert proc.returncode == 0
        finally:
            assert s.stop() == 0
    finally:
        servers.stop()


def test_the_runners_and_decide_exit_1_when_the_server_cannot_be_reached(tmp_path: Path) -> None:
    """Their --help: 1 for a log that could not be read or written, 2 for bad usage or no such log."""
    port = natsserver.free_ports(1)[0]
    url = f"nats://127.0.0.1:{port}/GONE?timeout={TIMEOUT}"
    for args in (["failback", url, "--probe-cmd", "true", "--resume-cmd", "true"],
                 ["failback", url, "--retire", "w1", "--reason", "moved"],
                 ["lanes", url, "--enqueue-cmd", "true"],
                 ["catchup", url, "--probe-cmd", "true", "--kick-cmd", "true"],
                 ["catchup", url, "--dry-run"],
                 ["handoff", "release", url, "h1", "--reason", "back"],
                 ["handoff", "probe", url, "a", "--probe-cmd", "true"],
                 ["decide", url, "s1", "--decision", "close", "--expected-revision", "1", "--idempotency-key", "k1",
                  "--reason", "done"]):
        out = run_cli(*args)
        assert out.returncode == 1, (args, out.stderr)
        line = one_line(out.stderr)
        assert line.startswith(f"eventlog: cannot read {url}: cannot connect to nats://127.0.0.1:{port}: "), line
    # a URL that names no log at all is still bad usage, as a file that is not there is no such log
    bad = run_cli("lanes", f"nats://127.0.0.1:{port}/GONE?nope=1", "--enqueue-cmd", "true")
    assert bad.returncode == 2 and "unknown option" in bad.stderr
    missing = run_cli("lanes", str(tmp_path / "none.jsonl"), "--enqueue-cmd", "true")
    assert missing.returncode == 2 and "no such log" in missing.stderr
