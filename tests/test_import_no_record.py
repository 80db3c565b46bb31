"""An input FILE that gives no record is said, never passed over in silence (``import quota-log``, ``worker-log``,
``ledger``).

Reported: ``eventlog import quota-log LOG empty.log`` exited 0 with "0 marker(s) imported" and nothing else, so a
person who pointed it at a rotated or truncated file could not tell. Now a FILE with no line, and a FILE with lines
but no record of the kind asked (with how many lines were read), are said on stderr and in ``--json``'s ``notes``;
the exit stays 0 (docs/DECISIONS.md: an empty file is no bad input). Real processes throughout.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

#: Each line reader, and what it calls a record in its words.
KINDS = {
    "quota-log": "no CLAUDE_QUOTA_JOB_SKIPPED or CLAUDE_QUOTA_JOB_RAN marker",
    "worker-log": "no line of the four messages (worker-log --help)",
    "ledger": "no ledger entry",
}

#: One record of each kind (so that a FILE holding one is not named).
RECORD = {
    "quota-log": "CLAUDE_QUOTA_JOB_SKIPPED job=com.lily.brief reason=quota remaining=60s ts=1787270400\n",
    "worker-log": json.dumps({"msg": "worker.checkpoint.restore_unavailable", "ts": "2026-08-21T09:00:00+00:00",
                              "session_id": "s1", "generation": 1, "status": 503}) + "\n",
    "ledger": json.dumps({"account": "acct-a", "limitedAt": "2026-08-21T09:00:00+00:00", "resetAt": None,
                          "source": "parsed-limit-message", "confidence": "unknown"}) + "\n",
}


def imported(source: str, log: Path, *files: Path) -> tuple[int, str, dict[str, object]]:
    """``eventlog import SOURCE LOG FILE... --json``: its exit, its stderr and its JSON."""
    out = run_cli("import", source, str(log), *map(str, files), "--json", env={"TZ": "UTC"})
    assert out.stdout, out.stderr
    return out.returncode, out.stderr, json.loads(out.stdout)


@pytest.mark.parametrize("source", list(KINDS))
def test_an_empty_file_is_said_with_exit_0(tmp_path: Path, source: str) -> None:
    empty = tmp_path / "rotated.log"
    empty.write_text("")
    code, stderr, report = imported(source, tmp_path / "e.jsonl", empty)
    said = f"{empty}: empty (no line): {KINDS[source]} to import from it (is it the right file"
    assert code == 0, stderr
    assert said in stderr
    assert [note for note in report["notes"] if said in note]  # type: ignore[union-attr]
    assert report["imported"] == 0


@pytest.mark.parametrize("source", ["quota-log", "worker-log"])
def test_a_file_of_lines_with_no_record_says_how_many_lines_were_read(tmp_path: Path, source: str) -> None:
    """A job's stderr with no marker (the guard never ran it), a worker's log with none of the four messages."""
    noise = tmp_path / "job.err"
    noise.write_text('Downloading... 100%\n{"msg": "worker.started"}\nTraceback (most recent call last):\n')
    code, stderr, report = imported(source, tmp_path / "e.jsonl", noise)
    said = f"{noise}: 3 line(s) read, {KINDS[source]}"
    assert code == 0, stderr
    assert said in stderr and said in json.dumps(report["notes"])
    if source == "worker-log":
        assert "(1 of other messages, 2 not JSON)" in stderr


def test_a_ledger_of_blank_lines_or_an_empty_list_says_how_many_lines_were_read(tmp_path: Path) -> None:
    blank, listed = tmp_path / "blank.jsonl", tmp_path / "list.json"
    blank.write_text("\n\n")
    listed.write_text("[]\n")
    code, stderr, _ = imported("ledger", tmp_path / "e.jsonl", blank, listed)
    assert code == 0, stderr
    assert f"{blank}: 2 line(s) read, no ledger entry among them" in stderr
    assert f"{listed}: 1 line(s) read, no ledger entry among them" in stderr


@pytest.mark.parametrize("source", list(KINDS))
def test_only_the_file_with_no_record_is_named(tmp_path: Path, source: str) -> None:
    good, empty = tmp_path / "good.log", tmp_path / "empty.log"
    good.write_text(RECORD[source])
    empty.write_text("")
    code, stderr, report = imported(source, tmp_path / "e.jsonl", good, empty)
    assert code == 0, stderr
    assert report["imported"] == 1
    assert f"{empty}: empty (no line)" in stderr and str(good) not in stderr


def test_a_catch_up_pass_that_imports_an_empty_marker_file_says_so(tmp_path: Path) -> None:
    """``catchup --import-quota-log``: the import's note is the pass's note."""
    empty = tmp_path / "brief.err"
    empty.write_text("")
    log = tmp_path / "e.jsonl"
    log.write_text(json.dumps({"type": "job_registered", "ts": "2026-08-21T07:00:00+00:00", "label": "com.lily.brief",
                               "guarded": True, "calendar": [{"Hour": 9}], "interval_s": None}) + "\n")
    out = run_cli("catchup", str(log), "--import-quota-log", str(empty), "--kick-cmd",
                  "/bin/true", "--probe-cmd", "echo PING_OK", "--json")
    assert f"import quota-log: {empty}: empty (no line)" in out.stderr
