"""``eventlog handoff release|requeue|skip`` (a person's hand on a handoff) and attempt fencing, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, write_log

J = "+09:00"


def t(clock: str) -> str:
    return f"2026-08-03T{clock}{J}"


CREATED = {"type": "handoff_created", "ts": t("09:00:00"), "handoff_id": "h1", "account": "cloud-account-a"}
CLAIMED = {"type": "claimed", "ts": t("10:00:00"), "handoff_id": "h1", "watcher": "w1", "attempt": 1}
REQUESTED = {"type": "resume_requested", "ts": t("10:00:01"), "handoff_id": "h1", "attempt": 1}
UNCONFIRMED = {"type": "needs_human", "ts": t("10:31:00"), "handoff_id": "h1", "reason": "resume_unconfirmed"}


def lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def state(log: Path) -> dict[str, Any]:
    out = run_cli("replay", str(log))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["handoffs"]["items"]["h1"]  # type: ignore[no-any-return]


def act(log: Path, action: str, reason: str = "watcher w1 is dead", *more: str) -> Any:
    return run_cli("handoff", action, str(log), "h1", "--reason", reason, "--actor", "ops", "--at", t("11:00:00"),
                   *more)


@pytest.mark.parametrize(
    ("before", "action", "appended", "after"),
    [
        ([CLAIMED], "release", {"type": "released", "reason": "watcher w1 is dead"}, "pending"),
        ([CLAIMED], "requeue", {"type": "released", "reason": "watcher w1 is dead"}, "pending"),
        ([CLAIMED, REQUESTED, UNCONFIRMED], "requeue", {"type": "released"}, "pending"),
        ([CLAIMED, REQUESTED], "requeue",
         {"type": "resume_failed", "attempt": 1, "effect": "none", "error": "requeued by ops: watcher w1 is dead"},
         "pending"),
        ([], "skip", {"type": "skip", "reason": "watcher w1 is dead"}, "skipped"),
        ([CLAIMED, REQUESTED], "skip", {"type": "skip"}, "skipped"),
        ([CLAIMED, REQUESTED, UNCONFIRMED], "skip", {"type": "skip"}, "skipped"),
    ],
)
def test_a_person_moves_a_handoff(tmp_path: Path, before: list[dict[str, Any]], action: str,
                                  appended: dict[str, Any], after: str) -> None:
    log = write_log(tmp_path / "log.jsonl", [CREATED, *before])
    out = act(log, action, "watcher w1 is dead", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    last = lines(log)[-1]
    assert last == {**last, **appended, "handoff_id": "h1", "actor": "ops", "ts": t("11:00:00")}
    assert report["event"]["type"] == appended["type"] and report["state"] == after == state(log)["state"]
    assert out.stderr == ""


@pytest.mark.parametrize(
    ("before", "action", "why"),
    [
        ([CLAIMED, REQUESTED], "release",
         "h1 is resume_requested: release gives back a claim before any request, and a resume request went out; "
         "requeue it once you checked that nothing happened outside, or skip it"),
        ([CLAIMED, REQUESTED, UNCONFIRMED], "release",
         "h1 is needs_human: release gives back a claim before any request, and it is with a person; requeue it "
         "once you checked that nothing happened outside, or skip it"),
        ([], "release", "h1 is already pending: nothing to release"),
        ([], "requeue", "h1 is already pending: nothing to requeue"),
        ([{"type": "skip", "ts": t("10:00:00"), "handoff_id": "h1", "reason": "obsolete"}], "skip",
         "h1 is skipped: only an open handoff can be skipped"),
        ([{"type": "skip", "ts": t("10:00:00"), "handoff_id": "h1", "reason": "obsolete"}], "requeue",
         "h1 is skipped: it is closed"),
    ],
)
def test_a_refused_action_exits_3_with_the_reason_and_writes_nothing(
    tmp_path: Path, before: list[dict[str, Any]], action: str, why: str
) -> None:
    log = write_log(tmp_path / "log.jsonl", [CREATED, *before])
    size = log.stat().st_size
    out = act(log, action)
    assert out.returncode == 3
    assert out.stderr == f"eventlog: {action} of h1 refused: {why}\n"
    assert log.stat().st_size == size


def test_bad_usage_and_unknown_ids_exit_2(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [CREATED, CLAIMED])
    out = run_cli("handoff", "release", str(log), "nope", "--reason", "x")
    assert out.returncode == 2 and "no handoff 'nope' was ever created" in out.stderr
    assert run_cli("handoff", "release", str(log), "h1", "--reason", "  ").returncode == 2
    assert run_cli("handoff", "release", str(log), "h1").returncode == 2  # --reason is required
    assert run_cli("handoff", "release", str(tmp_path / "missing.jsonl"), "h1", "--reason", "x").returncode == 2
    assert len(lines(log)) == 2
    out = run_cli("handoff", "probe", str(log), "nobody", "--probe-cmd", "true")
    assert out.returncode == 2 and "account 'nobody'" in out.stderr


@pytest.mark.parametrize(("before", "action", "reason"), [
    ([CLAIMED, REQUESTED], "requeue", "<checked: nothing happened outside>"),  # as explain prints it
    ([CLAIMED, REQUESTED, UNCONFIRMED], "requeue", "<why it may go back>"),
    ([CLAIMED], "release", " <why> "),
    ([], "skip", "<why it is closed>"),
])
def test_a_pasted_placeholder_reason_is_refused_and_nothing_is_written(
    tmp_path: Path, before: list[dict[str, Any]], action: str, reason: str
) -> None:
    """A copied command's ``--reason '<...>'`` pasted as it is would be kept in the log as if someone had checked:
    refused as decide refuses it (exit 2, nothing written)."""
    log = write_log(tmp_path / "log.jsonl", [CREATED, *before])
    before_bytes = log.read_bytes()
    out = act(log, action, reason)
    assert out.returncode == 2
    assert "is the placeholder of a copied command: write the real one" in out.stderr, out.stderr
    assert log.read_bytes() == before_bytes
    # a reason that only quotes one in its words is a reason
    assert act(log, action, f"checked the cloud console: not {reason.strip()}").returncode == 0


def test_the_actor_defaults_to_the_os_user(tmp_path: Path) -> None:
    import getpass

    log = write_log(tmp_path / "log.jsonl", [CREATED, CLAIMED])
    out = run_cli("handoff", "release", str(log), "h1", "--reason", "x")
    assert out.returncode == 0, out.stderr
    assert lines(log)[-1]["actor"] == getpass.getuser()
    assert out.stdout.startswith("h1: released appended (release by ")


def test_the_issues_fencing_sequence_through_eventlog_append(tmp_path: Path) -> None:
    """Issue 17: w1 attempt 1 released, w2 attempt 2 claims; w1's resume_requested attempt:1 is refused, w2's taken."""
    log = write_log(tmp_path / "log.jsonl", [CREATED])

    def append(event: dict[str, Any]) -> Any:
        return run_cli("append", str(log), stdin=json.dumps(event) + "\n")

    assert append(CLAIMED).returncode == 0
    released = {"type": "released", "ts": t("10:31:00"), "handoff_id": "h1", "reason": "stale claim"}
    assert append(released).returncode == 0
    assert append({**CLAIMED, "ts": t("10:31:01"), "watcher": "w2", "attempt": 2}).returncode == 0
    w1 = append({**REQUESTED, "ts": t("10:31:02"), "attempt": 1})
    assert w1.returncode == 3
    assert "resume_requested of attempt 1 is fenced off: the live claim of h1 is attempt 2 (by w2)" in w1.stderr
    w2 = append({**REQUESTED, "ts": t("10:31:03"), "attempt": 2})
    assert w2.returncode == 0, w2.stderr
    assert state(log) == {"state": "resume_requested", "account": "cloud-account-a", "attempt": 2, "stale": None}


NAIVE = {**CREATED, "ts": "2026-08-03T09:00:00"}
NAIVE_REASON = "line 1: no_offset: ts '2026-08-03T09:00:00' has no UTC offset (give --assume-tz)"


def test_bad_lines_of_the_log_are_named(tmp_path: Path) -> None:
    """Issue 17 point 6: a handoff whose creation is a bad line is not "never created" without a word."""
    log = write_log(tmp_path / "log.jsonl", [NAIVE])
    out = act(log, "skip")
    assert out.returncode == 2
    assert out.stderr == (f"eventlog: {log}: no handoff 'h1' was ever created; {log}: 1 bad line(s) skipped: "
                          f"{NAIVE_REASON}\n")
    probe = run_cli("handoff", "probe", str(log), "cloud-account-a", "--probe-cmd", "true")
    assert probe.returncode == 2 and f"{log}: 1 bad line(s) skipped: {NAIVE_REASON}" in probe.stderr
    # With the handoff there, the action is taken and the bad line is still named.
    log = write_log(tmp_path / "two.jsonl", [NAIVE, {**CREATED, "handoff_id": "h2"}])
    out = run_cli("handoff", "skip", str(log), "h2", "--reason", "x", "--at", t("11:00:00"))
    assert out.returncode == 0
    assert out.stderr == f"eventlog: {log}: 1 bad line(s) skipped: {NAIVE_REASON}\n"
    assert lines(log)[-1]["type"] == "skip"


def test_a_conflicts_next_steps_say_what_is_true(tmp_path: Path) -> None:
    """A requeue alone meets the same conflict (the saved head cannot change): status and explain say to bring the
    tree back to the saved head and requeue, or settle it by hand and skip, never a bare requeue."""
    created = {**CREATED, "repo": "/srv/app", "branch": "main", "head": "abc1234"}
    conflict = {"type": "conflict", "ts": t("10:00:02"), "handoff_id": "h1", "attempt": 1,
                "detail": "HEAD moved from abc1234 to def5678 since the handoff was saved; nothing edited"}
    log = write_log(tmp_path / "log.jsonl", [created, CLAIMED, REQUESTED, conflict])
    out = run_cli("status", str(log), "--at", t("11:00:00"), "--json")
    [item] = [it for g in json.loads(out.stdout)["groups"] for it in g["items"]]
    assert item["reason_code"] == "needs_human"
    assert "A requeue alone meets the same conflict: bring the tree back to its saved head and requeue, or " \
           "settle it by hand and skip it" in item["reason"]
    out = run_cli("explain", str(log), "h1", "--at", t("11:00:00"), "--json")
    [verdict] = json.loads(out.stdout)["verdicts"]
    assert "bring it back (HEAD at its saved head abc1234 on main, no uncommitted changes" in verdict["says"]
    assert "of /srv/app" in verdict["says"]
    assert verdict["next"] == [
        f"eventlog handoff requeue {log} h1 --reason '<the tree is back at the saved head: how>'",
        f"eventlog handoff skip {log} h1 --reason '<settled by hand: how>'",
    ]
