"""Shared helpers for the tests: run the CLI, write logs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent

# No property test is a timing test (speed is tools/bench's): hypothesis's 200 ms deadline per example failed one
# on a machine busy with other work ("Unreliable test timings", 277 ms then 0.8 ms).
settings.register_profile("untimed", deadline=None)
settings.load_profile("untimed")


def run_cli(*args: str, stdin: bytes | str | None = None, timeout: float = 60,
            env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run ``python -m eventlog ARGS`` in ``cwd`` and capture its output as text (``env``: variables set on top of
    ours)."""
    data = stdin.decode() if isinstance(stdin, bytes) else stdin
    return subprocess.run(
        [sys.executable, "-m", "eventlog", *args],
        input=data, capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False,
        env=None if env is None else {**os.environ, **env},
    )


#: Runs argv (stdout to /dev/null) from a fresh small process and prints its exit and peak RSS (KiB, wait4: it and
#: the processes it waited for). Started from the test process directly, a child's peak counted the test
#: process's own (its memory at the fork, kept across exec), so a big test process hid what the child took.
_PEAK = """import os, sys
pid = os.fork()
if pid == 0:
    fd = os.open(os.devnull, os.O_WRONLY); os.dup2(fd, 1)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def peak_rss_kb(argv: list[str]) -> tuple[int, int]:
    """Run ``argv`` (its stdout to /dev/null) and give its exit status and its peak RSS in KiB (with the
    processes it waited for: the largest of them). No timing in it."""
    out = subprocess.run([sys.executable, "-c", _PEAK, *argv], capture_output=True, text=True, timeout=600,
                         check=True)
    code, kb = out.stdout.split()
    return int(code), int(kb)


def write_long_line(path: Path, before: str, mb: int, after: str) -> Path:
    """Write ``before``, ``mb`` million filler characters, then ``after``, in pieces (the test process stays small
    however long the line is): a file holding one line far over MAX_LINE_BYTES."""
    with path.open("w") as f:
        f.write(before)
        for _ in range(mb):
            f.write("z" * 1_000_000)
        f.write(after)
    return path


def write_log(path: Path, events: list[dict[str, Any]]) -> Path:
    """Write events as JSONL lines."""
    path.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events), encoding="utf-8")
    return path


def bound_by_permissions() -> list[str]:
    """The command that runs a process which file permissions bind: as root, root without the capabilities that
    let it read or write any file (``setpriv``; still uid 0, so the test's files stay its own); nothing for another
    user."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("root reads and writes a chmod 000 file; setpriv is needed to run without that power")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]


@pytest.fixture
def cli() -> Any:
    """The ``run_cli`` helper."""
    return run_cli


def system_tool(name: str, package: str) -> str:
    """The path of a system binary a test needs: a loud skip when it is absent outside CI, a failure in CI
    (``.ci/run`` installs Debian's ``package`` when it is missing)."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed, and CI must run this test (.ci/run installs Debian's {package})")
        pytest.skip(f"{name.upper()} IS NOT INSTALLED: this check did not run (apt-get install -y {package})")
    return path


@pytest.fixture
def git_binary() -> str:
    """git's path (the lane observer and the resume example read real working trees)."""
    return system_tool("git", "git")
