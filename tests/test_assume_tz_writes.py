"""What the writers make of times: ``serve --assume-tz`` takes lines as ``append --assume-tz`` does, offsets are
written as ISO 8601 writes them, and a wall time the zone skipped or repeated is said.

Spec section 2: ``ts`` is ISO 8601 with a UTC offset; without one it is bad input unless the reader is given an
assumed zone. README: ``--assume-tz`` applies wherever times are read or written, and ``POST /v1/events`` is
``eventlog append`` (checked). A review found ``serve --assume-tz`` refusing what ``append --assume-tz`` wrote,
and telling the HTTP client to "give --assume-tz"; ``append`` writing ``+05:45:30`` offsets that other tools'
parsers cannot read; and wall times New York skipped or repeated written without a word. Real processes on a UTC
host throughout: the CLI, and a server answering an HTTP client.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, write_log
from tests.serving import start_server

UTC_HOST = {"TZ": "UTC"}
KATHMANDU = "Asia/Kathmandu"
NEW_YORK = "America/New_York"
CREATED = {"type": "handoff_created", "ts": "2026-12-01T09:00:00+05:45", "handoff_id": "h0", "account": "acct-a"}


def created(handoff_id: str, ts: str, **more: Any) -> dict[str, Any]:
    return {"type": "handoff_created", "ts": ts, "handoff_id": handoff_id, "account": "acct-a", **more}


def jsonl(*events: dict[str, Any]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def append(log: Path, *events: dict[str, Any], zone: str | None = None):  # type: ignore[no-untyped-def]
    """``eventlog append LOG [--assume-tz ZONE]`` on a UTC host."""
    return run_cli("append", str(log), *(["--assume-tz", zone] if zone else []), stdin=jsonl(*events), env=UTC_HOST)


def test_serve_with_assume_tz_takes_a_line_without_an_offset_as_append_does(tmp_path: Path) -> None:
    naive = created("h1", "2026-12-02T09:00:00", deadline="2026-12-02T17:00:00")
    by_cli = write_log(tmp_path / "cli.jsonl", [CREATED])
    done = append(by_cli, naive, zone=KATHMANDU)
    assert done.returncode == 0, done.stderr

    by_http = write_log(tmp_path / "http.jsonl", [CREATED])
    server = start_server(by_http, tmp_path, None, "--assume-tz", KATHMANDU, via=["env", "TZ=UTC"])
    try:
        answer = server.client().post("/v1/events", content=jsonl(naive))
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"written": 1, "first_seq": 2, "last_seq": 2}
    finally:
        assert server.stop() == 0, server.output()
    assert lines(by_http) == lines(by_cli)
    assert (lines(by_http)[1]["ts"], lines(by_http)[1]["deadline"]) == ("2026-12-02T09:00:00+05:45",
                                                                        "2026-12-02T17:00:00+05:45")


def test_serve_without_assume_tz_tells_the_http_client_the_line_needs_an_offset(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", [CREATED])
    server = start_server(log, tmp_path, via=["env", "TZ=UTC"])
    try:
        answer = server.client().post("/v1/events", content=jsonl(created("h1", "2026-12-02T09:00:00")))
    finally:
        assert server.stop() == 0, server.output()
    assert answer.status_code == 400, answer.text
    [said] = answer.json()["problems"]
    assert said.startswith("body line 1: no_offset: ts '2026-12-02T09:00:00' has no UTC offset"), said
    assert "needs its UTC offset" in said and "--assume-tz" not in said, said
    assert len(lines(log)) == 1


@pytest.mark.parametrize(("field", "offset"), [("ts", "+05:45:30"), ("ts", "+05:45:30.5"), ("ts", "+05:45:00"),
                                               ("deadline", "-04:56:02")])
def test_append_refuses_an_offset_with_seconds_naming_line_and_reason(tmp_path: Path, field: str,
                                                                      offset: str) -> None:
    log = tmp_path / "work.jsonl"
    bad = {**created("h2", "2026-12-02T09:00:00+05:45"), field: "2026-12-02T09:00:00" + offset}
    done = append(log, created("h1", "2026-12-02T08:00:00+05:45"), bad)
    assert done.returncode == 2, done.stderr  # append --help: 2 bad input
    assert done.stderr == (f"eventlog: {log}: stdin line 2: bad_time: {field} '2026-12-02T09:00:00{offset}' has "
                           f"seconds in its UTC offset ({offset}), which ISO 8601 does not write and other tools "
                           "cannot read; write the time in an offset of hours and minutes (+hh:mm or -hh:mm)\n")
    assert not log.exists()


def test_serve_refuses_an_offset_with_seconds_as_append_does(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", [CREATED])
    server = start_server(log, tmp_path, via=["env", "TZ=UTC"])
    try:
        answer = server.client().post("/v1/events", content=jsonl(created("h1", "2026-12-02T09:00:00+05:45:30")))
    finally:
        assert server.stop() == 0, server.output()
    assert answer.status_code == 400, answer.text
    [said] = answer.json()["problems"]
    assert said.startswith("body line 1: bad_time: ts '2026-12-02T09:00:00+05:45:30' has seconds in its UTC "
                           "offset (+05:45:30)"), said
    assert len(lines(log)) == 1


#: Times Python reads and other tools' ISO 8601 and RFC 3339 parsers do not (a fuzzing review found each taken).
NOT_EXTENDED_FORM = ["2026-12-02T00:00:00.Z", "2026-12-02T00:00:00 +00:00", "2026-W49-3T00:00:00Z",
                     "20261202T000000+0530", "2026-12-02T01,5+05", "2026-12-02 00:00:00+00:00",
                     "2026-12-02t00:00:00Z", "2026-12-02T00:00:00+0530", "2026-12-02T00:00:00+05"]
FORM_EXPECTED = ("is not written in ISO 8601's extended form, which other tools cannot read; write it as "
                 "YYYY-MM-DDTHH:MM[:SS[.fraction]] followed by Z or an offset +hh:mm or -hh:mm "
                 "(e.g. 2026-12-02T09:00:00+05:45 or 2026-12-02T03:15:00Z)")


@pytest.mark.parametrize("field", ["ts", "deadline"])
@pytest.mark.parametrize("text", NOT_EXTENDED_FORM)
def test_append_refuses_a_time_not_in_the_extended_form_naming_line_field_and_form(tmp_path: Path, text: str,
                                                                                    field: str) -> None:
    log = tmp_path / "work.jsonl"
    done = append(log, created("h1", "2026-12-02T08:00:00+05:45"), {**created("h2", "2026-12-02T09:00:00Z"),
                                                                     field: text})
    assert done.returncode == 2, done.stderr  # append --help: 2 bad input
    assert done.stderr == f"eventlog: {log}: stdin line 2: bad_time: {field} {text!r} {FORM_EXPECTED}\n"
    assert not log.exists()


def test_serve_refuses_a_time_not_in_the_extended_form_as_append_does(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", [CREATED])
    server = start_server(log, tmp_path, via=["env", "TZ=UTC"])
    try:
        answers = [server.client().post("/v1/events", content=jsonl(created("h1", text)))
                   for text in NOT_EXTENDED_FORM]
    finally:
        assert server.stop() == 0, server.output()
    for text, answer in zip(NOT_EXTENDED_FORM, answers, strict=True):
        assert answer.status_code == 400, (text, answer.text)
        assert answer.json()["problems"] == [f"body line 1: bad_time: ts {text!r} {FORM_EXPECTED}"]
    assert len(lines(log)) == 1


@pytest.mark.parametrize("text", ["2026-12-02T09:00:00Z", "2026-12-02T09:00:00+05:45", "2026-12-02T09:00:00-00:00",
                                  "2026-12-02T09:00Z", "2026-12-02T09:00:00.5+05:45",
                                  "2026-12-02T09:00:00.123456789Z"])
def test_append_writes_a_time_in_the_extended_form_as_given(tmp_path: Path, text: str) -> None:
    log = tmp_path / "work.jsonl"
    done = append(log, created("h1", text, deadline=text))
    assert done.returncode == 0, done.stderr
    assert (lines(log)[0]["ts"], lines(log)[0]["deadline"]) == (text, text)


def test_assume_tz_writes_a_time_without_offset_in_the_extended_form(tmp_path: Path) -> None:
    """A time without offset in a form ISO 8601 does not write is written in the assumed zone, in the form."""
    log = tmp_path / "work.jsonl"
    done = append(log, created("h1", "2026-12-02 09:00:00", deadline="2026-12-02T17:00"), zone=KATHMANDU)
    assert done.returncode == 0, done.stderr
    assert (lines(log)[0]["ts"], lines(log)[0]["deadline"]) == ("2026-12-02T09:00:00+05:45",
                                                                "2026-12-02T17:00:00+05:45")


def test_a_log_already_holding_times_not_in_the_extended_form_reads_as_before(tmp_path: Path) -> None:
    """A writer's rule only: what an older appender wrote is read, and printed as written."""
    log = write_log(tmp_path / "old.jsonl", [{**created("h1", "2026-12-02 09:00:00 +05:45"), "seq": 1}])
    done = run_cli("replay", str(log), env=UTC_HOST)
    assert done.returncode == 0, done.stderr
    dump = json.loads(done.stdout)
    assert (dump["events"], dump["bad_lines"], dump["as_of"]) == (1, [], "2026-12-02 09:00:00 +05:45")


def test_a_log_already_holding_such_offsets_reads_as_before(tmp_path: Path) -> None:
    """A writer's rule only: the line an older appender wrote is an event, read as before."""
    log = write_log(tmp_path / "old.jsonl", [{**created("h1", "2026-12-02T09:00:00+05:45:30.5"), "seq": 1}])
    done = run_cli("replay", str(log), "--at", "2026-12-02T10:00:00+05:45", env=UTC_HOST)
    assert done.returncode == 0, done.stderr
    dump = json.loads(done.stdout)
    assert (dump["events"], dump["bad_lines"]) == (1, [])
    assert dump["handoffs"]["pending"]["oldest_age_s"] == 3630.5  # its offset read to the half second


#: Wall times a zone skipped or repeated: the zone, the time, as it is written, and the words for it.
CHANGED_WALL_TIMES = [
    (NEW_YORK, "2026-03-08T02:30:00", "2026-03-08T02:30:00-05:00",
     "is a wall time America/New_York skipped (its clocks went forward): written as 2026-03-08T02:30:00-05:00, in "
     "the offset before the change (the instant America/New_York calls 2026-03-08T03:30:00-04:00)"),
    (NEW_YORK, "2026-11-01T01:30:00", "2026-11-01T01:30:00-04:00",
     "occurs twice in America/New_York (its clocks went back): written as 2026-11-01T01:30:00-04:00, the first of "
     "the two (the second is 2026-11-01T01:30:00-05:00)"),
    ("Australia/Lord_Howe", "2026-10-04T02:15:00", "2026-10-04T02:15:00+10:30",
     "is a wall time Australia/Lord_Howe skipped (its clocks went forward): written as 2026-10-04T02:15:00+10:30, "
     "in the offset before the change (the instant Australia/Lord_Howe calls 2026-10-04T02:45:00+11:00)"),
]


@pytest.mark.parametrize(("zone", "wall", "written", "said"), CHANGED_WALL_TIMES)
def test_append_says_a_wall_time_the_zone_skipped_or_repeated(tmp_path: Path, zone: str, wall: str, written: str,
                                                              said: str) -> None:
    log = tmp_path / "work.jsonl"
    done = append(log, created("h1", "2026-06-01T09:00:00"), created("h2", wall), zone=zone)
    assert done.returncode == 0, done.stderr
    assert [line["ts"] for line in lines(log)][1] == written  # the writer's time as given, in the rule's offset
    notes = [line for line in done.stderr.splitlines() if "stdin line" in line]
    assert notes == [f"eventlog: {log}: stdin line 2 (seq 2): ts '{wall}' {said}; give the offset in the input if "
                     "another was meant"]


@pytest.mark.parametrize(("zone", "wall", "written", "said"), CHANGED_WALL_TIMES)
@pytest.mark.parametrize("command", [["replay"], ["status", "--json"], ["catchup", "--dry-run"]])
def test_an_at_the_zone_skipped_or_repeated_is_said_as_a_line_is(tmp_path: Path, zone: str, wall: str, written: str,
                                                                 said: str, command: list[str]) -> None:
    """`--at TIME` without an offset is read in `--assume-tz`'s zone (--help); one the zone skipped or repeated was
    taken in silence by the views and runners, where a line at that time is said. The same reading (the offset
    before the change: the dump's as_of) and the same words, once, on stderr; stdout and the exit as before."""
    log = write_log(tmp_path / "l.jsonl", [{**created("h1", "2026-01-05T09:00:00+00:00"), "seq": 1}])
    given = run_cli(command[0], str(log), *command[1:], "--assume-tz", zone, "--at", wall)
    offset = run_cli(command[0], str(log), *command[1:], "--assume-tz", zone, "--at", written)
    assert given.returncode == offset.returncode
    if command[0] != "catchup":  # catch-up names the zone of its day only for a time in the zone's own offset
        assert given.stdout == offset.stdout
    if command == ["replay"]:
        assert json.loads(given.stdout)["as_of"] == written
    note = f"eventlog: --at '{wall}' {said.replace('written as', 'judged as of')}; give the offset in --at if " \
           "another was meant"
    assert given.stderr.splitlines().count(note) == 1, given.stderr
    assert given.stderr.replace(note + "\n", "", 1) == offset.stderr
    assert "--at" not in run_cli("replay", str(log), "--assume-tz", zone, "--at", "2026-06-01T09:00:00").stderr
