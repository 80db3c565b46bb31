"""``tools/bench``: generate a log of all four domains, measure, print figures against targets.

Usage: ``tools/bench [--events N] [--entities N] [--log LOG] [--out DIR] [--json] [--only NAME,...]``.
Measurements: replay, rebuild, memory, follow, snapshot, append (docs/PERFORMANCE.md).
Exit status: 0 done (a MISS is a figure, not a failure); 1 a measurement failed; 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.measure import MEASURES, ROOT, Config, Context
from bench.report import ERROR, Row, table


def build_parser() -> argparse.ArgumentParser:
    """The options of ``tools/bench``."""
    d = Config()
    p = argparse.ArgumentParser(prog="tools/bench", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--events", type=int, default=d.events, help=f"events in the main log ({d.events:,})")
    p.add_argument("--entities", type=int, default=d.entities, help=f"streams in the main log ({d.entities:,})")
    p.add_argument("--out", type=Path, default=d.out, metavar="DIR",
                   help="where logs are generated (kept and reused by name) and scratch files go (bench-out/)")
    p.add_argument("--log", type=Path, metavar="LOG",
                   help="measure replay, rebuild, snapshot and appends on this log instead of a generated one "
                   "(memory and follow still use generated logs of --events and --entities)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON instead of a table")
    p.add_argument("--only", metavar="NAME,...", help=f"run only these measurements: {','.join(MEASURES)}")
    p.add_argument("--seed", type=int, default=d.seed, help="generator seed")
    p.add_argument("--repeat", type=int, default=d.repeat, help="runs of each best-of timing (3)")
    p.add_argument("--follow-events", type=int, default=d.follow_events, help="size of the followed log (10,000)")
    p.add_argument("--follow-samples", type=int, default=d.follow_samples, help="appended lines timed (200)")
    p.add_argument("--append-count", type=int, default=d.append_count, help="appends per writer process (500)")
    p.add_argument("--checked-appends", type=int, default=d.checked_appends, help="timed checked API appends (25)")
    p.add_argument("--cli-appends", type=int, default=d.cli_appends, help="timed eventlog append runs (3)")
    p.add_argument("--serve-decisions", type=int, default=d.serve_decisions, help="timed serve decisions (400)")
    p.add_argument("--serve-status", type=int, default=d.serve_status, help="timed GET /v1/status (2,000)")
    return p


def machine() -> dict[str, Any]:
    """What the figures were taken on."""
    return {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }


def code_version() -> str:
    """The commit the figures were taken at, ``+changes`` when eventlog/ or projections/ differ from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        changed = subprocess.run(["git", "status", "--porcelain", "--", "eventlog", "projections"], cwd=ROOT,
                                 capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+changes" if changed else "")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the chosen measurements and print them."""
    parser = build_parser()
    args = parser.parse_args(argv)
    names = list(MEASURES)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in MEASURES]
        if unknown or not names:
            parser.error(f"--only: unknown measurement {', '.join(unknown)} (known: {', '.join(MEASURES)})")
    if args.events < 2 * args.entities or args.entities < 10:
        parser.error("need --entities >= 10 and at least two events per entity")
    if args.log is not None and not args.log.is_file():
        parser.error(f"--log: {args.log} is not a readable file")
    cfg = Config(
        events=args.events, entities=args.entities, out=args.out.resolve(), seed=args.seed,
        repeat=max(1, args.repeat), follow_events=args.follow_events, follow_samples=args.follow_samples,
        append_count=args.append_count, checked_appends=max(1, args.checked_appends),
        cli_appends=max(1, args.cli_appends), serve_decisions=max(1, args.serve_decisions),
        serve_status=max(1, args.serve_status), log=None if args.log is None else args.log.resolve(),
    )
    cfg.out.mkdir(parents=True, exist_ok=True)
    tty = sys.stderr.isatty()
    started = time.monotonic()

    def say(message: str) -> None:
        if tty:
            print(f"[bench {time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    load_before = os.getloadavg()
    code = code_version()
    ctx = Context(cfg, say)
    rows: list[Row] = []
    failed = False
    for name in names:
        t0 = time.monotonic()
        try:
            rows.extend(MEASURES[name](cfg, ctx))
        except Exception as err:  # noqa: BLE001 - one failed measurement must not hide the others
            failed = True
            traceback.print_exc(file=sys.stderr)
            rows.append(Row(name, f"failed: {type(err).__name__}: {err}", None, "", verdict=ERROR))
        say(f"{name} done in {time.monotonic() - t0:.1f} s")
    elapsed = time.monotonic() - started
    info = machine()
    info["loadavg_1m"] = {"start": round(load_before[0], 2), "end": round(os.getloadavg()[0], 2)}
    info["code"] = code
    if args.json:
        print(json.dumps({
            "command": ["tools/bench", *(argv if argv is not None else sys.argv[1:])],
            "machine": info,
            "sizes": {"events": cfg.events, "entities": cfg.entities},
            "log": None if cfg.log is None else str(cfg.log),
            "measurements": names,
            "elapsed_s": round(elapsed, 1),
            "generated_s": {k: round(v, 1) for k, v in ctx.generated.items()},
            "rows": [asdict(r) for r in rows],
        }, indent=1))
    else:
        gen = sum(ctx.generated.values())
        sizes = f"{cfg.events:,} events, {cfg.entities:,} entities"
        print(f"tools/bench: {sizes if cfg.log is None else f'{cfg.log} (memory, follow: {sizes})'}; "
              f"{', '.join(names)}")
        load = info["loadavg_1m"]
        print(f"machine: {info['nproc']} cores, Python {info['python']}, {info['platform']}; "
              f"load average (1 min) {load['start']} at the start, {load['end']} at the end")
        print(f"code: {code}; took {elapsed:.0f} s" + (f" (generating logs {gen:.0f} s)" if gen else ""))
        print()
        print(table(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
