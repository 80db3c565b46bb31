"""What a catch-up says when stopped, and what its dry run says a real pass would do (review R9).

A catch-up stopped by SIGTERM while its first re-run ran summed up "nothing kicked". ``catchup --dry-run`` after a
pass was killed mid re-run exited 0 listing a candidate a real pass would not kick; it now says what a real pass
would (the blocker, the command to type, exit 1), and that a real pass would do nothing while another catch-up
holds the lock. Real processes throughout.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.test_catchup_reruns import Jobs, kill_started
from tests.test_catchup_scheduler import Fake
from tests.test_follow import _wait_for
from tests.test_runner_lock_waits import held


def test_a_catchup_stopped_by_sigterm_mid_rerun_says_what_it_kicked(tmp_path: Path) -> None:
    j = Jobs(tmp_path / "j", com_x="exec sleep 30", com_y="exit 0")
    runner = j.popen("--kill-grace", "1s", "--json")
    try:
        j.wait_kicked()
        runner.send_signal(signal.SIGTERM)
        out, err = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.communicate()
        kill_started(j.dir)
    assert runner.returncode == 1, err
    report = json.loads(out)
    assert report["runs"] == [{"label": "com.x", "outcome": "interrupted", "exit": None, "written": True}]
    assert "nothing kicked" not in report["note"]
    assert report["note"] == "stopped by SIGTERM: 1 kicked and stopped (com.x); not kicked: com.y"


def test_a_dry_run_after_a_pass_killed_mid_rerun_says_what_a_real_pass_would(tmp_path: Path) -> None:
    j = Jobs(tmp_path / "j", com_x="exec sleep 30", com_y="exit 0")
    runner = j.popen("--timeout", "20s", "--kill-grace", "2s")
    try:
        j.wait_kicked()
        runner.send_signal(signal.SIGKILL)  # the runner dies mid re-run; its job runs on
        runner.wait(timeout=30)
        runner.communicate()
        dry = j.catchup("--dry-run", "--json")
        real = j.catchup("--json")
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.communicate()
        kill_started(j.dir)
    settle = f"printf '%s\\n' '{{\"type\": \"catchup_finished\", \"label\": \"com.x\", \"outcome\": \"exited\"}}' | " \
             f"eventlog append {j.log}"
    assert real.returncode == 1 and json.loads(real.stdout)["waits_for"] == ["com.x"]  # what a real pass does
    assert dry.returncode == real.returncode, dry.stderr
    report = json.loads(dry.stdout)
    assert report["waits_for"] == ["com.x"] and report["runs"] == []
    assert f"once it no longer runs, record its end: {settle}" in dry.stderr
    assert "a run now would kick nothing: a re-run may still run (com.x)" in report["note"]


def test_a_dry_run_while_another_catchup_holds_the_lock_says_a_real_pass_does_nothing(tmp_path: Path) -> None:
    j = Jobs(tmp_path / "j", com_x="exit 0")
    with held(j.log, "catchup") as holder:
        dry = j.catchup("--dry-run", "--json")
    assert dry.returncode == 0
    assert f"another catch-up holds the lock of {j.log} (eventlog catchup, pid {holder.pid}): a real pass now " \
           "would do nothing" in dry.stderr
    assert json.loads(dry.stdout)["candidates"] == ["com.x"]


def test_a_dry_run_asks_the_scheduler_as_a_real_pass_would(tmp_path: Path) -> None:
    fake = Fake(tmp_path)
    try:
        fake.plan(com_lily_a="deaf", com_lily_b="exit:0")
        assert fake.catchup("launchd", "--timeout", "0.5s", "--kill-grace", "0.5s").returncode == 1  # a left open
        dry = fake.catchup("launchd", "--dry-run")
        assert dry.returncode == 1 and json.loads(dry.stdout)["waits_for"] == ["com.lily.a"]
        assert "launchd still runs it, so nothing is kicked until it ends (re-runs never overlap): wait, or stop " \
               "it: launchctl kill SIGKILL gui/501/com.lily.a" in dry.stderr
        fake.stop_leftovers()
        assert _wait_for(lambda: not list(fake.dir.glob("com.lily.a.pid")))
        before = fake.tail()
        dry = fake.catchup("launchd", "--dry-run")
        assert dry.returncode == 1 and json.loads(dry.stdout)["waits_for"] == []
        assert "launchd no longer runs it: a real pass now writes its end" in dry.stderr
        assert fake.tail() == before  # a dry run writes nothing
    finally:
        fake.stop_leftovers()
