"""A torn tail no append will cut: every view says so by the appender's own rule, as an item for a person.

README (Append): the appender cuts only what a crashed writer can have left, an unfinished batch and a
torn last line of at most 1 MiB that starts like a log line; anything else at the end is left as it is and
every append is refused. The views must tell those two apart: "the next append cuts it" for the first, an
item that needs a person (with the command to type) for the second. Run as a user runs them.
"""

from __future__ import annotations

import json
import random
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, write_log
from tests.serving import start_server
from tests.test_follow import _metric, _wait_for, following

LINES = [{"type": "handoff_created", "ts": f"2026-08-03T09:0{i}:00+09:00", "handoff_id": f"h{i}",
          "account": "cloud-account-a"} for i in range(3)]
EVENT = '{"type":"handoff_created","handoff_id":"h9","account":"cloud-account-a"}\n'

#: What a log may end in past its last line end, and whether the next append cuts it (the README's rule).
TAILS: dict[str, tuple[bytes, bool]] = {
    "a writer's torn line": (b'{"type":"handoff_created","ts":"2026-08-03T09:', True),
    "text": (b"GARBAGE-no-newline", False),
    "random bytes": (b"\x89" + random.Random(7).randbytes(300).replace(b"\n", b"."), False),
    "a NUL in a torn line": (b'{"type":"handoff_created"\0', False),
    "more than 1 MiB without a line end": (b'{"type":"x","pad":"' + b"a" * (1 << 20) + b'"', False),
}


def log_with(tmp_path: Path, tail: bytes, name: str = "work.jsonl") -> Path:
    log = write_log(tmp_path / name, LINES)
    with log.open("ab") as f:
        f.write(tail)
    return log


def log_items(log: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """``status LOG --domain log --json``: the run, and every item of the log domain."""
    out = run_cli("status", str(log), "--at", "log", "--domain", "log", "--json", "--all", *extra)
    assert out.stdout, out.stderr
    return out, [item for g in json.loads(out.stdout)["groups"] for item in g["items"]]


@pytest.mark.parametrize("kind", list(TAILS))
def test_status_says_what_the_next_append_does_with_the_tail(tmp_path: Path, kind: str) -> None:
    tail, cut = TAILS[kind]
    log = log_with(tmp_path, tail)
    out, items = log_items(log)
    assert out.returncode == 1  # either way something needs a person
    [item] = [it for it in items if it["id"] == "last line"]
    totals = json.loads(out.stdout)["totals"]["log"]
    assert totals["torn_tail"] is True and totals["torn_tail_stuck"] is (not cut)
    appended = run_cli("append", str(log), stdin=EVENT)
    if cut:
        assert item["reason_code"] == "torn_tail" and "the next append cuts it" in item["reason"]
        assert item["needs_decision"] is False
        assert appended.returncode == 0, appended.stderr
        assert "cut a torn tail" in appended.stderr
    else:
        assert item["reason_code"] == "torn_tail_stuck" and item["needs_decision"] is True
        assert "no append cuts" in item["reason"] and "the next append cuts it" not in item["reason"]
        assert appended.returncode == 2, appended.stderr  # ... and the appender agrees: it refuses, untouched
        assert log.read_bytes().endswith(tail)


def test_a_stuck_tail_is_what_a_person_must_decide_on_the_screen_too(tmp_path: Path) -> None:
    log = log_with(tmp_path, b"GARBAGE-no-newline")
    screen = run_cli("status", str(log), "--at", "log", "--needs-decision")
    assert screen.returncode == 1
    assert "An unfinished last line no append will cut: every append is refused: 1" in screen.stdout
    assert "the next append cuts it" not in screen.stdout
    assert "Log: 3 events, 0 bad lines, 0 rejected, an unfinished last line no append will cut" in screen.stdout
    # a torn tail the next append cuts needs no decision: --needs-decision leaves it out
    cuttable = log_with(tmp_path, TAILS["a writer's torn line"][0], "cuttable.jsonl")
    quiet = run_cli("status", str(cuttable), "--at", "log", "--needs-decision")
    assert quiet.returncode == 0 and "Nothing needs a person." in quiet.stdout, quiet.stdout


def test_the_command_to_copy_keeps_the_tail_aside_and_cuts_only_it(tmp_path: Path) -> None:
    tail = TAILS["random bytes"][0]
    log = log_with(tmp_path, tail)
    committed = log.read_bytes()[:-len(tail)]
    _out, [item] = log_items(log)
    done = subprocess.run(["sh", "-c", item["next"]], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert log.read_bytes() == committed
    kept = tmp_path / f"work.jsonl.tail-{len(committed)}"
    assert kept.read_bytes() == tail  # nothing is lost: `cat` it back to undo
    again, items = log_items(log)
    assert again.returncode == 0 and items == []
    assert run_cli("append", str(log), stdin=EVENT).returncode == 0


def test_the_command_to_copy_cuts_nothing_once_the_log_changed(tmp_path: Path) -> None:
    log = log_with(tmp_path, b"GARBAGE")
    _out, [item] = log_items(log)
    with log.open("ab") as f:
        f.write(b"-and-more")
    before = log.read_bytes()
    done = subprocess.run(["sh", "-c", item["next"]], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    assert log.read_bytes() == before
    assert not list(tmp_path.glob("work.jsonl.tail-*"))


def test_the_command_to_copy_quotes_the_log(tmp_path: Path) -> None:
    d = tmp_path / "my logs"
    d.mkdir()
    log = log_with(d, b"GARBAGE", "it's.jsonl")
    out = run_cli("status", str(log), "--at", "log", "--domain", "log", "--json")
    [item] = json.loads(out.stdout)["groups"][0]["items"]
    assert shlex.quote(str(log)) in item["next"]
    assert subprocess.run(["sh", "-c", item["next"]], capture_output=True, timeout=30).returncode == 0
    assert not log.read_bytes().endswith(b"GARBAGE")


def test_follow_prom_says_when_no_append_will_cut_the_tail_as_soon_as_it_is_so(tmp_path: Path) -> None:
    """A torn line that turns into one no append cuts (a NUL written into it) changes the metrics at once,
    not at the next tick (an hour here)."""
    log = log_with(tmp_path, TAILS["a writer's torn line"][0])
    with following(log, tmp_path) as (_dump, prom):
        assert _wait_for(lambda: _metric(prom, "recovery_torn_tail") == 1)
        assert _metric(prom, "recovery_torn_tail_stuck") == 0
        with log.open("ab") as f:
            f.write(b"\0")
        assert _wait_for(lambda: _metric(prom, "recovery_torn_tail_stuck") == 1)
        assert _metric(prom, "recovery_torn_tail") == 1


def test_serve_shows_it_on_status_and_metrics(tmp_path: Path) -> None:
    log = log_with(tmp_path, b"GARBAGE-no-newline")
    server = start_server(log, tmp_path)
    try:
        c = server.client("viewer")
        status = c.get("/v1/status").json()
        [group] = [g for g in status["groups"] if g["reason_code"] == "torn_tail_stuck"]
        assert group["needs_decision"] is True and group["items"][0]["next"].startswith("test ")
        assert not [g for g in status["groups"] if g["reason_code"] == "torn_tail"]
        assert status["totals"]["log"]["torn_tail_stuck"] is True
        assert 'recovery_torn_tail_stuck{log="' + str(log) + '"} 1' in c.get("/metrics").text
        # and what it appends is refused, as every append is
        refused = server.client("writer").post("/v1/events", content=EVENT)
        assert refused.status_code == 503 and "not the start of a log line" in refused.json()["message"]
    finally:
        assert server.stop() == 0
