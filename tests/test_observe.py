"""``eventlog observe lane``: seed 001's inputs (worker log, the repository's HEAD, the progress file, the stop
file) into lane events, only what changed, run as cron would run it."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.usefixtures("git_binary")

J = "+09:00"


def t(clock: str, day: str = "2026-08-05") -> str:
    return f"{day}T{clock}{J}"


def git(repo: Path, *args: str, when: str | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@example.com",
           "GIT_COMMITTER_NAME": "dev", "GIT_COMMITTER_EMAIL": "dev@example.com"}
    if when is not None:
        env.update(GIT_AUTHOR_DATE=when, GIT_COMMITTER_DATE=when)
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def commit(repo: Path, when: str, name: str = "change") -> str:
    (repo / name).write_text(when)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", name, when=when)
    return git(repo, "rev-parse", "HEAD")


def touch(path: Path, text: str, when: str) -> Path:
    path.write_text(text)
    stamp = datetime.fromisoformat(when).timestamp()
    os.utime(path, (stamp, stamp))
    return path


class Lane:
    """A lane's files, as seed 001's homelab has them, and the observer's command line."""

    def __init__(self, tmp: Path) -> None:
        self.log = tmp / "lanes.jsonl"
        self.repo = tmp / "product"
        subprocess.run(["git", "init", "-q", "-b", "main", str(self.repo)], check=True)
        self.first = commit(self.repo, t("10:00:00"), "start")
        self.worker_log = touch(tmp / "worker.log", "starting fix-42\n", t("10:00:00"))
        self.progress = touch(tmp / "progress.md", "# sashiko-repair\nstate: running\n", t("12:50:00"))
        self.stop = tmp / "STOP"

    def observe(self, *extra: str, at: str = t("13:00:00")) -> Any:
        return run_cli("observe", "lane", str(self.log), "sashiko-repair", "--worker-log", str(self.worker_log),
                       "--repo", str(self.repo), "--progress", str(self.progress), "--stop-file", str(self.stop),
                       "--assume-tz", "Asia/Tokyo", "--at", at, *extra)

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []


def finish(lane: Lane, line: str) -> None:
    with lane.worker_log.open("a") as f:
        f.write(line + "\n")


def test_seed_001s_unpicked_job_from_the_files_it_left(tmp_path: Path) -> None:
    lane = Lane(tmp_path)
    finish(lane, f"JOB_FINISHED job=fix-42 ts={t('12:54:00')}")
    out = lane.observe("--json")
    assert out.returncode == 0, out.stderr
    assert [(e["type"], e["ts"]) for e in lane.events()] == [
        ("repo_commit", t("10:00:00")), ("status_updated", t("12:50:00")), ("job_finished", t("12:54:00"))]
    assert lane.events()[0]["head"] == lane.first and lane.events()[2]["job_id"] == "fix-42"
    assert lane.events()[1]["state"] == "running"
    # The seed: the finished work sat unpicked for about 21 hours.
    stalls = run_cli("stalls", str(lane.log), "--at", t("09:54:00", "2026-08-06"))
    assert stalls.returncode == 1
    [result] = json.loads(stalls.stdout)["results"]
    assert result == {"product": "sashiko-repair", "stalled": True, "kind": "job-unpicked",
                      "detail": "作業は21時間0分前に終わっていますが、その成果がまだ取り込まれていません",
                      "finished_at": t("12:54:00")}


def test_nothing_changed_nothing_written(tmp_path: Path) -> None:
    lane = Lane(tmp_path)
    finish(lane, f"JOB_FINISHED job=fix-42 ts={t('12:54:00')}")
    assert lane.observe().returncode == 0
    before = lane.log.read_bytes()
    again = lane.observe(at=t("13:10:00"))
    assert again.returncode == 0 and again.stdout == "sashiko-repair: nothing changed, nothing written\n"
    assert lane.log.read_bytes() == before


def test_only_what_changed_is_appended(tmp_path: Path) -> None:
    lane = Lane(tmp_path)
    finish(lane, f"JOB_FINISHED job=fix-41 ts={t('11:00:00')}")
    lane.observe()
    n = len(lane.events())
    # A second job finishes, the progress file is rewritten idle, the product moves, the lane is stopped.
    finish(lane, f"JOB_FINISHED job=fix-42 ts={t('12:54:00')}")
    touch(lane.progress, "state: idle\n", t("13:05:00"))
    head = commit(lane.repo, t("14:00:00"))
    touch(lane.stop, "", t("14:30:00"))
    out = lane.observe("--json", at=t("15:00:00"))
    assert out.returncode == 0, out.stderr
    added = lane.events()[n:]
    assert [(e["type"], e["ts"]) for e in added] == [
        ("job_finished", t("12:54:00")), ("status_updated", t("13:05:00")), ("repo_commit", t("14:00:00")),
        ("lane_stopped", t("14:30:00"))]
    assert added[1]["state"] == "idle" and added[2]["head"] == head
    assert [e["type"] for e in json.loads(out.stdout)["appended"]] == [e["type"] for e in added]
    # The stop file is gone: the stop is lifted, stamped now (--at).
    lane.stop.unlink()
    lane.observe(at=t("16:00:00"))
    assert lane.events()[-1] == {**lane.events()[-1], "type": "lane_started", "ts": t("16:00:00")}


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ('{"state": "idle", "updated": "2026-08-05T13:05:00+09:00"}\n', "idle"),  # compact JSON, as a program writes it
        ('{"task": "fix-42", "state":"idle"}', "idle"),
        ('{\n  "previous": {\n    "state": "idle"\n  },\n  "state": "running"\n}\n', "running"),  # the top level's
        ('{"task": {"state": "idle"}}\n', "running"),  # a nested state is not the lane's: none said, running
        ("state: idle\n", "idle"),  # YAML
        ("# sashiko-repair\n\nstate=idle\n", "idle"),
        ('"state": "idle",\n', "idle"),  # a JSON-like line in a file that is no JSON object
        ("# sashiko-repair\n\n- state: idle\n- task: fix-42\n", "idle"),  # a Markdown bullet
        ("* State: Idle\n", "idle"),
        ("+ STATE: idle\n", "idle"),
        ("State: idle\n", "idle"),
        ("- **State:** idle\n", "idle"),
        ("- **state**: `idle`\n", "idle"),
        ("- state: running\n", "running"),
        ("- the state: idle is what we want\n", "running"),  # not a state line: none said, running
    ],
)
def test_the_progress_file_s_idle_state_is_read_in_any_layout(tmp_path: Path, text: str, state: str) -> None:
    """Seed 001: state: idle is a lane stopped on purpose, never a stall. A JSON progress file says it on one line
    as often as on its own line; either way the lane is idle, and an idle lane gets no resume."""
    lane = Lane(tmp_path)
    touch(lane.progress, text, t("13:05:00", "2026-08-04"))
    out = run_cli("observe", "lane", str(lane.log), "sashiko-repair", "--progress", str(lane.progress),
                  "--assume-tz", "Asia/Tokyo")
    assert out.returncode == 0, out.stderr
    assert [(e["type"], e["state"]) for e in lane.events()] == [("status_updated", state)]
    stalls = run_cli("stalls", str(lane.log), "--at", t("13:05:00"))  # a day later: quiet for 24 h unless idle
    [result] = json.loads(stalls.stdout)["results"]
    assert (stalls.returncode, result.get("reason")) == ((0, "lane-idle") if state == "idle" else (1, None))


def test_a_fast_forward_counts_from_when_the_repository_moved(tmp_path: Path) -> None:
    """The worker committed at 12:50 on a task branch; the product fast-forwarded to it at 14:00: picked up."""
    lane = Lane(tmp_path)
    git(lane.repo, "checkout", "-q", "-b", "task")
    task = commit(lane.repo, t("12:50:00"), "fix")
    git(lane.repo, "checkout", "-q", "main", when=t("12:51:00"))
    finish(lane, f"JOB_FINISHED job=fix-42 ts={t('12:54:00')}")
    lane.observe()
    git(lane.repo, "merge", "-q", "--ff-only", "task", when=t("14:00:00"))
    lane.observe(at=t("14:10:00"))
    moved = lane.events()[-1]
    assert moved == {**moved, "type": "repo_commit", "head": task, "ts": t("14:00:00")}  # the reflog, not 12:50
    # 96 minutes after the finish (over the 90-minute threshold) it counts as picked up.
    stalls = run_cli("stalls", str(lane.log), "--at", t("14:30:00"))
    assert stalls.returncode == 0 and json.loads(stalls.stdout)["results"][0]["reason"] == "moving"


def test_the_finished_format_is_configurable(tmp_path: Path) -> None:
    lane = Lane(tmp_path)
    finish(lane, "2026-08-05 12:54:00 worker: finished job fix-42 (exit 0)")
    out = lane.observe("--finished-regex", r"^(?P<ts>\S+ \S+) worker: finished job (?P<job_id>\S+)")
    assert out.returncode == 0, out.stderr
    found = [e for e in lane.events() if e["type"] == "job_finished"]
    assert [(e["ts"], e["job_id"]) for e in found] == [(t("12:54:00"), "fix-42")]  # read in --assume-tz


def test_epoch_times_and_lines_without_a_job(tmp_path: Path) -> None:
    lane = Lane(tmp_path)
    stamp = int(datetime.fromisoformat(t("12:54:00")).timestamp())
    finish(lane, f"JOB_FINISHED ts={stamp}")
    assert lane.observe().returncode == 0
    [found] = [e for e in lane.events() if e["type"] == "job_finished"]
    assert found["ts"] == t("12:54:00") and "job_id" not in found


def test_a_source_that_cannot_be_read_is_named_and_the_rest_observed(tmp_path: Path) -> None:
    lane = Lane(tmp_path)
    lane.worker_log.unlink()
    out = lane.observe()
    assert out.returncode == 1
    assert out.stderr.startswith(f"eventlog: cannot read the worker log {lane.worker_log}: ")
    assert [e["type"] for e in lane.events()] == ["repo_commit", "status_updated"]


def test_a_time_without_an_offset_needs_the_zone(tmp_path: Path) -> None:
    lane = Lane(tmp_path)
    finish(lane, "JOB_FINISHED job=fix-42 ts=2026-08-05T12:54:00")
    out = run_cli("observe", "lane", str(lane.log), "sashiko-repair", "--worker-log", str(lane.worker_log))
    assert out.returncode == 1
    assert out.stderr == (f"eventlog: {lane.worker_log}:2: time '2026-08-05T12:54:00' has no UTC offset "
                          "(give --assume-tz)\n")
    assert not lane.log.exists()  # nothing to write


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], "nothing to observe"),
        (["--worker-log", "w.log", "--finished-regex", "JOB_FINISHED"], "has no named group ts"),
        (["--worker-log", "w.log", "--finished-regex", "(unclosed"], "--finished-regex '(unclosed'"),
    ],
)
def test_bad_usage_exits_2(tmp_path: Path, args: list[str], words: str) -> None:
    out = run_cli("observe", "lane", str(tmp_path / "lanes.jsonl"), "p", *args)
    assert out.returncode == 2 and words in out.stderr
    assert not (tmp_path / "lanes.jsonl").exists()


def test_bad_lines_of_the_log_are_named_and_exit_1(tmp_path: Path) -> None:
    """Issue 17 point 6: a runner says how many bad lines it skipped and the first reasons, and exits 1.

    The lane's own job_finished is written without an offset: observe cannot know it, so it must say so.
    """
    lane = Lane(tmp_path)
    lane.log.write_text('{"type":"job_finished","ts":"2026-08-05T12:54:00","product":"sashiko-repair"}\n')
    out = run_cli("observe", "lane", str(lane.log), "sashiko-repair", "--progress", str(lane.progress),
                  "--at", t("13:00:00"))
    assert out.returncode == 1
    assert out.stderr == (f"eventlog: {lane.log}: 1 bad line(s) skipped: line 1: no_offset: ts '2026-08-05T12:54:00' "
                          "has no UTC offset (give --assume-tz)\n")
    assert [e["type"] for e in lane.events()] == ["job_finished", "status_updated"]  # the rest is still observed
    again = run_cli("observe", "lane", str(lane.log), "sashiko-repair", "--progress", str(lane.progress))
    assert again.returncode == 1 and again.stdout == "sashiko-repair: nothing written; 1 problem(s), on stderr\n"


@pytest.mark.parametrize("stopped", [True, False])
def test_a_stop_file_that_cannot_be_checked_is_named_and_changes_nothing(tmp_path: Path, stopped: bool) -> None:
    """Seed 001: a lane stopped on purpose gets no resume. A stop file that cannot be checked (a symlink to
    itself: ELOOP) is not a stop file gone: lifting the stop on it would send the lane a resume."""
    lane = Lane(tmp_path)
    if stopped:
        touch(lane.stop, "", t("12:00:00"))
        assert lane.observe().returncode == 0
        assert "lane_stopped" in [e["type"] for e in lane.events()]
    lane.stop.unlink(missing_ok=True)
    lane.stop.symlink_to(lane.stop.name)  # STOP -> STOP
    before = lane.events()
    out = lane.observe(at=t("14:00:00"))
    assert out.returncode == 1
    assert out.stderr == (f"eventlog: cannot check the stop file {lane.stop}: Too many levels of symbolic links "
                          "(the lane's stop is left as the log has it)\n")
    assert [e["type"] for e in lane.events()[len(before):]] == ([] if stopped else ["repo_commit", "status_updated"])
    assert not any(e["type"] in ("lane_started", "lane_stopped") for e in lane.events()[len(before):])
    # A stop file that does not exist is no problem: the stop is lifted.
    lane.stop.unlink()
    again = lane.observe(at=t("15:00:00"))
    assert again.returncode == 0, again.stderr
    assert [e["type"] for e in lane.events()][-1:] == (["lane_started"] if stopped else ["status_updated"])


def test_finished_lines_older_than_the_lane_s_latest_are_counted(tmp_path: Path) -> None:
    """A job finished at 12:00 but written after one of 12:54 was observed is not appended (appended after
    it, it would become the latest by log order), and the report says so, as imports count "older"."""
    lane = Lane(tmp_path)
    finish(lane, f"JOB_FINISHED job=fix-42 ts={t('12:54:00')}")
    assert lane.observe().returncode == 0
    finish(lane, f"JOB_FINISHED job=fix-43 ts={t('12:00:00')}")
    out = lane.observe("--json", at=t("13:10:00"))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["older"] == [f"{lane.worker_log}:3"]
    assert [e.get("job_id") for e in lane.events() if e["type"] == "job_finished"] == ["fix-42"]
    words = lane.observe(at=t("13:20:00"))
    assert words.returncode == 0 and words.stdout == (
        "sashiko-repair: nothing changed, nothing written; 1 finished line(s) older than the lane's latest "
        f"job_finished, not appended: {lane.worker_log}:3\n")


def test_a_worker_log_line_over_1_mib_is_named_never_held_whole_and_the_rest_is_read(tmp_path: Path) -> None:
    """Review R9: a lane's worker log with one 100 MB line took the observation (and so the lanes pass) to about
    217 MB RSS. That line is skipped in pieces and named as the log reader names it (it may be the finished
    line: exit 1); the lines after it are read. Peak RSS against a small line, no timing."""
    import sys

    from eventlog.reader import MAX_LINE_BYTES
    from tests.conftest import peak_rss_kb, write_long_line

    peaks: dict[str, int] = {}
    codes: dict[str, int] = {}
    for name, mb in (("small", 0), ("huge", 100)):
        worker = write_long_line(tmp_path / f"{name}.log", "progress ", mb,
                                 "\nJOB_FINISHED job=j1 ts=2026-12-02T10:00:00Z\n")
        log = tmp_path / f"{name}.jsonl"
        argv = [sys.executable, "-m", "eventlog", "observe", "lane", str(log), "p", "--worker-log", str(worker)]
        codes[name], peaks[name] = peak_rss_kb(argv)
        assert [json.loads(x)["job_id"] for x in log.read_text().splitlines()] == ["j1"]
    assert peaks["huge"] - peaks["small"] < 20 * 1024, peaks  # KiB: the line alone is 100 MB
    assert codes == {"small": 0, "huge": 1}
    out = run_cli("observe", "lane", str(tmp_path / "again.jsonl"), "p", "--worker-log", str(tmp_path / "huge.log"))
    assert out.returncode == 1
    assert f"{tmp_path / 'huge.log'}:1: too_long: line is longer than {MAX_LINE_BYTES} bytes" in out.stderr
