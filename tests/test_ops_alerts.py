"""The shipped alert rules (ops/prometheus/): promtool accepts them, their unit tests pass and make every alert both
fire and stay quiet, every metric and label value they use exists in a real ``follow --prom`` file, and every value of
a verdict label either fires its alert or is known to need nobody."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from eventlog.cli import build_parser
from eventlog.cli.common import replay_log
from eventlog.clock import LAST_LINE, parse_at
from eventlog.follow import Follower, judged
from eventlog.prom import NEEDS_HUMAN_REASONS, of_replay
from eventlog.runners.sessions import needs_decision
from eventlog.views import status as triage_of
from projections.ahead import CHECKS
from projections.runner import Runner
from projections.sessions import WORKER_WAITS
from tests.conftest import ROOT, run_cli, system_tool, write_log
from tests.opskit import (
    RULE_TESTS,
    RULES,
    exposed,
    follow_file,
    follow_prom,
    held_series,
    selectors,
    series_along,
    unknown_in,
)
from tests.test_follow import _wait_for, following
from tests.test_prom import promtool, promtool_passes, replayed
from tests.test_prom import value as sample_value
from tests.test_status_explain import reruns_not_ended_well, unfed_from_lines

L = "/var/lib/recovery-ledger/ledger.jsonl"


def rules() -> list[dict[str, Any]]:
    """Every alerting rule of the shipped file, in order."""
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def rule_tests() -> list[dict[str, Any]]:
    """Every ``alert_rule_test`` of the shipped unit tests."""
    found = []
    for path in sorted(RULE_TESTS.glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["tests"]:
            found += group.get("alert_rule_test", [])
    return found


@pytest.fixture(scope="module")
def metrics(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, set[str]]]:
    """The sample names and label values of a real follow --prom file written from the shipped fixtures."""
    return exposed(follow_prom(tmp_path_factory.mktemp("follow")))


@pytest.fixture(scope="module")
def metrics_tz(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, set[str]]]:
    """The same from a follow given ``--assume-tz Asia/Tokyo``."""
    return exposed(follow_prom(tmp_path_factory.mktemp("follow"), extra=("--assume-tz", "Asia/Tokyo")))


def test_promtool_accepts_the_rules() -> None:
    checked = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules())} rules found" in checked.stdout


def test_the_rule_unit_tests_pass() -> None:
    files = sorted(p.name for p in RULE_TESTS.glob("*.yml"))
    assert files
    checked = subprocess.run([promtool(), "test", "rules", *files], cwd=RULE_TESTS, capture_output=True, text=True,
                             timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("SUCCESS") == len(files)


def test_the_unit_tests_fail_when_a_rule_is_wrong(tmp_path: Path) -> None:
    """The check above can fail: a threshold moved in a copy of the rules breaks the unit tests."""
    text = RULES.read_text().replace("expr: recovery_lane_stalled == 1", "expr: recovery_lane_stalled == 2")
    assert text != RULES.read_text()
    (tmp_path / "prometheus").mkdir()
    (tmp_path / "prometheus" / RULES.name).write_text(text)
    (tmp_path / "prometheus" / "tests").mkdir()
    for path in RULE_TESTS.glob("*.yml"):
        (tmp_path / "prometheus" / "tests" / path.name).write_text(path.read_text())
    checked = subprocess.run([promtool(), "test", "rules", "lanes_catchup.yml"], cwd=tmp_path / "prometheus" / "tests",
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode != 0 and "RecoveryLaneStalled" in checked.stdout + checked.stderr


def test_every_alert_fires_in_one_unit_test_and_stays_quiet_in_another() -> None:
    names = [rule["alert"] for rule in rules()]
    assert len(names) == len(set(names))
    fired = {t["alertname"] for t in rule_tests() if t.get("exp_alerts")}
    quiet = {t["alertname"] for t in rule_tests() if not t.get("exp_alerts")}
    assert set(names) - fired == set(), "never shown to fire"
    assert set(names) - quiet == set(), "never shown to stay quiet"
    assert fired | quiet <= set(names), "a unit test names an alert that is not shipped"


def test_every_alert_has_a_severity_a_summary_and_a_command_to_type_next() -> None:
    for rule in rules():
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        assert rule["labels"]["domain"] in {"ledger", "handoffs", "lanes", "catchup", "sessions"}, rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]
        description = rule["annotations"]["description"]
        assert "Next: `" in description, rule["alert"]
        commands = re.findall(r"`([^`]+)`", description.split("Next:", 1)[1])
        assert any(c.split()[0] in {"eventlog", "systemctl", "journalctl", "jq", "ls", "tail"} for c in commands), \
            rule["alert"]


#: What the placeholders of an alert's commands stand for, as a person would fill them in.
PLACEHOLDERS = {"{{ $labels.log }}": L, "{{ $log }}": L, "{{ $tz }}": " --assume-tz Asia/Tokyo",
                "{{ $labels.product }}": "sashiko-repair",
                "{{ $labels.watcher }}": "watcher-a",
                "{{ $labels.account }}": "cloud-account-a", "LOG": L, "SESSION_ID": "s-1",
                "HANDOFF_ID": "h1", "ACCOUNT": "cloud-account-a", "PRODUCT": "sashiko-repair", "ID": "h1",
                "DECISION": "close", "N": "3", "KEY": "k1", "TEXT": "why", "CMD": "probe", "LABEL": "com.lily.a",
                "...": "x"}


#: What a catch-up alert's command starts with: the zone its days were judged in (the ``zone`` label follow writes).
ZONED = "{{ with $labels.zone }}TZ={{ . }} {{ end }}"


def typed_commands() -> list[str]:
    """Every whole ``eventlog LOG ...`` command an alert's description or docs/OPERATIONS.md's table tells a person
    to type, placeholders filled (``a\\|b``: the first; ``| jq ...`` cut off)."""
    texts = [rule["annotations"]["description"] for rule in rules()]
    texts += re.findall(r"^\| `Recovery\w+` \|.*$", (ROOT / "docs" / "OPERATIONS.md").read_text(), flags=re.M)
    found = []
    for text in texts:
        for command in re.findall(r"`(?:" + re.escape(ZONED) + r"|TZ=\S+ )?(eventlog [^`]+)`", text):
            if "LOG" not in command and "$labels.log" not in command and "{{ $log }}" not in command:
                continue  # a command named in words ("then `eventlog handoff requeue` with the log, ...")
            command = re.sub(r"(\w+)\\\|\w+", r"\1", command).split(" | ")[0].split(" \\| ")[0]
            for word, value in PLACEHOLDERS.items():
                command = command.replace(word, value)
            found.append(command)
    return found


def test_every_eventlog_command_an_alert_tells_a_person_to_type_is_one_eventlog_takes() -> None:
    """A command the pager prints that eventlog refuses (a required flag left out) leaves the person at 3 a.m.
    with a usage error instead of the next step."""
    commands = typed_commands()
    assert any(c.startswith("eventlog decide ") for c in commands)
    parser = build_parser()
    for command in commands:
        try:
            parser.parse_args(shlex.split(command)[1:])
        except SystemExit:
            pytest.fail(f"eventlog refuses what an alert says to type: {command}")


def test_every_metric_and_label_value_the_rules_use_is_in_a_real_follow_file(
    metrics: dict[str, dict[str, set[str]]],
) -> None:
    """Renaming a metric, a label or a label value breaks this test: the rules would never fire again."""
    for rule in rules():
        assert unknown_in(rule["expr"], metrics) == [], rule["alert"]
        assert re.search(r"\brecovery_\w+", rule["expr"]), rule["alert"]


def test_the_unit_tests_feed_series_a_real_follow_file_has(
    metrics: dict[str, dict[str, set[str]]], metrics_tz: dict[str, dict[str, set[str]]],
) -> None:
    """The fed series are named and labelled as follow writes them (their label values may be made up): with
    ``assume_tz`` as a follow given --assume-tz writes them, else as one without."""
    for path in sorted(RULE_TESTS.glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["tests"]:
            for fed in group["input_series"]:
                name, labels = re.fullmatch(r"(\w+)\{(.*)\}", fed["series"]).groups()  # type: ignore[union-attr]
                assert name in metrics, (path.name, name)
                keys = {k for k, _op, _v in re.findall(r'(\w+)(=)"([^"]*)"', labels)}
                assert keys == set((metrics_tz if "assume_tz" in keys else metrics)[name]), (path.name, fed["series"])


def test_the_alerts_in_docs_metrics_are_the_shipped_rules() -> None:
    section = (ROOT / "docs" / "METRICS.md").read_text().split("## Alerts", 1)[1]
    rows = re.findall(r"^\| `(\w+)` \| `([^`]+)` \|([^|]*)\|", section, flags=re.MULTILINE)
    documented = {name: (expr, wait.strip()) for name, expr, wait in rows}
    shipped = {rule["alert"]: (" ".join(rule["expr"].split()), rule.get("for", "")) for rule in rules()}
    assert documented == shipped



# --- no label taken from the log runs when a person pastes an alert's command ---------------------------------

#: The labels an alert copies from the log's own lines (follow names them as the log does).
FROM_THE_LOG = ("watcher", "account", "product")
#: The plain labels of every alert below: the series' other labels are the values follow writes.
PLAIN = {"log": L, **dict.fromkeys(FROM_THE_LOG, "watcher-a"), "kind": "retryable", "reason": "conflict",
         "check": "watcher_late", "admission_state": "recovery_required", "attention": "RECOVERY_REQUIRED"}
#: Names a writer of the log may give a watcher, an account or a lane: each would run something if pasted bare.
HOSTILE_IDS = ("$(touch PWNED)", "w; touch PWNED", "`touch PWNED`", "it's PWNED", "two words", "a\nb`touch PWNED`")
#: LOGs follow may be given: a space, a quote, what a shell expands, a backtick, a leading dash.
HOSTILE_LOGS = ("/srv/ledger data/it's.jsonl", "/srv/$(touch PWNED).jsonl", "/srv/`touch PWNED`;x.jsonl",
                "-ledger.jsonl", '/srv/a\\b"c$HOME!.jsonl')


def _go_unquoted(text: str) -> str:
    """A Go-quoted string's value (strconv.Quote: ``\\"``, ``\\\\``, ``\\n``, ``\\xNN``, ``\\uNNNN``, ...)."""
    value = ast.literal_eval(f'"{text}"')
    assert isinstance(value, str)
    return value


_GO_PAIR = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def rendered(tmp_path: Path, cases: list[dict[str, str]]) -> list[dict[str, dict[str, str]]]:
    """For each of ``cases`` (an alert's labels), every shipped alert's annotations as Prometheus renders them.

    Each rule fires on one series holding the case's labels (its ``$value`` 1). promtool is told to expect no
    annotations, and what it got is read back from its report; then told to expect exactly what was read, it
    passes: the texts are promtool's own, not a re-implementation of its templates."""
    shipped = rules()
    for rule in shipped:
        rule["expr"], _ = "hostile_input", rule.pop("for", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [{"name": "hostile", "rules": shipped}]}))

    def run(expected: list[dict[str, dict[str, str]]] | None) -> subprocess.CompletedProcess[str]:
        tests = []
        for i, labels in enumerate(cases):
            series = "hostile_input{" + ",".join(f"{k}={json.dumps(v)}" for k, v in {**labels, "case": str(i)}.items())
            tests.append({"interval": "1m", "input_series": [{"series": series + "}", "values": "1x3"}],
                          "alert_rule_test": [
                              {"eval_time": "1m", "alertname": rule["alert"], "exp_alerts": [
                                  {"exp_labels": {**labels, "case": str(i), **rule["labels"]},
                                   **({"exp_annotations": expected[i][rule["alert"]]} if expected else {})}]}
                              for rule in shipped]})
        (tmp_path / "t.yml").write_text(json.dumps({"rule_files": ["rules.yml"], "evaluation_interval": "1m",
                                                    "tests": tests}))
        return subprocess.run([promtool(), "test", "rules", "t.yml"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)

    report = run(None)
    assert report.returncode != 0
    got: list[dict[str, dict[str, str]]] = [{} for _ in cases]
    for labels_text, annotations_text in re.findall(r"got:\[\s*0:\s*Labels:\{(.*)\}\n\s*Annotations:\{(.*)\}\n",
                                                    report.stdout + report.stderr):
        labels = {k: _go_unquoted(v) for k, v in _GO_PAIR.findall(labels_text)}
        got[int(labels["case"])][labels["alertname"]] = {k: _go_unquoted(v)
                                                         for k, v in _GO_PAIR.findall(annotations_text)}
    assert [set(g) for g in got] == [{rule["alert"] for rule in shipped}] * len(cases), report.stdout[-3000:]
    again = run(got)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    return got


#: Every program an alert's command names, and the ones its words run (``$(id -u)``, ``| jq``): none is on
#: the PATH of :func:`pasted`, so each only says what it was given.
PROGRAMS = {"--reason", "curl", "df", "eventlog", "grep", "head", "id", "jq", "journalctl", "launchctl", "ls", "mv",
            "od", "systemctl", "tail", "timedatectl"}


def pasted(command: str, workdir: Path) -> list[list[str]]:
    """What bash runs when ``command`` is pasted: the argv of each program it starts (sorted: a pipeline's run at
    once). No program is found: bash's ``command_not_found_handle`` writes down each argv instead of running it."""
    record = workdir / "argv"
    record.unlink(missing_ok=True)
    script = ("command_not_found_handle() { printf '%s\\0' \"$#\" \"$@\" >&3; }\n"
              f"exec 3>{shlex.quote(str(record))}\n{command}\n")
    ran = subprocess.run([system_tool("bash", "bash"), "-c", script], cwd=workdir, capture_output=True,
                         text=True, timeout=30, env={"PATH": str(workdir / "no-programs"), "HOME": "/home/someone"})
    assert (ran.returncode, ran.stderr) == (0, ""), (command, ran.stderr)
    words, argvs = record.read_text().split("\0")[:-1], []
    while words:
        count, words = int(words[0]), words[1:]
        argvs.append(words[:count])
        words = words[count:]
    return sorted(argvs)


def spans(text: str) -> list[str]:
    """The backticked commands of an alert's text."""
    assert text.count("`") % 2 == 0, text
    return re.findall(r"`([^`]*)`", text)


def test_no_label_from_the_log_is_in_a_command_and_the_log_is_one_word(tmp_path: Path) -> None:
    """The review: an account named ``$(touch PWNED)`` made RecoveryAccountBackingOff say ``eventlog explain LOG
    $(touch PWNED)``, which pasted into bash created PWNED; a watcher ``w; rm -rf ~`` made the retire command two.
    Every alert, rendered by promtool for names and LOGs a shell would act on: no name from the log is in any
    command (nor opens one), and each command, pasted into bash, runs exactly what it runs for a plain LOG, with
    that LOG as one word (``./`` before a leading ``-``)."""
    cases = [PLAIN] + [{**PLAIN, "log": log, **dict.fromkeys(FROM_THE_LOG, ident)}
                       for log in HOSTILE_LOGS for ident in HOSTILE_IDS[HOSTILE_LOGS.index(log) % 2::2]]
    texts = rendered(tmp_path, cases)
    plain = texts[0]
    for labels, alerts in zip(cases[1:], texts[1:], strict=True):
        word = "./" + labels["log"] if labels["log"].startswith("-") else labels["log"]
        for alert, texts_of in alerts.items():
            said = texts_of["description"]
            # a summary names LOG as it is (follow's own argument, no command); nothing else in it opens a span
            assert "`" not in texts_of["summary"].replace(labels["log"], ""), (alert, texts_of["summary"])
            commands, plain_commands = spans(said), spans(plain[alert]["description"])
            assert len(commands) == len(plain_commands), (alert, said)
            for command, plain_command in zip(commands, plain_commands, strict=True):
                assert labels["watcher"] not in command, (alert, command)
                runs = pasted(command, tmp_path)
                assert {argv[0] for argv in runs} <= PROGRAMS, (alert, command)
                assert runs == sorted([w.replace(L, word) for w in argv] for argv in pasted(plain_command, tmp_path)), \
                    (alert, command)
                if not re.search(r"[|$]", command.replace(labels["log"], "")):  # one program, nothing expanded
                    assert [shlex.split(command)] == runs, (alert, command)
    touched = [alerts for alerts in texts if "PWNED" in json.dumps(alerts)]
    assert touched and not (tmp_path / "PWNED").exists()


def test_the_alerts_of_an_id_from_the_log_name_it_in_words_and_say_where_the_quoted_command_is(
    tmp_path: Path,
) -> None:
    """What replaces the bare id: the name Go-quoted in words (a backtick as \\x60), and a command without it
    that lists the item with the `eventlog explain` eventlog quotes itself."""
    ident = "`touch PWNED`; x"
    (texts,) = rendered(tmp_path, [{**PLAIN, **dict.fromkeys(FROM_THE_LOG, ident)}])
    quoted = '"\\x60touch PWNED\\x60; x"'
    expected = {"RecoveryWatcherDead": ("watchers", "Failback watcher " + quoted),
                "RecoveryWatcherErrored": (None, "failback watcher " + quoted),
                "RecoveryAccountBackingOff": ("handoffs", "Probes of account " + quoted),
                "RecoveryLaneStalled": ("lanes", "Lane " + quoted)}
    for alert, (domain, summary) in expected.items():
        assert summary in texts[alert]["summary"]
        if domain is not None:
            assert quoted in texts[alert]["description"]
            assert f"eventlog status {L} --domain {domain} --all" in spans(texts[alert]["description"])
    mentioned = {alert for alert, texts_of in texts.items() if ident[1:6] in json.dumps(texts_of)}
    assert mentioned == set(expected)


# --- every value of a verdict label: its alert, or known to need nobody --------------------------------

#: For each family whose label says a verdict: the alert each value fires (None: nobody is needed).
#: A value follow writes that is not here fails the test below: decide whether it needs a person, and if it
#: does, add an alert for it to ops/prometheus/recovery-ledger.rules.yml (and a unit test) before listing it.
VERDICTS: dict[str, tuple[str, dict[str, str | None]]] = {
    # a backoff pages by how long the account's probes have failed (RecoveryAccountBackingOff on
    # recovery_account_probes_failing_seconds), not by the plan, which reads due whenever a backoff runs out
    "recovery_probe_plan_accounts": ("reason", {
        "nothing_pending": None, "waiting_reset": None, "due": None, "needs_person": "RecoveryAccountNeedsPerson",
        **dict.fromkeys(("backoff_transient", "backoff_unexpected", "backoff_estimate"), None),
    }),
    "recovery_handoff_stale_claims": ("kind", {
        "retryable": "RecoveryClaimStuck", "unknown_effect": "RecoveryResumeUnknownEffect",
    }),
    "recovery_handoff_needs_human": ("reason", dict.fromkeys(
        ("conflict", "resume_failed_unknown_effect", "resume_unconfirmed", "resume_failing", "other"),
        "RecoveryHandoffNeedsHuman")),
    "recovery_lane_stalled": ("kind", dict.fromkeys(("job-unpicked", "status-quiet"), "RecoveryLaneStalled")),
    "recovery_catchup_reruns": ("kind", dict.fromkeys(("failed", "no_end"), "RecoveryCatchupRerunFailed")),
    "recovery_dated_ahead": ("check", dict.fromkeys(CHECKS, "RecoveryDatedAhead")),
    # an interrupt's verdict says how it went; a person is needed when its turn's outcome is unknown, which the
    # session says (RecoverySessionNeedsDecision, RecoverySessionUnknownTurnLeft), or, when the log never recorded
    # the turn's end, recovery_sessions_interrupt_unrecorded (RecoverySessionInterruptUnrecorded), as status does
    # a session that should have a worker and has none at work, past its bound (status: the same reason codes)
    "recovery_sessions_without_worker": ("kind", dict.fromkeys(WORKER_WAITS, "RecoverySessionWithoutWorker")),
    "recovery_controls_total": ("verdict", dict.fromkeys(
        ("clean", "late_sdk", "engine_timeout", "capture_timeout", "capture_failed", "checkpoint_unavailable",
         "deadline_exceeded", "unexplained"), None)),
}


def _minutes(duration: str | None) -> int:
    units = {"h": 60, "m": 1}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([hm])", duration or "0m"))


def _sweep_case(rules_: list[dict[str, Any]], series: str, labels: dict[str, str], counter: bool,
                expected: set[str]) -> dict[str, Any]:
    """One promtool test: ``series`` is 1 (a counter: rises to 1) from the start, follow is alive; each alert is
    checked two minutes after its ``for``: those in ``expected`` fire with the series' labels, the rest do not."""
    span = 12 * 60 + 30
    present = {k: v for k, v in labels.items() if v}  # an empty label value is no label to Prometheus
    fed = [
        {"series": series, "values": f"0 1x{span}" if counter else f"1x{span}"},
        {"series": f'recovery_follow_tick_seconds{{log="{L}"}}', "values": f"5x{span}"},
        {"series": f'recovery_judged_timestamp_seconds{{log="{L}"}}', "values": f"0+60x{span}"},
    ]
    checks = [
        {"eval_time": f"{_minutes(rule.get('for')) + 2}m", "alertname": rule["alert"],
         "exp_alerts": [{"exp_labels": {**present, **rule["labels"]}}] if rule["alert"] in expected else []}
        for rule in rules_
    ]
    return {"interval": "1m", "input_series": fed, "alert_rule_test": checks}


def test_every_value_of_a_verdict_label_fires_its_alert_or_is_known_to_need_nobody(
    tmp_path: Path, metrics: dict[str, dict[str, set[str]]],
) -> None:
    """The guard for new verdicts: the values are read from a real follow file, so a reason, kind or verdict added
    to the code (an account waiting for a person, say) fails here until it is classified and, if a person is
    needed, alerted on. Each value is fed alone through promtool and exactly its alert must fire."""
    shipped = rules()
    cases = []
    for family, (label, table) in VERDICTS.items():
        sample = family if family in metrics else family.removesuffix("_total") + "_total"
        values = metrics[sample][label]
        assert values - set(table) == set(), f"{family}{{{label}}}: classify these values (and alert on them)"
        assert set(table) - values == set(), f"{family}{{{label}}}: no longer written"
        others = {k: sorted(v)[0] for k, v in metrics[sample].items() if k not in {label, "log"}}
        for value, alert in table.items():
            labels = {"log": L, **others, label: value}
            series = sample + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
            cases.append(_sweep_case(shipped, series, labels, sample.endswith("_total"), {alert} - {None}))
    # sessions: every (admission_state, attention) pair follow lists; a decision is needed where status says so
    pairs = metrics["recovery_sessions"]
    for state in sorted(pairs["admission_state"]):
        for attention in sorted(pairs["attention"]):
            labels = {"log": L, "admission_state": state, "attention": attention}
            expected = {"RecoverySessionNeedsDecision"} if needs_decision(labels) else set()
            series = "recovery_sessions{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
            cases.append(_sweep_case(shipped, series, labels, False, expected))
    assert len(cases) >= 5 + 2 + 3 + 2 + 8 + 25
    for rule in shipped:  # the texts are checked by the unit tests; here only which series fire
        rule.pop("annotations", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [{"name": "sweep", "rules": shipped}]}))
    (tmp_path / "sweep.yml").write_text(json.dumps(
        {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": cases}))
    checked = subprocess.run([promtool(), "test", "rules", "sweep.yml"], cwd=tmp_path, capture_output=True, text=True,
                             timeout=300)
    assert checked.returncode == 0, (checked.stdout + checked.stderr)[-4000:]


def test_operations_doc_says_what_to_type_next_for_every_alert() -> None:
    """docs/OPERATIONS.md's table: every shipped alert, with its severity, and a command for each."""
    text = (ROOT / "docs" / "OPERATIONS.md").read_text()
    rows = re.findall(r"^\| `(Recovery\w+)` \| (\w+) \|[^|]*\| (.*) \|$", text, flags=re.MULTILINE)
    assert {name: severity for name, severity, _next in rows} == \
        {rule["alert"]: rule["labels"]["severity"] for rule in rules()}
    assert all("`" in typed for _n, _s, typed in rows)


# --- each fixture's own series through the shipped rules ---------------------------------------------------

#: Not judged from one fixture: they need follow or its file gone (the unit tests above), or a rate over an hour
#: of interrupts; or, for an interrupt of a turn whose end the log never recorded, a fact no dump holds (its
#: promtool unit test is in ops/prometheus/tests/sessions.yml, its series in tests/test_next_runs.py and below:
#: test_an_interrupt_pages_exactly_where_status_calls_a_person_for_it); nor does one hold a torn
#: tail no append cuts, an unfinished batch, or a file that is no event log (ops/prometheus/tests/ledger.yml; their
#: series in tests/test_stuck_tail.py, tests/test_unfinished_batch.py and tests/test_not_a_log.py); nor lines that
#: vanished while follow read the log (its series in tests/test_log_path_swaps.py); and a dump judged at its last
#: line has no line dated ahead of now (only a live judgement counts them: ledger.yml, and tests/test_dated_ahead.py);
#: nor how the lanes runner's last pass ended, nor the lanes it could not observe (lanes_catchup.yml; their series in
#: tests/test_lanes_pass.py and tests/test_lanes_gauges.py),
#: nor does a dump hold a handoff's deadline (handoffs.yml; its series in tests/test_deadline_passed.py),
#: nor how long an account's probes have failed, 6 h of which no fixture holds (handoffs.yml; its series written
#: minute by minute below: test_an_account_whose_probes_fail_for_6_hours_is_paged_though_its_backoffs_run_out),
#: nor whether follow could save its snapshot (ledger.yml; its series in tests/test_follow_outputs.py),
#: nor a stream's server that cannot be reached (ledger.yml; its series in tests/test_nats_liveness.py),
#: nor a lanes pass that stopped: no fixture's last lane_check is twice its period old at its last line
#: (lanes_catchup.yml; its series in tests/test_lanes_late.py); nor the machine's TZ that names no zone, which only
#: a live judgement takes (lanes_catchup.yml; its series in tests/test_zone_named.py).
NOT_FROM_A_FIXTURE = {"RecoveryCatchupZoneUnknown",
                      "RecoveryFollowDead", "RecoveryMetricsAbsent", "RecoveryLogMissing", "RecoveryInterruptSlow",
                      "RecoverySessionInterruptUnrecorded", "RecoveryTornTailStuck", "RecoveryUnfinishedBatch",
                      "RecoveryNotALog", "RecoveryLinesVanished", "RecoveryDatedAhead", "RecoveryLanesErrored",
                      "RecoveryHandoffPastDeadline", "RecoveryAccountBackingOff", "RecoverySnapshotUnsaved",
                      "RecoveryLogUnreachable", "RecoveryLanesDead", "RecoveryLanesLate", "RecoveryLaneUnobserved"}


def expected_alerts(dump: dict[str, Any]) -> set[tuple[str, frozenset[tuple[str, str]]]]:
    """The alerts a dump's verdicts call for, each with the labels its series carries (beside ``log``)."""
    def one(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
        return name, frozenset((k, v) for k, v in labels.items() if v)

    h, out = dump["handoffs"], set()
    for name, beat in h["watchers"].items():
        if beat["late"]:
            out.add(one("RecoveryWatcherDead", watcher=name))
        if beat["exit"] == "error":
            out.add(one("RecoveryWatcherErrored", watcher=name))
    if h["watcher"]["late"]:
        out.add(one("RecoveryWatcherLate"))
    if h["by_state"].get("pending") and not h["watchers"]:  # no fixture retires a watcher (the dump cannot say)
        out.add(one("RecoveryNoWatcher"))
    for kind, alert in (("retryable", "RecoveryClaimStuck"), ("unknown_effect", "RecoveryResumeUnknownEffect")):
        if h["stale_claims"].get(kind):
            out.add(one(alert, kind=kind))
    for reason in h["needs_human_reasons"]:
        out.add(one("RecoveryHandoffNeedsHuman", reason=reason if reason in NEEDS_HUMAN_REASONS else "other"))
    for plan in h["probe_plan"].values():
        if plan["reason"] == "needs_person":
            out.add(one("RecoveryAccountNeedsPerson", reason=plan["reason"]))
    for lane in dump["lanes"]["now"]["results"]:
        if lane["stalled"]:
            out.add(one("RecoveryLaneStalled", product=lane["product"], kind=lane["kind"]))
    if dump["catchup"]["probe"]:
        out.add(one("RecoveryCatchupWaiting"))
    if dump["catchup"]["circuit"] == "open":
        out.add(one("RecoveryCatchupCircuitOpen"))
    for item in dump["sessions"]["items"].values():
        pair = {"admission_state": item["admission_state"], "attention": item["attention"]}  # the series' labels
        if needs_decision(pair):
            out.add(one("RecoverySessionNeedsDecision", admission_state=item["admission_state"],
                        attention=item["attention"] or ""))
        if item["unknown_turns"] and item["admission_state"] not in ("recovery_required", "closed"):
            out.add(one("RecoverySessionUnknownTurnLeft"))  # moved on with a turn of unknown outcome left in it
    if dump["sessions"]["retry_due"]:
        out.add(one("RecoverySessionRetryOverdue"))
    if dump["bad_lines"]:  # held_series: written after follow started, so new ones too
        out |= {one("RecoveryBadLines"), one("RecoveryBadLinesNew")}
    if dump["rejected"]:
        out |= {one("RecoveryRejectedEvents"), one("RecoveryRejectedEventsNew")}
    if dump["torn_tail"]:
        out.add(one("RecoveryTornTail"))
    return out


#: RecoverySessionDecisionWaitLong's bound: a wait for a decision longer than this pages (critical).
DECISION_WAIT_LONG_S = 4 * 3600


def session_alerts_from_status(log: Path) -> set[tuple[str, frozenset[tuple[str, str]]]]:
    """The sessions alerts no dump holds the facts of, as `status` judges the log at its last line: a session with no
    worker at work (RecoverySessionWithoutWorker, by kind), a wait for a decision over 4 h
    (RecoverySessionDecisionWaitLong)."""
    items = [i for g in triage_of(replay_log(str(log), show_progress=False), str(log), LAST_LINE).groups
             for i in g.items if i.domain == "sessions"]
    out = {("RecoverySessionWithoutWorker", frozenset({("kind", i.reason_code)})) for i in items
           if i.reason_code in WORKER_WAITS}
    if any(i.needs_decision and (i.for_s or 0) > DECISION_WAIT_LONG_S for i in items):
        out.add(("RecoverySessionDecisionWaitLong", frozenset()))
    return out


def _fixture_case(log: Path, shipped: list[dict[str, Any]]) -> tuple[dict[str, Any], set[str]]:
    """One promtool test: the fixture's exposition judged at its last line, held as it is for 12 h 40 min
    (:func:`tests.opskit.held_series`: follow alive, each watcher exactly as late as the dump says). Each alert is
    checked two minutes after its ``for``."""
    dump, text = replayed(log)
    used = {name for rule in shipped for name, _m in selectors(rule["expr"])}
    t0 = datetime.fromisoformat(dump["as_of"]).timestamp() if dump["as_of"] else 0.0  # log_empty: no time
    span, step = 380, 120
    fed = held_series(text, t0, used, span, step)
    expected = expected_alerts(dump)
    if dump["as_of"]:  # re-runs that did not end well, jobs nothing feeds: read from the log (no dump holds them)
        expected |= {("RecoveryCatchupRerunFailed", frozenset({("kind", kind)}))
                     for kind in set(reruns_not_ended_well(log, dump["as_of"]).values())}
        if unfed_from_lines(log, dump["as_of"]):
            expected.add(("RecoveryCatchupUnfed", frozenset()))
        expected |= session_alerts_from_status(log)
    checks = []
    for rule in shipped:
        if rule["alert"] in NOT_FROM_A_FIXTURE:
            continue
        firing = [dict(labels) for name, labels in sorted(expected, key=str) if name == rule["alert"]]
        checks.append({"eval_time": f"{_minutes(rule.get('for')) + 2}m", "alertname": rule["alert"],
                       "exp_alerts": [{"exp_labels": {"log": str(log), **labels, **rule["labels"]}}
                                      for labels in firing]})
    return {"interval": f"{step}s", "input_series": fed, "alert_rule_test": checks}, {n for n, _l in expected}


def test_each_fixtures_series_fire_exactly_the_alerts_its_dump_calls_for(tmp_path: Path) -> None:
    """Every shipped fixture, judged at its last line, through the shipped rules: the alerts that fire are those
    its verdicts need a person for, with their labels, and no other; between them the fixtures fire every alert
    but the ones that need follow gone."""
    shipped = rules()
    cases, fired = [], set()
    for log in sorted((ROOT / "fixtures").glob("*.jsonl")):
        case, names = _fixture_case(log, shipped)
        cases.append(case)
        fired |= names
    assert fired == {rule["alert"] for rule in shipped} - NOT_FROM_A_FIXTURE
    for rule in shipped:
        rule.pop("annotations", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [{"name": "fixtures", "rules": shipped}]}))
    (tmp_path / "fixtures.yml").write_text(json.dumps(
        {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": cases}))
    checked = subprocess.run([promtool(), "test", "rules", "fixtures.yml"], cwd=tmp_path, capture_output=True,
                             text=True, timeout=300)
    assert checked.returncode == 0, (checked.stdout + checked.stderr)[-6000:]


# --- lines that were bad before follow started ------------------------------------------------------------


def test_bad_and_rejected_lines_already_in_the_log_when_follow_starts_fire_and_keep_firing(tmp_path: Path) -> None:
    """A log that held a bad line and a rejected event before `follow` started: `status` exits 1 for them, and
    so the standing alerts fire from the first scrape of follow's own file, for as long as the log holds them
    (12 h here); the *New alerts do not (nothing new was written)."""
    log = write_log(tmp_path / "log.jsonl", [
        {"type": "handoff_created", "ts": "2026-08-03T09:00:00+09:00", "handoff_id": "h1", "account": "a"},
        {"type": "handoff_created", "ts": "2026-08-03T09:00:01+09:00", "handoff_id": "h1", "account": "a"},
    ])
    with log.open("a") as f:
        f.write("not json\n")
    with following(log, tmp_path) as (_dump, prom):
        _wait_for(lambda: prom.exists() and "recovery_bad_lines_total" in prom.read_text())
        text = prom.read_text()
    counted = ("recovery_bad_lines_total", "recovery_rejected_events_total")
    shipped = [r for r in rules() if any(name in r["expr"] for name in counted)]
    assert {r["alert"] for r in shipped} == {"RecoveryBadLines", "RecoveryBadLinesNew", "RecoveryRejectedEvents",
                                             "RecoveryRejectedEventsNew"}
    span = 12 * 60
    fed = [{"series": s.name + "{" + ",".join(f'{k}="{v}"' for k, v in s.labels.items()) + "}",
            "values": f"{s.value:g}x{span}"}  # as scraped: the counter holds the log's count from follow's start
           for family in text_string_to_metric_families(text) for s in family.samples
           if s.name in counted]
    assert [f["values"] for f in fed] == [f"1x{span}", f"1x{span}"]
    firing = {"RecoveryBadLines", "RecoveryRejectedEvents"}
    checks = [{"eval_time": when, "alertname": r["alert"],
               "exp_alerts": [{"exp_labels": {"log": str(log), **r["labels"]}}] if r["alert"] in firing else []}
              for r in shipped for when in ("0m", "30m", "12h")]
    for rule in shipped:
        rule.pop("annotations", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [{"name": "bad", "rules": shipped}]}))
    (tmp_path / "t.yml").write_text(json.dumps({"rule_files": ["rules.yml"], "evaluation_interval": "1m",
                                                "tests": [{"interval": "1m", "input_series": fed,
                                                           "alert_rule_test": checks}]}))
    checked = subprocess.run([promtool(), "test", "rules", "t.yml"], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120)
    assert checked.returncode == 0, (checked.stdout + checked.stderr)[-4000:]
    assert run_cli("status", str(log), "--at", "log").returncode == 1  # the same verdict as the alert's


# --- catch-up's days: the commands an alert prints judge in the zone follow judged in ---------------------------


def _zones_apart(now: datetime) -> tuple[str, str, datetime]:
    """Two zones (follow's, the person's shell's) and a slot, today in both: passed 3 h ago in the first, still to
    come in the second (so a guarded job with no marker is unfed there, and a skipped one a candidate, but
    neither in the second), and not within 2 h of midnight."""
    zones = [f"Etc/GMT{-k:+d}" if k else "UTC" for k in range(-12, 15)]  # Etc/GMT-9 is UTC+9
    for follows in zones:
        slot = (now.astimezone(ZoneInfo(follows)) - timedelta(hours=3)).replace(second=0, microsecond=0)
        if slot.date() != now.astimezone(ZoneInfo(follows)).date() or slot.hour > 21:
            continue
        for shell in zones:
            there = now.astimezone(ZoneInfo(shell))
            if there.replace(hour=slot.hour, minute=slot.minute, second=0, microsecond=0) > there + timedelta(
                    minutes=10):
                return follows, shell, slot
    raise AssertionError(f"no two zones apart at {now}")


def _rendered(alert: str) -> str:
    """The description promtool checked for ``alert`` firing with zone Asia/Tokyo (ops/prometheus/tests)."""
    for test in rule_tests():
        for exp in test.get("exp_alerts") or []:
            if test["alertname"] == alert and exp["exp_labels"].get("zone") == "Asia/Tokyo" \
                    and "assume_tz" not in exp["exp_labels"]:
                return str(exp["exp_annotations"]["description"])
    raise AssertionError(f"no unit test of {alert} with a zone")


def test_the_catchup_alerts_commands_judge_in_the_zone_follow_judged_in(tmp_path: Path) -> None:
    """OPERATIONS puts TZ in ledger.env only: follow judged catch-up's today in it, and the alerts' commands, pasted
    in a shell of another zone, judged another today ("Nothing needs a person." under RecoveryCatchupUnfed). follow
    now names its zone on the catch-up verdicts judged by day, and the commands carry it."""
    for alert in ("RecoveryCatchupUnfed", "RecoveryCatchupWaiting"):
        (rule,) = [r for r in rules() if r["alert"] == alert]
        assert ZONED + "eventlog " in rule["annotations"]["description"], alert
    now = datetime.now(UTC)
    follows, shell, slot = _zones_apart(now)
    calendar = [{"Hour": slot.hour, "Minute": slot.minute}]
    registered = (now - timedelta(hours=4, minutes=1)).isoformat()
    log = write_log(tmp_path / "ledger.jsonl", [
        {"type": "job_registered", "ts": registered, "label": "com.lily.brief", "guarded": True,
         "calendar": calendar, "interval_s": None},
        {"type": "job_registered", "ts": registered, "label": "com.lily.post", "guarded": True,
         "calendar": calendar, "interval_s": None},
        {"type": "job_skipped", "ts": (now - timedelta(minutes=1)).isoformat(), "label": "com.lily.post",
         "reason": "quota", "remaining_s": 60},
    ])
    text = follow_file(log, tmp_path, env={"TZ": follows})
    assert sample_value(text, "recovery_catchup_unfed", zone=follows) == 1
    assert sample_value(text, "recovery_catchup_probe", zone=follows) == 1

    def pasted(alert: str) -> list[subprocess.CompletedProcess[str]]:
        """Each eventlog command of the alert's description, as the person pastes it into a shell of ``shell``."""
        commands = re.findall(r"`(TZ=\S+ eventlog [^`]+)`", _rendered(alert))
        assert commands, alert
        bin_dir = os.path.dirname(sys.executable)
        return [subprocess.run(c.replace("Asia/Tokyo", follows).replace(L, str(log)).replace(
            "LABEL", "com.lily.brief"), shell=True, capture_output=True, text=True, timeout=120, cwd=ROOT,
            env={**os.environ, "TZ": shell, "PATH": f"{bin_dir}:{os.environ['PATH']}"}) for c in commands]

    status, explain = pasted("RecoveryCatchupUnfed")
    assert status.returncode == 1 and "com.lily.brief" in status.stdout and "nothing feeds" in status.stdout, \
        status.stdout + status.stderr
    assert "nothing feeds its markers" in explain.stdout, explain.stdout + explain.stderr
    (dry_run,) = pasted("RecoveryCatchupWaiting")
    assert "com.lily.post" in dry_run.stdout, dry_run.stdout + dry_run.stderr
    # the same command without the zone, as the alerts printed it: the shell's today, another verdict
    unzoned = run_cli("status", str(log), "--domain", "catchup", env={"TZ": shell})
    assert unzoned.returncode == 0 and "Nothing needs a person." in unzoned.stdout, unzoned.stdout


# --- a log written without offsets: the commands an alert prints read it as follow did ---------------------------


def test_the_alerts_of_a_log_followed_with_assume_tz_print_commands_that_read_it_so(tmp_path: Path) -> None:
    """Spec section 2: a log written without offsets is read with --assume-tz ZONE, and without it every line is
    bad. follow --assume-tz judged it, but the alerts printed `eventlog status LOG`, `eventlog explain LOG ID`:
    pasted, those said every line was bad. follow now puts its own --assume-tz on every series (`assume_tz`), and
    every eventlog command of LOG an alert prints carries it; a follow without it writes no such label, and its
    alerts' commands are as they were."""
    ts = "2026-08-03T09:00:00"  # no offset
    log = write_log(tmp_path / "jst.jsonl", [
        {"type": "handoff_created", "ts": ts, "handoff_id": "h1", "account": "a"},
        {"type": "handoff_created", "ts": ts, "handoff_id": "h1", "account": "a"},  # rejected: h1 exists
        {"type": "handoff_created", "ts": ts + "+09:00", "handoff_id": "h2", "account": "a"},  # read either way
    ])
    zoned = follow_file(log, tmp_path, extra=("--assume-tz", "Asia/Tokyo"))
    prom = tmp_path / "zoned.prom"
    prom.write_text(zoned)
    checked = subprocess.run([promtool(), "check", "metrics"], stdin=prom.open(), capture_output=True, text=True,
                             timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    samples = [s for family in text_string_to_metric_families(zoned) for s in family.samples]
    assert samples and all(s.labels.get("assume_tz") == "Asia/Tokyo" for s in samples)
    assert (sample_value(zoned, "recovery_bad_lines_total"), sample_value(zoned, "recovery_rejected_events_total")) \
        == (0, 1)
    plain = follow_file(log, tmp_path)
    assert not any("assume_tz" in s.labels for family in text_string_to_metric_families(plain)
                   for s in family.samples)
    assert sample_value(plain, "recovery_bad_lines_total") == 2  # follow without it: every line is bad

    (labels,) = [s.labels for family in text_string_to_metric_families(zoned) for s in family.samples
                 if s.name == "recovery_rejected_events_total"]
    with_tz, without = rendered(tmp_path, [labels, {"log": str(log)}])
    option = " --assume-tz Asia/Tokyo"
    for alert, texts_of in with_tz.items():
        commands, bare = spans(texts_of["description"]), spans(without[alert]["description"])
        for command, plain_command in zip(commands, bare, strict=True):
            if re.match(r"(TZ=\S+ )?eventlog \w+( \w+)? " + re.escape(str(log)), plain_command):
                assert command == plain_command.replace(str(log), str(log) + option, 1), (alert, command)
            else:
                assert command == plain_command and option not in command, (alert, command)
        assert option not in without[alert]["description"], alert

    bin_dir = os.path.dirname(sys.executable)

    def pasted(alert: str, texts: dict[str, dict[str, str]], word: str) -> subprocess.CompletedProcess[str]:
        """The alert's `eventlog WORD ...` command, as a person pastes it into a shell (ID: the rejected one)."""
        (command,) = [c for c in spans(texts[alert]["description"]) if c.startswith(f"eventlog {word} ")]
        return subprocess.run(command.replace(" ID", " h1"), shell=True, capture_output=True, text=True, timeout=120,
                              cwd=ROOT, env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})

    status = pasted("RecoveryFollowDead", with_tz, "status")
    assert status.returncode == 1 and "no_offset" not in status.stdout and "h1" in status.stdout, \
        status.stdout + status.stderr
    explain = pasted("RecoveryRejectedEvents", with_tz, "explain")
    assert explain.returncode == 0 and "no_offset" not in explain.stdout, explain.stdout + explain.stderr
    # the commands as the alerts printed them before: every line a bad one
    assert "no_offset" in pasted("RecoveryFollowDead", without, "status").stdout


# --- probes failing for hours: series follow writes minute by minute ------------------------------------------

ACCOUNT = "cloud-account-a"
T0 = datetime.fromisoformat("2026-08-03T09:00:00+09:00")


def _at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def failing_probes(log: Path, hours: int) -> list[str]:
    """A 5-min failback watcher of one pending handoff probes its account at each pass whose plan says due, and
    every probe says transient (it takes 20 s); ``follow`` judges the log each minute (30 s past it) and writes its
    file: :class:`Follower` ``catch_up``, ``judged``, ``of_replay``, as ``eventlog follow --at`` does. The files,
    one a minute."""
    write_log(log, [{"type": "handoff_created", "ts": T0.isoformat(), "handoff_id": "h1", "account": ACCOUNT}])
    follower = Follower(str(log), Runner)
    follower.start()
    texts = []
    for minute in range(hours * 60 + 1):
        if minute % 5 == 0:
            lines = []
            if follower.replay.folder.handoffs.plan(ACCOUNT, _at(minute))["probe"]:
                lines.append({"type": "probe_result", "ts": _at(minute + 1 / 3).isoformat(), "account": ACCOUNT,
                              "outcome": "transient"})
            lines.append({"type": "watcher_run", "ts": _at(minute + 5 / 12).isoformat(), "watcher": "watcher-a",
                          "exit": "ok", "period_s": 300})
            with log.open("a") as f:
                f.writelines(json.dumps(line) + "\n" for line in lines)
        follower.catch_up()
        at = parse_at(_at(minute + 0.5).isoformat(), local=False)
        texts.append(of_replay(follower.replay, judged(follower, at), 5))
    return texts


def test_an_account_whose_probes_fail_for_6_hours_is_paged_though_its_backoffs_run_out(tmp_path: Path) -> None:
    """The review's run: every probe transient, 14 in a row over 9 h. The backoff is capped at 1 h, and when it runs
    out the plan reads due until the next pass, so `recovery_probe_plan_accounts{reason="backoff_transient"}` drops
    to 0 every hour and a `for: 6h` on it never ends. How long the probes have failed does not drop: the alert
    fires once it passes 6 h, and `explain` says the same."""
    log = tmp_path / "log.jsonl"
    texts = failing_probes(log, 9)
    probes = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum(p["type"] == "probe_result" for p in probes) == 14
    fed = series_along(texts, {"recovery_account_probes_failing_seconds", "recovery_probe_plan_accounts"})
    plan = {f["series"]: f["values"].split() for f in fed}
    due = plan[f'recovery_probe_plan_accounts{{log="{log}",reason="due"}}']
    assert [m for m in range(120, 540) if due[m] == "1"], "the plan never read due between two backoffs"
    (rule,) = [r for r in rules() if r["alert"] == "RecoveryAccountBackingOff"]
    labels = {"log": str(log), "account": ACCOUNT, **rule["labels"]}
    checks = [{"eval_time": "5h59m", "alertname": rule["alert"], "exp_alerts": []}]
    checks += [{"eval_time": f"{m // 60}h{m % 60}m", "alertname": rule["alert"], "exp_alerts": [{"exp_labels": labels}]}
               for m in range(360, 541) if due[m] == "1" or m in (360, 540)]
    assert len(checks) > 4
    promtool_passes(tmp_path, {"groups": [{"name": "backoff", "rules": [rule]}]},
                    {"interval": "1m", "input_series": fed, "alert_rule_test": checks})
    moment = next(m for m in range(360, 541) if due[m] == "1")  # the plan says due: the backoff ran out
    at = _at(moment + 0.5)
    cut = tmp_path / "cut.jsonl"  # the log as it was then
    cut.write_text("".join(line + "\n" for line in log.read_text().splitlines()
                           if datetime.fromisoformat(json.loads(line)["ts"]) <= at))
    explained = run_cli("explain", str(cut), ACCOUNT, "--at", at.isoformat(), "--json")
    assert explained.returncode == 0, explained.stderr
    (verdict,) = json.loads(explained.stdout)["verdicts"]
    assert verdict["code"] == "due"
    assert verdict["facts"]["run"]["failing_since"] == _at(1 / 3).isoformat()
    assert f"its probes have failed since {_at(1 / 3).isoformat()} (6 h" in verdict["says"]


# --- interrupts: the alerts page where status calls a person ---------------------------------------------------

NEEDS_DECISION = ("RecoverySessionNeedsDecision", (("admission_state", "recovery_required"),
                                                   ("attention", "RECOVERY_REQUIRED")))
#: Each interrupt fixture: the reason codes `status` gives its session, and the sessions alerts its series fire.
INTERRUPTS: dict[str, tuple[list[str], set[tuple[str, tuple[tuple[str, str], ...]]]]] = {
    "clean": ([], set()),
    "late_sdk": ([], set()),
    # the receipt's deadline passed with the turn still running, and no turn_finished since
    "deadline_exceeded": (["interrupt_unrecorded"], {("RecoverySessionInterruptUnrecorded", ())}),
    # the turn ended outcome_unknown: recovery required
    **dict.fromkeys(("engine_timeout", "capture_timeout", "capture_failed", "checkpoint_unavailable"),
                    (["outcome_unknown"], {NEEDS_DECISION})),
}


@pytest.mark.parametrize("name", sorted(INTERRUPTS))
def test_an_interrupt_pages_exactly_where_status_calls_a_person_for_it(tmp_path: Path, name: str) -> None:
    """Seed 004: a turn whose outcome is unknown waits for an operator; an interrupt never moves a session, so the
    interrupt's result (verdict and all) is only why. The fixture's series from a real follow file (judged at its
    last line, held 1 h) through the shipped sessions alerts fire exactly where `status` exits 1 for the session,
    and each alert's next command is one eventlog takes with no id left to guess."""
    log = ROOT / "fixtures" / f"sessions_interrupt_{name}.jsonl"
    codes, alerts = INTERRUPTS[name]
    status = run_cli("status", str(log), "--at", "log", "--json")
    assert status.returncode == (1 if codes else 0), status.stdout + status.stderr
    items = [i for g in json.loads(status.stdout)["groups"] for i in g["items"]]
    assert [i["reason_code"] for i in items] == codes
    shipped = [r for r in rules() if r["labels"]["domain"] == "sessions"]
    dump, text = replayed(log)
    used = {n for rule in shipped for n, _m in selectors(rule["expr"])}
    fed = held_series(text, datetime.fromisoformat(dump["as_of"]).timestamp(), used, 60, 60)
    checks = [{"eval_time": f"{_minutes(rule.get('for')) + 2}m", "alertname": rule["alert"],
               "exp_alerts": [{"exp_labels": {"log": str(log), **dict(labels), **rule["labels"]}}
                              for alert, labels in alerts if alert == rule["alert"]]}
              for rule in shipped if rule["alert"] != "RecoveryInterruptSlow"]  # a rate over an hour of them
    promtool_passes(tmp_path, {"groups": [{"name": "sessions", "rules": shipped}]},
                    {"interval": "1m", "input_series": fed, "alert_rule_test": checks})
    for item in items:  # what status prints next is filled in: no id left for a person to find
        assert not re.search(r"\b(SESSION_ID|TURN_ID|ID)\b", item["next"]), item["next"]


def test_a_deadline_exceeded_interrupt_is_settled_as_status_says(tmp_path: Path) -> None:
    """The receipt of an interrupt ran out of its deadline (outcome unknown) and the log holds no end of its turn:
    `status` names the session (it still takes work) and prints the line that records the end; appended, the session
    waits for a decision, and RecoverySessionNeedsDecision takes over from RecoverySessionInterruptUnrecorded."""
    log = tmp_path / "log.jsonl"
    log.write_bytes((ROOT / "fixtures" / "sessions_interrupt_deadline_exceeded.jsonl").read_bytes())
    before = run_cli("status", str(log), "--at", "log", "--json")
    assert before.returncode == 1
    (item,) = [i for g in json.loads(before.stdout)["groups"] for i in g["items"]]
    assert (item["reason_code"], item["id"]) == ("interrupt_unrecorded", "s-deadline")
    recorded = subprocess.run(item["next"], shell=True, cwd=ROOT, capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert recorded.returncode == 0, recorded.stderr
    after = run_cli("status", str(log), "--at", "log", "--json")
    assert after.returncode == 1
    (item,) = [i for g in json.loads(after.stdout)["groups"] for i in g["items"]]
    assert (item["reason_code"], item["id"], item["needs_decision"]) == ("outcome_unknown", "s-deadline", True)
    _dump, text = replayed(log)
    assert sample_value(text, "recovery_sessions_interrupt_unrecorded") == 0
    assert sample_value(text, "recovery_sessions", admission_state="recovery_required",
                        attention="RECOVERY_REQUIRED") == 1
