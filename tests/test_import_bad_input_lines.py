"""Every importer names each input that cannot become an event by its file and line, and imports the rest.

``eventlog import --help``: exit 1 when "some input could not be read or turned into an event (the rest
is imported, each named on stderr)"; exit 2 only for bad usage or a LOG that cannot be read. Three kinds
of bad input, in every importer and in ``observe lane``: JSON nested deeper than the log's rule (no traceback),
an event the appender would refuse (a line over 1 MiB: not a reason to refuse the whole import), and
bytes that are not UTF-8 (named ``not_utf8``, as the log reader names them, never turned into U+FFFD:
a replaced byte in an id makes another job).
"""

from __future__ import annotations

import json
import plistlib
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from eventlog.reader import NESTED_TOO_DEEP
from tests.conftest import run_cli

TS = "2026-08-03T01:20:00+09:00"
EPOCH = int(datetime.fromisoformat(TS).timestamp())
#: Text past what one log line may hold (1 MiB).
HUGE = "x" * (2 << 20)
UTC = ("--assume-tz", "UTC")


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def events(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []


def said(out: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines on stderr, long ones cut to their start."""
    return [line[:300] for line in out.stderr.splitlines()]


def no_traceback(out: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in out.stderr, out.stderr[-2000:]


# --- worker-log ----------------------------------------------------------------------------------------

STORE = {"msg": "worker.checkpoint.store_unavailable", "ts": TS, "session_id": "s1", "generation": 1, "cause": "dns"}


def test_worker_log_names_an_id_that_is_not_utf8_and_a_line_too_long(tmp_path: Path) -> None:
    src = tmp_path / "w.log"
    bad = json.dumps({**STORE, "session_id": "sQQ"}).encode().replace(b"sQQ", b"s\xff")
    src.write_bytes(bad + b"\n" + json.dumps({**STORE, "session_id": HUGE}).encode() + b"\n"
                    + json.dumps({**STORE, "session_id": "s2"}).encode() + b"\n")
    log = tmp_path / "W.jsonl"
    out = run_cli("import", "worker-log", str(log), str(src), "--json")
    no_traceback(out)
    assert out.returncode == 1
    report = json.loads(out.stdout)
    first, second = report["skipped"]
    at = bad.index(b"\xff")
    assert first == f"{src}:1: worker.checkpoint.store_unavailable: not_utf8: invalid UTF-8 at byte {at}"
    # over a log line's 1 MiB: skipped unread, as the log reader names it (review R9: never held whole)
    assert second == f"{src}:2: too_long: line is longer than 1048576 bytes"
    assert [e["session_id"] for e in events(log)] == ["s2"]  # no "s\ufffd"


# --- ledger --------------------------------------------------------------------------------------------

ENTRY = {"account": "a", "limitedAt": TS, "resetAt": None, "source": "parsed-limit-message",
         "confidence": "explicit"}


@pytest.mark.parametrize(("importer", "text", "named", "field", "kept"), [
    ("worker-log", json.dumps(STORE) + "\n" + '{"msg":"x","a":' + deep(3000) + "}\n", "skipped {src}:2",
     "session_id", "s1"),
    ("ledger", '{"account": "b", "x": ' + deep(5000) + "}\n" + json.dumps(ENTRY) + "\n", "{src}:1", "account", "a"),
])
def test_a_line_nested_too_deep_is_named_by_the_logs_rule_and_the_rest_imported(
        tmp_path: Path, importer: str, text: str, named: str, field: str, kept: str) -> None:
    src = tmp_path / "input"
    src.write_text(text)
    log = tmp_path / "L.jsonl"
    out = run_cli("import", importer, str(log), str(src))
    no_traceback(out)
    assert out.returncode == 1
    [line] = said(out)
    assert line.startswith(f"eventlog: {named.format(src=src)}: {NESTED_TOO_DEEP} (at byte ")
    assert [e[field] for e in events(log)] == [kept]


def test_ledger_lines_that_are_not_utf8_or_too_long_are_named_by_their_line(tmp_path: Path) -> None:
    src = tmp_path / "ledger.jsonl"
    src.write_bytes(json.dumps({**ENTRY, "account": "bQQ"}).encode().replace(b"bQQ", b"b\xff") + b"\n\n"
                    + json.dumps({**ENTRY, "source": HUGE}).encode() + b"\n"
                    + json.dumps({**ENTRY, "account": "lone\ud800"}).encode() + b"\n"
                    + json.dumps(ENTRY).encode() + b"\n")
    log = tmp_path / "L.jsonl"
    out = run_cli("import", "ledger", str(log), str(src))
    no_traceback(out)
    assert out.returncode == 1
    lines = said(out)
    assert len(lines) == 3
    assert lines[0] == f"eventlog: {src}:1: not_utf8: invalid UTF-8 at byte 14"
    assert lines[1].startswith(f"eventlog: {src}:3: too_long: ")
    assert lines[2] == f"eventlog: {src}:4: not_utf8: '\\ud800' is a lone surrogate, which no UTF-8 text can hold"
    assert [e["account"] for e in events(log)] == ["a"]


# --- quota-log -----------------------------------------------------------------------------------------


def marker(label: str, reason: str = "quota") -> str:
    return f"CLAUDE_QUOTA_JOB_SKIPPED job={label} reason={reason} remaining=5s ts={EPOCH}"


def test_quota_log_names_a_marker_too_long_by_its_file_and_line_and_imports_the_rest(tmp_path: Path) -> None:
    src = tmp_path / "q.err"
    src.write_text("\n".join([marker("a"), "noise", marker("b", HUGE), marker("c")]) + "\n")
    log = tmp_path / "Q.jsonl"
    out = run_cli("import", "quota-log", str(log), str(src), *UTC)
    no_traceback(out)
    assert out.returncode == 1
    assert len(said(out)) == 1 and said(out)[0].startswith(f"eventlog: {src}:3: too_long: ")
    assert "nothing was written" not in out.stderr
    assert [e["label"] for e in events(log)] == ["a", "c"]


def test_quota_log_names_a_label_that_is_not_utf8_and_keeps_a_real_replacement_character(tmp_path: Path) -> None:
    src = tmp_path / "q.err"
    src.write_bytes(b"\xfe noise that is no marker\n" + marker("d\xff").encode("latin-1") + b"\n"
                    + marker("e\ufffd").encode() + b"\n")
    log = tmp_path / "Q.jsonl"
    out = run_cli("import", "quota-log", str(log), str(src), *UTC)
    assert out.returncode == 1
    assert said(out) == [f"eventlog: {src}:2: not_utf8: invalid UTF-8 at byte {len('CLAUDE_QUOTA_JOB_SKIPPED job=d')}"]
    assert [e["label"] for e in events(log)] == ["e\ufffd"]  # written as U+FFFD by the guard: a label as any other


# --- handoff-files, circuit, launchd ----------------------------------------------------------------------


def handoff(hid: str, **extra: Any) -> str:
    return json.dumps({"handoffId": hid, "account": "a", "createdAt": TS, **extra})


def test_handoff_files_name_each_file_that_cannot_become_events_and_import_the_rest(tmp_path: Path) -> None:
    d = tmp_path / "handoffs"
    d.mkdir()
    (d / "h1.json").write_text(handoff("h1"))
    (d / "h2.json").write_text('{"handoffId": "h2", "x": ' + deep(5000) + "}")
    (d / "h3.json").write_text(handoff("h3", repo=HUGE))
    (d / "h4.json").write_text(handoff("h4"))
    (d / "h4.skip").write_bytes(b"moved \xff on\n")
    (d / "h5.json").write_text(handoff("h5"))
    (d / "h5.skip").write_text(HUGE + "\n")
    log = tmp_path / "H.jsonl"
    out = run_cli("import", "handoff-files", str(log), str(d), *UTC)
    no_traceback(out)
    assert out.returncode == 1
    lines = said(out)
    assert len(lines) == 4
    assert lines[0].startswith(f"eventlog: {d / 'h2.json'}: {NESTED_TOO_DEEP} (at byte ")
    assert lines[1].startswith(f"eventlog: {d / 'h3.json'}: too_long: ")
    assert lines[2] == f"eventlog: {d / 'h4.skip'}: not_utf8: invalid UTF-8 at byte 6"
    assert lines[3].startswith(f"eventlog: {d / 'h5.skip'}: too_long: ")
    assert [(e["type"], e["handoff_id"]) for e in events(log)] == [
        ("handoff_created", "h1"), ("handoff_created", "h4"), ("handoff_created", "h5")]


def test_circuit_names_a_file_too_deep_or_a_reason_too_long(tmp_path: Path) -> None:
    log = tmp_path / "C.jsonl"
    state = tmp_path / "state.json"
    state.write_text('{"open_until": ' + deep(5000) + "}")
    out = run_cli("import", "circuit", str(log), str(state))
    no_traceback(out)
    assert out.returncode == 1
    [line] = said(out)
    assert line.startswith(f"eventlog: cannot read {state}: {NESTED_TOO_DEEP} (at byte ")
    state.write_text(json.dumps({"open_until": TS, "opened_at": TS, "reason": HUGE}))
    out = run_cli("import", "circuit", str(log), str(state), "--json")
    assert out.returncode == 1
    assert said(out)[0].startswith(f"eventlog: {state}: too_long: ")
    assert json.loads(out.stdout)["already"] == 0
    assert not log.exists()


def test_launchd_names_a_plist_whose_label_is_too_long_and_registers_the_rest(tmp_path: Path) -> None:
    d = tmp_path / "LaunchAgents"
    d.mkdir()
    for name, label in (("big.plist", HUGE), ("ok.plist", "com.lily.ok")):
        with open(d / name, "wb") as f:
            plistlib.dump({"Label": label, "ProgramArguments": ["/bin/echo"]}, f)
    log = tmp_path / "J.jsonl"
    out = run_cli("import", "launchd", str(log), str(d))
    assert out.returncode == 1
    assert len(said(out)) == 1
    assert said(out)[0].startswith(f"eventlog: {d / 'big.plist'}: bad_id: label is 2,097,152 ")
    assert [e["label"] for e in events(log)] == ["com.lily.ok"]


# --- observe lane --------------------------------------------------------------------------------------


@pytest.mark.parametrize("again", [False, True])
def test_observe_names_worker_log_lines_that_cannot_become_events(tmp_path: Path, again: bool) -> None:
    src = tmp_path / "worker.log"
    src.write_bytes(b"JOB_FINISHED job=a ts=2026-08-05T12:54:00+00:00\n"
                    b"JOB_FINISHED job=b\xff ts=2026-08-05T12:55:00+00:00\n"
                    + f"JOB_FINISHED job={HUGE} ts=2026-08-05T12:56:00+00:00\n".encode()
                    + b"JOB_FINISHED job=d ts=2026-08-05T12:57:00+00:00\n")
    log = tmp_path / "lanes.jsonl"
    cmd = ("observe", "lane", str(log), "prod", "--worker-log", str(src))
    out = run_cli(*cmd)
    if again:  # named on every pass while the worker log holds them, though older than the lane's latest
        out = run_cli(*cmd)
    assert out.returncode == 1
    lines = said(out)
    assert lines[0] == f"eventlog: {src}:2: not_utf8: invalid UTF-8 at byte {len('JOB_FINISHED job=b')}"
    assert lines[1] == f"eventlog: {src}:3: too_long: line is longer than 1048576 bytes"  # never held whole
    assert len(lines) == 2
    assert [e["job_id"] for e in events(log)] == ["a", "d"]
