"""Any id the appender takes can be opened, decided and pasted (docs/DECISIONS.md: "Ids in URLs", "The command to
copy").

The appender takes any string as an id: ``s/with/slash``, ``.``, ``..``, ``""``, ids with ``%``, ``;``, ``?`` or
``#``, and ids with control characters. In a URL an id is one path segment, percent-encoded (a ``%2F`` is part
of the id); ``""``, ``.`` and ``..`` are written ``;``, ``.;`` and ``..;`` (clients fold ``.`` and ``..`` away,
browsers even written ``%2E``). The API is driven with httpx against a real server (the console's links in
chromium: tests/test_console_ids.py), and the copy commands of ``status`` are run with ``sh -c`` as a person
pastes them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.conftest import write_log
from tests.serving import start_server

#: Ids no route could name before: a "/" split the segment, "." and ".." were folded away, "" named nothing.
IDS = ["s/with/slash", ".", "..", "", "a;b", ";", ".;", "%2F", "q?x#y", "ü ß", "s/../x"]


def segment(ident: str) -> str:
    """An id as the docs say to write it in a URL."""
    return {"": ";", ".": ".;", "..": "..;"}.get(ident) or quote(ident, safe="")


def at(hhmmss: str) -> str:
    return f"2026-08-03T{hhmmss}+09:00"


def stopped(sid: str) -> list[dict[str, Any]]:
    """A session whose restore failed for good (it waits for a decision, revision 4), with a turn of its own id
    whose outcome is unknown."""
    return [
        {"type": "worker_claimed", "ts": at("09:00:00"), "session_id": sid, "generation": 1, "worker": "w",
         "restore": True},
        {"type": "turn_started", "ts": at("09:00:01"), "session_id": sid, "turn_id": sid},
        {"type": "turn_finished", "ts": at("09:00:02"), "session_id": sid, "turn_id": sid,
         "outcome": "outcome_unknown"},
        {"type": "checkpoint_restore_failed", "ts": at("09:00:10"), "session_id": sid, "generation": 1,
         "reason": "incompatible_checkpoint"},
    ]


def decided(log: Path) -> list[dict[str, Any]]:
    lines = log.read_text().split("\n")[:-1]  # not splitlines(): an id may hold a U+0085 or U+2028
    return [e for e in map(json.loads, lines) if e["type"] == "recovery_decision"]


def test_the_api_opens_and_decides_every_id_the_log_takes(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", [e for sid in IDS for e in stopped(sid)])
    server = start_server(log, tmp_path)
    try:
        c = server.client("ops")
        for sid in IDS:
            seen = c.get(f"/v1/sessions/{segment(sid)}")
            assert seen.status_code == 200, (sid, seen.text)
            assert seen.json()["session_id"] == sid
            assert seen.json()["admission_state"] == "recovery_required"
            turn = c.get(f"/v1/sessions/{segment(sid)}/turns/{segment(sid)}")
            assert turn.status_code == 200, (sid, turn.text)
            assert turn.json()["outcome"] == "outcome_unknown"
            sent = c.post(f"/v1/sessions/{segment(sid)}/recovery-decisions",
                          json={"decision": "start_fresh", "expected_revision": 4, "reason": "checked"},
                          headers={"Idempotency-Key": f"k-{IDS.index(sid)}"})
            assert sent.status_code == 200, (sid, sent.text)
            assert decided(log)[-1]["session_id"] == sid and decided(log)[-1]["actor"] == "ops"
        assert [d["session_id"] for d in decided(log)] == IDS
        # a "%2F" is part of the id: the id "a" of "a%2Fb" is no session, and says which id it looked for
        missing = c.get("/v1/sessions/s%2Fwith")
        assert missing.status_code == 404 and "'s/with'" in missing.json()["message"], missing.text
        # the page of any of them is the console
        for sid in IDS:
            page = c.get(f"/sessions/{segment(sid)}")
            assert page.status_code == 200 and "console.js" in page.text, (sid, page.status_code)
    finally:
        server.stop()


# --- commands to copy ------------------------------------------------------------------

#: Ids with characters a terminal would act on or nobody sees: an escape sequence and a newline, a bidi
#: override and a trailing newline, a leading "-" with a tab, C1 and "!", "%", "'" and "\".
CONTROL = ["h\x1b[31mred\nline", "s\u202e1\n", "-t\tab", "c1\x85!%'\\"]


def pasted(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run COMMAND with ``sh -c`` in ``cwd`` as a person pastes it (``eventlog`` on PATH)."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.parametrize("sid", CONTROL)
def test_a_copy_command_for_an_id_with_control_characters_works_pasted_and_shows_none(tmp_path: Path,
                                                                                      sid: str) -> None:
    events = [*stopped(sid),
              {"type": "handoff_created", "ts": at("09:00:00"), "handoff_id": sid, "account": "acct"},
              {"type": "needs_human", "ts": at("09:10:00"), "handoff_id": sid, "reason": "resume_unconfirmed"}]
    write_log(tmp_path / "work.jsonl", events)
    shown = pasted(f"eventlog status --at {at('12:00:00')} work.jsonl", tmp_path)
    assert shown.returncode == 1, shown.stderr
    commands = [line.strip() for line in shown.stdout.splitlines() if line.startswith("      eventlog ")]
    [explain] = [c for c in commands if c.startswith("eventlog explain")]
    [decide] = [c for c in commands if c.startswith("eventlog decide")]
    listed = pasted(f"eventlog status --json --at {at('12:00:00')} work.jsonl", tmp_path)
    items = {i["reason_code"]: i for g in json.loads(listed.stdout)["groups"] for i in g["items"]}
    # what the screen shows is what --json gives (nothing to escape), and it holds no control character
    assert (items["needs_human"]["next"], items["restore_failed"]["next"]) == (explain, decide)
    assert (explain + decide).isprintable()

    looked = pasted(explain, tmp_path)
    assert looked.returncode == 0, looked.stderr
    assert json.loads(pasted(explain.replace("explain", "explain --json", 1), tmp_path).stdout)["id"] == sid

    done = pasted(decide.replace("'<why>'", "checked"), tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("accepted: "), done.stdout + done.stderr
    assert [d["session_id"] for d in decided(tmp_path / "work.jsonl")] == [sid]
