"""JetStream throughput: publish and replay events/s on a nats-server started here (loopback, temporary store).

Usage: ``.venv/bin/python -m bench.jetstream [--events N] [--appends N] [--nodes 1|3] [--json]``.

Measured, on the log of :mod:`bench.generate` (all four domains, no bad line):

- ``import``: ``import-log`` of N lines (pipelined publishes, each expecting the one before);
- ``replay``: a full replay from the stream (ordered consumer) and, for scale, of the same file;
- ``append``: N checked appends one event at a time (catch up, check, publish with
  ``Nats-Expected-Last-Subject-Sequence``), as a writer would;
- ``batch``: the same events in atomic batches of 100;
- for scale, the same checked appends to a file (:class:`eventlog.appender.EventLog`).

Figures, not pass/fail: exit 0 unless a measurement failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import generate
from eventlog.appender import EventLog
from eventlog.cli.common import replay_log
from eventlog.jetstream import JetStreamLog, import_log
from tests import natsserver


def measure(events: int, appends: int, nodes: int) -> dict[str, Any]:
    """Start the server(s), run every measurement, stop them; the figures."""
    out: dict[str, Any] = {"events": events, "appends": appends, "nodes": nodes, "replicas": nodes}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / "log.jsonl"
        generate.write_log(path, events, max(10, events // 20))
        with open(path, "rb") as f:
            lines = [f.readline() for _ in range(min(appends, events))]
        servers = natsserver.start(root / "nats", nodes)
        try:
            url = servers.stream_url("BENCH", 0, replicas=nodes)
            with JetStreamLog(url) as log, open(path, "rb") as f:
                t = time.perf_counter()
                report = import_log(f, log)
                out["import_events_per_s"] = round(report.imported / (time.perf_counter() - t))
                assert report.error is None and report.imported == events, report
            with JetStreamLog(url) as log:
                t = time.perf_counter()
                replay = log.replay()
                out["replay_events_per_s"] = round(replay.events / (time.perf_counter() - t))
            t = time.perf_counter()
            from_file = replay_log(str(path), show_progress=False)
            out["file_replay_events_per_s"] = round(from_file.events / (time.perf_counter() - t))
            objs = [json.loads(line) for line in lines[:appends]]
            for obj in objs:
                obj.pop("seq", None)
            with JetStreamLog(servers.stream_url("APPEND", 0, prefix="append", replicas=nodes)) as log:
                t = time.perf_counter()
                for obj in objs:
                    log.append([obj])
                out["checked_append_events_per_s"] = round(len(objs) / (time.perf_counter() - t))
            with JetStreamLog(servers.stream_url("BATCH", 0, prefix="batch", replicas=nodes)) as log:
                t = time.perf_counter()
                for i in range(0, len(objs), 100):
                    log.append(objs[i:i + 100])
                out["batch_append_events_per_s"] = round(len(objs) / (time.perf_counter() - t))
            file_log = EventLog(root / "append.jsonl")
            t = time.perf_counter()
            for obj in objs:
                file_log.append([obj])
            out["file_checked_append_events_per_s"] = round(len(objs) / (time.perf_counter() - t))
        finally:
            servers.stop()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run and print the figures."""
    p = argparse.ArgumentParser(prog="bench.jetstream", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--events", type=int, default=100_000, help="events imported and replayed (100,000)")
    p.add_argument("--appends", type=int, default=2_000, help="events appended one by one and in batches (2,000)")
    p.add_argument("--nodes", type=int, choices=(1, 3), default=1, help="one server, or 3 with replicas 3")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        figures = measure(args.events, args.appends, args.nodes)
    except Exception as err:  # noqa: BLE001 - a failed measurement is reported, exit 1
        print(f"bench.jetstream: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:32} {value:>12,}" if isinstance(value, int) else f"{key:32} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
