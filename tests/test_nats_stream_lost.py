"""A stream lost and made again (docs/JETSTREAM.md, "A stream that is gone"): a nats-server that lost its store
comes back without the stream, and the next append makes a new one. As for a log file replaced by a shorter one,
the committed lines the old stream held are counted as vanished (the dump's ``lines_vanished``,
``recovery_vanished_lines_total``): by a follow started again from its ``--snapshot``, and by a running follow;
meanwhile ``follow`` and ``serve`` wait for the stream (``log_missing``, ``recovery_log_missing``, a 503 saying
there is no such stream) and follow it again once it is there. ``lanes --observe`` makes a stream not there yet,
as it makes a log file. Against a real nats-server restarted with an empty store; the CLI, ``follow`` and
``serve`` as real processes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests import natsserver
from tests.conftest import run_cli
from tests.serving import start_server
from tests.test_lanes_observe_dir import FAKE, a_lane
from tests.test_nats_liveness import TIMEOUT, created, following, health, metric, read_json, wait_for


def _append(url: str, *hids: str) -> None:
    for hid in hids:
        out = run_cli("append", url, stdin=created(hid))
        assert out.returncode == 0, out.stderr


def test_a_follow_started_again_counts_the_lines_a_replaced_stream_lost_as_its_snapshot_held_them(
        tmp_path: Path) -> None:
    """follow --help: committed lines that vanished while it was stopped (its --snapshot held them) stay counted;
    the same steps on a file give lines 3, before 4, after 1."""
    servers = natsserver.start(tmp_path / "nats")
    url = servers.stream_url("REPL", prefix="rp", timeout=TIMEOUT)
    snap = tmp_path / "s.snap"
    try:
        _append(url, "h1", "h2", "h3", "h4")
        with following(url, tmp_path, "--snapshot", str(snap)) as (_proc, dump, _prom):
            wait_for(lambda: read_json(dump).get("events") == 4)
        assert snap.is_file()
        servers.kill()
        servers.restart(fresh=True)
        _append(url, "h5")  # makes the stream again
        with following(url, tmp_path, "--snapshot", str(snap)) as (proc, dump, prom):
            got = wait_for(lambda: (d := read_json(dump)).get("events") == 1 and d)
            assert got["lines_vanished"]["lines"] == 3, got
            assert (got["lines_vanished"]["before"], got["lines_vanished"]["after"]) == (4, 1), got
            wait_for(lambda: metric(prom, "recovery_vanished_lines_total") == 3, 10)
        assert proc.returncode == 0
        assert "belongs to another stream" in (proc.stderr.read() if proc.stderr else "")
    finally:
        servers.stop()


def test_follow_and_serve_wait_for_a_stream_that_is_gone_and_count_what_it_lost_once_it_is_back(
        tmp_path: Path) -> None:
    """follow --help and serve --help: a log that goes away later is waited for, and followed again once it can.
    Neither exits nor says the connection is down once the server answers without the stream."""
    servers = natsserver.start(tmp_path / "nats")
    url = servers.stream_url("GONE", prefix="gn", timeout=TIMEOUT)
    try:
        _append(url, "h1", "h2", "h3", "h4")
        s = start_server(url, tmp_path)
        try:
            c = s.client("ops")
            with following(url, tmp_path) as (proc, dump, prom):
                wait_for(lambda: read_json(dump).get("events") == 4)
                servers.kill()
                servers.restart(fresh=True)
                gone = wait_for(lambda: (d := read_json(dump)).get("log_missing") and d, 30)
                assert "log_unreachable" not in gone and gone["events"] == 0, gone
                wait_for(lambda: metric(prom, "recovery_log_missing") == 1, 10)
                assert metric(prom, "recovery_log_unreachable") == 0
                answer = wait_for(lambda: (r := health(s)) is not None and r.status_code == 503
                                  and "no stream GONE" in r.json()["message"] and r, 30, lambda: s.output())
                assert "unreachable" not in answer.json()["message"]
                assert proc.poll() is None, proc.communicate()

                _append(url, "h5")  # makes the stream again
                back = wait_for(lambda: (d := read_json(dump)).get("events") == 1 and "log_missing" not in d and d, 30)
                assert back["lines_vanished"]["lines"] == 3, back
                assert (back["lines_vanished"]["before"], back["lines_vanished"]["after"]) == (4, 1), back
                wait_for(lambda: metric(prom, "recovery_vanished_lines_total") == 3, 10)
                assert metric(prom, "recovery_log_missing") == 0
                wait_for(lambda: (r := health(s)) is not None and r.status_code == 200, 30, lambda: s.output())
                assert c.get("/healthz").json()["last_seq"] == 1
                ok = c.post("/v1/events", content=created("h6").encode())
                assert ok.status_code == 200 and ok.json()["last_seq"] == 2, ok.text
                served = c.get("/v1/status").json()
                assert "lines_vanished" in [g["reason_code"] for g in served["groups"]], served
                wait_for(lambda: read_json(dump).get("events") == 2, 30)
            assert proc.returncode == 0
            err = proc.stderr.read() if proc.stderr else ""
            assert "no stream GONE" in err and "waiting for it" in err and "is there now" in err, err
        finally:
            assert s.stop() == 0
    finally:
        servers.stop()


def test_lanes_observe_makes_a_stream_not_there_yet_as_it_makes_a_log_file(tmp_path: Path) -> None:
    """lanes --help: with --observe a log is created, as observe lane does (JETSTREAM.md: on the first append)."""
    servers = natsserver.start(tmp_path / "nats")
    url = servers.stream_url("LANES", prefix="ln", timeout=TIMEOUT)
    try:
        lanes_dir = a_lane(tmp_path)
        cmd = f"{sys.executable} {FAKE} {tmp_path / 'calls.jsonl'} ok"
        out = run_cli("lanes", url, "--enqueue-cmd", cmd, "--observe", str(lanes_dir))
        assert out.returncode == 0, out.stderr
        assert "observed sashiko-repair: job_finished" in out.stdout, out.stdout
        dump = json.loads(run_cli("replay", url).stdout)
        assert dump["events"] >= 2
        without = run_cli("lanes", servers.stream_url("NOT_THERE", prefix="nt", timeout=TIMEOUT),
                          "--enqueue-cmd", cmd)
        assert without.returncode == 2 and "no such log" in without.stderr  # without --observe: nothing to judge
    finally:
        servers.stop()



def test_a_stream_deleted_while_follow_is_connected_is_noticed_within_a_tick(tmp_path: Path) -> None:
    """A stream deleted while the connection stays up (nats stream rm) sends nothing: follow asks every tick
    whether the stream is still the one it folded, so it waits for it and counts what vanished once it is back
    (it used to keep its dump as of the deleted stream for ever, and miss every later line)."""
    import asyncio

    import nats

    servers = natsserver.start(tmp_path / "nats")
    url = servers.stream_url("DEL", prefix="dl", timeout=TIMEOUT)

    async def delete() -> None:
        nc = await nats.connect(servers.urls[0])
        try:
            await nc.jetstream().delete_stream("DEL")
        finally:
            await nc.close()

    try:
        _append(url, "h1", "h2", "h3", "h4")
        with following(url, tmp_path) as (_proc, dump, _prom):
            wait_for(lambda: read_json(dump).get("events") == 4)
            asyncio.run(delete())
            wait_for(lambda: read_json(dump).get("log_missing"), 15)
            _append(url, "h5")
            back = wait_for(lambda: (d := read_json(dump)).get("events") == 1 and "log_missing" not in d and d, 30)
            assert back["lines_vanished"]["lines"] == 3, back
    finally:
        servers.stop()
