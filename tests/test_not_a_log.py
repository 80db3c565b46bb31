"""A file that is no event log: every view says no append is taken on it, by the appender's own rule.

README (Append): a file none of whose lines is a JSON object (a binary, a text, a file of JSON arrays) is no
event log, and every append is refused, whatever its end holds. ``status`` (text, --json, --needs-decision),
serve's /v1/status and /metrics, and ``follow --prom`` must say so as something that needs a person
(``not_a_log``, ``recovery_not_a_log``), never "the next append cuts it". Run as a user runs them; the
appender's answer on the same file is the reference. And an append's error names the log once.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, write_log
from tests.serving import start_server
from tests.test_follow import _metric, _wait_for, following

EVENT = '{"type":"handoff_created","handoff_id":"h9","account":"cloud-account-a"}\n'
LINES = [{"type": "handoff_created", "ts": f"2026-08-03T09:0{i}:00+09:00", "handoff_id": f"h{i}",
          "account": "cloud-account-a"} for i in range(3)]

#: Files, and whether the appender refuses them as no event log (the README's rule).
FILES: dict[str, tuple[bytes, bool]] = {
    "a binary": (b"\x89PNG\r\n\x1a\n" + random.Random(5).randbytes(2000), True),
    "a plain text": (b"shopping list\neggs\n", True),
    "a text without a final newline": (b"shopping list\neggs", True),
    "a text ending in what looks like a torn log line": (b"shopping list\n{\"type\":\"handoff_cr", True),
    "a file of JSON arrays": (b"[1, 2]\n[\"a\"]\n", True),
    "JSON objects that are all bad lines": (b'{"type":"handoff_created","ts":"2026-08-03T09:00:00"}\n', False),
    "an event log": (b"".join(json.dumps(e).encode() + b"\n" for e in LINES), False),
}


def status_json(log: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    out = run_cli("status", str(log), "--at", "log", "--json", "--all", *extra)
    assert out.stdout, out.stderr
    return out, json.loads(out.stdout)


def groups(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["reason_code"]: g for g in view["groups"]}


@pytest.mark.parametrize("kind", list(FILES))
def test_status_and_the_appender_agree_on_whether_the_file_is_a_log(tmp_path: Path, kind: str) -> None:
    data, refused = FILES[kind]
    log = tmp_path / "work.jsonl"
    log.write_bytes(data)
    out, view = status_json(log)
    found = groups(view)
    appended = run_cli("append", str(log), stdin=EVENT)
    assert view["totals"]["log"]["not_a_log"] is refused
    if refused:
        assert appended.returncode == 2 and "does not look like an event log" in appended.stderr, appended.stderr
        assert log.read_bytes() == data  # left as it is
        assert out.returncode == 1
        group = found["not_a_log"]
        assert group["needs_decision"] is True and group["count"] == 1
        [item] = group["items"]
        assert item["id"] == str(log) and item["needs_decision"] is True
        assert "does not look like an event log" in item["reason"] and "every append" in item["reason"]
        # no word of cutting a tail: no append is taken at all
        assert "torn_tail" not in found and "torn_tail_stuck" not in found
        assert "next append cuts" not in out.stdout
    else:
        assert appended.returncode == 0, appended.stderr
        assert "not_a_log" not in found


def test_the_screen_says_it_needs_a_person(tmp_path: Path) -> None:
    log = tmp_path / "notes.txt"
    log.write_bytes(FILES["a text ending in what looks like a torn log line"][0])
    screen = run_cli("status", str(log), "--at", "log", "--needs-decision")
    assert screen.returncode == 1
    assert "A file that is no event log: every append is refused: 1" in screen.stdout
    assert f"head -c 300 {log} | od -c | head" in screen.stdout
    assert "the next append cuts it" not in screen.stdout
    assert "no event log: every append is refused" in screen.stdout.splitlines()[-1]  # the totals line


def test_the_commands_given_look_then_move_it_aside_and_appends_are_taken_again(tmp_path: Path) -> None:
    data = FILES["a binary"][0]
    log = tmp_path / "it's a log.jsonl"
    log.write_bytes(data)
    _out, view = status_json(log)
    [item] = groups(view)["not_a_log"]["items"]
    looked = subprocess.run(["sh", "-c", item["next"]], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert looked.returncode == 0 and "P   N   G" in looked.stdout, looked.stderr
    assert log.read_bytes() == data  # the next command only looks
    move = re.search(r"\((mv -n .*?)\)", item["reason"])
    assert move, item["reason"]
    moved = subprocess.run(["sh", "-c", move[1]], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert moved.returncode == 0, moved.stderr
    assert Path(f"{log}.not-a-log").read_bytes() == data  # nothing is lost
    assert run_cli("append", str(log), stdin=EVENT).returncode == 0
    again, view = status_json(log, "--domain", "log")
    assert again.returncode == 0 and view["groups"] == []  # (a new handoff, no watcher yet: not the log's)


def test_follow_prom_says_it_and_holds_back_the_torn_tail_alerts(tmp_path: Path) -> None:
    log = tmp_path / "notes.txt"
    log.write_bytes(FILES["a text without a final newline"][0])
    with following(log, tmp_path) as (_dump, prom):
        assert _wait_for(lambda: _metric(prom, "recovery_not_a_log") == 1)
        assert _metric(prom, "recovery_torn_tail") == 1  # the facts stay: the alerts hold back (ledger.yml)
    good = write_log(tmp_path / "good.jsonl", LINES)
    with following(good, tmp_path) as (_dump, prom):
        assert _wait_for(lambda: _metric(prom, "recovery_events_total") == 3)
        assert _metric(prom, "recovery_not_a_log") == 0


def test_serve_shows_it_on_status_and_metrics_and_refuses_the_append(tmp_path: Path) -> None:
    log = tmp_path / "work.jsonl"
    log.write_bytes(FILES["a file of JSON arrays"][0])
    server = start_server(log, tmp_path)
    try:
        c = server.client("viewer")
        status = c.get("/v1/status").json()
        group = groups(status)["not_a_log"]
        assert group["needs_decision"] is True and group["items"][0]["next"].startswith("head -c 300 ")
        assert status["totals"]["log"]["not_a_log"] is True
        assert 'recovery_not_a_log{log="' + str(log) + '"} 1' in c.get("/metrics").text
        refused = server.client("writer").post("/v1/events", content=EVENT)
        assert refused.status_code == 503 and "does not look like an event log" in refused.json()["message"]
    finally:
        assert server.stop() == 0


# -- an append's error names the log once ------------------------------------------------------------------------


def said_once(stderr: str, log: Path) -> list[str]:
    """The lines of ``stderr`` that name ``log``; each must name it once."""
    named = [line for line in stderr.splitlines() if str(log) in line]
    assert named, stderr
    assert all(line.count(str(log)) == 1 for line in named), stderr
    return named


@pytest.mark.parametrize("kind", ["not a log", "a tail no append cuts", "a directory", "a FIFO"])
def test_append_names_the_log_once(tmp_path: Path, kind: str) -> None:
    log = tmp_path / "work.jsonl"
    if kind == "not a log":
        log.write_bytes(b"shopping list\n")
        said = f"eventlog: {log} does not look like an event log: none of its 1 line(s) is a JSON object"
    elif kind == "a tail no append cuts":
        write_log(log, LINES)
        with log.open("ab") as f:
            f.write(b"GARBAGE")
        said = f"eventlog: {log} ends with 7 bytes that are not the start of a log line"
    elif kind == "a directory":
        log.mkdir()
        said = f"eventlog: {log} is a directory, not a log file"
    else:
        os.mkfifo(log)
        said = f"eventlog: {log} is not a regular file (a FIFO), so it cannot hold a log"
    out = run_cli("append", str(log), stdin=EVENT, timeout=30)
    assert out.returncode != 0
    [line] = said_once(out.stderr, log)
    assert line.startswith(said), out.stderr
    # the append's own refusals that do not name it are said of the log, before the input line
    good = write_log(tmp_path / "good.jsonl", LINES)
    stale = run_cli("append", str(good), "--expect-revision", "5", stdin=EVENT)
    assert stale.returncode == 3
    assert said_once(stale.stderr, good) == [f"eventlog: {good}: stdin line 1: expected revision 5, stream is at 0"]


def test_runners_name_the_log_once(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", LINES)
    with log.open("ab") as f:
        f.write(b"GARBAGE")
    skipped = run_cli("handoff", "skip", str(log), "h1", "--reason", "not ours")
    assert skipped.returncode == 1
    assert said_once(skipped.stderr, log) == [
        f"eventlog: cannot append the skip of h1: {log} ends with 7 bytes that are not the start of a log line "
        "(b'GARBAGE'...): it does not look like an event log; left as it is, nothing was written"]
    text = tmp_path / "notes.txt"
    text.write_bytes(b"shopping list\n")
    lanes = run_cli("lanes", str(text), "--enqueue-cmd", "true")
    assert lanes.returncode == 1
    named = said_once(lanes.stderr, text)
    assert f"eventlog: cannot append the lane check: {text} does not look like an event log" in "\n".join(named)
