"""A stream that eventlog did not write alone: lines of other clients, streams made by other tools, lost messages.

Against a real nats-server (tests/natsserver.py), the CLI in a subprocess. What is checked (docs/JETSTREAM.md):
a line another client wrote with its own ``seq`` ahead of its sequence never blocks an append (the appender
continues after it, as a file appender continues from the file's last ``seq``); a stream whose limits drop
messages is refused for writes; sequences that hold no message any more are counted as vanished lines
everywhere the views look; the over-size error says what is counted; ``import-log`` counts what it leaves out.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eventlog.appender import EventLog
from eventlog.events import INT64_MAX
from eventlog.jetstream import JetStreamLog
from tests import natsserver
from tests.conftest import ROOT, run_cli

TS = "2026-12-01T22:00:00Z"

pytest.importorskip("nats")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[natsserver.Servers]:
    servers = natsserver.start(tmp_path_factory.mktemp("nats-others"), nodes=1)
    yield servers
    servers.stop()


_names = iter(range(10_000))


def fresh(server: natsserver.Servers) -> tuple[str, str, str]:
    """A stream nobody used yet: (its URL, its name, its prefix)."""
    n = next(_names)
    return server.stream_url(f"O{n}", prefix=f"o{n}"), f"O{n}", f"o{n}"


def created(hid: str) -> dict[str, Any]:
    return {"type": "handoff_created", "ts": TS, "handoff_id": hid, "account": "a"}


def lines(*events: dict[str, Any]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def client(server: natsserver.Servers, act: Any) -> Any:
    """Run ``act(js)`` with another client's JetStream context (nats-py), as a tool other than eventlog would."""
    import nats

    async def run() -> Any:
        nc = await nats.connect(server.urls[0])
        try:
            return await act(nc.jetstream())
        finally:
            await nc.close()

    return asyncio.run(run())


def publish(server: natsserver.Servers, subject: str, body: str) -> int:
    """Publish ``body`` as another client does; its stream sequence."""

    async def act(js: Any) -> int:
        return int((await js.publish(subject, body.encode())).seq)

    return int(client(server, act))


def make_stream(server: natsserver.Servers, name: str, prefix: str, **config: Any) -> None:
    """Create a stream as another tool does (its defaults: no deny_delete, no deny_purge)."""
    from nats.js.api import StreamConfig

    async def act(js: Any) -> None:
        await js.add_stream(StreamConfig(name=name, subjects=[f"{prefix}.>"], **config))

    client(server, act)


def delete(server: natsserver.Servers, name: str, *seqs: int) -> None:
    async def act(js: Any) -> None:
        for seq in seqs:
            await js.delete_msg(name, seq)

    client(server, act)


# --- a line another client wrote with its own seq ---------------------------------------------------------


def test_a_line_with_a_seq_ahead_from_another_client_does_not_block_appends(server: natsserver.Servers) -> None:
    """The review's case: handoff_created, then another client's watcher_run with seq 50 at sequence 2. Every
    append was refused for good (exit 1, blaming an import); the appender continues after seq 50 instead (spec:
    seq set by the appender, strictly increasing; OUTPUTS.md: continuing from the log's last)."""
    url, _name, prefix = fresh(server)
    assert run_cli("append", url, stdin=lines(created("h1"))).returncode == 0
    publish(server, f"{prefix}.log", '{"type":"watcher_run","ts":"2026-12-01T22:00:09Z","seq":50,"watcher":"far",'
                                     '"exit":"ok","period_s":900}')
    beat = {"type": "watcher_run", "ts": "2026-12-01T22:01:00Z", "watcher": "w", "exit": "ok", "period_s": 900}
    done = run_cli("append", url, "--no-check", stdin=lines(beat))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["first_seq"] == 51
    probe = {"type": "probe_result", "ts": TS, "account": "a", "outcome": "ok"}
    claim = {"type": "claimed", "ts": TS, "handoff_id": "h1", "watcher": "w", "attempt": 1}
    done = run_cli("append", url, stdin=lines(probe, claim))  # a checked batch
    assert done.returncode == 0, done.stderr
    assert (json.loads(done.stdout)["first_seq"], json.loads(done.stdout)["last_seq"]) == (52, 53)
    dump = json.loads(run_cli("replay", url).stdout)
    assert dump["events"] == 5 and dump["bad_lines"] == [] and dump["rejected"] == []
    assert dump["handoffs"]["items"]["h1"]["state"] == "claimed"
    exported = run_cli("export", url).stdout.splitlines()
    assert [json.loads(line)["seq"] for line in exported] == [1, 50, 51, 52, 53]
    status = run_cli("status", "--json", url)
    assert json.loads(status.stdout)["totals"]["log"]["bad_lines"] == 0


def test_a_line_written_meanwhile_is_a_lost_race_then_the_append_continues_after_it(
        server: natsserver.Servers) -> None:
    """Once the seq runs ahead, an append expects the stream's last sequence: a line another client writes
    between the append's read and its publish makes it re-read, so no two lines carry one seq."""
    url, _name, prefix = fresh(server)
    assert run_cli("append", url, stdin=lines({"type": "lane_check", "ts": TS})).returncode == 0
    publish(server, f"{prefix}.log", json.dumps({"type": "lane_check", "ts": TS, "seq": 10}))

    def meanwhile(attempt: int) -> None:
        if attempt == 0:
            publish(server, f"{prefix}.log", json.dumps({"type": "lane_check", "ts": TS, "seq": 20}))

    with JetStreamLog(url, before_publish=meanwhile) as log:
        result = log.append([{"type": "lane_check", "ts": TS}])
        assert log.races_lost == 1
        assert (result.first_seq, result.last_seq) == (21, 21)
        dump = log.replay().dump(url)
    assert dump["events"] == 4 and dump["bad_lines"] == []


def test_a_seq_no_line_can_follow_is_named_as_such(server: natsserver.Servers) -> None:
    url, _name, prefix = fresh(server)
    assert run_cli("append", url, stdin=lines({"type": "lane_check", "ts": TS})).returncode == 0
    publish(server, f"{prefix}.log", json.dumps({"type": "lane_check", "ts": TS, "seq": INT64_MAX}))
    refused = run_cli("append", url, stdin=lines({"type": "lane_check", "ts": TS}))
    assert refused.returncode == 1
    assert f"the log's seq is at {INT64_MAX}" in refused.stderr and "another writer" in refused.stderr
    assert "imported from a file" not in refused.stderr


# --- a stream whose limits drop messages, and messages gone ----------------------------------------------


def test_the_settings_that_drop_messages() -> None:
    from nats.js.api import DiscardPolicy, RetentionPolicy, StreamConfig

    from eventlog.jetstream import drops_messages

    assert drops_messages(StreamConfig(name="S", subjects=["s.>"])) == []
    assert drops_messages(StreamConfig(name="S", max_msgs=3)) == ["max_msgs 3 with discard old"]
    assert drops_messages(StreamConfig(name="S", max_msgs=3, max_bytes=10, discard=DiscardPolicy.NEW)) == []
    assert drops_messages(StreamConfig(name="S", max_age=60)) == ["max_age 60 s"]
    assert drops_messages(StreamConfig(name="S", max_bytes=100))[0].startswith("max_bytes 100")
    assert drops_messages(StreamConfig(name="S", max_msgs_per_subject=1, discard=DiscardPolicy.NEW))
    assert drops_messages(StreamConfig(name="S", max_msgs_per_subject=1, discard=DiscardPolicy.NEW,
                                       discard_new_per_subject=True)) == []
    assert "retention workqueue" in drops_messages(StreamConfig(name="S", retention=RetentionPolicy.WORK_QUEUE))[0]


def test_writes_refuse_a_stream_whose_limits_drop_messages(server: natsserver.Servers, tmp_path: Path) -> None:
    """The review's case: a stream made by another tool with max_msgs 3 (discard old) took 5 events (exit 0) and
    kept 3, counted nowhere. Appends and import-log refuse it now, saying which limit and what to do."""
    url, name, prefix = fresh(server)
    make_stream(server, name, prefix, max_msgs=3)
    refused = run_cli("append", url, stdin=lines(*(created(f"h{i}") for i in range(1, 6))))
    assert refused.returncode == 1, refused.stdout
    assert f"stream {name} drops messages by itself (max_msgs 3 with discard old)" in refused.stderr
    assert "nothing was written" in refused.stderr and refused.stderr.count(url) == 1
    day = tmp_path / "day.jsonl"
    day.write_text(lines(created("h1")))
    imported = run_cli("import-log", str(day), url)
    assert imported.returncode == 2 and "drops messages by itself" in imported.stderr
    with JetStreamLog(url) as log:
        info = log.info()
        assert info is not None and info.state.messages == 0


def test_sequences_without_a_message_are_counted_as_vanished_lines(server: natsserver.Servers,
                                                                   tmp_path: Path) -> None:
    """Messages another tool deleted (or its limits dropped) were gone without a word: replay said "2 events"
    after a delete. They are counted now, named by sequence, in the dump, status and the status totals."""
    url, name, prefix = fresh(server)
    make_stream(server, name, prefix)  # no deny_delete: another tool's defaults
    assert run_cli("append", url, stdin=lines(*(created(f"h{i}") for i in range(1, 7)))).returncode == 0
    delete(server, name, 2, 3, 6)
    dump = json.loads(run_cli("replay", url).stdout)
    assert dump["events"] == 3
    assert dump["lines_vanished"] == {"lines": 3, "runs": 2, "ranges": [[2, 3], [6, 6]]}
    status = run_cli("status", "--json", "--all", url)
    assert status.returncode == 1
    triage = json.loads(status.stdout)
    [group] = [g for g in triage["groups"] if g["reason_code"] == "lines_vanished"]
    [item] = group["items"]
    assert item["needs_decision"] is True and "seq 2..3, 6" in item["reason"]
    assert item["next"].startswith("eventlog export ") and item["next"].endswith(f"> {name}.jsonl")
    assert triage["totals"]["log"]["lines_vanished"] == 3
    words = run_cli("status", url).stdout
    assert "3 committed lines vanished" in words
    # a snapshot read to a last sequence that holds no message is trusted again, and keeps the count
    snap = tmp_path / "s.snap"
    first = run_cli("replay", url, "--snapshot", str(snap))
    again = run_cli("replay", url, "--snapshot", str(snap))
    assert first.returncode == again.returncode == 0 and again.stderr == "", again.stderr
    assert json.loads(again.stdout) == json.loads(first.stdout) == dump
    # the first sequences dropped by a stream's limits: the same
    url, name, prefix = fresh(server)
    make_stream(server, name, prefix, max_msgs=3)
    for i in range(1, 6):
        publish(server, f"{prefix}.handoff.h{i}", json.dumps(created(f"h{i}")))
    dump = json.loads(run_cli("replay", url).stdout)
    assert dump["events"] == 3 and dump["lines_vanished"] == {"lines": 2, "runs": 1, "ranges": [[1, 2]]}


def test_follow_counts_a_streams_vanished_lines_in_its_dump_and_prometheus_file(server: natsserver.Servers,
                                                                                  tmp_path: Path) -> None:
    url, name, prefix = fresh(server)
    make_stream(server, name, prefix)
    assert run_cli("append", url, stdin=lines(*(created(f"h{i}") for i in range(1, 5)))).returncode == 0
    delete(server, name, 1, 4)
    dump, prom = tmp_path / "dump.json", tmp_path / "m.prom"
    proc = subprocess.Popen([sys.executable, "-m", "eventlog", "follow", url, "--dump", str(dump), "--prom",
                             str(prom)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not prom.exists():
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        assert json.loads(dump.read_text())["lines_vanished"] == {"lines": 2, "runs": 2, "ranges": [[1, 1], [4, 4]]}
        assert 'recovery_vanished_lines_total{log="' + url + '"} 2' in prom.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0


# --- sizes and imports ---------------------------------------------------------------------------------


def test_an_event_over_the_servers_limit_says_what_is_counted(server: natsserver.Servers) -> None:
    """The review's case: "too_long: 1048539 bytes, more than the server takes (1048576)" stated a size below
    the limit. The limit a body has (the server's max_payload less the room kept for headers) is said."""
    url, _name, _prefix = fresh(server)
    event = {"type": "handoff_created", "handoff_id": "h1", "account": "a", "repo": ""}  # a long text, no id
    event["repo"] = "r" * (1_048_426 - len(json.dumps(event)))
    text = json.dumps(event)
    assert len(text) == 1_048_426
    refused = run_cli("append", url, stdin=text + "\n")
    assert refused.returncode == 2
    said = refused.stderr
    size, room = (int(n) for n in __import__("re").search(r"too_long: (\d+) bytes, more than the (\d+) ", said)
                  .groups())
    assert size > room and room == 1_048_576 - 256
    assert "1048576 bytes a message, headers included" in said


def test_import_log_counts_the_lines_of_an_unfinished_batch_it_leaves_out(server: natsserver.Servers,
                                                                          tmp_path: Path) -> None:
    """The review's case: one line, a batch of 2 missing its last line, a torn line: "imported": 1 and
    nothing counted the 2 complete lines left out."""
    path = tmp_path / "cut.jsonl"
    EventLog(path).append([created("h1")])
    EventLog(path).append([created("h2"), created("h3"), created("h4")])
    kept = path.read_bytes().splitlines(keepends=True)[:3]
    path.write_bytes(b"".join(kept) + b'{"type":"handoff_cr')
    url, _name, _prefix = fresh(server)
    out = run_cli("import-log", str(path), url)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert (report["imported"], report["unfinished_batch"], report["torn_line"], report["torn_tail"]) == (
        1, 2, True, True)
    assert ("an unfinished batch of 2 complete line(s) (seq 2..3, since line 2) of a batch that was to end at "
            "seq 4 is not committed") in out.stderr
    assert "its 2 line(s) were not imported" in out.stderr and "last line has no newline" in out.stderr
