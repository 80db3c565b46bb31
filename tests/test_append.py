"""``eventlog append`` and ``EventLog.append`` as spec/OUTPUTS.md describes them."""

from __future__ import annotations

import json
import os
import stat
from datetime import datetime
from pathlib import Path

import pytest
from freezegun import freeze_time

from eventlog.appender import BadInput, Conflict, EventLog
from tests.conftest import run_cli

TS = "2026-08-03T01:00:00+09:00"


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def created(hid: str = "h1", **extra: object) -> dict[str, object]:
    return {"type": "handoff_created", "ts": TS, "handoff_id": hid, "account": "acct", **extra}


def test_append_sets_seq_keeps_ts_and_extra_fields(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    out = run_cli("append", str(log), stdin=json.dumps(created(note="kept")) + "\n")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["first_seq"] == 1
    run_cli("append", str(log), stdin=json.dumps(created("h2")) + "\n" + json.dumps(created("h3")) + "\n")
    got = lines(log)
    assert [e["seq"] for e in got] == [1, 2, 3]
    assert got[0]["ts"] == TS and got[0]["note"] == "kept"


def test_missing_ts_is_now_with_the_local_offset(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    with freeze_time("2026-08-03T00:00:00+00:00"):
        EventLog(log).append([{"type": "lane_check"}])
    ts = str(lines(log)[0]["ts"])
    parsed = datetime.fromisoformat(ts)
    assert parsed.tzinfo is not None
    assert parsed.timestamp() == datetime.fromisoformat("2026-08-03T00:00:00+00:00").timestamp()


def test_seq_continues_from_a_hand_written_log(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(2 * (json.dumps({"type": "lane_check", "ts": TS}) + "\n"))
    EventLog(log).append([{"type": "lane_check", "ts": TS}])
    assert lines(log)[-1]["seq"] == 3


def test_a_batch_with_one_bad_event_writes_nothing(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    EventLog(log).append([created()])
    before = log.read_bytes()
    batch = json.dumps(created("h2")) + "\n" + json.dumps({"type": "claimed", "ts": TS, "handoff_id": "h2"}) + "\n"
    out = run_cli("append", str(log), stdin=batch)
    assert out.returncode == 2
    assert "stdin line 2: missing_field: watcher" in out.stderr
    assert log.read_bytes() == before
    assert run_cli("append", str(log), stdin="{not json\n").returncode == 2
    assert run_cli("append", str(log), stdin='{"type":"lane_check","ts":"2026-08-03T01:00:00"}\n').returncode == 2
    assert log.read_bytes() == before


def test_every_bad_input_line_is_named_whatever_its_kind(tmp_path: Path) -> None:
    """OUTPUTS.md: append validates every line; each bad one is named (a line that is no JSON object
    does not hide the lines that are objects but no events), and nothing is written."""
    log = tmp_path / "log.jsonl"
    stdin = ('{"type":"nope"}\n\n{"type":"handoff_created","handoff_id":"h1"}\n[1]\n{not json\n'
             + json.dumps(created("h2")) + "\n")
    out = run_cli("append", str(log), stdin=stdin)
    assert out.returncode == 2
    named = [line.split(": ")[2:4] for line in out.stderr.splitlines()]
    assert named == [["stdin line 1", "unknown_type"], ["stdin line 3", "missing_field"],
                     ["stdin line 4", "not_object"], ["stdin line 5", "not_json"]], out.stderr
    assert not log.exists()


def test_lines_are_named_as_stdin_numbers_them_blank_lines_included(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    bad = run_cli("append", str(log), stdin='\n{"type":"nope"}\n')
    assert bad.returncode == 2 and f"{log}: stdin line 2: unknown_type" in bad.stderr
    claimed = {"type": "claimed", "ts": TS, "handoff_id": "h9", "watcher": "w", "attempt": 1}
    refused = run_cli("append", str(log), stdin="\n" + json.dumps(created()) + "\n\n" + json.dumps(claimed) + "\n")
    assert refused.returncode == 3 and f"{log}: stdin line 4: claimed rejected" in refused.stderr, refused.stderr
    assert not log.exists()


def test_torn_tail_is_cut_never_glued_to(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    EventLog(log).append([created()])
    with log.open("ab") as f:
        f.write(b'{"type":"handoff_created","ts":"' + TS.encode() + b'","handoff_id":"h9"')
    out = run_cli("append", str(log), stdin=json.dumps(created("h2")) + "\n")
    assert out.returncode == 0
    assert "torn tail" in out.stderr
    got = lines(log)
    assert [e["handoff_id"] for e in got] == ["h1", "h2"]
    assert [e["seq"] for e in got] == [1, 2]


def test_expect_revision_conflict_is_exit_3_and_writes_nothing(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    EventLog(log).append([created()])
    before = log.read_bytes()
    ev = json.dumps({"type": "local_started", "ts": TS, "handoff_id": "h1"}) + "\n"
    out = run_cli("append", str(log), "--expect-revision", "0", stdin=ev)
    assert out.returncode == 3 and "expected revision 0" in out.stderr
    assert log.read_bytes() == before
    assert run_cli("append", str(log), "--expect-revision", "1", stdin=ev).returncode == 0
    with pytest.raises(Conflict):
        EventLog(log).append([{"type": "local_started", "ts": TS, "handoff_id": "h1"}], expect_revision=1)


def test_a_rejected_transition_is_refused_unless_no_check(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    ev = json.dumps({"type": "local_started", "ts": TS, "handoff_id": "never-created"}) + "\n"
    out = run_cli("append", str(log), stdin=ev)
    assert out.returncode == 3
    assert not log.exists() or log.read_bytes() == b""
    assert run_cli("append", str(log), "--no-check", stdin=ev).returncode == 0
    assert len(lines(log)) == 1


def test_bad_input_in_the_api(tmp_path: Path) -> None:
    with pytest.raises(BadInput) as err:
        EventLog(tmp_path / "log.jsonl").append([{"type": "nope", "ts": TS}])
    assert "unknown_type" in err.value.messages[0]


def test_new_log_mode_is_0640(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    old = os.umask(0o022)
    try:
        EventLog(log).append([created()])
    finally:
        os.umask(old)
    assert stat.S_IMODE(log.stat().st_mode) == 0o640


def test_sidecar_is_rebuilt_when_it_does_not_match(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    EventLog(log).append([created()])
    sidecar = Path(str(log) + ".sidecar")
    assert sidecar.exists()
    sidecar.write_bytes(b"corrupt")
    EventLog(log).append([created("h2")])
    # The log was replaced behind the sidecar's back: a second h1 must still be refused.
    log.write_text(json.dumps(created()) + "\n")
    with pytest.raises(Conflict):
        EventLog(log).append([created()])
    sidecar.unlink()
    EventLog(log).append([created("h3")])
    assert [e.get("seq") for e in lines(log)] == [None, 2]  # line 1 stands in for its seq


def test_a_log_path_that_is_a_directory(tmp_path: Path) -> None:
    out = run_cli("append", str(tmp_path), stdin=json.dumps(created()) + "\n")
    assert out.returncode == 1
    assert "is a directory" in out.stderr


def claimed(hid: str = "h1") -> dict[str, object]:
    return {"type": "claimed", "ts": TS, "handoff_id": hid, "watcher": "w", "attempt": 1}


def test_a_kept_state_sees_what_other_writers_appended(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    mine, theirs = EventLog(log), EventLog(log)
    mine.append([created()])
    theirs.append([claimed()])
    with pytest.raises(Conflict, match="already has a live claim"):
        mine.append([claimed()])  # a kept state that missed their claim would write a second one
    assert [e["type"] for e in lines(log)] == ["handoff_created", "claimed"]


def test_a_refused_batch_leaves_nothing_in_the_kept_state(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    el = EventLog(log)
    el.append([created()])
    with pytest.raises(Conflict):
        el.append([claimed(), claimed()])  # the first is fine, the second refused: neither is written
    el.append([claimed()])  # so this claim is the first live one
    assert [e["type"] for e in lines(log)] == ["handoff_created", "claimed"]


def test_a_kept_state_is_dropped_when_the_log_is_rewritten(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    el = EventLog(log)
    el.append([created(), claimed()])
    Path(str(log) + ".sidecar").unlink()
    log.write_text(json.dumps(created()) + "\n")  # same inode, other bytes: h1 is pending again
    el.append([claimed()])
    assert [e["type"] for e in lines(log)] == ["handoff_created", "claimed"]


def test_integers_past_64_bits_are_refused_and_named(tmp_path: Path) -> None:
    """Spec section 1, "Ranges": an integer field must fit in a signed 64-bit integer (issue 15)."""
    log = tmp_path / "log.jsonl"
    with pytest.raises(BadInput) as err:
        EventLog(log).append([created(importance=2**63), {**claimed(), "attempt": 2**64}])
    assert "line 1: bad_value: importance" in str(err.value) and "line 2: bad_value: attempt" in str(err.value)
    assert not log.exists()  # refused before the file was even opened
    EventLog(log).append([created(importance=2**63 - 1), created("h2", importance=-(2**63))])  # the edges are fine
    with log.open("ab") as f:  # a hand-written line past the range is a bad line, named, for every reader
        f.write(json.dumps({**claimed(), "attempt": 2**63}).encode() + b"\n")
    dump = json.loads(run_cli("replay", str(log)).stdout)
    assert dump["events"] == 2
    assert dump["bad_lines"] == [{"line": 3, "reason": "bad_value: attempt: expected int <= 9223372036854775807"}]


def test_a_kept_state_is_not_trusted_once_anyone_else_wrote(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    el = EventLog(log)
    checks = [{"type": "lane_check", "ts": TS}] * 80  # > 4 KiB: the edge hashes do not reach the middle
    el.append([*checks, created()])  # the first append saves the sidecar here
    el.append([{"type": "local_start_failed", "ts": TS, "handoff_id": "h1", "error": "e"}])
    el.append(checks)
    data = log.read_bytes()
    at = data.index(b'"local_start_failed"')
    start, end = data.rindex(b"\n", 0, at) + 1, data.index(b"\n", at)
    skip = json.loads(data[start:end]) | {"type": "skip", "reason": "r"}
    del skip["error"]
    line = json.dumps(skip, separators=(",", ":")).encode()
    line = line[:-1] + b" " * (end - start - len(line)) + line[-1:]  # same size (spaces before the brace)
    with open(log, "r+b") as f:  # rewritten in place: only the file's stat tells
        f.seek(start)
        f.write(line)
    with pytest.raises(Conflict, match="skipped"):
        el.append([claimed()])  # h1 is skipped now; a kept state would still see it pending
