"""What the benchmark runs in child processes: peak memory of a replay, and appending writers.

``python -m bench.child rss LOG`` runs ``eventlog replay LOG`` in this process
(the dump goes to /dev/null) and prints one JSON line: the resident size after
the imports (``base_kb``), the peak (``hwm_kb``, VmHWM) and the seconds taken.

``python -m bench.child append LOG --count N --tag T [--fsync]`` prints
``ready``, waits for a line on stdin, appends N ``status_updated`` events of
product ``bench-T`` one per call with :meth:`EventLog.append`, and prints one
JSON line with its start and end (``time.monotonic``, comparable across processes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from eventlog.appender import EventLog
from eventlog.cli import main as eventlog_main


def status_kb(key: str) -> int:
    """A ``/proc/self/status`` figure in kB (``VmRSS``, ``VmHWM``)."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise LookupError(key)


def rss(log: str) -> int:
    """Replay ``log`` as ``tools/replay`` does; print the memory figures."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    base = status_kb("VmRSS")
    with open(os.devnull, "w") as devnull:
        sys.stdout = devnull
        started = time.perf_counter()
        code = eventlog_main(["replay", log])
        took = time.perf_counter() - started
        sys.stdout = sys.__stdout__
    out.write(json.dumps({"base_kb": base, "hwm_kb": status_kb("VmHWM"), "exit": code, "seconds": took}) + "\n")
    out.close()
    return code


def append(log: str, count: int, tag: str, fsync: bool) -> int:
    """Wait for the go line, then append ``count`` events one per call."""
    el = EventLog(log)
    event = {"type": "status_updated", "product": f"bench-{tag}", "state": "running"}
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.monotonic()
    for _ in range(count):
        el.append([event], fsync=fsync)
    end = time.monotonic()
    print(json.dumps({"start": start, "end": end, "count": count}), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run one child job."""
    parser = argparse.ArgumentParser(prog="bench.child")
    sub = parser.add_subparsers(dest="job", required=True)
    r = sub.add_parser("rss")
    r.add_argument("log")
    a = sub.add_parser("append")
    a.add_argument("log")
    a.add_argument("--count", type=int, required=True)
    a.add_argument("--tag", required=True)
    a.add_argument("--fsync", action="store_true")
    args = parser.parse_args(argv)
    if args.job == "rss":
        return rss(args.log)
    return append(args.log, args.count, args.tag, args.fsync)


if __name__ == "__main__":
    sys.exit(main())
