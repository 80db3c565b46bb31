"""The measurements of issue 7, each a function of (config, context) -> rows.

Every one is side by side in one run on one machine: a figure of ours, the
reference it is compared with, the ratio and the target of DESIGN.md
("Performance targets"). What exactly is timed is said in each docstring and
in docs/PERFORMANCE.md.
"""

from __future__ import annotations

import gc
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from bench import generate
from bench.report import INFO, MISS, PASS, Row, compared, verdict
from eventlog import snapshot as snapshot_io
from eventlog.appender import EventLog
from eventlog.cli.common import replay_log
from eventlog.cli.replay import replay_from_snapshot
from eventlog.events import read_times
from eventlog.reader import fast_decoder, iter_blocks
from eventlog.replay import BLOCK_BYTES, Replay
from projections.runner import Runner

ROOT = Path(__file__).resolve().parent.parent
TOOLS_REPLAY = ROOT / "tools" / "replay"
#: Bound on any one child process (seconds).
CHILD_TIMEOUT = 900


@dataclass
class Config:
    """Sizes and counts of one run."""

    events: int = 1_000_000
    entities: int = 100_000
    out: Path = ROOT / "bench-out"
    seed: int = generate.SEED
    repeat: int = 3
    follow_events: int = 10_000
    follow_entities: int = 1_000
    follow_samples: int = 200
    follow_gap_s: float = 0.02
    append_count: int = 500
    append_procs: tuple[int, ...] = (1, 2, 4)
    checked_appends: int = 25
    cli_appends: int = 3
    #: A log of one's own to measure replay, rebuild, snapshot and appends on, instead of the generated one.
    log: Path | None = None
    #: ``eventlog serve``: timed decisions, status requests, and client threads.
    serve_decisions: int = 400
    serve_status: int = 2000
    serve_concurrency: int = 4


@dataclass
class Context:
    """What measurements share within one run: logs, figures already taken, progress."""

    cfg: Config
    say: Callable[[str], None]
    #: Best in-process ``replay_log`` of the main log (no dump), seconds.
    full_replay_s: float | None = None
    #: ``tools/replay LOG > /dev/null`` of the main log, seconds.
    tools_replay_s: float | None = None
    generated: dict[str, float] = field(default_factory=dict)
    lines: int | None = None

    def log(self, events: int, entities: int) -> Path:
        """A generated log (cached in ``out`` by its name)."""
        name = generate.log_name(events, entities, self.cfg.seed)
        path = self.cfg.out / name
        if not path.exists():
            self.say(f"generating {events:,} events, {entities:,} entities -> {path}")
            started = time.perf_counter()
            generate.write_log(path, events, entities, self.cfg.seed)
            self.generated[name] = time.perf_counter() - started
        return path

    def main_log(self) -> Path:
        """The log the replay, rebuild, snapshot and append figures are taken on (``--log`` or generated)."""
        if self.cfg.log is not None:
            return self.cfg.log
        return self.log(self.cfg.events, self.cfg.entities)

    def main_lines(self) -> int:
        """How many lines the main log has (counted once for ``--log``)."""
        if self.cfg.log is None:
            return self.cfg.events
        if self.lines is None:
            with open(self.cfg.log, "rb") as f:
                self.lines = sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b""))
        return self.lines


def _timed(fn: Callable[[], object]) -> float:
    gc.collect()
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _run(args: list[str], **kw: Any) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(args, cwd=ROOT, timeout=CHILD_TIMEOUT, check=True, **kw)


def _timed_run(args: list[str], stdin: bytes | None = None) -> float:
    started = time.perf_counter()
    _run(args, input=stdin, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def decode_floor(path: Path) -> int:
    """The floor: read the file line by line, ``msgspec.json.decode`` each line untyped, keep nothing."""
    decode = msgspec.json.decode
    n = 0
    with open(path, "rb") as f:
        for line in f:
            decode(line)
            n += 1
    return n


# --- full replay --------------------------------------------------------------------


class _NoFold:
    """A folder that keeps nothing: what a replay costs before any projection runs."""

    def fold(self, ev: Any, line: int, at: Any) -> None:
        return None

    def fold_block(self, evs: Any, first_line: int, ats: Any) -> None:
        return None

    def revision(self, ev: Any) -> int:
        return 0

    def view(self, as_of: Any, as_of_text: str | None = None) -> dict[str, Any]:
        return {}


def _read_only(path: Path) -> None:
    with open(path, "rb") as f:
        Replay(_NoFold()).feed(f)


def _typed_only(path: Path) -> None:
    """The contract pass's decoding alone: every block into the fast structs, nothing checked."""
    with open(path, "rb") as f:
        for block in iter_blocks(f, 0, BLOCK_BYTES):
            list(map(fast_decoder.decode, block.lines))


def _times_only(blocks: list[list[str]]) -> None:
    """The contract pass's reading of times alone, over every block's ``ts`` (already decoded)."""
    for texts in blocks:
        read_times(texts)


def _timed_times(path: Path, repeat: int) -> float:
    """Best of ``repeat`` :func:`_times_only` over the log's ``ts`` texts (decoded first, not timed)."""
    with open(path, "rb") as f:
        blocks = [[ev.ts for ev in map(fast_decoder.decode, block.lines)] for block in iter_blocks(f, 0, BLOCK_BYTES)]
    return min(_timed(lambda: _times_only(blocks)) for _ in range(repeat))


def _timed_replay_command(log: Path, *extra: str) -> tuple[float, float]:
    """``tools/replay [extra] LOG > /dev/null`` once: (wall seconds, peak resident MB of that process)."""
    started = time.perf_counter()
    proc = subprocess.Popen([str(TOOLS_REPLAY), *extra, str(log)], cwd=ROOT, stdout=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, proc.args)
    return took, usage.ru_maxrss / 1024  # KiB on Linux


def replay(cfg: Config, ctx: Context) -> list[Row]:
    """Full replay against the decode floor (DESIGN.md: the command at most 3.5x, the contract pass 1.3x).

    Timed: the floor (best of ``repeat``); the contract pass, a replay with a
    folder that keeps nothing (best of ``repeat``); ``replay_log(path)`` then
    ``.dump(path)`` in this process (best of ``repeat``, the fold and the dump
    also apart); ``tools/replay LOG > /dev/null`` (best of ``repeat``:
    interpreter start, imports, replay, dump and its printing), with the
    peak resident memory of that process.
    """
    best = f"best of {cfg.repeat}"
    log = ctx.main_log()
    n = ctx.main_lines()
    ctx.say("replay: floor")
    floor = min(_timed(lambda: decode_floor(log)) for _ in range(cfg.repeat))
    ctx.say("replay: reading and checking only")
    checked = min(_timed(lambda: _read_only(log)) for _ in range(cfg.repeat))
    typed = min(_timed(lambda: _typed_only(log)) for _ in range(cfg.repeat))
    times = _timed_times(log, cfg.repeat)
    runs: list[tuple[float, float, float]] = []
    for i in range(cfg.repeat):
        ctx.say(f"replay: in-process {i + 1}/{cfg.repeat}")
        gc.collect()
        t0 = time.perf_counter()
        state = replay_log(str(log), show_progress=False)
        t1 = time.perf_counter()
        state.dump(str(log))
        t2 = time.perf_counter()
        runs.append((t2 - t0, t1 - t0, t2 - t1))
        del state
    total, fold, dump = min(runs)
    ctx.full_replay_s = min(r[1] for r in runs)
    ctx.say("replay: tools/replay")
    commands = [_timed_replay_command(log) for _ in range(cfg.repeat)]
    sub, rss = min(commands)
    ctx.tools_replay_s = sub
    ctx.say("replay: tools/replay --jobs 2")
    jobs = min(_timed_replay_command(log, "--jobs", "2")[0] for _ in range(cfg.repeat))
    return [
        Row("replay", f"floor: read lines + msgspec.json.decode untyped, {best}", floor, "s",
            note=f"{n / floor:,.0f} lines/s"),
        compared("replay", f"contract pass: a replay with a folder that keeps nothing, {best}", checked, "s",
                 floor, "floor", "<= 1.3", note="typed decoding, times with offsets, seq, no key twice, and every "
                 "bad line named, before any projection"),
        Row("replay", f"  of it: typed decoding into the event structs alone, {best}", typed, "s", floor, "floor",
            typed / floor, note="msgspec, ts as text; nothing checked"),
        Row("replay", f"  of it: reading every ts (read_times) alone, {best}", times, "s", floor, "floor",
            times / floor, note="the rest of the pass: no key twice (quote counts), seq order, the other times"),
        compared("replay", f"tools/replay LOG > /dev/null, {best}", sub, "s", floor, "floor", "<= 3.5",
                 note="includes interpreter start, imports and printing the dump"),
        Row("replay", f"tools/replay --jobs 2 LOG > /dev/null, {best}", jobs, "s", floor, "floor", jobs / floor,
            note=f"the domains folded in 2 processes, the same dump; {sub / jobs:.2f}x as fast as one process "
            f"on {os.cpu_count()} cores"),
        Row("replay", f"replay_log + dump in-process, {best}", total, "s", floor, "floor", total / floor,
            note=f"read+decode+fold {fold:.3g} s, dump {dump:.3g} s; {n / total:,.0f} events/s"),
        Row("replay", "peak resident memory of that tools/replay LOG (VmHWM, whole process)", rss, "MB"),
    ]


# --- rebuild against the eventsourcing library -------------------------------------------


def _project_no_assert(aggregate: Any, events: Any) -> Any:
    """The library's ``project_aggregate`` without its per-event ``isinstance`` assert."""
    for ev in events:
        aggregate = ev.mutate(aggregate)
    return aggregate


def _library_rebuild(es: Any, only: Path, n: int, repeat: int, ctx: Context) -> tuple[int, float, float, float]:
    """Store the handoff events in the library (not timed), then time rebuilding them: (handoffs, store s, s, s)."""
    app = es.HandoffApp()
    started = time.perf_counter()
    with open(only, "rb") as f:
        ids = es.store(app, (msgspec.json.decode(line) for line in f))
    stored = time.perf_counter() - started
    get = app.repository.get

    def rebuild_default() -> None:
        if es.rebuild(app, ids) != n:
            raise AssertionError("eventsourcing rebuilt a different number of events")

    def rebuild_no_assert() -> None:
        for uid in ids:
            get(uid, projector_func=_project_no_assert)

    ctx.say("rebuild: eventsourcing")
    lib = min(_timed(rebuild_default) for _ in range(repeat))
    lib_fast = min(_timed(rebuild_no_assert) for _ in range(repeat))
    return len(ids), stored, lib, lib_fast


def rebuild(cfg: Config, ctx: Context) -> list[Row]:
    """Rebuild throughput against ``eventsourcing`` 9.5.6 on the same handoff events.

    Not timed: writing the handoff-only log (every line of the main log whose
    stream is a handoff) and storing the same events, in log order, through a
    ``Handoff`` aggregate into the library's in-memory (POPO) recorder.
    Timed (best of ``repeat``): ``repository.get(id)`` of every handoff, the
    library rebuilding each aggregate from its stored events (no cache, no
    snapshots), once with the library's own projector and once without its
    per-event ``isinstance`` assert (what ``python -O`` would do); and our
    ``replay_log`` of the handoff-only log (reading, decoding, checking every
    transition and folding; no dump).
    """
    best = f"best of {cfg.repeat}"
    try:
        from bench import es_handoff
    except ImportError:
        return [Row("rebuild", "eventsourcing is not installed (tools/bench installs the bench extra)", None, "",
                    verdict=MISS)]
    log = ctx.main_log()
    only = cfg.out / f"handoffs-{log.name}"
    ctx.say("rebuild: handoff-only log")
    n = generate.handoff_only(log, only)
    ctx.say(f"rebuild: storing {n:,} events in eventsourcing (not timed)")
    handoffs, stored, lib, lib_fast = _library_rebuild(es_handoff, only, n, cfg.repeat, ctx)
    ctx.say("rebuild: ours")
    ours = min(_timed(lambda: replay_log(str(only), show_progress=False)) for _ in range(cfg.repeat))
    per = f"{n:,} events of {handoffs:,} handoffs"
    return [
        Row("rebuild", f"eventsourcing 9.5.6: repository.get of every handoff, {best}", n / lib, "ev/s",
            note=f"{per}; {lib:.3g} s; storing them took {stored:.3g} s (not timed)"),
        Row("rebuild", f"eventsourcing, projector without its isinstance assert, {best}", n / lib_fast, "ev/s",
            note=f"{lib_fast:.3g} s"),
        compared("rebuild", f"ours: replay_log of the handoff-only log, {best}", n / ours, "ev/s", n / lib,
                 "library", ">= 5.0", note=f"{ours:.3g} s"),
        compared("rebuild", "ours against the library without the assert", n / ours, "ev/s", n / lib_fast,
                 "library -O", ">= 5.0"),
    ]


# --- peak memory ---------------------------------------------------------------------


def _rss(log: Path) -> dict[str, Any]:
    out = _run([sys.executable, "-m", "bench.child", "rss", str(log)], stdout=subprocess.PIPE)
    result: dict[str, Any] = json.loads(out.stdout)
    if result["exit"] != 0:
        raise RuntimeError(f"replay of {log} exited {result['exit']}")
    return result


def memory(cfg: Config, ctx: Context) -> list[Row]:
    """Peak memory of ``eventlog replay`` (as ``tools/replay``) in a child process per log.

    The figure is the child's VmHWM minus its resident size after the imports:
    what the replay, its state and its dump added. Three logs: few events and
    few entities, ten times the events with the same entities, and ten times
    the entities with the same events.
    """
    small_e, small_n = cfg.events // 10, max(1, cfg.entities // 10)
    cases = [(small_e, small_n), (cfg.events, small_n), (cfg.events, cfg.entities)]
    figures: list[tuple[float, dict[str, Any]]] = []
    for ev, ent in cases:
        log = ctx.log(ev, ent)
        ctx.say(f"memory: replay of {ev:,} events / {ent:,} entities in a child")
        r = _rss(log)
        figures.append(((r["hwm_kb"] - r["base_kb"]) / 1024, r))

    def label(i: int) -> str:
        return f"{cases[i][0]:,} ev / {cases[i][1]:,} entities"

    def note(i: int) -> str:
        r = figures[i][1]
        peak, base = r["hwm_kb"] / 1024, r["base_kb"] / 1024
        return f"peak {peak:,.0f} MB, {base:,.0f} MB after imports; replay {r['seconds']:.3g} s"

    (a, _), (b, _), (c, _) = figures
    return [
        Row("memory", f"peak RSS growth, {label(0)}", a, "MB", note=note(0)),
        compared("memory", f"peak RSS growth, {label(1)} (events x10)", b, "MB", a, "x10 fewer events", "<= 2.0",
                 note=note(1)),
        Row("memory", f"peak RSS growth, {label(2)} (entities x10)", c, "MB", b, "x10 fewer entities",
            c / b if b else None, "", INFO, note=note(2)),
    ]


# --- follow latency ------------------------------------------------------------------

_EVENTS = re.compile(rb'"events": ?(\d+)')


def _dump_events(path: Path) -> int | None:
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except FileNotFoundError:
        return None
    m = _EVENTS.search(head)
    return int(m.group(1)) if m else None


def follow(cfg: Config, ctx: Context) -> list[Row]:
    """Follow latency: from the write of one line to a dump that counts it.

    ``eventlog follow LOG --dump PATH`` runs as a child on a log of
    ``follow_events``; then ``follow_samples`` valid lines (the generator's
    next ones, seq increasing) are appended one at a time with a raw
    ``O_APPEND`` write, ``follow_gap_s`` apart. Timed per line: from just
    before the write until the dump's ``events`` (read from its first 4 KiB,
    polled every 0.2 ms) counts it.
    """
    out = cfg.out
    log = out / "follow.jsonl"
    dump = out / "follow.dump.json"
    for p in (log, dump):
        p.unlink(missing_ok=True)
    n = min(cfg.follow_events, cfg.events)
    ent = min(cfg.follow_entities, n // 4)
    ctx.say(f"follow: writing a {n:,}-event log")
    extra = generate.write_log(log, n + cfg.follow_samples, ent, cfg.seed, keep=cfg.follow_samples)
    with open(out / "follow.stderr", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "eventlog", "follow", str(log), "--dump", str(dump)],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err,
        )
    samples: list[float] = []
    timeouts = 0
    try:
        deadline = time.monotonic() + 120
        while _dump_events(dump) != n:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"eventlog follow did not write its first dump (see {out / 'follow.stderr'})")
            time.sleep(0.01)
        time.sleep(0.2)
        ctx.say(f"follow: {len(extra)} samples")
        fd = os.open(log, os.O_WRONLY | os.O_APPEND)
        try:
            expected = n
            for line in extra:
                expected += 1
                started = time.perf_counter()
                os.write(fd, line)
                while True:
                    seen = _dump_events(dump)
                    now = time.perf_counter()
                    if seen is not None and seen >= expected:
                        samples.append((now - started) * 1000)
                        break
                    if now - started > 5:
                        timeouts += 1
                        break
                    time.sleep(0.0002)
                time.sleep(cfg.follow_gap_s)
        finally:
            os.close(fd)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if not samples:
        return [Row("follow", "no appended line was seen in the dump", None, "ms", verdict=MISS)]
    ordered = sorted(samples)

    def rank(p: float) -> float:  # nearest rank, as spec/OUTPUTS.md's percentiles
        return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]

    p95 = rank(95)
    note = f"{len(samples)} samples on a {n:,}-event log; max {ordered[-1]:.3g} ms; timeouts (>5 s) {timeouts}"
    return [
        Row("follow", "append -> dump reflects it, p50", rank(50), "ms", note=note),
        Row("follow", "append -> dump reflects it, p95", p95, "ms", target="<= 20",
            verdict=verdict(p95, "<= 20") if not timeouts else MISS),
    ]


# --- restart from a snapshot -----------------------------------------------------------


def snapshot(cfg: Config, ctx: Context) -> list[Row]:
    """Restart from an up-to-date snapshot against a full replay.

    Not timed: the first ``replay_from_snapshot`` (it replays in full and
    writes the snapshot). Timed (best of ``repeat``): ``replay_from_snapshot``
    with the snapshot up to date (load and check it, read nothing new, save it
    again, as ``tools/replay --snapshot`` does), against ``replay_log`` (no
    dump on either side); and once each as commands, dump printed to /dev/null:
    ``tools/replay --snapshot SNAP LOG`` against ``tools/replay LOG``.
    """
    best = f"best of {cfg.repeat}"
    log = ctx.main_log()
    snap = cfg.out / f"snapshot-{log.stem}.msgpack"
    snap.unlink(missing_ok=True)
    ctx.say("snapshot: writing the snapshot (full replay, not timed)")
    first = _timed(lambda: replay_from_snapshot(str(log), str(snap), None, False))
    ctx.say("snapshot: restarts")
    restart = min(_timed(lambda: replay_from_snapshot(str(log), str(snap), None, False)) for _ in range(cfg.repeat))
    full = ctx.full_replay_s
    if full is None:
        ctx.say("snapshot: full replays")
        full = min(_timed(lambda: replay_log(str(log), show_progress=False)) for _ in range(cfg.repeat))
        ctx.full_replay_s = full
    size = snap.stat().st_size / 2**20
    def load() -> None:
        with open(log, "rb") as f:
            loaded, why = snapshot_io.load(str(snap), f, Replay(Runner()))
        if loaded is None:
            raise RuntimeError(f"snapshot not loaded: {why}")

    load_s = min(_timed(load) for _ in range(cfg.repeat))
    ctx.say("snapshot: tools/replay --snapshot")
    sub = _timed_run([str(TOOLS_REPLAY), "--snapshot", str(snap), str(log)])
    full_sub = ctx.tools_replay_s
    if full_sub is None:
        full_sub = _timed_run([str(TOOLS_REPLAY), str(log)])
        ctx.tools_replay_s = full_sub
    return [
        compared("snapshot", f"replay_from_snapshot, snapshot up to date, {best}", restart, "s", full,
                 "full replay", "< 0.05",
                 note=f"snapshot {size:,.1f} MB; loading it {load_s:.3g} s; writing it first {first:.3g} s"),
        compared("snapshot", "tools/replay --snapshot SNAP LOG > /dev/null, once", sub, "s", full_sub,
                 "tools/replay LOG", "< 0.05", note="both include interpreter start and the dump"),
    ]


# --- appends ---------------------------------------------------------------------------


def _writers(log: Path, procs: int, count: int, fsync: bool) -> tuple[float, bool, str]:
    """``procs`` children appending ``count`` events each at once: (appends/s, intact, why not)."""
    for p in (log, Path(str(log) + ".sidecar")):
        p.unlink(missing_ok=True)
    children = []
    for tag in range(procs):
        args = [sys.executable, "-m", "bench.child", "append", str(log), "--count", str(count), "--tag", str(tag)]
        children.append(subprocess.Popen(
            [*args, "--fsync"] if fsync else args, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        ))
    try:
        for c in children:
            assert c.stdout is not None
            if c.stdout.readline().strip() != b"ready":
                raise RuntimeError("an append writer did not start")
        for c in children:
            assert c.stdin is not None
            c.stdin.write(b"go\n")
            c.stdin.flush()
        results = []
        for c in children:
            out, _ = c.communicate(timeout=CHILD_TIMEOUT)
            if c.returncode != 0:
                raise RuntimeError(f"an append writer exited {c.returncode}")
            results.append(json.loads(out))
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
                c.wait()
    wall = max(r["end"] for r in results) - min(r["start"] for r in results)
    seqs: list[int] = []
    tags: Counter[str] = Counter()
    with open(log, "rb") as f:
        for line in f:
            obj = msgspec.json.decode(line)
            seqs.append(obj["seq"])
            tags[obj["product"]] += 1
    total = procs * count
    why = ""
    if seqs != list(range(1, total + 1)):
        why = f"seq is not 1..{total} in order ({len(seqs)} lines)"
    elif any(tags[f"bench-{t}"] != count for t in range(procs)):
        why = f"lost or extra events: {dict(tags)}"
    return total / wall, not why, why


def _checked_appends(log: Path, k: int, cli_k: int, tag: str) -> tuple[float, float, float]:
    """Warm the sidecar, then time ``k`` API appends and ``cli_k`` CLI appends: (warm s, API ms, CLI ms), medians."""
    el = EventLog(log)

    def event(i: int) -> dict[str, Any]:
        return {"type": "handoff_created", "handoff_id": f"bench-{tag}-{i}", "account": "acct-bench"}

    warm = _timed(lambda: el.append([event(0)]))
    # One collection before the series, none between: a full collection before
    # each sub-millisecond call would time the cold caches it leaves (timeit
    # does the same). The CLI runs are separate processes, timed as they come.
    gc.collect()
    api = []
    for i in range(1, k + 1):
        ev = event(i)
        started = time.perf_counter()
        el.append([ev])
        api.append((time.perf_counter() - started) * 1000)
    cli = []
    for i in range(k + 1, k + 1 + cli_k):
        line = json.dumps(event(i)).encode() + b"\n"
        cli.append(_timed_run([sys.executable, "-m", "eventlog", "append", str(log)], stdin=line) * 1000)
    return warm, statistics.median(api), statistics.median(cli)


def append(cfg: Config, ctx: Context) -> list[Row]:
    """Appends/s from several processes, and a checked append on the big log against an empty one.

    Writers: ``procs`` child processes, each ``append_count`` calls of
    ``EventLog(path).append([one event], fsync=...)`` on a fresh log, started
    together; appends/s = all events / (last end - first start). The log is
    then read back: seq must be 1..n in order and each writer's events all there.
    Checked appends: a ``handoff_created`` of a new id per call (the transition
    check runs), on a copy of the main log and on an empty log. The first
    append builds the sidecar (not timed); then the median of
    ``checked_appends`` API calls and of ``cli_appends`` ``eventlog append`` runs.
    """
    rows: list[Row] = []
    writers_log = cfg.out / "append-writers.jsonl"
    for fsync in (False, True):
        for procs in cfg.append_procs:
            ctx.say(f"append: {procs} writer(s), fsync={fsync}")
            rate, intact, why = _writers(writers_log, procs, cfg.append_count, fsync)
            rows.append(Row(
                "append", f"{procs} process{'es' if procs > 1 else ''} x {cfg.append_count}, "
                f"{'fsync' if fsync else 'no fsync'}", rate, "appends/s", target="no loss, seq 1..n",
                verdict=PASS if intact else MISS, note=why,
            ))
    src = ctx.main_log()
    big = cfg.out / "append-big.jsonl"
    empty = cfg.out / "append-empty.jsonl"
    for p in (big, empty, Path(str(big) + ".sidecar"), Path(str(empty) + ".sidecar")):
        p.unlink(missing_ok=True)
    ctx.say("append: copying the main log")
    shutil.copyfile(src, big)
    ctx.say("append: checked appends on the big log (the first builds the sidecar)")
    big_warm, big_api, big_cli = _checked_appends(big, cfg.checked_appends, cfg.cli_appends, "big")
    ctx.say("append: checked appends on an empty log")
    _, empty_api, empty_cli = _checked_appends(empty, cfg.checked_appends, cfg.cli_appends, "empty")
    sidecar = Path(str(big) + ".sidecar").stat().st_size / 2**20
    n = f"{ctx.main_lines():,}"
    rows += [
        compared("append", f"checked append, API, {n}-event log, median of {cfg.checked_appends}", big_api, "ms",
                 empty_api, "empty log", "<= 2.0",
                 note=f"the first append built the sidecar ({sidecar:,.1f} MB) in {big_warm:.3g} s"),
        compared("append", f"checked append, eventlog append CLI, {n}-event log, median of {cfg.cli_appends}",
                 big_cli, "ms", empty_cli, "empty log", "<= 2.0", note="includes interpreter start"),
    ]
    for p in (big, Path(str(big) + ".sidecar")):
        p.unlink(missing_ok=True)
    return rows


def serve(cfg: Config, ctx: Context) -> list[Row]:
    """``eventlog serve`` on the generated log of ``--events``/``--entities`` (:func:`bench.serve.measure`).

    Timed per request, from send to the whole answer read, ``serve_concurrency``
    clients at once: a decision (``close`` of a different open session each,
    accepted: appended, folded by the follower, its receipt read back), and
    ``GET /v1/status`` with nothing written. Target (issue 16): p95 under 50 ms.
    """
    from bench import serve as serve_bench

    log = ctx.log(cfg.events, cfg.entities)
    ctx.say("serve: starting eventlog serve and sending requests")
    result = serve_bench.measure(log, cfg.out, cfg.serve_decisions, cfg.serve_status, max(1, cfg.serve_status // 100),
                                 cfg.serve_concurrency)
    decision, status = result["rows"][0], result["rows"][1]
    rows = [Row("serve", "startup: eventlog serve until /healthz answers 200 (its replay of the log)",
                result["startup_s"], "s", note=f"then one untimed warm-up decision, {result['warmup_decision_s']} s")]
    for label, r in (("decision (close, accepted)", decision), ("GET /v1/status, no writes", status)):
        what = f"{label}, {r['requests']} requests, {cfg.serve_concurrency} clients"
        rows.append(Row("serve", f"{what}: p50", r["p50_ms"], "ms",
                        note=f"{r['requests_per_s']} requests/s; p99 {r['p99_ms']} ms, max {r['max_ms']} ms"))
        rows.append(Row("serve", f"{what}: p95", r["p95_ms"], "ms", target="< 50",
                        verdict=verdict(r["p95_ms"], "< 50")))
    return rows


MEASURES: dict[str, Callable[[Config, Context], list[Row]]] = {
    "replay": replay,
    "rebuild": rebuild,
    "memory": memory,
    "follow": follow,
    "snapshot": snapshot,
    "append": append,
    "serve": serve,
}
