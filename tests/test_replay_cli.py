"""``tools/replay`` as spec/OUTPUTS.md describes it: calls, keys, exit codes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import ROOT, run_cli, write_log

TOP_KEYS = ["log", "as_of", "events", "bad_lines", "torn_tail", "rejected", "handoffs", "lanes", "catchup", "sessions"]


def test_every_dump_key_is_present(tmp_path: Path) -> None:
    log = write_log(tmp_path / "a.jsonl", [{"type": "lane_check", "ts": "2026-08-08T10:00:00+09:00"}])
    out = run_cli("replay", str(log))
    assert out.returncode == 0, out.stderr
    dump = json.loads(out.stdout)
    assert list(dump)[: len(TOP_KEYS)] == TOP_KEYS
    assert dump["as_of"] == "2026-08-08T10:00:00+09:00"
    assert dump["events"] == 1
    for key in ("total", "items", "by_state", "failover", "failback", "not_returned", "skip_reasons", "pending",
                "stale_claims", "latency_s", "probes", "probe_plan", "next_claims", "watcher"):
        assert key in dump["handoffs"]
    assert set(dump["catchup"]) >= {"candidates", "probe", "circuit"}
    assert set(dump["sessions"]) >= {"items", "receipts"}


def test_one_dump_per_log_in_order(tmp_path: Path) -> None:
    a = write_log(tmp_path / "a.jsonl", [{"type": "lane_check", "ts": "2026-08-08T10:00:00+09:00"}])
    b = write_log(tmp_path / "b.jsonl", [])
    out = run_cli("replay", str(a), str(b))
    lines = out.stdout.splitlines()
    assert [json.loads(x)["log"] for x in lines] == [str(a), str(b)]
    assert json.loads(lines[1])["as_of"] is None


def test_as_of_is_the_last_applied_line_not_the_largest_ts(tmp_path: Path) -> None:
    log = write_log(tmp_path / "a.jsonl", [
        {"type": "lane_check", "ts": "2026-08-08T12:00:00+09:00"},
        {"type": "lane_check", "ts": "2026-08-08T10:00:00+09:00"},
    ])
    with log.open("a") as f:
        f.write("garbage\n")
    dump = json.loads(run_cli("replay", str(log)).stdout)
    assert dump["as_of"] == "2026-08-08T10:00:00+09:00"
    assert dump["bad_lines"] == [{"line": 3, "reason": dump["bad_lines"][0]["reason"]}]


def test_at_overrides_as_of(tmp_path: Path) -> None:
    log = write_log(tmp_path / "a.jsonl", [{"type": "lane_check", "ts": "2026-08-08T10:00:00+09:00"}])
    dump = json.loads(run_cli("replay", "--at", "2026-08-09T00:00:00+09:00", str(log)).stdout)
    assert dump["as_of"] == "2026-08-09T00:00:00+09:00"


def test_exit_2_for_bad_usage_and_unreadable_files(tmp_path: Path) -> None:
    log = write_log(tmp_path / "a.jsonl", [{"type": "lane_check", "ts": "2026-08-08T10:00:00+09:00"}])
    assert run_cli("replay", str(tmp_path / "missing.jsonl")).returncode == 2
    assert run_cli("replay", str(tmp_path)).returncode == 2
    assert run_cli("replay", "--at", "2026-08-09T00:00:00", str(log)).returncode == 2
    assert run_cli("replay", "--assume-tz", "Mars/Olympus", str(log)).returncode == 2
    assert run_cli("replay").returncode == 2


def test_strict_stops_at_a_bad_line_with_exit_2(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    log.write_text('{"type":"lane_check","ts":"2026-08-08T10:00:00+09:00"}\nnope\n')
    lax = run_cli("replay", str(log))
    assert lax.returncode == 0 and json.loads(lax.stdout)["bad_lines"][0]["line"] == 2
    strict = run_cli("replay", "--strict", str(log))
    assert strict.returncode == 2
    assert f"{log}:2: not_json" in strict.stderr
    assert strict.stdout == ""


def test_assume_tz_reads_naive_times(tmp_path: Path) -> None:
    log = write_log(tmp_path / "a.jsonl", [{"type": "lane_check", "ts": "2026-08-08T10:00:00"}])
    plain = json.loads(run_cli("replay", str(log)).stdout)
    assert plain["events"] == 0 and plain["bad_lines"][0]["reason"].startswith("no_offset")
    zoned = json.loads(run_cli("replay", "--assume-tz", "Asia/Tokyo", str(log)).stdout)
    assert zoned["events"] == 1 and zoned["as_of"] == "2026-08-08T10:00:00+09:00"


def test_check_reports_a_readable_difference_and_exit_1(tmp_path: Path) -> None:
    log = write_log(tmp_path / "a.jsonl", [{"type": "lane_check", "ts": "2026-08-08T10:00:00+09:00"}])
    dump = json.loads(run_cli("replay", str(log)).stdout)
    expected = tmp_path / "a.expected.json"
    expected.write_text(json.dumps(dump))
    assert run_cli("replay", "--check", str(log)).returncode == 0
    dump["events"] = 7
    expected.write_text(json.dumps(dump))
    out = run_cli("replay", "--check", str(log))
    assert out.returncode == 1
    assert "events: expected 7, got 1" in out.stdout


def test_shipped_fixtures_match_their_expected_dumps() -> None:
    fixtures = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "fixtures").glob("*.jsonl"))
    assert fixtures
    out = subprocess.run([str(ROOT / "tools" / "replay"), "--check", *fixtures],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("ok ") == len(fixtures)


def test_bad_input_fixture_names_every_reason() -> None:
    dump = json.loads((ROOT / "fixtures" / "log_bad_input.expected.json").read_text())
    codes = {b["reason"].split(":")[0] for b in dump["bad_lines"]}
    assert codes == {"not_json", "not_object", "unknown_type", "missing_field", "wrong_type", "bad_value",
                     "no_offset", "bad_time", "bad_seq", "not_utf8", "bad_version"}
    assert dump["torn_tail"] is True


def test_jobs_fold_the_domains_apart_into_the_same_dump(tmp_path: Path) -> None:
    """``--jobs N``: every shipped fixture and a generated log of all four domains, the same dump as one process."""
    from bench.generate import write_log as generate

    big = tmp_path / "gen.jsonl"
    generate(big, 20_000, 600)
    # a line no domain accepts (rejected) and a bad line, for the merge of rejections and bad lines
    with big.open("a") as f:
        f.write('{"type":"verified","ts":"2026-12-01T00:00:00+09:00","seq":20001,"handoff_id":"nope","attempt":1,'
                '"branch":"b","head":"h","dirty":false,"todos":"taken_over"}\n{"type":"claimed"}\n')
    logs = [str(big), *sorted(str(p) for p in (ROOT / "fixtures").glob("*.jsonl"))]
    one = run_cli("replay", *logs)
    assert one.returncode == 0, one.stderr
    assert '"rejected":[{"line":20001' in one.stdout.splitlines()[0]
    for jobs in ("2", "3", "4"):
        split = run_cli("replay", "--jobs", jobs, *logs)
        assert split.returncode == 0, split.stderr
        assert split.stdout == one.stdout


def test_jobs_bad_usage(tmp_path: Path) -> None:
    log = write_log(tmp_path / "a.jsonl", [{"type": "lane_check", "ts": "2026-08-01T09:00:00+09:00"}])
    for args in (["--jobs", "0"], ["--jobs", "5"], ["--jobs", "2", "--snapshot", str(tmp_path / "s")]):
        done = run_cli("replay", *args, str(log))
        assert done.returncode == 2
        assert "--jobs" in done.stderr


def test_a_log_written_the_other_ways_the_spec_allows_replays_to_the_same_dump(tmp_path: Path) -> None:
    """``"v":1`` on every line, no ``seq`` at all (spec section 2: the line number stands in), or every field
    written as ``json.dumps`` writes it (bench/shapes.py): the same state as the compact log."""
    from bench.generate import write_log as generate
    from bench.shapes import SHAPES
    from bench.shapes import main as reshape

    plain = tmp_path / "plain.jsonl"
    generate(plain, 20_000, 600)
    lines = plain.read_bytes().count(b"\n")
    dumps = {}
    for shape in ("plain", *SHAPES):
        log = tmp_path / f"{shape}.jsonl"
        if shape != "plain":
            assert reshape([shape, str(plain), str(log)]) == 0
        done = run_cli("replay", str(log))
        assert done.returncode == 0, done.stderr
        dump = json.loads(done.stdout)
        assert dump["events"] == lines and dump["bad_lines"] == [] and dump["rejected"] == [], shape
        dump.pop("log")
        dumps[shape] = dump
    assert b'"seq"' not in (tmp_path / "no-seq.jsonl").read_bytes()
    assert (tmp_path / "dumps.jsonl").read_bytes().startswith(b'{"type": ')
    assert dumps["plain"]["sessions"]["receipts"] and dumps["plain"]["handoffs"]["total"]
    for shape in SHAPES:
        assert dumps[shape] == dumps["plain"], shape


def test_tools_replay_runs_this_checkout_whatever_directory_it_is_run_from(tmp_path: Path) -> None:
    """``python -m`` would put the current directory first: an ``eventlog`` there must not be what runs."""
    decoy = tmp_path / "eventlog"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise SystemExit('the eventlog of the current directory ran')\n")
    (decoy / "__main__.py").write_text("raise SystemExit('the eventlog of the current directory ran')\n")
    fixture = ROOT / "fixtures" / "log_bad_input.jsonl"
    done = subprocess.run([str(ROOT / "tools" / "replay"), str(fixture)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert "current directory" not in done.stderr
    assert done.returncode == 0 and json.loads(done.stdout)["log"] == str(fixture)
