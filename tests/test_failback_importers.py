"""``eventlog import ledger|handoff-files|circuit``: what seed 000's and seed 002's users already have, into a log."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests.conftest import ROOT, run_cli, write_log

FIX = ROOT / "fixtures"
J = "+09:00"
#: The zone mtimes are written in (the tests' files say JST times).
TOKYO = ("--assume-tz", "Asia/Tokyo")
NOTHING = "0 event(s) imported, 1 already in the log\n"

#: Seed 000's ledger entry, exactly as the seed shows it.
SEED_LEDGER = {
    "account": "cloud-account-a",
    "limitedAt": "2026-08-03T01:20:00+09:00",
    "resetAt": "2026-08-03T17:00:00+09:00",
    "source": "parsed-limit-message",
    "confidence": "explicit",
}


def t(clock: str, day: str = "2026-08-03") -> str:
    return f"{day}T{clock}{J}"


def lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def replay(log: Path, at: str | None = None) -> dict[str, Any]:
    out = run_cli("replay", str(log), *(["--at", at] if at else []))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def put(path: Path, text: str, when: str | None = None) -> Path:
    path.write_text(text)
    if when is not None:
        stamp = datetime.fromisoformat(when).timestamp()
        os.utime(path, (stamp, stamp))
    return path


# --- the ledger -------------------------------------------------------------------------------


def test_the_seeds_ledger_entry_becomes_the_accounts_limit_and_once_only(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", [
        {"type": "handoff_created", "ts": t("01:21:00"), "handoff_id": "h1", "account": "cloud-account-a"}])
    ledger = put(tmp_path / "ledger.json", json.dumps(SEED_LEDGER, indent=2))
    out = run_cli("import", "ledger", str(log), str(ledger), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["imported"] == 1
    limit = lines(log)[-1]
    assert limit == {**limit, "type": "limit_recorded", "ts": SEED_LEDGER["limitedAt"], "account": "cloud-account-a",
                     "limited_at": SEED_LEDGER["limitedAt"], "reset_at": SEED_LEDGER["resetAt"],
                     "source": "parsed-limit-message", "confidence": "explicit"}
    # The watcher now waits for the account's real reset, not a fixed 12 hours (seed 000).
    plan = replay(log, t("10:00:00"))["handoffs"]["probe_plan"]["cloud-account-a"]
    assert plan == {"probe": False, "reason": "waiting_reset", "next_probe_at": SEED_LEDGER["resetAt"]}
    again = run_cli("import", "ledger", str(log), str(ledger))
    assert again.returncode == 0 and again.stdout == "0 event(s) imported, 1 already in the log\n"
    assert len(lines(log)) == 2


def test_a_list_or_json_lines_in_time_order_older_ones_left(tmp_path: Path) -> None:
    log = tmp_path / "work.jsonl"
    later = {**SEED_LEDGER, "limitedAt": t("09:00:00"), "resetAt": None, "confidence": "unknown",
             "source": "no reset time stated"}
    put(tmp_path / "a.json", json.dumps([later, SEED_LEDGER]))
    out = run_cli("import", "ledger", str(log), str(tmp_path / "a.json"))
    assert out.returncode == 0, out.stderr
    assert [e["limited_at"] for e in lines(log)] == [SEED_LEDGER["limitedAt"], t("09:00:00")]
    assert lines(log)[1]["reset_at"] is None
    # JSON Lines, with snake_case keys; an entry older than the account's latest is left, and said.
    older = {"account": "cloud-account-a", "limited_at": t("05:00:00"), "reset_at": t("06:00:00"),
             "source": "parsed-limit-message", "confidence": "explicit"}
    other = {**older, "account": "cloud-account-b"}
    put(tmp_path / "b.jsonl", json.dumps(older) + "\n\n" + json.dumps(other) + "\n")
    out = run_cli("import", "ledger", str(log), str(tmp_path / "b.jsonl"))
    assert out.returncode == 0
    assert out.stderr == (f"eventlog: left: {tmp_path / 'b.jsonl'}:1: the limit of account cloud-account-a at "
                          f"{t('05:00:00')} is older than the account's latest in the log ({t('09:00:00')})\n")
    assert [(e["account"], e["limited_at"]) for e in lines(log)[2:]] == [("cloud-account-b", t("05:00:00"))]


def test_bad_entries_are_named_and_the_rest_imported(tmp_path: Path) -> None:
    log = tmp_path / "work.jsonl"
    entries = [
        SEED_LEDGER,
        {**SEED_LEDGER, "account": ""},
        {**SEED_LEDGER, "confidence": "sure"},
        {**SEED_LEDGER, "limitedAt": "2026-08-03T02:00:00"},
        "not an object",
    ]
    ledger = put(tmp_path / "ledger.json", json.dumps(entries))
    out = run_cli("import", "ledger", str(log), str(ledger))
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        f"eventlog: {ledger}: entry 2: no account",
        f"eventlog: {ledger}: entry 3: confidence 'sure' is not explicit, estimated or unknown",
        f"eventlog: {ledger}: entry 4: time '2026-08-03T02:00:00' has no UTC offset (give --assume-tz)",
        f"eventlog: {ledger}: entry 5: not a JSON object",
    ]
    assert len(lines(log)) == 1
    zoned = run_cli("import", "ledger", str(log), str(ledger), "--assume-tz", "Asia/Tokyo")
    assert lines(log)[-1]["limited_at"] == t("02:00:00") and zoned.returncode == 1
    missing = run_cli("import", "ledger", str(log), str(tmp_path / "none.json"))
    assert missing.returncode == 1 and "cannot read" in missing.stderr


# --- the legacy handoff files ----------------------------------------------------------------


def legacy_dir(tmp: Path) -> Path:
    """Seed 000's old watcher's files: started locally or not, a .resumed that proves nothing, skips."""
    d = tmp / "handoffs"
    d.mkdir()
    record = {"account": "cloud-account-a", "repo": "team/app", "branch": "main", "head": "abc1234"}
    put(d / "h1.json", json.dumps({**record, "handoffId": "h1", "createdAt": t("01:00:00"),
                                    "localStartedAt": t("01:02:00")}))
    put(d / "h1.resumed", "", t("18:00:00"))
    put(d / "h2.json", json.dumps({**record, "createdAt": t("01:10:00"), "localStarted": True,
                                    "deadline": t("20:00:00"), "importance": 2}))
    put(d / "h3.json", json.dumps({**record, "created_at": t("01:20:00"), "localStartError": "no local slot"}))
    put(d / "h4.json", json.dumps({**record, "createdAt": "2026-07-20T09:00:00+09:00", "localStarted": True}))
    put(d / "h4.skip", "before the mechanism existed\n", t("12:00:00"))
    put(d / "h5.json", json.dumps({**record, "createdAt": t("01:30:00"), "localStarted": True}))
    put(d / "h5.resumed", "", t("18:10:00"))
    put(d / "h5.skip", "", t("19:00:00"))
    put(d / "notes.txt", "not a handoff file")
    return d


def test_legacy_files_map_conservatively_and_the_log_is_the_fixture(tmp_path: Path) -> None:
    log = tmp_path / "work.jsonl"
    put(tmp_path / "ledger.json", json.dumps(SEED_LEDGER))
    assert run_cli("import", "ledger", str(log), str(tmp_path / "ledger.json")).returncode == 0
    out = run_cli("import", "handoff-files", str(log), str(legacy_dir(tmp_path)), "--assume-tz", "Asia/Tokyo", "--json")
    assert out.returncode == 0, out.stderr
    # The markers' mtimes are written in the zone given; the envelope's bookkeeping is the appender's.
    written = [{k: v for k, v in e.items() if k not in ("seq", "batch_end")} for e in lines(log)]
    fixture = FIX / "handoffs_legacy_import.jsonl"
    assert written == [json.loads(line) for line in fixture.read_text().splitlines()]
    h = replay(log)["handoffs"]
    # 4 of 5 started locally, none returned: the .resumed markers prove nothing came back.
    assert h["failover"] == {"started": 4, "total": 5} and h["failback"] == {"returned": 0, "total": 5}
    assert h["items"]["h1"]["state"] == "needs_human" and h["items"]["h3"]["state"] == "pending"
    assert h["needs_human_reasons"] == {"legacy_resumed_unverified": 1}
    assert h["skip_reasons"] == {"before the mechanism existed": 1, "legacy .skip marker": 1}
    again = run_cli("import", "handoff-files", str(log), str(tmp_path / "handoffs"))
    assert again.returncode == 0 and again.stdout == "0 event(s) imported, 9 already in the log\n"  # 5 files, 4 markers
    assert len(lines(log)) == len(written)


def seed_dir(tmp: Path) -> Path:
    """The user review's directory: h01 (deadline, importance), and h02, started locally, with a .resumed marker."""
    d = tmp / "hd"
    d.mkdir()
    put(d / "h01.json", json.dumps({"handoffId": "h01", "account": "cloud-account-a", "createdAt": t("01:00:00"),
                                    "deadline": t("23:00:00"), "importance": 1}))
    put(d / "h02.json", json.dumps({"handoffId": "h02", "account": "cloud-account-a", "createdAt": t("01:10:00"),
                                    "localStarted": True}))
    put(d / "h02.resumed", "", t("18:00:00"))
    return d


def test_a_person_requeue_is_not_undone_by_the_next_import(tmp_path: Path) -> None:
    """A .resumed marker is applied once: the log's needs_human dated with its mtime is its effect (DECISIONS.md)."""
    log, d = tmp_path / "g2.jsonl", seed_dir(tmp_path)
    assert run_cli("import", "handoff-files", str(log), str(d), *TOKYO).returncode == 0
    assert replay(log)["handoffs"]["items"]["h02"]["state"] == "needs_human"
    explain = run_cli("explain", str(log), "h02")
    assert f"eventlog handoff requeue {log} h02 --reason" in explain.stdout, explain.stdout
    requeue = run_cli("handoff", "requeue", str(log), "h02", "--reason", "checked by hand: nothing came back")
    assert requeue.returncode == 0, requeue.stderr
    written = lines(log)
    for zone in (TOKYO, TOKYO, ("--assume-tz", "UTC")):  # the marker's mtime in another zone is the same instant
        again = run_cli("import", "handoff-files", str(log), str(d), *zone)
        assert again.returncode == 0, again.stderr
        assert again.stdout == "0 event(s) imported, 3 already in the log\n"  # 2 files, 1 marker
        assert lines(log) == written
    assert replay(log)["handoffs"]["items"]["h02"]["state"] == "pending"


def requeued(tmp_path: Path) -> tuple[Path, Path]:
    """seed_dir imported (h02.resumed at 18:00 applied), then h02 requeued by a person."""
    log, d = tmp_path / "g2.jsonl", seed_dir(tmp_path)
    assert run_cli("import", "handoff-files", str(log), str(d), *TOKYO).returncode == 0
    assert run_cli("handoff", "requeue", str(log), "h02", "--reason", "checked by hand").returncode == 0
    return log, d


@pytest.mark.parametrize("how", ["cp -r", "touch", "restored"])
def test_a_marker_of_another_time_never_undoes_a_person_requeue(tmp_path: Path, how: str) -> None:
    """The review's run: the handoff files copied without their mtimes (or touched, or restored from a backup),
    then imported: a new needs_human after the person's requeue, exit 0, "1 event(s) imported". The same marker with
    another mtime cannot be told from one the old watcher placed again: named with both times, not applied."""
    log, d = requeued(tmp_path)
    written = lines(log)
    if how == "cp -r":
        shutil.copytree(d, tmp_path / "hd2", copy_function=shutil.copy)  # contents and mode, not the mtimes
        d = tmp_path / "hd2"
    else:
        put(d / "h02.resumed", "", None if how == "touch" else t("12:00:00"))
    marker = (d / "h02.resumed").stat().st_mtime
    when = datetime.fromtimestamp(marker).astimezone(ZoneInfo("Asia/Tokyo")).isoformat()
    for _ in (1, 2):
        out = run_cli("import", "handoff-files", str(log), str(d), *TOKYO, "--json")
        assert out.returncode == 1, out.stderr
        report = json.loads(out.stdout)
        said = (f"{d / 'h02'}.resumed: the marker's time is {when}, the log applied one at {t('18:00:00')}; h02 is "
                "pending again since (a person requeued it): not applied")
        assert report["changed_markers"] == [said] and report["imported"] == 0
        assert f"eventlog: changed: {said}\n" in out.stderr
        assert lines(log) == written
    assert replay(log)["handoffs"]["items"]["h02"]["state"] == "pending"
    people = run_cli("import", "handoff-files", str(log), str(d), *TOKYO)
    assert people.stdout == ("0 event(s) imported, 2 already in the log, 1 .resumed marker(s) of another time than "
                             "the log applied (not applied)\n")
    # The marker was the same one: the command stderr gives puts its time back, and the next import is quiet.
    touch = next(line for line in people.stderr.splitlines() if "put back the time the log applied" in line)
    assert touch.endswith(f"touch -d 2026-08-03T09:00:00Z {d / 'h02'}.resumed")
    subprocess.run(touch.rsplit(": ", 1)[1], shell=True, check=True)
    quiet = run_cli("import", "handoff-files", str(log), str(d), *TOKYO)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "0 event(s) imported, 3 already in the log\n", "")
    assert lines(log) == written


def test_a_marker_placed_again_is_applied_once_a_person_says_so(tmp_path: Path) -> None:
    """The old watcher placed h02.resumed again at 21:00 (it started the cloud session once more): a person who
    knows it types the command stderr gives; the marker is then applied, once."""
    log, d = requeued(tmp_path)
    put(d / "h02.resumed", "", t("21:00:00"))
    out = run_cli("import", "handoff-files", str(log), str(d), *TOKYO)
    assert out.returncode == 1
    cmd = (f"eventlog import handoff-files {log} {d} --apply-resumed h02 --assume-tz Asia/Tokyo")
    assert (f"eventlog: h02: if the old watcher started the cloud session again (it places h02.resumed before each "
            f"start), hand it to a person: {cmd}; if the marker was only copied") in out.stderr
    applied = run_cli(*cmd.split()[1:], "--json")
    assert applied.returncode == 0, applied.stderr
    assert json.loads(applied.stdout)["imported"] == 1 and lines(log)[-1] == {
        **lines(log)[-1], "type": "needs_human", "ts": t("21:00:00"), "reason": "legacy_resumed_unverified"}
    assert replay(log)["handoffs"]["items"]["h02"]["state"] == "needs_human"
    again = run_cli("import", "handoff-files", str(log), str(d), *TOKYO)
    assert (again.returncode, again.stdout) == (0, "0 event(s) imported, 3 already in the log\n")
    # the person requeues it once more: each of the two markers is applied already
    assert run_cli("handoff", "requeue", str(log), "h02", "--reason", "checked again").returncode == 0
    for when in ("18:00:00", "21:00:00"):
        put(d / "h02.resumed", "", t(when))
        assert run_cli("import", "handoff-files", str(log), str(d), *TOKYO).stdout.startswith("0 event(s) imported, 3")
    unknown = run_cli("import", "handoff-files", str(log), str(d), *TOKYO, "--apply-resumed", "h09")
    assert unknown.returncode == 0 and (f"eventlog: --apply-resumed h09: {d} holds no h09.resumed of another time "
                                        "than the one") in unknown.stderr


def test_a_second_file_of_one_handoff_id_is_named_and_the_rest_imported(tmp_path: Path) -> None:
    log, d = tmp_path / "g3.jsonl", seed_dir(tmp_path)
    original = json.loads((d / "h01.json").read_text())
    put(d / "h01 (copy).json", json.dumps({**original, "importance": 7}))
    put(d / "a-copy.json", json.dumps({**original, "importance": 8}))  # sorts first; h01.json is still the one kept
    put(d / "h01 (copy).resumed", "", t("19:00:00"))
    for run in (1, 2):
        out = run_cli("import", "handoff-files", str(log), str(d), *TOKYO, "--json")
        assert out.returncode == 1, out.stderr
        said = [f"{d / name}.json: handoffId h01 is given by {d / 'h01'}.json already: left out, with its markers "
                "(remove the copy, or give it its own handoffId)" for name in ("a-copy", "h01 (copy)")]
        report = json.loads(out.stdout)
        assert report["problems"] == said and out.stderr.splitlines() == [f"eventlog: {x}" for x in said]
        assert report["imported"] == (4 if run == 1 else 0)
    assert [(e["type"], e["handoff_id"]) for e in lines(log)] == [
        ("handoff_created", "h01"), ("handoff_created", "h02"), ("local_started", "h02"), ("needs_human", "h02")]
    assert lines(log)[0]["importance"] == 1
    assert replay(log)["handoffs"]["items"]["h01"]["state"] == "pending"  # the copy's .resumed was not applied


def test_a_changed_field_of_a_handoff_file_is_named_not_already(tmp_path: Path) -> None:
    log, d = tmp_path / "g2.jsonl", seed_dir(tmp_path)
    assert run_cli("import", "handoff-files", str(log), str(d), *TOKYO).returncode == 0
    written = lines(log)
    # The same deadline in another offset is the same instant: not a change.
    put(d / "h01.json", json.dumps({"handoffId": "h01", "account": "cloud-account-b", "createdAt": t("01:00:00"),
                                    "deadline": "2026-08-03T14:00:00+00:00", "importance": 5}))
    put(d / "h02.json", json.dumps({"handoffId": "h02", "account": "cloud-account-a", "createdAt": t("01:10:00"),
                                    "localStarted": True, "deadline": t("20:00:00")}))
    out = run_cli("import", "handoff-files", str(log), str(d), *TOKYO, "--json")
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    assert report["changed"] == [
        f"{d / 'h01'}.json: account: the log has \"cloud-account-a\", the file \"cloud-account-b\"",
        f"{d / 'h01'}.json: importance: the log has 1, the file 5",
        f"{d / 'h02'}.json: deadline: the log has none, the file \"{t('20:00:00')}\"",
    ]
    assert report["already"] == 1 and report["imported"] == 0  # h02.resumed only: both files differ
    assert lines(log) == written  # the log keeps its own
    people = run_cli("import", "handoff-files", str(log), str(d), *TOKYO)
    assert people.stdout == ("0 event(s) imported, 1 already in the log, 3 field(s) differing from the log "
                             "(kept as the log has them)\n")
    assert f"eventlog: changed: {d / 'h01'}.json: importance: the log has 1, the file 5" in people.stderr
    assert (f"eventlog: h01: the log keeps its values (no event changes a handoff's fields once created): to take "
            f"the file's, eventlog handoff skip {log} h01 --reason '<why it is handed off anew>' and hand the work "
            f"off again under a new handoffId; else put the log's values back in {d / 'h01'}.json") in people.stderr
    assert run_cli("handoff", "skip", str(log), "h01", "--reason", "handed off anew as h01b").returncode == 0
    closed = run_cli("import", "handoff-files", str(log), str(d), *TOKYO)
    assert closed.returncode == 1
    assert (f"h01 is skipped: its fields order no claim any more; put the log's values back in {d / 'h01'}.json "
            "to silence this") in closed.stderr


def test_a_marker_of_a_handoff_the_log_moved_on_is_left(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", [
        {"type": "handoff_created", "ts": t("01:00:00"), "handoff_id": "h1", "account": "cloud-account-a"},
        {"type": "claimed", "ts": t("10:00:00"), "handoff_id": "h1", "watcher": "w1", "attempt": 1},
    ])
    d = tmp_path / "handoffs"
    d.mkdir()
    put(d / "h1.resumed", "", t("18:00:00"))
    put(d / "h1.skip", "obsolete", t("18:00:00"))
    put(d / "h9.resumed", "", t("18:00:00"))
    out = run_cli("import", "handoff-files", str(log), str(d))
    assert out.returncode == 1  # h9: a marker with nothing to apply it to
    assert out.stderr.splitlines() == [
        "eventlog: left: h1.resumed: h1 is claimed in the log",
        "eventlog: left: h1.skip: h1 is claimed in the log",
        "eventlog: h9: a marker but no h9.json and no such handoff in the log",
    ]
    assert len(lines(log)) == 2


def test_a_handoff_file_without_an_account(tmp_path: Path) -> None:
    log = tmp_path / "work.jsonl"
    d = tmp_path / "handoffs"
    d.mkdir()
    put(d / "h1.json", json.dumps({"createdAt": t("01:00:00")}))
    put(d / "h2.json", "{not json")
    out = run_cli("import", "handoff-files", str(log), str(d))
    assert out.returncode == 1
    assert f"{d / 'h1.json'}: no account (give --account for files without one)" in out.stderr
    assert f"{d / 'h2.json'}: " in out.stderr
    out = run_cli("import", "handoff-files", str(log), str(d), "--account", "cloud-account-z")
    assert lines(log)[0] == {**lines(log)[0], "handoff_id": "h1", "account": "cloud-account-z"}
    assert run_cli("import", "handoff-files", str(log), str(tmp_path / "nodir")).returncode == 2


def test_a_directory_without_handoff_files_says_so(tmp_path: Path) -> None:
    """As import launchd: exit 0 (nothing failed), and stderr says the directory held nothing to import."""
    d = tmp_path / "empty"
    d.mkdir()
    put(d / "notes.txt", "not a handoff file")
    out = run_cli("import", "handoff-files", str(tmp_path / "work.jsonl"), str(d), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["imported"] == 0
    assert f"{d} holds no handoff file (ID.json, ID.resumed, ID.skip): nothing to import" in out.stderr
    full = run_cli("import", "handoff-files", str(tmp_path / "work.jsonl"), str(legacy_dir(tmp_path)),
                   "--assume-tz", "Asia/Tokyo")
    assert "nothing to import" not in full.stderr


# --- the guard's circuit --------------------------------------------------------------------


def test_the_circuit_state_file_opens_and_closes_once_each(tmp_path: Path) -> None:
    log = write_log(tmp_path / "jobs.jsonl", [
        {"type": "job_registered", "ts": "2026-08-21T07:00:00+09:00", "label": "com.lily.post", "guarded": True,
         "calendar": [{"Hour": 9, "Minute": 0}], "interval_s": None},
        {"type": "job_skipped", "ts": "2026-08-21T09:00:05+09:00", "label": "com.lily.post", "reason": "quota",
         "remaining_s": 3595},
    ])
    state = put(tmp_path / "circuit.json", json.dumps({"open_until": "2026-08-21T10:00:00+09:00",
                                                       "reason": "quota exhausted"}), "2026-08-21T08:55:00+09:00")
    out = run_cli("import", "circuit", str(log), str(state), *TOKYO)
    assert out.returncode == 0, out.stderr
    assert lines(log)[-1] == {**lines(log)[-1], "type": "circuit_opened", "ts": "2026-08-21T08:55:00+09:00",
                              "reason": "quota exhausted", "open_until": "2026-08-21T10:00:00+09:00"}
    catchup = replay(log, "2026-08-21T09:30:00+09:00")["catchup"]
    assert catchup == {**catchup, "circuit": "open", "probe": False}
    assert run_cli("import", "circuit", str(log), str(state), *TOKYO).stdout == NOTHING
    # The guard closes it early: the state file says so.
    put(state, json.dumps({"state": "closed", "open_until": None}), "2026-08-21T09:20:00+09:00")
    assert run_cli("import", "circuit", str(log), str(state), *TOKYO).returncode == 0
    assert lines(log)[-1] == {**lines(log)[-1], "type": "circuit_closed", "ts": "2026-08-21T09:20:00+09:00"}
    catchup = replay(log, "2026-08-21T09:30:00+09:00")["catchup"]
    assert catchup == {**catchup, "circuit": "closed", "probe": True, "candidates": ["com.lily.post"]}
    assert run_cli("import", "circuit", str(log), str(state), *TOKYO).stdout == NOTHING
    assert len(lines(log)) == 4


def test_circuit_epochs_are_written_in_the_zone(tmp_path: Path) -> None:
    log = tmp_path / "jobs.jsonl"
    until = int(datetime.fromisoformat("2026-08-21T10:00:00+09:00").timestamp())
    state = put(tmp_path / "c.json", json.dumps({"open_until": until, "opened_at": until - 3600}))
    assert run_cli("import", "circuit", str(log), str(state), "--assume-tz", "Asia/Tokyo").returncode == 0
    assert lines(log)[0] == {**lines(log)[0], "ts": "2026-08-21T09:00:00+09:00", "reason": "quota",
                             "open_until": "2026-08-21T10:00:00+09:00"}


@pytest.mark.parametrize("text", ["[]", '{"state": "half", "open_until": 1}', "{nope", '{"open_until": "soon"}'])
def test_a_bad_circuit_file_is_named(tmp_path: Path, text: str) -> None:
    state = put(tmp_path / "c.json", text)
    out = run_cli("import", "circuit", str(tmp_path / "jobs.jsonl"), str(state))
    assert out.returncode == 1 and out.stderr.startswith(f"eventlog: cannot read {state}: ")
    assert not (tmp_path / "jobs.jsonl").exists()
