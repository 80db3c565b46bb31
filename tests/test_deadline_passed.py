"""A handoff still out past its deadline is named to a person (seed 000: old handoffs are not ended by the deadline
alone; a person is told, then skips with a reason if it will not be done).

The reviewers' story: pending for 41 days, its deadline passed 34 days ago, and ``status`` said "Nothing needs a
person". Spec section 3: nothing expires on a timer, so no state changes; the live views name it, judged as of now
(or ``--at``): ``status``, ``explain`` (with the ``handoff skip`` to type), ``serve`` and ``follow --prom`` with
its alert. Run as a user runs them.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import run_cli, write_log
from tests.opskit import RULES, held_series, selectors
from tests.serving import start_server
from tests.test_follow import _metric, _wait_for, following
from tests.test_next_runs import typed
from tests.test_prom import promtool, promtool_passes


def days(n: float) -> str:
    """A time ``n`` days from now (ago when negative), as a writer in Tokyo writes it."""
    return (datetime.now(UTC).replace(microsecond=0) + timedelta(days=n)).astimezone(
        datetime.fromisoformat("2026-01-01T00:00:00+09:00").tzinfo).isoformat()


def story() -> list[dict[str, Any]]:
    """h7 is the reviewers' handoff; the others are not past their deadline, or not out any more. Its times are
    taken when it is written (not at import), so the ages hold however long a suite runs before it."""
    def created(hid: str, deadline: str | None, age_days: float = 41) -> dict[str, Any]:
        return {"type": "handoff_created", "ts": days(-age_days), "handoff_id": hid, "account": "cloud-account-a",
                **({"deadline": deadline} if deadline else {})}
    return [
        created("h7", days(-34)),
        created("h8", days(3)),  # not yet
        created("h9", None),  # no deadline
        created("h10", days(-30)),
        {"type": "skip", "ts": days(-29), "handoff_id": "h10", "reason": "obsolete"},  # closed: not out
        created("h11", days(-20)),
        {"type": "claimed", "ts": days(-1 / 24 / 6), "handoff_id": "h11", "watcher": "w1", "attempt": 1},
        {"type": "watcher_run", "ts": days(-1 / 24 / 6), "watcher": "w1", "exit": "ok", "period_s": 900},
        created("h12", days(-10)),  # with a person already: its own item holds it
        {"type": "needs_human", "ts": days(-9), "handoff_id": "h12", "reason": "waiting for the customer"},
    ]


def groups(out: subprocess.CompletedProcess[str]) -> dict[str, list[dict[str, Any]]]:
    return {g["reason_code"]: g["items"] for g in json.loads(out.stdout)["groups"]}


def test_status_names_each_handoff_out_past_its_deadline(tmp_path: Path) -> None:
    events = story()
    deadline = events[0]["deadline"]
    log = write_log(tmp_path / "work.jsonl", events)
    out = run_cli("status", str(log), "--json")
    assert out.returncode == 1
    found = groups(out)
    assert [it["id"] for it in found["deadline_passed"]] == ["h7", "h11"]
    assert [it["id"] for it in found["needs_human"]] == ["h12"]
    h7, h11 = found["deadline_passed"]
    assert h7["since"] == deadline and h7["needs_decision"] is True
    assert 34 * 86400 - 60 < h7["for_s"] < 34 * 86400 + 60
    assert h7["reason"].startswith("pending, created 41 d ago; its deadline "
                                   f"{deadline} passed 34 d ago and nothing ends it on a timer")
    assert h7["next"] == f"eventlog explain {log} h7"
    assert h11["reason"].startswith("claimed by w1 (attempt 1), created 41 d ago")
    assert json.loads(out.stdout)["totals"]["handoffs"]["deadline_passed"] == 2
    text = run_cli("status", str(log))
    assert "Handoffs not back by their deadline (nothing expires on a timer): 2" in text.stdout
    assert "past their deadline 2" in text.stdout
    # judged as of a time (--at), as every item is: before h7's deadline, nothing
    early = run_cli("status", str(log), "--at", days(-35), "--json")
    assert "deadline_passed" not in groups(early)
    # the dump is the spec's: no state changed
    dump = json.loads(run_cli("replay", str(log)).stdout)
    assert dump["handoffs"]["items"]["h7"]["state"] == "pending"


def test_explain_says_what_a_person_can_do_and_the_skip_works_pasted(tmp_path: Path) -> None:
    events = story()
    deadline = events[0]["deadline"]
    log = write_log(tmp_path / "work.jsonl", events)
    out = run_cli("explain", str(log), "h7", "--json")
    assert out.returncode == 0, out.stderr
    [verdict] = json.loads(out.stdout)["verdicts"]
    assert f"its deadline {deadline} passed 34 d ago" in verdict["says"]
    assert [it["reason_code"] for it in verdict["needs_person"]] == ["deadline_passed"]
    [skip] = [cmd for cmd in verdict["next"] if cmd.startswith("eventlog handoff skip ")]
    assert skip == f"eventlog handoff skip {log} h7 --reason '<why it will not be done>'"
    assert verdict["facts"]["deadline"] == deadline
    # pasted as printed, the placeholder is refused; with the person's reason it closes h7 (counted by it)
    pasted = typed(skip, tmp_path)
    assert pasted.returncode == 2 and "placeholder" in pasted.stderr, pasted.stderr
    done = typed(skip.replace("'<why it will not be done>'", shlex.quote("the customer cancelled it")), tmp_path)
    assert done.returncode == 0, done.stderr
    after = groups(run_cli("status", str(log), "--json"))
    assert [it["id"] for it in after["deadline_passed"]] == ["h11"]
    # one with a person says so too, and offers what its reason offers (no second skip)
    out = run_cli("explain", str(log), "h12", "--json")
    assert out.returncode == 0, out.stderr
    [verdict] = json.loads(out.stdout)["verdicts"]
    assert "its deadline" in verdict["says"] and "passed 10 d ago" in verdict["says"]
    assert [cmd.split(" --reason")[0] for cmd in verdict["next"]] == [
        f"eventlog handoff requeue {log} h12", f"eventlog handoff skip {log} h12"]


def test_serve_and_follow_prom_count_it_and_its_alert_fires(tmp_path: Path) -> None:
    log = write_log(tmp_path / "work.jsonl", story())
    server = start_server(log, tmp_path)
    try:
        c = server.client("viewer")
        status = c.get("/v1/status").json()
        deadline = [g for g in status["groups"] if g["reason_code"] == "deadline_passed"]
        assert [it["id"] for it in deadline[0]["items"]] == ["h7", "h11"]
        assert f'recovery_handoff_deadline_passed{{log="{log}"}} 2' in c.get("/metrics").text
    finally:
        assert server.stop() == 0
    with following(log, tmp_path) as (dump, prom):
        assert _wait_for(lambda: prom.exists() and _metric(prom, "recovery_handoff_deadline_passed") == 2)
        text = prom.read_text()
        judged = json.loads(dump.read_text())
    lint = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    rules = yaml.safe_load(RULES.read_text())
    used = {name for g in rules["groups"] for rule in g["rules"] for name, _m in selectors(rule["expr"])}
    t0 = datetime.fromisoformat(judged["as_of"]).timestamp()
    case = {"interval": "1m", "input_series": held_series(text, t0, used, 30, 60), "alert_rule_test": [
        {"eval_time": "1m", "alertname": "RecoveryHandoffPastDeadline", "exp_alerts": [
            {"exp_labels": {"log": str(log), "severity": "warning", "domain": "handoffs"}}]},
    ]}
    promtool_passes(tmp_path, rules, case)
