"""An unfinished batch at the end of a log is named as such and counted, apart from a torn last line.

docs/RELIABILITY.md: "events + bad_lines = complete lines", and nothing is held without being counted and
named. A writer killed mid-batch leaves complete lines of a batch whose last line never came: the replay holds
them (the dump stays the contract's: ``torn_tail`` true, neither events nor bad lines), and every view says how
many lines, which ``seq`` and from which line, that the next append cuts them, and how to look at them
(README: Append, all or nothing). A torn last line is its own item. Run as a user runs them.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import run_cli
from tests.serving import start_server
from tests.test_follow import _metric, _wait_for, following
from tests.test_stuck_tail import log_items


def event(hid: str) -> str:
    return json.dumps({"type": "handoff_created", "handoff_id": hid, "account": "cloud-account-a"}) + "\n"


def cut_batch(tmp_path: Path, keep: int = 3, after: bytes = b"", name: str = "work.jsonl") -> Path:
    """One event, then a batch of 3 (seq 2..4) of which only ``keep - 1`` lines are left, then ``after``."""
    log = tmp_path / name
    assert run_cli("append", str(log), stdin=event("h0")).returncode == 0
    assert run_cli("append", str(log), stdin="".join(event(f"h{i}") for i in (1, 2, 3))).returncode == 0
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:keep]) + after)
    return log


def by_code(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found = {item["reason_code"]: item for item in items}
    assert len(found) == len(items), items
    return found


def test_status_names_the_held_lines_of_an_unfinished_batch_not_a_torn_line(tmp_path: Path) -> None:
    log = cut_batch(tmp_path)  # the reviewer's `head -n 3 LOG`: the file ends in "\n"
    dump = json.loads(run_cli("replay", str(log)).stdout)
    assert (dump["events"], dump["bad_lines"], dump["torn_tail"]) == (1, [], True)  # the contract's dump, as ever
    out, items = log_items(log)
    assert out.returncode == 1
    [item] = items
    assert item["reason_code"] == "unfinished_batch" and item["id"] == "lines 2..3"
    assert item["reason"].startswith("an unfinished batch of 2 complete line(s) (seq 2..3, since line 2) of a batch "
                                     "that was to end at seq 4 is not committed")
    assert item["reason"].endswith("the next append cuts it") and item["needs_decision"] is False
    assert "no newline" not in item["reason"]
    shown = subprocess.run(["sh", "-c", item["next"]], cwd=tmp_path, capture_output=True, timeout=30)
    assert shown.stdout == b"".join(log.read_bytes().splitlines(keepends=True)[1:])  # the held lines themselves
    totals = json.loads(out.stdout)["totals"]["log"]
    assert totals["torn_tail"] is True and totals["unfinished_batch"] == 2 and totals["torn_line"] is False
    # every complete line is counted somewhere: events + bad lines + held lines
    assert totals["events"] + totals["bad_lines"] + totals["unfinished_batch"] == log.read_bytes().count(b"\n")
    screen = run_cli("status", str(log), "--at", "log", "--domain", "log")
    assert "An unfinished batch: complete lines held, not committed: 1" in screen.stdout
    assert "  lines 2..3: an unfinished batch of 2 complete line(s)" in screen.stdout
    assert "Log: 1 event, 0 bad lines, 0 rejected, an unfinished batch of 2 complete lines\n" in screen.stdout
    assert "tail -c 300" not in screen.stdout
    # the next append says it in the same words, and cuts exactly that
    appended = run_cli("append", str(log), stdin=event("h9"))
    assert appended.returncode == 0, appended.stderr
    assert "an unfinished batch of 2 complete line(s) (seq 2..3, since line 2)" in appended.stderr
    assert log_items(log)[1] == []


def test_a_torn_line_after_the_batch_is_its_own_item(tmp_path: Path) -> None:
    log = cut_batch(tmp_path, after=b'{"type":"handoff_cre')
    out, items = log_items(log)
    found = by_code(items)
    assert set(found) == {"unfinished_batch", "torn_tail"}
    assert found["unfinished_batch"]["id"] == "lines 2..3" and found["torn_tail"]["id"] == "last line"
    assert "the last line has no newline" in found["torn_tail"]["reason"]
    totals = json.loads(out.stdout)["totals"]["log"]
    assert totals["unfinished_batch"] == 2 and totals["torn_line"] is True
    screen = run_cli("status", str(log), "--at", "log", "--domain", "log")
    assert "an unfinished batch of 2 complete lines and an unfinished last line\n" in screen.stdout


def test_a_torn_line_alone_is_no_batch(tmp_path: Path) -> None:
    log = cut_batch(tmp_path, keep=1, after=b'{"type":"handoff_cre')
    out, items = log_items(log)
    assert [it["reason_code"] for it in items] == ["torn_tail"]
    totals = json.loads(out.stdout)["totals"]["log"]
    assert totals["unfinished_batch"] == 0 and totals["torn_line"] is True


def test_a_stuck_tail_after_a_batch_says_the_batch_goes_with_it(tmp_path: Path) -> None:
    log = cut_batch(tmp_path, after=b"GARBAGE")
    batch = b"".join(log.read_bytes().splitlines(keepends=True)[1:3])
    _out, [item] = log_items(log)  # no "the next append cuts it": no append is taken
    assert item["reason_code"] == "torn_tail_stuck"
    assert "with them go an unfinished batch of 2 complete line(s) (seq 2..3, since line 2)" in item["reason"]
    assert subprocess.run(["sh", "-c", item["next"]], cwd=tmp_path, timeout=30).returncode == 0
    [kept] = tmp_path.glob("work.jsonl.tail-*")
    assert kept.read_bytes() == batch + b"GARBAGE"  # nothing lost
    assert log_items(log)[1] == []


def test_follow_prom_counts_the_held_lines_until_an_append_cuts_them(tmp_path: Path) -> None:
    log = cut_batch(tmp_path)
    with following(log, tmp_path) as (_dump, prom):
        assert _wait_for(lambda: _metric(prom, "recovery_unfinished_batch_lines") == 2)
        assert _metric(prom, "recovery_torn_tail") == 1 and _metric(prom, "recovery_torn_tail_stuck") == 0
        assert run_cli("append", str(log), stdin=event("h9")).returncode == 0
        assert _wait_for(lambda: _metric(prom, "recovery_unfinished_batch_lines") == 0)
        assert _metric(prom, "recovery_torn_tail") == 0


def test_serve_shows_it_on_status_and_metrics(tmp_path: Path) -> None:
    log = cut_batch(tmp_path)
    server = start_server(log, tmp_path)
    try:
        c = server.client("viewer")
        status = c.get("/v1/status").json()
        [group] = [g for g in status["groups"] if g["domain"] == "log"]
        assert group["reason_code"] == "unfinished_batch" and group["items"][0]["id"] == "lines 2..3"
        assert status["totals"]["log"]["unfinished_batch"] == 2
        assert 'recovery_unfinished_batch_lines{log="' + str(log) + '"} 2' in c.get("/metrics").text
    finally:
        assert server.stop() == 0
