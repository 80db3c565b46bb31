"""Snapshots: snapshot plus tail equals a full replay; a stale snapshot is refused."""

from __future__ import annotations

import json
from pathlib import Path

from eventlog import snapshot
from eventlog.replay import Replay
from projections.runner import Runner
from tests.conftest import ROOT, run_cli


def fixture_logs() -> list[Path]:
    return sorted(p for p in (ROOT / "fixtures").glob("*.jsonl") if p.stat().st_size > 0)


def test_snapshot_plus_tail_equals_full_replay(tmp_path: Path) -> None:
    for src in fixture_logs():
        data = src.read_bytes()
        cut = data.find(b"\n", len(data) // 2) + 1 or len(data)
        log = tmp_path / src.name
        log.write_bytes(data[:cut])
        snap = tmp_path / (src.name + ".snap")
        first = run_cli("replay", "--snapshot", str(snap), str(log))
        assert first.returncode == 0, first.stderr
        with log.open("ab") as f:
            f.write(data[cut:])
        resumed = run_cli("replay", "--snapshot", str(snap), str(log))
        assert resumed.returncode == 0
        assert "replaying from the start" not in resumed.stderr, resumed.stderr
        full = run_cli("replay", str(log))
        assert json.loads(resumed.stdout) == json.loads(full.stdout), src.name


def test_a_snapshot_of_another_file_or_version_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    log.write_text('{"type":"lane_check","ts":"2026-08-08T10:00:00+09:00"}\n')
    snap = str(tmp_path / "a.snap")
    replay = Replay(Runner())
    with log.open("rb") as f:
        replay.feed(f)
        snapshot.save(snap, f, replay, snapshot.folder_version(replay))
        loaded, why = snapshot.load(snap, f, snapshot.folder_version(replay))
        assert loaded is not None and loaded.events == 1, why
        loaded, why = snapshot.load(snap, f, "projections.runner.Runner/999/tz=None")
        assert loaded is None and "another version" in why
    log.write_text('{"type":"lane_check","ts":"2026-08-08T11:00:00+09:00"}\n')  # same size, other bytes
    with log.open("rb") as f:
        loaded, why = snapshot.load(snap, f, snapshot.folder_version(replay))
        assert loaded is None and "does not match" in why
    Path(snap).write_bytes(b"\x00garbage")
    with log.open("rb") as f:
        loaded, why = snapshot.load(snap, f, snapshot.folder_version(replay))
        assert loaded is None and "unreadable" in why
    out = run_cli("replay", "--snapshot", snap, str(log))
    assert out.returncode == 0 and "replaying from the start" in out.stderr
    assert json.loads(out.stdout)["events"] == 1
