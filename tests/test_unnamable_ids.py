"""Ids no command can carry (docs/DECISIONS.md, "Ids a command can name"; ``eventlog append --help``).

No argument of a command can hold a NUL (a shell drops it: ``"$(printf '\\000h1')"`` is ``h1``), nor more than
128 KiB (Linux: "Argument list too long"). The appender refuses an id with a NUL or longer than 1,024 characters
(``bad_id``: ``append`` exit 2, ``POST /v1/events`` 400, nothing written); a log another tool wrote with such ids
reads as before, and the views print, in place of a command that would act on another id or fail, why no command
can name it and the search that lists its lines. Each command is run with ``sh -c`` as a person pastes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_log
from tests.serving import start_server

T = "2026-08-03T12:00:00+09:00"
NUL = "\x00h1"
LONG = "s" * 200_000
DUE = "r" * 200_000


def at(hhmmss: str) -> str:
    return f"2026-08-03T{hhmmss}+09:00"


def pasted(command: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run COMMAND with ``sh -c`` in ``cwd`` as a person pastes it (``eventlog`` on PATH)."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(["sh", "-c", command], cwd=cwd, env=env, input=stdin, capture_output=True, text=True,
                          timeout=60, check=False)


def line(event: dict[str, Any]) -> str:
    return json.dumps(event, ensure_ascii=False)


def handoff(hid: str) -> list[dict[str, Any]]:
    """A handoff handed to a person."""
    return [{"type": "handoff_created", "ts": at("09:00:00"), "handoff_id": hid, "account": "a"},
            {"type": "needs_human", "ts": at("09:10:00"), "handoff_id": hid, "reason": "resume_unconfirmed"}]


def stopped(sid: str) -> list[dict[str, Any]]:
    """A session whose restore failed for good: it waits for a decision."""
    return [{"type": "worker_claimed", "ts": at("09:00:00"), "session_id": sid, "generation": 1, "worker": "w",
             "restore": True},
            {"type": "checkpoint_restore_failed", "ts": at("09:00:10"), "session_id": sid, "generation": 1,
             "reason": "incompatible_checkpoint"}]


@pytest.mark.parametrize(("event", "field", "why"), [
    (handoff(NUL)[0], "handoff_id", "holds a NUL character"),
    ({**handoff("h2")[0], "account": "a\x00"}, "account", "holds a NUL character"),
    (stopped(LONG)[0], "session_id", "is 200,000 characters long, more than an id may be (1,024)"),
    ({"type": "turn_started", "ts": at("09:00:01"), "session_id": "s", "turn_id": "t" * 1025}, "turn_id",
     "is 1,025 characters long"),
    ({"type": "claimed", "ts": at("09:00:01"), "handoff_id": "h1", "watcher": "w\x00", "attempt": 1}, "watcher",
     "holds a NUL character"),
])
def test_the_appender_refuses_an_id_no_command_can_name(tmp_path: Path, event: dict[str, Any], field: str,
                                                        why: str) -> None:
    log = write_log(tmp_path / "work.jsonl", handoff("h1")[:1])
    before = log.read_bytes()
    done = pasted("eventlog append work.jsonl", tmp_path, stdin=line(handoff("h0")[0]) + "\n" + line(event) + "\n")
    assert done.returncode == 2, done.stderr                                  # bad input (append --help)
    assert f"work.jsonl: stdin line 2: bad_id: {field} {why}" in done.stderr, done.stderr
    assert log.read_bytes() == before                                         # all or nothing


def test_an_id_of_1024_characters_is_written(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", [])
    done = pasted("eventlog append work.jsonl", tmp_path, stdin=line(handoff("h" * 1024)[0]) + "\n")
    assert done.returncode == 0, done.stderr
    assert json.loads(log.read_text())["handoff_id"] == "h" * 1024


def test_serve_refuses_a_long_id_and_writes_nothing(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", handoff("h1"))
    before = log.read_bytes()
    server = start_server(log, tmp_path)
    try:
        sent = server.client("ops").post("/v1/events", content=line(stopped(LONG)[0]) + "\n")
        assert sent.status_code == 400, sent.text
        assert "body line 1: bad_id: session_id is 200,000 characters long" in sent.text, sent.text[:500]
    finally:
        server.stop()
    assert log.read_bytes() == before


def next_of(cwd: Path) -> dict[tuple[str, str], str]:
    """The ``next`` of each item of ``status --json --all``, by (reason code, id)."""
    out = pasted(f"eventlog status --json --all --at {T} work.jsonl", cwd)
    assert out.stdout, out.stderr
    return {(i["reason_code"], i["id"]): i["next"] for g in json.loads(out.stdout)["groups"] for i in g["items"]}


def test_a_log_written_with_such_ids_reads_and_names_no_command_that_acts_on_another(tmp_path: Path) -> None:
    """A handoff ``\\0h1`` beside ``h1`` (pasted, ``eventlog handoff skip LOG "$(printf '\\000h1')"`` closed
    ``h1``), and sessions of 200,000-character ids (every command failed "Argument list too long"): one waits for
    a decision (the appender would refuse it), one's retry is due (``eventlog sessions``: no argument holds it)."""
    due = [{**e, "reason": "storage_checksum_mismatch"} if "reason" in e else e for e in stopped(DUE)]  # backoff
    log = write_log(tmp_path / "work.jsonl", [*handoff("h1")[:1], *handoff(NUL), *stopped(LONG), *due])
    dump = json.loads(pasted("eventlog replay work.jsonl", tmp_path).stdout)      # read as before
    assert dump["handoffs"]["items"][NUL]["state"] == "needs_human"
    assert dump["sessions"]["items"][LONG]["admission_state"] == "recovery_required"

    items = next_of(tmp_path)
    for key, why in [(("needs_human", NUL), "it holds a NUL character"),
                     (("restore_failed", LONG), "it is 200,000 characters long"),
                     (("retry_due", DUE), "it is 200,000 bytes long, more than a command's argument may be")]:
        words = items[key]
        assert words.startswith("no command can name this id: ") and why in words, words[:300]
        assert "eventlog " not in words and len(words) < 1000, words[:300]
        # the search it names lists the id's lines, and only those
        search = words.split("as JSON text: ", 1)[1].removesuffix(" lists them")
        found = pasted(search, tmp_path)
        assert found.returncode == 0, found.stderr
        wanted = [f"{n}:{text}" for n, text in enumerate(log.read_text().splitlines(), 1)
                  if key[1] in json.loads(text).values()]
        assert found.stdout.splitlines() == wanted

    screen = pasted(f"eventlog status --all --at {T} work.jsonl", tmp_path)
    assert screen.returncode == 1 and "no command can name this id" in screen.stdout, screen.stderr
    assert "printf" not in screen.stdout                                       # no "$(printf '\000h1')" to paste
    # h1 itself is untouched by all this: still pending
    assert dump["handoffs"]["items"]["h1"]["state"] == "pending"


def test_a_decision_the_appender_would_refuse_is_not_offered(tmp_path: Path) -> None:
    """A session id of 2,000 characters fits an argument, but a decision naming it is one the appender refuses
    (``bad_id``): status names no decide command; ``explain`` (it writes nothing) is still offered and works."""
    sid = "d" * 2000
    write_log(tmp_path / "work.jsonl", stopped(sid))
    words = next_of(tmp_path)["restore_failed", sid]
    assert words.startswith("no command can name this id: it is 2,000 characters long, more than an id may be"), words
    explained = pasted(f"eventlog explain --json --at {T} work.jsonl {sid}", tmp_path)
    [verdict] = json.loads(explained.stdout)["verdicts"]
    assert verdict["next"] and all("eventlog decide" not in c for c in verdict["next"]), verdict["next"]
    assert all(c.startswith(("no command can name", "eventlog sessions", "eventlog explain")) for c in verdict["next"])
