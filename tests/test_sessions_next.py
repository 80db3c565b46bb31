"""``eventlog sessions`` text prints whole commands to copy: under each need, the command ``status`` gives it
(not the view itself); under "would accept now", the ``eventlog decide`` commands ``explain`` gives, ``close``
last. It printed ``needs a person: ...`` alone and option fragments (``--decision close --expected-revision 4``):
an unrecorded interrupt said "record the turn's end, then decide" without the ``printf ... | eventlog append``.

A LOG and an id with two spaces in a row: every command is pasted into ``sh -c`` as a person would.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from tests.conftest import write_log
from tests.test_dash_ids import pasted
from tests.test_odd_ids import decided, stopped

LOG = "two  sp.jsonl"
SID = "job  two"
T = "2026-08-03T12:00:00+09:00"


def at(hhmmss: str) -> str:
    return f"2026-08-03T{hhmmss}+09:00"


EVENTS: list[dict[str, Any]] = [
    *stopped(SID),  # restore failed for good: a decision to make
    # w1: an interrupt of a turn whose end the log never recorded (status: printf ... | eventlog append)
    {"type": "interrupt_stage", "ts": at("10:00:00"), "session_id": "w1", "turn_id": "t1", "control_id": "c1",
     "stage": "control_received", "elapsed_ms": 0},
    {"type": "control_result", "ts": at("10:00:05"), "session_id": "w1", "turn_id": "t1", "control_id": "c1",
     "operation": "interrupt", "outcome": "unknown", "reason_code": "deadline_exceeded"},
    # s-due: in backoff, its retry due long before T and nothing since (status: eventlog sessions LOG s-due)
    {"type": "worker_claimed", "ts": at("11:00:00"), "session_id": "s-due", "generation": 1, "worker": "w-3",
     "restore": True},
    {"type": "checkpoint_restore_failed", "ts": at("11:00:10"), "session_id": "s-due", "generation": 1,
     "reason": "storage_checksum_mismatch"},
]


def json_of(command: str, cwd: Path) -> dict[str, Any]:
    out = pasted(command, cwd)
    assert out.stdout, out.stderr
    return dict(json.loads(out.stdout))


def sections(text: str) -> dict[str, list[str]]:
    """The text view's lines by session (a section starts after a blank line with ``ID: state``)."""
    out: dict[str, list[str]] = {}
    for block in text.split("\n\n")[1:]:
        head, *rest = block.rstrip("\n").split("\n")
        out[head.rsplit(": ", 1)[0]] = rest
    return out


def accepted_block(lines: list[str]) -> list[str]:
    """The lines under ``would accept now:``."""
    start = lines.index("  would accept now:") + 1
    block = []
    for line in lines[start:]:
        if not line.startswith("    "):
            break
        block.append(line.strip())
    return block


def test_the_text_view_prints_under_each_need_and_decision_the_whole_command_status_and_explain_print(
        tmp_path: Path) -> None:
    write_log(tmp_path / LOG, EVENTS)
    q = shlex.quote
    view = pasted(f"eventlog sessions --at {T} {q(LOG)}", tmp_path)
    assert view.returncode == 1, view.stderr  # sessions need a person
    shown = sections(view.stdout)
    assert set(shown) == {SID, "w1", "s-due"}, view.stdout
    needs = json_of(f"eventlog sessions --json --at {T} {q(LOG)}", tmp_path)["items"]
    status = json_of(f"eventlog status --json --all --at {T} {q(LOG)}", tmp_path)
    status_next = {(i["id"], i["reason_code"]): i["next"] for g in status["groups"] for i in g["items"]}
    for sid, lines in shown.items():
        items = needs[sid]["needs"]
        assert items, sid
        explain = json_of(f"eventlog explain --json --at {T} {q(LOG)} {q(sid)}", tmp_path)
        [verdict] = [v for v in explain["verdicts"] if v["kind"] == "session"]  # SID is its turn's id too
        for item in items:
            assert status_next[sid, item["reason_code"]] == item["next"]
            said = f"  needs a person: {item['reason']}"
            at_need = lines.index(next(line for line in lines if line.startswith(said)))
            if item["next"] == f"eventlog sessions {q(LOG)} {q(sid)}":  # what is read here: not printed again
                assert not lines[at_need + 1].startswith("    next: "), lines
            else:
                assert lines[at_need + 1] == f"    next: {item['next']}", (sid, lines)
        decides = [c for c in verdict["next"] if c.startswith("eventlog decide ")]
        assert decides and accepted_block(lines) == decides, (sid, lines, verdict["next"])  # explain's, in its order
        assert "--decision close" in decides[-1]  # close (it cannot be undone) last
        printed = [line.split("next: ", 1)[-1].strip() for line in lines
                   if line.startswith("    next: ") or line.strip() in decides]
        assert set(printed) <= set(verdict["next"]) | {i["next"] for i in items}, (sid, printed)

    # s-due: status sends a person here; here are the whole commands, not fragments
    assert "    --decision" not in view.stdout
    assert accepted_block(shown["s-due"]) == [
        f"eventlog decide {q(LOG)} s-due --decision close --expected-revision 2 --idempotency-key close-r2 "
        "--reason '<why>'"]

    # w1: the turn's end to record, printed in whole where the words say "record the turn's end"
    [interrupt] = needs["w1"]["needs"]
    assert interrupt["reason_code"] == "interrupt_unrecorded" and interrupt["next"].startswith("printf ")
    assert f"    next: {interrupt['next']}" in shown["w1"]


def test_each_command_of_the_text_view_does_what_it_says_when_pasted(tmp_path: Path) -> None:
    log = write_log(tmp_path / LOG, EVENTS)
    view = sections(pasted(f"eventlog sessions --at {T} {shlex.quote(LOG)}", tmp_path).stdout)

    decides = accepted_block(view[SID])
    assert len(decides) >= 2 and SID in shlex.split(decides[0])
    for command in decides:  # as printed: the placeholder is refused, nothing is written
        refused = pasted(command, tmp_path)
        assert refused.returncode == 2 and "<why>" in refused.stderr, (command, refused.stderr)
    assert decided(log) == []
    first = pasted(decides[0], tmp_path, **{"<why>": "checked the runtime"})
    assert first.returncode == 0 and first.stdout.startswith("accepted: "), (decides[0], first.stdout, first.stderr)
    assert [d["session_id"] for d in decided(log)] == [SID]

    [record] = [line.split("next: ", 1)[1] for line in view["w1"] if line.startswith("    next: ")]
    recorded = pasted(record, tmp_path)
    assert recorded.returncode == 0, (record, recorded.stderr)
    after = json_of(f"eventlog sessions --json --at {T} {shlex.quote(LOG)} w1", tmp_path)["items"]["w1"]
    assert "t1" in after["unknown_turns"]
    assert [i["reason_code"] for i in after["needs"]] != ["interrupt_unrecorded"]
