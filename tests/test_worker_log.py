"""``eventlog import worker-log``: seed 004's worker log lines into events; importing again adds nothing."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from eventlog.cli.common import replay_log
from eventlog.worker_log import cause_of, read
from tests.conftest import peak_rss_kb, run_cli, write_log, write_long_line

SID, TURN, CID = "s-7", "t-3", "ctl-9"


def stage(name: str, ms: int, **kw: Any) -> str:
    return json.dumps({"level": "info", "msg": "worker.turn.interrupt.stage", "ts": f"2026-08-06T17:00:{ms // 1000:02d}"
                       f".{ms % 1000:03d}+09:00", "session_id": SID, "turn_id": TURN, "control_id": CID,
                       "stage": name, "elapsed_ms": ms, **kw})


# The seed's capture timeout, as a worker writes it, in the shapes a logger may use.
WORKER_LOG = "\n".join([
    json.dumps({"msg": "worker.started", "ts": "2026-08-06T16:59:00+09:00", "worker": "w-1"}),
    json.dumps({"msg": "worker.checkpoint.restore_unavailable", "ts": "2026-08-06T16:59:01+09:00",
                "session_id": SID, "generation": 1, "status": 503}),
    json.dumps({"message": "worker.checkpoint.store_unavailable", "time": 1786003142000,  # epoch milliseconds
                "fields": {"sessionId": SID, "generation": 1, "error": "dns lookup failed"}}),
    json.dumps({"msg": "worker.checkpoint.store_unavailable", "ts": "2026-08-06T16:59:03+09:00",
                "session_id": SID, "generation": 1, "error": "response body cut short"}),
    stage("control_received", 0),
    stage("sdk_interrupt_called", 2),
    json.dumps({"event": "worker.turn.interrupt.stage", "timestamp": "2026-08-06T08:00:00.150Z",
                "attrs": {"sessionId": SID, "turnId": TURN, "controlId": CID, "stage": "sdk_interrupt_answered",
                          "elapsedMs": 150}}),
    stage("engine_terminal", 200),
    "panic: runtime error: a line that is not JSON",
    stage("capture_started", 210),
    stage("capture_finished", 30210, outcome="timeout", budget_ms=30000),
    stage("finalize_maybe", 30215),
    json.dumps({"msg": "control.result", "ts": "2026-08-06T17:00:30.240+09:00", "session_id": SID, "turn_id": TURN,
                "control_id": CID, "operation": "interrupt", "outcome": "outcome_unknown",
                "code": "interrupt_checkpoint_unavailable", "duration_ms": 30260}),
    json.dumps({"msg": "control.result", "ts": "2026-08-06T17:00:31", "session_id": SID, "control_id": "ctl-x",
                "operation": "interrupt", "outcome": "completed", "effect_ms": 0}),
]) + "\n"


def setup(tmp_path: Path) -> tuple[Path, Path]:
    log = write_log(tmp_path / "log.jsonl", [
        {"type": "worker_claimed", "ts": "2026-08-06T16:58:00+09:00", "session_id": SID, "generation": 1,
         "worker": "w-1", "restore": True},
    ])
    src = tmp_path / "worker.log"
    src.write_text(WORKER_LOG, encoding="utf-8")
    return log, src


def test_import_turns_the_four_messages_into_events(tmp_path: Path) -> None:
    log, src = setup(tmp_path)
    out = run_cli("import", "worker-log", str(log), str(src), "--json")
    assert out.returncode == 1, out.stderr  # lines of the four messages were skipped: a person should look
    got = json.loads(out.stdout)
    assert (got["imported"], got["already"], got["other"], got["not_json"]) == (9, 0, 1, 1)
    assert got["not_json_first"] == [f"{src}:9"]
    # the body cut short (not a cause the spec lists), a stage the seed does not name, a time without offset
    assert [s.split(": ")[0] for s in got["skipped"]] == [f"{src}:4", f"{src}:12", f"{src}:14"]
    assert got["skipped"][0] == (f"{src}:4: worker.checkpoint.store_unavailable: no cause the spec lists "
                                 "(connect, dns, timeout, http_408, http_429, http_5xx)")
    assert got["skipped"][1].startswith(f"{src}:12: worker.turn.interrupt.stage: bad_value")
    assert "stage" in got["skipped"][1]
    assert got["skipped"][2] == (f"{src}:14: control.result: time '2026-08-06T17:00:31' has no UTC offset "
                                 "(give --assume-tz)")
    assert all(f"skipped {s}" in out.stderr for s in got["skipped"])

    dump = replay_log(str(log)).dump(str(log))
    assert dump["rejected"] == [] and dump["bad_lines"] == []
    written = [json.loads(x) for x in log.read_text().splitlines()][1:]
    storage = [(w["type"], w["cause"], w["ts"]) for w in written if w["type"] == "storage_unavailable"]
    assert storage[0] == ("storage_unavailable", "http_5xx", "2026-08-06T16:59:01+09:00")
    assert storage[1][1] == "dns"  # epoch milliseconds, written in the local zone: the same instant
    assert datetime.fromisoformat(storage[1][2]) == datetime.fromisoformat("2026-08-06T16:59:02+09:00")
    c = dump["sessions"]["controls"][CID]
    assert [(s["stage"], s["elapsed_ms"]) for s in c["stages"]] == [
        ("control_received", 0), ("sdk_interrupt_called", 2), ("sdk_interrupt_answered", 150),
        ("engine_terminal", 200), ("capture_started", 210), ("capture_finished", 30210)]
    assert (c["reason_code"], c["effect_ms"], c["budget_exceeded"], c["verdict"]) == (
        "interrupt_checkpoint_unavailable", 30260, ["capture"], "capture_timeout")
    # storage errors never count; the stages count in the session's revision like its other events
    s = dump["sessions"]["items"][SID]
    assert (s["failures"], s["revision"]) == (0, 10)


def test_importing_again_adds_nothing(tmp_path: Path) -> None:
    log, src = setup(tmp_path)
    run_cli("import", "worker-log", str(log), str(src))
    before = log.read_bytes()
    again = run_cli("import", "worker-log", str(log), str(src), str(src), "--json")
    got = json.loads(again.stdout)
    assert (got["imported"], got["already"]) == (0, 18)
    assert log.read_bytes() == before


def test_assume_tz_reads_times_without_an_offset(tmp_path: Path) -> None:
    log, src = setup(tmp_path)
    out = run_cli("import", "worker-log", str(log), str(src), "--assume-tz", "Asia/Tokyo", "--json")
    got = json.loads(out.stdout)
    assert got["imported"] == 10 and len(got["skipped"]) == 2
    dump = replay_log(str(log)).dump(str(log))
    assert dump["sessions"]["controls"]["ctl-x"]["verdict"] == "clean"
    assert [json.loads(x) for x in log.read_text().splitlines()][-1]["ts"] == "2026-08-06T17:00:31+09:00"


def test_what_the_timeline_refuses_is_skipped_and_named(tmp_path: Path) -> None:
    log, src = setup(tmp_path)
    run_cli("import", "worker-log", str(log), str(src))
    other = tmp_path / "other.log"
    other.write_text(json.dumps({"msg": "control.result", "ts": "2026-08-06T17:01:00+09:00", "session_id": "s-8",
                                 "control_id": CID, "operation": "interrupt", "outcome": "interrupted",
                                 "effect_ms": 5}) + "\n")
    out = run_cli("import", "worker-log", str(log), str(other))
    assert out.returncode == 1
    assert f"skipped {other}:1: control {CID!r} belongs to session {SID!r}, turn {TURN!r}" in out.stderr
    # the same control's result again, saying something else: not a repeat, and the timeline refuses it
    second = tmp_path / "second.log"
    second.write_text(json.dumps({"msg": "control.result", "ts": "2026-08-06T17:01:00+09:00", "session_id": SID,
                                  "control_id": CID, "operation": "interrupt", "outcome": "interrupted",
                                  "effect_ms": 5}) + "\n")
    out = run_cli("import", "worker-log", str(log), str(second))
    assert out.returncode == 1
    assert f"skipped {second}:1: control {CID!r} already has its control_result" in out.stderr
    assert replay_log(str(log)).dump(str(log))["rejected"] == []


def test_an_unreadable_file_is_a_problem_and_the_rest_is_imported(tmp_path: Path) -> None:
    log, src = setup(tmp_path)
    out = run_cli("import", "worker-log", str(log), str(tmp_path / "absent.log"), str(src))
    assert out.returncode == 1
    assert "cannot read" in out.stderr and "absent.log" in out.stderr
    assert "9 event(s) imported" in out.stdout


def test_causes_in_the_spec_s_words() -> None:
    assert cause_of({"cause": "HTTP_429"}) == "http_429"
    assert cause_of({"status_code": "408"}) == "http_408"
    assert cause_of({"http_status": 502}) == "http_5xx"
    assert cause_of({"status": 404}) is None  # NoSuchKey: not transient (the seed)
    assert cause_of({"error": "request timed out"}) == "timeout"
    assert cause_of({"reason": "connection refused"}) == "connect"
    assert cause_of({"error": "checksum mismatch"}) is None


def test_read_counts_every_line() -> None:
    found = read(WORKER_LOG.encode().splitlines(), "w.log")
    assert len(found.events) + len(found.skipped) + found.other + len(found.not_json) == 14


def test_a_time_a_logger_writes_in_another_iso_form_is_imported_in_the_written_form(tmp_path: Path) -> None:
    """A worker's logger may write `2026-08-06 16:59:01+0900`: Python reads it, the appender writes only ISO 8601's
    extended form (docs/DECISIONS.md), so the importer writes the same instant and offset in that form."""
    log, _ = setup(tmp_path)
    src = tmp_path / "spaced.log"
    src.write_text(json.dumps({"msg": "worker.checkpoint.restore_unavailable", "ts": "2026-08-06 16:59:01+0900",
                               "session_id": SID, "generation": 1, "status": 503}) + "\n", encoding="utf-8")
    out = run_cli("import", "worker-log", str(log), str(src), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["imported"] == 1
    assert json.loads(log.read_text().splitlines()[-1])["ts"] == "2026-08-06T16:59:01+09:00"


def test_a_line_longer_than_a_log_line_is_skipped_named_and_never_held_whole(tmp_path: Path) -> None:
    """Review R9: one 100 MB line took the import to about 217 MB RSS. A line over MAX_LINE_BYTES (1 MiB) is
    skipped and named as the log reader names it (it may be one of the four messages: exit 1), the lines after
    it read; its bytes are never held (peak RSS, measured without timing, against a file of small lines)."""
    import sys

    from eventlog.reader import MAX_LINE_BYTES

    good = json.dumps({"msg": "control.result", "ts": "2026-12-01T10:00:00Z", "session_id": "s1",
                       "control_id": "c1", "operation": "interrupt", "outcome": "applied"}) + "\n"
    peaks: dict[str, int] = {}
    codes: dict[str, int] = {}
    for name, mb in (("small", 0), ("huge", 100)):
        src = write_long_line(tmp_path / f"{name}.log", '{"msg": "other", "pad": "', mb, '"}\n' + good)
        log = tmp_path / f"{name}.jsonl"
        codes[name], peaks[name] = peak_rss_kb([sys.executable, "-m", "eventlog", "import", "worker-log", str(log),
                                                str(src)])
        assert [json.loads(x)["type"] for x in log.read_text().splitlines()] == ["control_result"]
    assert peaks["huge"] - peaks["small"] < 20 * 1024, peaks  # KiB: the line alone is 100 MB
    assert codes == {"small": 0, "huge": 1}  # the line is named: it may be one of the four messages
    out = run_cli("import", "worker-log", str(tmp_path / "again.jsonl"), str(tmp_path / "huge.log"), "--json")
    got = json.loads(out.stdout)
    assert (out.returncode, got["imported"], got["skipped"]) == (
        1, 1, [f"{tmp_path / 'huge.log'}:1: too_long: line is longer than {MAX_LINE_BYTES} bytes"])
