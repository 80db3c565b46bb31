"""The README's worked example of the resume handshake, ``examples/failback/resume_async.sh``, run as a user would.

A failback pass runs it as ``--resume-cmd``; it looks at a real git working tree, starts the
"cloud session" (here a shell command that waits for a file the test creates) detached, answers
``started``, and the session's end is reported into the log with ``eventlog append``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, run_cli, write_log

SCRIPT = ROOT / "examples" / "failback" / "resume_async.sh"
PROBE = ROOT / "tests" / "fakes" / "failback_probe.py"

pytestmark = pytest.mark.usefixtures("git_binary")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def make_repo(path: Path) -> str:
    """A working tree with one commit; its HEAD."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "README").write_text("app\n")
    git(path, "add", "README")
    git(path, "-c", "user.email=dev@example.com", "-c", "user.name=dev", "commit", "-q", "-m", "first")
    return git(path, "rev-parse", "HEAD")


def lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def wait_for_line(log: Path, kind: str, timeout_s: float = 30) -> dict[str, Any]:
    """The first line of type ``kind`` once the detached half has appended it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [e for e in lines(log) if e["type"] == kind]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no {kind} in {log} after {timeout_s} s: {lines(log)}")


def failback(tmp_path: Path, log: Path, session: str) -> subprocess.CompletedProcess[str]:
    """One pass with the example as the resume command, as a cron line would run it."""
    env = {**os.environ, "CLOUD_SESSION": session, "TMPDIR": str(tmp_path),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    assert (Path(sys.executable).parent / "eventlog").exists(), "tools/setup installs the eventlog command"
    return subprocess.run(
        [sys.executable, "-m", "eventlog", "failback", str(log), "--probe-cmd", f"{sys.executable} {PROBE} ok",
         "--resume-cmd", f"{SCRIPT} {{handoff_id}}", "--watcher", "w1", "--json"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=60, check=False,
    )


def handoff_log(tmp_path: Path, repo: Path, head: str) -> Path:
    return write_log(tmp_path / "work.jsonl", [{
        "type": "handoff_created", "ts": "2026-08-03T09:00:00+09:00", "handoff_id": "h1",
        "account": "cloud-account-a", "repo": str(repo), "branch": "main", "head": head,
    }])


def test_started_then_the_session_reports_verified(tmp_path: Path) -> None:
    head = make_repo(tmp_path / "app")
    log = handoff_log(tmp_path, tmp_path / "app", head)
    go = tmp_path / "go"
    out = failback(tmp_path, log, f"while [ ! -e {go} ]; do sleep 0.05; done; echo already_done")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["resumed"][0]["result"] == "started" and report["resumed"][0]["attempt"] == 1
    # The pass is over and nothing came back yet: the handoff waits as resume_requested.
    assert [e["type"] for e in lines(log)] == ["handoff_created", "probe_result", "claimed", "resume_requested",
                                               "watcher_run"]
    go.touch()
    verified = wait_for_line(log, "verified")
    assert verified == {**verified, "handoff_id": "h1", "attempt": 1, "branch": "main", "head": head,
                        "dirty": False, "todos": "already_done"}
    status = run_cli("replay", str(log))
    assert json.loads(status.stdout)["handoffs"]["items"]["h1"]["state"] == "returned"


def test_a_session_that_fails_after_starting_reports_effect_unknown(tmp_path: Path) -> None:
    head = make_repo(tmp_path / "app")
    log = handoff_log(tmp_path, tmp_path / "app", head)
    out = failback(tmp_path, log, "echo 'lost the connection' >&2; exit 7")
    assert out.returncode == 0, out.stderr
    failed = wait_for_line(log, "resume_failed")
    assert failed == {**failed, "attempt": 1, "effect": "unknown", "error": "session exit 7: lost the connection"}


def test_someone_elses_change_is_a_conflict_and_nothing_starts(tmp_path: Path) -> None:
    head = make_repo(tmp_path / "app")
    (tmp_path / "app" / "README").write_text("edited by someone else\n")
    log = handoff_log(tmp_path, tmp_path / "app", head)
    marker = tmp_path / "session-ran"
    out = failback(tmp_path, log, f"touch {marker}")
    assert out.returncode == 1  # a conflict goes to a person
    conflict = lines(log)[4]
    assert conflict["type"] == "conflict" and conflict["attempt"] == 1
    assert "uncommitted changes" in conflict["detail"] and not marker.exists()


def test_a_session_that_cannot_start_is_effect_none_and_pending_again(tmp_path: Path) -> None:
    head = make_repo(tmp_path / "app")
    log = handoff_log(tmp_path, tmp_path / "app", head)
    out = failback(tmp_path, log, "no-such-cloud-cli --resume")
    assert out.returncode == 0, out.stderr
    failed = lines(log)[4]
    assert failed == {**failed, "type": "resume_failed", "effect": "none",
                      "error": "cannot start the session: no-such-cloud-cli not found"}
    assert json.loads(run_cli("replay", str(log)).stdout)["handoffs"]["items"]["h1"]["state"] == "pending"


def test_the_readmes_transcript_works_as_written(tmp_path: Path) -> None:
    """README, "The resume handshake": the append example's handoff (no repo), then the transcript's own lines in
    one shell, with only what is the user's own stood in: HOME (its ``~/src/app`` is a clean checkout here), the
    probe, and the cloud session (no ``claude`` here). It failed with "no working tree at ''" while the transcript
    set no REPO_DIR."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [append] = re.findall(r"^\$ (echo '\{\"type\":\"handoff_created\".*\}' \| eventlog append work\.jsonl)$",
                          readme, re.M)
    section = readme.split("### The resume handshake", 1)[1].split("```console\n", 1)[1].split("```", 1)[0]
    commands = [line[2:].split("   #")[0].split("    #")[0] for line in section.splitlines()
                if line.startswith("$ ")]
    exports = [c for c in commands if c.startswith("export ")]
    [failback_line] = [c for c in commands if c.startswith("eventlog failback ")]
    assert "\\" in failback_line  # continued on the next line as shown: join it as a shell does
    joined = section.split("$ eventlog failback ", 1)[1].split("\n")
    failback_cmd = "eventlog failback " + joined[0].rstrip("\\").rstrip() + " " + joined[1].strip()
    head = make_repo(tmp_path / "src" / "app")
    go = tmp_path / "go"
    session = f"while [ ! -e {go} ]; do sleep 0.05; done"
    probe = f"{sys.executable} {PROBE} ok"
    script = "\n".join([append, *exports, f"export CLOUD_SESSION={shlex.quote(session)}",  # the stand-in session
                        failback_cmd.replace("""'claude -p "reply PING_OK"'""", shlex.quote(probe))
                        .replace("examples/failback/", f"{ROOT}/examples/failback/") + " --json"])
    env = {**os.environ, "HOME": str(tmp_path), "TMPDIR": str(tmp_path),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("REPO_DIR", None)
    out = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout.splitlines()[-1])  # after the append's own line
    assert report["resumed"][0]["result"] == "started", report["resumed"]
    go.touch()
    verified = wait_for_line(tmp_path / "work.jsonl", "verified")
    assert verified == {**verified, "handoff_id": "h1", "attempt": 1, "branch": "main", "head": head, "dirty": False}
