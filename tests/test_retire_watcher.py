"""A watcher that stopped for good can be retired by a person, after which the views stop calling it late.

The reviewers' story: a one-off ``--watcher w1`` pass (the README's transcript) or a renamed host left a watcher
"late" in ``status`` for ever, and ``RecoveryWatcherDead`` fired for ever, with no way to say it is gone. Now
``eventlog failback LOG --retire NAME --reason TEXT`` writes its final heartbeat (``watcher_run`` with ``retired``);
``status``, ``explain``, ``serve`` and ``follow --prom`` leave it out; the dump keeps the spec's rule; a pass under
that name brings it back. Run as a user runs them.
"""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import run_cli, write_log
from tests.opskit import RULES, follow_file, held_series, selectors
from tests.test_next_runs import typed
from tests.test_prom import promtool_passes, replayed


def ago(hours: float) -> str:
    return (datetime.now(UTC).replace(microsecond=0) - timedelta(hours=hours)).isoformat()


def beat(watcher: str, hours_ago: float) -> dict[str, Any]:
    return {"type": "watcher_run", "ts": ago(hours_ago), "watcher": watcher, "exit": "ok", "period_s": 900}


def story(tmp_path: Path) -> Path:
    """w1 ran once three days ago (a one-off pass); w2 runs every 15 minutes."""
    return write_log(tmp_path / "work.jsonl", [
        {"type": "handoff_created", "ts": ago(80), "handoff_id": "h1", "account": "cloud-account-a"},
        beat("w1", 72), beat("w2", 0.1),
    ])


def codes(log: Path) -> dict[str, list[str]]:
    out = run_cli("status", str(log), "--json")
    return {g["reason_code"]: [it["id"] for it in g["items"]] for g in json.loads(out.stdout)["groups"]}


def watcher_dead_fires(log: Path, tmp_path: Path) -> list[str]:
    """The watchers RecoveryWatcherDead fires for on the series follow writes now (through promtool)."""
    dump, text = replayed(log, live=True)
    rules = yaml.safe_load(RULES.read_text())
    used = {name for g in rules["groups"] for rule in g["rules"] for name, _m in selectors(rule["expr"])}
    t0 = datetime.fromisoformat(dump["as_of"]).timestamp()
    fed = held_series(text, t0, used, 10, 60)
    firing = sorted({s["series"].split('watcher="')[1].split('"')[0] for s in fed
                     if s["series"].startswith("recovery_watcher_last_run_timestamp_seconds")
                     and "w1" in s["series"]})
    case = {"interval": "1m", "input_series": fed, "alert_rule_test": [
        {"eval_time": "1m", "alertname": "RecoveryWatcherDead", "exp_alerts": [
            {"exp_labels": {"log": str(log), "watcher": name, "severity": "critical", "domain": "handoffs"}}
            for name in firing]}]}
    promtool_passes(tmp_path, rules, case)
    return firing


def test_a_retired_watcher_is_late_no_more(tmp_path: Path) -> None:
    log = story(tmp_path)
    assert codes(log) == {"watcher_late": ["w1"]}
    assert watcher_dead_fires(log, tmp_path) == ["w1"]
    # the late watcher's explain names the command; pasted as printed, its placeholder is refused
    explained = json.loads(run_cli("explain", str(log), "w1", "--json").stdout)
    [verdict] = explained["verdicts"]
    retire = f"eventlog failback {log} --retire w1 --reason '<why it stopped for good>'"
    assert retire in verdict["next"] and "retire it" in verdict["says"]
    pasted = typed(retire, tmp_path)
    assert pasted.returncode == 2 and "placeholder" in pasted.stderr, pasted.stderr
    before = log.read_bytes()
    done = typed(retire.replace("'<why it stopped for good>'", shlex.quote("a one-off pass from the README")),
                 tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("watcher w1 retired (retired by ")
    final = json.loads(log.read_bytes()[len(before):])
    assert final == {**final, "type": "watcher_run", "watcher": "w1", "exit": "ok", "period_s": 900, "retired": True}

    # every view leaves it out; its explain says so
    assert codes(log) == {}
    status = json.loads(run_cli("status", str(log), "--json").stdout)
    assert status["totals"]["watchers"] == {**status["totals"]["watchers"], "watchers": 2, "late": 0, "retired": 1}
    [verdict] = json.loads(run_cli("explain", str(log), "w1", "--json").stdout)["verdicts"]
    assert verdict["code"] == "retired" and verdict["next"] == []
    assert watcher_dead_fires(log, tmp_path) == []
    _dump, text = replayed(log, live=True)
    assert 'watcher="w2"' in text and 'watcher="w1"' not in text
    # the dump keeps the spec's rule: the retiring line is a watcher_run, and w1's entry is as its heartbeats say
    dump = json.loads(run_cli("replay", str(log)).stdout)["handoffs"]
    assert dump["watcher"] == {"last_run": final["ts"], "late": False}
    assert set(dump["watchers"]["w1"]) == {"last_run", "period_s", "exit", "detail", "late"}

    # twice: nothing more is written
    again = run_cli("failback", str(log), "--retire", "w1", "--reason", "gone")
    assert again.returncode == 0 and "already retired" in again.stdout
    assert json.loads(log.read_bytes()[len(before):]) == final
    # a pass under that name brings it back (and it is judged again)
    write_log(tmp_path / "more.jsonl", [beat("w1", 72 - 1)])
    with log.open("a", encoding="utf-8") as f:
        f.write((tmp_path / "more.jsonl").read_text())
    assert codes(log) == {"watcher_late": ["w1"]}


def test_with_every_watcher_retired_pending_work_is_no_all_clear(tmp_path: Path) -> None:
    log = story(tmp_path)
    for name in ("w1", "w2"):
        out = run_cli("failback", str(log), "--retire", name, "--reason", "moved to the new host", "--actor", "ops")
        assert out.returncode == 0, out.stderr
    assert codes(log) == {"no_watcher": ["failback"]}
    out = run_cli("status", str(log))
    assert "1 handoff(s) pending and every watcher in the log is retired: nothing brings them back" in out.stdout


def alerts_on_follow(log: Path, tmp_path: Path, names: tuple[str, ...]) -> set[str]:
    """Which of the watcher alerts ``names`` fire on the file a real ``follow --prom`` writes now (promtool)."""
    text = follow_file(log, tmp_path)
    rules = yaml.safe_load(RULES.read_text())
    used = {name for g in rules["groups"] for rule in g["rules"] for name, _m in selectors(rule["expr"])}
    t0 = datetime.fromisoformat(json.loads((tmp_path / "dump.json").read_text())["as_of"]).timestamp()
    fed = held_series(text, t0, used, 10, 60)
    firing = set()
    for name in names:  # each one either fires (with its labels) or not: promtool says which
        labels = {"log": str(log), "severity": "critical" if name != "RecoveryWatcherLate" else "warning",
                  "domain": "handoffs", **({"watcher": "w1"} if name == "RecoveryWatcherDead" else {})}
        case = {"interval": "1m", "input_series": fed, "alert_rule_test": [
            {"eval_time": "1m", "alertname": name, "exp_alerts": [{"exp_labels": labels}]}]}
        try:
            promtool_passes(tmp_path, yaml.safe_load(RULES.read_text()), case)
        except AssertionError:
            continue
        firing.add(name)
    return firing


def test_retiring_the_last_watcher_fires_no_watcher_where_the_late_alerts_go_quiet(tmp_path: Path) -> None:
    """The reviewers' story: h1 pending, w1 (every 15 min) last ran 30 days ago. Retiring it made follow --prom
    go from recovery_watcher_late 1 to 0 while status said no_watcher: now recovery_no_watcher says it and
    RecoveryNoWatcher fires."""
    log = write_log(tmp_path / "work.jsonl", [
        {"type": "handoff_created", "ts": ago(24 * 31), "handoff_id": "h1", "account": "cloud-account-a"},
        beat("w1", 24 * 30)])
    names = ("RecoveryWatcherLate", "RecoveryWatcherDead", "RecoveryNoWatcher")
    assert alerts_on_follow(log, tmp_path, names) == {"RecoveryWatcherLate", "RecoveryWatcherDead"}
    assert "recovery_no_watcher{log=" + json.dumps(str(log)) + "} 0" in follow_file(log, tmp_path)

    out = run_cli("failback", str(log), "--retire", "w1", "--reason", "host renamed")
    assert out.returncode == 0, out.stderr
    assert run_cli("status", str(log)).returncode == 1 and codes(log) == {"no_watcher": ["failback"]}
    text = follow_file(log, tmp_path)
    assert "recovery_no_watcher{log=" + json.dumps(str(log)) + "} 1" in text
    assert "recovery_watcher_late{log=" + json.dumps(str(log)) + "} 0" in text  # the spec's rule: a heartbeat
    assert alerts_on_follow(log, tmp_path, names) == {"RecoveryNoWatcher"}

    # a pass under any name runs again: no_watcher ends
    with log.open("a", encoding="utf-8") as f:
        f.write(json.dumps(beat("w2", 0)) + "\n")
    assert "recovery_no_watcher{log=" + json.dumps(str(log)) + "} 0" in follow_file(log, tmp_path)


def test_retire_usage(tmp_path: Path) -> None:
    log = story(tmp_path)
    before = log.read_bytes()
    for args, said in (
        (["--retire", "nobody", "--reason", "x"], "no watcher_run or claim names watcher 'nobody'"),
        (["--retire", "w1"], "--retire needs --reason"),
        (["--retire", "w1", "--reason", " "], "--reason is empty"),
        (["--reason", "x"], "--reason and --actor go with --retire NAME"),
        ([], "a pass needs --probe-cmd and --resume-cmd"),
    ):
        out = run_cli("failback", str(log), *args)
        assert out.returncode == 2 and said in out.stderr, (args, out.stderr)
    assert log.read_bytes() == before


def test_a_watcher_named_empty_can_be_retired_or_run_by_the_commands_its_explain_prints(tmp_path: Path) -> None:
    """The spec's `watcher` is any string, and the appender takes `""`: such a watcher was late for ever, since both
    commands `explain` prints for it were refused (`--retire ''`: "names no watcher"; `--watcher ''`: "is empty").
    Each works now, with its placeholders filled in; an empty name the log does not know stays refused."""
    log = write_log(tmp_path / "work.jsonl", [
        {"type": "handoff_created", "ts": ago(80), "handoff_id": "h1", "account": "cloud-account-a"}, beat("", 72)])
    assert codes(log) == {"watcher_late": [""]}
    [item] = [i for g in json.loads(run_cli("status", str(log), "--json").stdout)["groups"] for i in g["items"]]
    assert item["next"] == f"eventlog explain {log} ''"
    [verdict] = json.loads(typed(item["next"] + " --json", tmp_path).stdout)["verdicts"]
    [run_now, retire] = verdict["next"]
    assert "--watcher ''" in run_now and "--retire ''" in retire
    passing = tmp_path / "copy.jsonl"
    passing.write_bytes(log.read_bytes())
    ran = typed(run_now.replace(shlex.quote(str(log)), shlex.quote(str(passing))), tmp_path,
                probe="echo PING_OK", resume="""printf '{"started": "session of %s"}\\n' {handoff_id}""")
    assert ran.returncode == 0, ran.stderr
    last = json.loads(passing.read_text().splitlines()[-1])
    assert (last["type"], last["watcher"], last["exit"]) == ("watcher_run", "", "ok")
    assert "watcher_late" not in codes(passing)
    done = typed(retire.replace("'<why it stopped for good>'", "'a one-off pass'"), tmp_path)
    assert done.returncode == 0, done.stderr
    assert codes(log) == {"no_watcher": ["failback"]}  # retired: its pending handoff has no watcher left
    # a nameless watcher the log does not name is never started, nor retired
    (tmp_path / "other").mkdir()
    other = story(tmp_path / "other")
    before = other.read_bytes()
    for args, said in ((["--watcher", "", "--probe-cmd", "true", "--resume-cmd", "true"], "--watcher is empty"),
                       (["--retire", "", "--reason", "x"], "no watcher_run or claim names watcher ''")):
        out = run_cli("failback", str(other), *args)
        assert out.returncode == 2 and said in out.stderr, (args, out.stderr)
    assert other.read_bytes() == before
