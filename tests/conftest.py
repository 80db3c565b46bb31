"""Shared helpers for the tests: run the CLI, write logs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args: str, stdin: bytes | str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``python -m eventlog ARGS`` and capture its output as text."""
    data = stdin.decode() if isinstance(stdin, bytes) else stdin
    return subprocess.run(
        [sys.executable, "-m", "eventlog", *args],
        input=data, capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False,
    )


def write_log(path: Path, events: list[dict[str, Any]]) -> Path:
    """Write events as JSONL lines."""
    path.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events), encoding="utf-8")
    return path


@pytest.fixture
def cli() -> Any:
    """The ``run_cli`` helper."""
    return run_cli
