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
from pathlib import Path
from typing import Any
from urllib.parse import quote

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
