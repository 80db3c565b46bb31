"""One command-line grammar: LOG first, --at and --assume-tz, durations with units, unknown ids, exit codes
in every --help, --version, and control characters never printed raw."""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from eventlog.cli import build_parser
from eventlog.cli.common import escape, parse_duration
from eventlog.clock import LAST_LINE, NOW, At, parse_at
from tests.conftest import ROOT, run_cli, write_log

FIX = ROOT / "fixtures"
AT_CLOSE = "2026-12-02T05:00:00Z"


# --- durations ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "seconds"), [
    ("90m", 5400), ("8h", 28800), ("30s", 30), ("1h30m", 5400), ("2d", 172800), ("1d2h3m4s", 93784),
    ("1.5h", 5400), ("1800", 1800), ("0.5", 0.5), ("0", 0), (" 45m ", 2700),
])
def test_durations_with_units(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "30m1h", "1h 30m", "8 hours", "-5", "nan", "inf", "1e999", "90M", "5ms"])
def test_what_is_no_duration(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_a_bad_duration_is_bad_usage() -> None:
    out = run_cli("failback", str(FIX / "log_empty.jsonl"), "--probe-cmd", "p", "--resume-cmd", "r",
                  "--stale-after", "soon")
    assert out.returncode == 2
    assert "--stale-after: 'soon' is not a duration (e.g. 90m, 8h, 1h30m, 30s, 2d" in out.stderr


# --- --at ----------------------------------------------------------------------------------------


def test_parse_at() -> None:
    assert parse_at(None) == NOW
    assert parse_at(None, default=LAST_LINE) == LAST_LINE
    assert parse_at("log") == LAST_LINE and parse_at(" LOG ") == LAST_LINE
    t = "2026-08-03T10:00:00+09:00"
    assert parse_at(t) == At(datetime.fromisoformat(t), t)
    tokyo = parse_at("2026-08-03T10:00:00", ZoneInfo("Asia/Tokyo"))
    assert tokyo.text == t and tokyo.time is not None and tokyo.time.utcoffset() == timedelta(hours=9)
    with pytest.raises(ValueError, match="no UTC offset"):
        parse_at("2026-08-03T10:00:00")
    with pytest.raises(ValueError, match="not an ISO 8601 time"):
        parse_at("noon")


def test_at_resolves_now_a_time_or_the_last_line() -> None:
    last = datetime(2026, 8, 3, 1, 0, tzinfo=UTC)
    assert LAST_LINE.resolve(last, "as written") == (last, "as written")
    assert At(last, "x").resolve(None, None) == (last, "x")
    before = datetime.now().astimezone()
    when, text = NOW.resolve(last, "as written")
    assert when is not None and when >= before and text == when.isoformat()


def test_live_views_judge_now_and_at_log_is_the_replay(tmp_path: Path) -> None:
    # one pending handoff; the watcher ran (period 900 s) at the last line: not late as of the log, late now
    log = write_log(tmp_path / "dead.jsonl", [
        {"type": "handoff_created", "ts": "2026-08-03T08:00:00+09:00", "handoff_id": "h1", "account": "a"},
        {"type": "watcher_run", "ts": "2026-08-03T08:00:01+09:00", "watcher": "w", "exit": "ok", "period_s": 900},
    ])
    as_of_log = run_cli("status", str(log), "--at", "log")
    assert as_of_log.returncode == 0 and "Nothing needs a person." in as_of_log.stdout
    started = datetime.now().astimezone()
    now = run_cli("status", str(log), "--json")
    assert now.returncode == 1
    judged = json.loads(now.stdout)
    assert datetime.fromisoformat(judged["as_of"]) >= started
    assert [(g["reason_code"], [i["id"] for i in g["items"]]) for g in judged["groups"]] == [("watcher_late", ["w"])]
    replayed = json.loads(run_cli("replay", str(log)).stdout)  # the replay is unchanged: the last line
    assert replayed["as_of"] == "2026-08-03T08:00:01+09:00" and replayed["handoffs"]["watcher"]["late"] is False
    at = run_cli("explain", str(log), "h1", "--json", "--at", "2026-08-03T08:10:00+09:00")
    assert json.loads(at.stdout)["as_of"] == "2026-08-03T08:10:00+09:00"


def test_status_pinned_in_process_by_freezegun(capsys: pytest.CaptureFixture[str]) -> None:
    from freezegun import freeze_time

    from eventlog.cli import main

    with freeze_time("2026-08-03T02:00:00+00:00"):
        status = main(["status", str(FIX / "handoffs_watcher_stopped.jsonl"), "--json"])
    judged = json.loads(capsys.readouterr().out)
    assert judged["as_of"] == "2026-08-03T02:00:00+00:00"
    assert status == (1 if judged["needs_person"] else 0) and judged["needs_person"] == sum(
        g["count"] for g in judged["groups"])


# --- --help, --version ---------------------------------------------------------------------------


def _subcommands() -> list[list[str]]:
    out: list[list[str]] = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, [*path, name])
                return
        out.append(path)

    walk(build_parser(), [])
    return out


def test_every_subcommand_help_lists_its_exit_codes_in_clean_text() -> None:
    commands = _subcommands()
    assert ["import", "launchd"] in commands and ["failback"] in commands and len(commands) >= 16
    for path in commands:
        out = run_cli(*path, "--help")
        assert out.returncode == 0, path
        assert "exit status:\n  0 " in out.stdout, path
        assert re.search(r"^  4 +(stdout could not be written|written, but stdout|the decision was written)",
                         out.stdout, re.M), (path, out.stdout)  # the output lost: the same 4 everywhere
        assert not re.search(r"``|:(func|mod|class|meth|data|attr):", out.stdout), (path, out.stdout)


def test_log_is_the_first_positional_argument() -> None:
    for path in _subcommands():
        # no log (schema; keys add|list|remove edit a key file); import-log FILE LOG copies a file into a stream
        if path in (["schema"], ["import-log"]) or path[0] == "keys":
            continue
        text = run_cli(*path, "--help").stdout
        positional = text.split("positional arguments:\n", 1)[1].split("\n")[0].split()
        assert positional[0] == "LOG", (path, text)


def _positionals(path: list[str]) -> list[str]:
    """The metavars of a subcommand's positional arguments, in order."""
    parser = build_parser()
    for name in path:
        (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = sub.choices[name]
    return [str(a.metavar) for a in parser._actions if not a.option_strings and not isinstance(
        a, argparse._SubParsersAction)]


@pytest.mark.parametrize("log", ["", "  "])
def test_every_command_refuses_an_empty_log_and_names_ledger_log(log: str) -> None:
    """The units pass ${LEDGER_LOG}: empty when ledger.env misses or misspells it. Runners said `cannot read : no
    such log`, serve served the working directory and follow exported log="": now every command that takes a LOG
    refuses an empty one at parse time, exit 2, naming the variable."""
    checked = []
    for path in _subcommands():
        names = _positionals(path)
        if "LOG" not in names:
            continue
        argv = [*path, *(log if n == "LOG" else "x" for n in names)]
        out = run_cli(*argv)
        assert out.returncode == 2, (argv, out.stdout, out.stderr)
        assert "LOG is empty (is LEDGER_LOG set in ledger.env?)" in out.stderr, (argv, out.stderr)
        checked.append(path)
    assert {"follow", "serve", "status", "catchup", "failback", "lanes", "replay", "export"} <= {p[0] for p in checked}
    assert len(checked) >= 20


def test_version() -> None:
    out = run_cli("--version")
    assert out.returncode == 0 and re.fullmatch(r"eventlog \d+\.\d+\.\d+\n", out.stdout)


# --- an unknown id is the same everywhere -------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["explain", "{log}", "nobody"],
    ["explain", "{log}", "nobody", "--json"],
    ["sessions", "{log}", "nobody"],
    ["sessions", "{log}", "nobody", "--json"],
    ["decide", "{log}", "nobody", "--decision", "close", "--expected-revision", "0", "--idempotency-key", "k",
     "--reason", "r"],
])
def test_an_unknown_id_is_one_line_on_stderr_and_exit_2(tmp_path: Path, args: list[str]) -> None:
    log = tmp_path / "s.jsonl"
    log.write_bytes((FIX / "sessions_close.jsonl").read_bytes())
    before = log.read_bytes()
    out = run_cli(*[a.replace("{log}", str(log)) for a in args])
    assert out.returncode == 2 and out.stdout == ""
    [line] = out.stderr.splitlines()
    assert line.startswith(f"eventlog: {log}: no ") and "'nobody'" in line
    assert log.read_bytes() == before


# --- positionals and options in any order, every command alike ----------------------------------------


@pytest.mark.parametrize("command", ["explain", "sessions"])
@pytest.mark.parametrize("order", [["{log}", "s-close", "--json"], ["{log}", "--json", "s-close"],
                                   ["--json", "{log}", "s-close"], ["{log}", "--at", AT_CLOSE, "--json", "s-close"]])
def test_the_id_may_come_before_or_after_the_options(command: str, order: list[str]) -> None:
    """``sessions LOG --json S1`` said "unrecognized arguments: S1" (exit 2) where ``explain LOG --json S1`` worked:
    argparse gave the optional SESSION nothing at LOG."""
    log = str(FIX / "sessions_close.jsonl")
    want = run_cli(command, log, "s-close", "--json", "--at", AT_CLOSE)
    assert want.returncode == 0 and json.loads(want.stdout)["as_of"] == AT_CLOSE, want.stderr
    got = run_cli(command, *[log if a == "{log}" else a for a in order], "--at", AT_CLOSE)
    assert (got.returncode, got.stdout, got.stderr) == (0, want.stdout, want.stderr)


def test_replay_takes_logs_among_its_options() -> None:
    """``replay`` LOG... is a positional that may be left out, as ``sessions``' SESSION: one after an option was
    refused too."""
    logs = [str(FIX / "log_empty.jsonl"), str(FIX / "lanes_no_status.jsonl")]
    got = run_cli("replay", "--strict", logs[0], "--check", logs[1])
    assert (got.returncode, got.stdout, got.stderr) == (0, f"ok       {logs[0]}\nok       {logs[1]}\n", "")


@pytest.mark.parametrize("command", ["explain", "sessions"])
def test_the_printed_dash_dash_form_works_for_an_id_and_log_starting_with_a_dash(command: str, tmp_path: Path) -> None:
    """The views print ``eventlog sessions -- LOG ID`` when LOG or ID starts with '-'; the intermixed parsing of a
    command with an optional positional refused what follows ``--`` on Python 3.11 (exit 2)."""
    (tmp_path / "-s.jsonl").write_text((FIX / "sessions_close.jsonl").read_text().replace("s-close", "-close"))
    got = run_cli(command, "--json", "--at", AT_CLOSE, "--", "-s.jsonl", "-close", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert "-close" in json.loads(got.stdout)["items"] if command == "sessions" else "-close" in got.stdout
    whole = run_cli("replay", "--", "-s.jsonl", cwd=tmp_path)
    assert whole.returncode == 0 and json.loads(whole.stdout)["log"] == "-s.jsonl", whole.stderr


# --- LOG first for the importers; --assume-tz where times are read or written -------------------------


def test_import_grammar_old_tz_flag_still_works_and_says_so(tmp_path: Path) -> None:
    markers = tmp_path / "guard.err"
    markers.write_text("CLAUDE_QUOTA_JOB_RAN job=a exit=0 ts=1787270405\n")
    log = tmp_path / "jobs.jsonl"
    out = run_cli("import", "quota-log", str(log), str(markers), "--tz", "Asia/Tokyo")
    assert out.returncode == 0
    assert out.stderr == "eventlog: --tz is deprecated: use --assume-tz (here: --assume-tz Asia/Tokyo)\n"
    assert json.loads(log.read_text())["ts"] == "2026-08-21T09:00:05+09:00"


def test_append_assume_tz_writes_the_offset(tmp_path: Path) -> None:
    log = tmp_path / "w.jsonl"
    naive = json.dumps({"type": "limit_recorded", "ts": "2026-08-03T10:00:00", "account": "a",
                        "limited_at": "2026-08-03T09:59:00", "reset_at": "2026-08-03T15:00:00",
                        "source": "parsed-limit-message", "confidence": "explicit"}) + "\n"
    refused = run_cli("append", str(log), stdin=naive)
    assert refused.returncode == 2 and "give --assume-tz" in refused.stderr
    out = run_cli("append", str(log), "--assume-tz", "Asia/Tokyo", stdin=naive)
    assert out.returncode == 0, out.stderr
    written = json.loads(log.read_text())
    assert (written["ts"], written["limited_at"], written["reset_at"]) == (
        "2026-08-03T10:00:00+09:00", "2026-08-03T09:59:00+09:00", "2026-08-03T15:00:00+09:00")
    assert run_cli("replay", "--check", str(log)).returncode == 2  # no expected file: but it reads: no bad line
    assert json.loads(run_cli("replay", str(log)).stdout)["bad_lines"] == []


def test_decide_reads_a_log_without_offsets_in_assume_tz(tmp_path: Path) -> None:
    """A log whose times carry no offset: ``sessions --assume-tz`` shows the session and the decisions it would
    accept; ``decide --assume-tz`` must then read it the same way (not "no session")."""
    log = tmp_path / "naive.jsonl"
    log.write_text((ROOT / "fixtures" / "sessions_restore_backoff.jsonl").read_text().replace("+09:00", ""))
    shown = run_cli("sessions", str(log), "s-restore", "--assume-tz", "Asia/Tokyo", "--at", "log", "--json")
    assert shown.returncode in (0, 1), shown.stderr
    assert json.loads(shown.stdout)["items"]["s-restore"]["revision"] == 13
    assert "--assume-tz ZONE" in run_cli("decide", "--help").stdout
    out = run_cli("decide", str(log), "s-restore", "--decision", "close", "--expected-revision", "13",
                  "--idempotency-key", "k-naive", "--reason", "retired", "--assume-tz", "Asia/Tokyo", "--json")
    assert out.returncode == 0, out.stderr
    receipt = json.loads(out.stdout)
    assert (receipt["result"], receipt["session"]["admission_state"]) == ("accepted", "closed")
    assert run_cli("decide", str(log), "s-restore", "--decision", "close", "--expected-revision", "13",
                   "--idempotency-key", "k-mars", "--reason", "r", "--assume-tz", "Mars/Olympus").returncode == 2


def test_replay_takes_the_lane_thresholds() -> None:
    seed = str(FIX / "lanes_seed_sample.jsonl")
    default = run_cli("replay", "--checks", seed).stdout
    assert '"stalled": true' in default
    relaxed = run_cli("replay", "--checks", seed, "--quiet", "32h")
    assert relaxed.returncode == 0 and '"stalled": false' in relaxed.stdout
    old = run_cli("replay", "--checks", seed, "--quiet-hours", "32")
    assert old.stdout == relaxed.stdout and "--quiet-hours is deprecated" in old.stderr
    dump = json.loads(run_cli("replay", seed, "--unpicked", "1h30m").stdout)
    assert dump == json.loads(run_cli("replay", seed).stdout)  # 1h30m is the default 90m


# --- control characters ---------------------------------------------------------------------------


def test_escape() -> None:
    assert escape("a\nb\r\tc") == "a\\nb\\r\\tc"
    assert escape("\x1b[2J\x00\x7f\x9b") == "\\x1b[2J\\x00\\x7f\\x9b"
    assert escape("a\u2028b\u202ec") == "a\\u2028b\\u202ec"
    assert escape("\u200fa\u061c\u200e\u2069") == "\\u200fa\\u061c\\u200e\\u2069"  # every bidi control
    assert escape("進捗 ok \\n") == "進捗 ok \\n"


FORGED = "Nothing needs a person."
HOSTILE = f"h1\n{FORGED}\x1b[2J\x9b"


def hostile_log(tmp_path: Path) -> Path:
    return write_log(tmp_path / "hostile.jsonl", [
        {"type": "handoff_created", "ts": "2026-08-03T08:00:00+09:00", "handoff_id": HOSTILE, "account": "a\x1b[31m"},
        {"type": "needs_human", "ts": "2026-08-03T08:01:00+09:00", "handoff_id": HOSTILE,
         "reason": f"why\n{FORGED}"},
        {"type": "worker_claimed", "ts": "2026-08-03T08:02:00+09:00", "session_id": HOSTILE, "generation": 1,
         "worker": "w", "restore": True},
        {"type": "checkpoint_restore_failed", "ts": "2026-08-03T08:03:00+09:00", "session_id": HOSTILE,
         "generation": 1, "reason": "incompatible_checkpoint"},
    ])


def _no_raw_control(text: str) -> None:
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]", text), text
    assert FORGED not in [line.strip(" -") for line in text.splitlines()]


def test_hostile_ids_are_printed_escaped_everywhere(tmp_path: Path) -> None:
    log = hostile_log(tmp_path)
    runs = {
        "status": run_cli("status", str(log), "--at", "log"),
        "sessions": run_cli("sessions", str(log), "--at", "log"),
        "explain": run_cli("explain", str(log), HOSTILE, "--at", "log"),
        "decide": run_cli("decide", str(log), HOSTILE, "--decision", "close", "--expected-revision", "0",
                          "--idempotency-key", "k", "--reason", "r"),
        "unknown": run_cli("sessions", str(log), f"x\n{FORGED}"),
    }
    for name, out in runs.items():
        _no_raw_control(out.stdout)
        _no_raw_control(out.stderr)
        if name == "unknown":
            assert "'x\\nNothing needs a person.'" in out.stderr
        elif name == "explain":  # the log's own lines are JSON: their C0 are JSON escapes already, C1 are ours
            assert "h1\\nNothing needs a person.\\u001b[2J\\x9b" in out.stdout
        else:
            assert "h1\\nNothing needs a person.\\x1b[2J\\x9b" in out.stdout + out.stderr, name
    assert runs["status"].returncode == 1 and "Needs a person: " in runs["status"].stdout
    assert runs["unknown"].returncode == 2


def test_each_command_alone_parses_as_in_the_whole_parser() -> None:
    """``eventlog CMD`` builds only CMD's parser (lazy imports): the table names every command, each the same."""
    from eventlog.cli import COMMAND_MODULES

    whole = _commands(build_parser())
    assert set(COMMAND_MODULES) == set(whole)
    for name in COMMAND_MODULES:
        alone = _commands(build_parser(name))
        assert name in alone
        assert alone[name].format_help() == whole[name].format_help()


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)
