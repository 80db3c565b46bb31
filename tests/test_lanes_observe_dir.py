"""The lanes pass observes each lane before it judges (seed 001: "壊れていたのは実装レーンではなく、「終わった」と
気づく主体でした").

A user review stopped the shipped observe-lane@ timer and wrote ``JOB_FINISHED job=j42 ts=<2 h ago>`` into the lane's
worker log: ``status`` said "Nothing needs a person." (exit 0), ``stalls`` said ``moving``; one observer pass would
have given ``job-unpicked``. An observer writes only what changed, so its silence cannot be told from a quiet lane.
Now ``eventlog lanes --observe DIR`` observes each lane of DIR (its ``NAME.env``, the observe-lane@ units' files,
read as data) as its first step, so one timer does both and its ``lane_check`` is the heartbeat of both (its age is
judged in tests/test_lanes_late.py). Real processes throughout.
"""

from __future__ import annotations

import json
import shlex
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, run_cli, write_log
from tests.test_lanes_pass import events, items, status

FAKE = ROOT / "tests" / "fakes" / "lanes_enqueue.py"


def ago(hours: float) -> str:
    """``hours`` before now, as a log writes it."""
    return (datetime.now().astimezone() - timedelta(hours=hours)).isoformat()


def lanes(log: Path, *extra: str, mode: str = "ok") -> Any:
    """``eventlog lanes LOG`` with the fake enqueue command (it records each call beside the log)."""
    cmd = shlex.join([sys.executable, str(FAKE), str(log.parent / "calls.jsonl"), mode])
    return run_cli("lanes", str(log), "--enqueue-cmd", cmd, *extra)


def calls(log: Path) -> list[list[str]]:
    path = log.parent / "calls.jsonl"
    return [json.loads(line)["argv"] for line in path.read_text().splitlines()] if path.exists() else []


def a_lane(tmp_path: Path, name: str = "sashiko", product: str = "sashiko-repair", finished_h: float = 2) -> Path:
    """A lane on disk (a worker log whose job finished ``finished_h`` hours ago, a progress file, a stop file that
    is not there) and its env file in ``tmp_path/lanes``, as ops/systemd/lane.env writes one; the directory."""
    home = tmp_path / name
    home.mkdir()
    (home / "worker.log").write_text(f"JOB_FINISHED job=j42 ts={ago(finished_h)}\n")
    (home / "progress.md").write_text("state: running\n")
    lanes_dir = tmp_path / "lanes"
    lanes_dir.mkdir(exist_ok=True)
    (lanes_dir / f"{name}.env").write_text(
        "# one lane (ops/systemd/lane.env)\n"
        f"LANE_PRODUCT={product}\n"
        f"LANE_WORKER_LOG={home / 'worker.log'}\n"
        f"LANE_PROGRESS='{home / 'progress.md'}'\n"
        "LANE_REPO=\n"
        f"LANE_STOP_FILE=\"{home / 'STOP'}\"\n")
    return lanes_dir


def test_the_review_story_one_lanes_pass_observes_the_finished_job_and_resumes_it(tmp_path: Path) -> None:
    """The observer's timer stopped after it wrote the lane's status; the job finished 2 h ago. The lanes pass
    with --observe reads the worker log itself, finds job-unpicked in the same pass and sends its resume."""
    lanes_dir = a_lane(tmp_path)
    log = write_log(tmp_path / "ledger.jsonl", [
        {"type": "status_updated", "ts": ago(3), "product": "sashiko-repair", "state": "running"},
    ])
    before = run_cli("stalls", str(log))
    assert json.loads(before.stdout)["results"][0]["reason"] == "moving"  # what nothing observed looks like

    out = lanes(log, "--observe", str(lanes_dir))
    assert out.returncode == 0, out.stderr
    assert "observed sashiko-repair: job_finished at " in out.stdout and "(j42)" in out.stdout
    assert "sashiko-repair: job-unpicked, resume enqueued" in out.stdout
    assert calls(log) == [["sashiko-repair", "job-unpicked"]]
    kinds = [e["type"] for e in events(log)]
    assert kinds.index("job_finished") < kinds.index("lane_check")  # observed before it judged
    check = next(e for e in events(log) if e["type"] == "lane_check")
    assert check["exit"] == "sending" and check["sending"] == {"sashiko-repair": "job-unpicked"}
    assert check["period_s"] == 3600
    stalls = run_cli("stalls", str(log))
    assert stalls.returncode == 1 and json.loads(stalls.stdout)["results"][0]["kind"] == "job-unpicked"

    again = lanes(log, "--observe", str(lanes_dir), "--json")  # nothing changed on disk: nothing observed twice
    assert again.returncode == 0, again.stderr
    assert [o["appended"] for o in json.loads(again.stdout)["observed"]] == [[]]
    assert calls(log) == [["sashiko-repair", "job-unpicked"]]


def test_a_lane_that_cannot_be_observed_is_named_and_the_pass_exits_1_the_others_observed(tmp_path: Path) -> None:
    lanes_dir = a_lane(tmp_path)
    a_lane(tmp_path, "kumihimo", "kumihimo", finished_h=0.5)
    (tmp_path / "kumihimo" / "worker.log").unlink()
    log = write_log(tmp_path / "ledger.jsonl", [])
    out = lanes(log, "--observe", str(lanes_dir))
    assert out.returncode == 1
    said = f"lane kumihimo ({lanes_dir / 'kumihimo.env'}): cannot read the worker log"
    assert said in out.stderr
    assert "observed sashiko-repair: job_finished" in out.stdout  # the other lane was observed and judged
    check = [e for e in events(log) if e["type"] == "lane_check"][-1]  # written before the resume it then sent
    assert check["exit"] == "sending" and said in check["detail"]  # then the resume went: the pass reads as error
    code, view = status(log)
    assert code == 1
    assert items(view, "lanes_error") == []  # its one problem is the lane's own item
    [unobserved] = items(view, "lane_unobserved")
    assert unobserved["id"] == "kumihimo" and said in unobserved["reason"]


def test_lane_files_are_read_as_data_and_what_the_parser_cannot_take_is_named_by_line(tmp_path: Path) -> None:
    """Never run: a command in a value stays text, a shell line is refused; each line it cannot take is
    FILE:LINE: reason, and that lane is not observed while the good one is."""
    lanes_dir = a_lane(tmp_path)
    marker = tmp_path / "ran"
    bad = lanes_dir / "bad.env"
    bad.write_text(
        "LANE_PRODUCT=odd\n"                                   # 1
        f"touch {marker}\n"                                    # 2: no KEY=VALUE
        "LANE_WORKERLOG=/tmp/typo\n"                           # 3: no such setting
        r"LANE_FINISHED_REGEX=^(?P<ts>\S+)" "\n"               # 4: a bare backslash systemd would drop
        "LANE_PROGRESS='/tmp/not closed\n"                     # 5
        "LANE_PRODUCT=again\n"                                 # 6: set twice
        f"LANE_REPO=$(touch {marker})\n")                      # 7: kept as text
    log = write_log(tmp_path / "ledger.jsonl", [])
    out = lanes(log, "--observe", str(lanes_dir))
    assert out.returncode == 1
    assert not marker.exists()
    for line, reason in ((2, "not KEY=VALUE"), (3, "LANE_WORKERLOG is not one of LANE_PRODUCT"),
                         (4, "a backslash in a bare value"), (5, "a single quote not closed on its line"),
                         (6, "LANE_PRODUCT is set again (first on line 1)")):
        assert f"{bad}:{line}: {reason}" in out.stderr, (line, out.stderr)
    assert "odd" not in [e.get("product") for e in events(log)]  # the file with refused lines is not observed
    assert "observed sashiko-repair: job_finished" in out.stdout

    bad.write_text(f"LANE_PRODUCT=odd\nLANE_REPO='$(touch {marker})'\n")  # a value, never a command
    out = lanes(log, "--observe", str(lanes_dir))
    assert not marker.exists()
    assert f"lane odd ({bad}): cannot read the repository $(touch {marker})" in out.stderr


def test_a_lanes_directory_that_observes_nothing_is_not_quiet(tmp_path: Path) -> None:
    log = write_log(tmp_path / "ledger.jsonl", [
        {"type": "status_updated", "ts": ago(1), "product": "sashiko-repair", "state": "running"},
    ])
    empty = tmp_path / "lanes"
    empty.mkdir()
    (empty / "README").write_text("not a lane\n")
    for where, said in ((empty, f"the lanes directory {empty} holds no *.env file"),
                        (tmp_path / "nowhere", f"cannot read the lanes directory {tmp_path / 'nowhere'}")):
        out = lanes(log, "--observe", str(where))
        assert out.returncode == 1 and said in out.stderr
        assert events(log)[-1]["exit"] == "error" and said in events(log)[-1]["detail"]
    out = lanes(log, "--observe=")  # empty: not given (as ledger.env's LANES_OBSERVE_DIR left empty)
    assert out.returncode == 0, out.stderr


def test_lines_that_mean_one_thing_to_systemd_and_another_to_a_person_are_named(tmp_path: Path) -> None:
    """A review: ``LANE_PRODUCT=sashiko-repair  # the main lane`` made the product ``sashiko-repair  # the main
    lane`` (systemd reads no comment after a value: so would the observe-lane@ unit); a byte order mark and ``export``
    were named as a bad key; a trailing U+3000 was trimmed here and kept by systemd (two names for one lane). Each is
    FILE:LINE: its own reason, and no such product reaches the log."""
    lanes_dir = a_lane(tmp_path)
    progress = tmp_path / "sashiko" / "progress.md"
    cases = {
        "comment": ("LANE_PRODUCT=sashiko-repair  # the main lane\n",
                    "a # after a space, which systemd keeps as part of the value"),
        "quoted": ("LANE_PRODUCT='sashiko-repair' # the main lane\n",
                   "a # after a space, which systemd keeps as part of the value"),
        "bom": ("\ufeffLANE_PRODUCT=sashiko-repair\n", "starts with a byte order mark (UTF-8 EF BB BF)"),
        "export": ("export LANE_PRODUCT=sashiko-repair\n", "not KEY=VALUE: export before the key"),
        "ideographic": ("LANE_PRODUCT=sashiko-repair\u3000\n",
                        "the value ends with U+3000 (IDEOGRAPHIC SPACE), which systemd keeps"),
        "nbsp": ("LANE_PRODUCT=\u00a0sashiko-repair\n",
                 "the value starts with U+00A0 (NO-BREAK SPACE), which systemd keeps"),
        "key": ("LANE_PRODUCT\u3000=sashiko-repair\n", "not KEY=VALUE: U+3000 (IDEOGRAPHIC SPACE) in the key"),
        "cr": (f"LANE_PROGRESS={progress}\rLANE_PRODUCT=sashiko-repair\n",
               "a carriage return inside the line, which systemd reads as a line break"),
    }
    for name, (first, _) in cases.items():
        (lanes_dir / f"{name}.env").write_text(first + f"LANE_PROGRESS={progress}\n")
    log = write_log(tmp_path / "ledger.jsonl", [])
    out = lanes(log, "--observe", str(lanes_dir))
    assert out.returncode == 1
    for name, (_, reason) in cases.items():
        assert f"{lanes_dir / name}.env:1: {reason}" in out.stderr, (name, out.stderr)
    assert {e.get("product") for e in events(log) if "product" in e} <= {"sashiko-repair"}
    assert "observed sashiko-repair: job_finished" in out.stdout  # the good lane still is

    (lanes_dir / "spaced.env").write_text("LANE_PRODUCT=a#b\u3000c  \n"  # within a value: the same to both
                                          f"LANE_PROGRESS={progress}\n")
    for name in cases:
        (lanes_dir / f"{name}.env").unlink()
    out = lanes(log, "--observe", str(lanes_dir))
    assert out.returncode == 0, out.stderr
    assert "a#b\u3000c" in {e.get("product") for e in events(log)}
