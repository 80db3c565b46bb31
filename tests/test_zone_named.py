"""A zone that is no zone is said: ``--assume-tz ""`` and a ``TZ`` nothing can read (review Z1).

``--assume-tz ""`` read as "no zone": ``replay`` and ``status`` exited 0 with every line without an offset
``no_offset``, while ``" "`` was refused; ``--assume-tz "$VAR"`` with VAR unset said nothing. ``TZ=Asia/Tokio``
is UTC to the C library, silently: ``catchup --dry-run`` said "no candidates today" and ``status`` "Nothing needs
a person." where ``TZ=Asia/Tokyo`` found the candidate. Real processes with ``TZ`` set, as a user runs them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli, write_log


@pytest.mark.parametrize("blank", ["", " "])
@pytest.mark.parametrize(("command", "more"), [("replay", []), ("status", []), ("sessions", []),
                                             ("catchup", ["--dry-run"]), ("explain", ["h1"])])
def test_an_empty_assume_tz_is_refused_naming_the_option(tmp_path: Path, command: str, more: list[str],
                                                         blank: str) -> None:
    log = write_log(tmp_path / "naive.jsonl", [
        {"type": "handoff_created", "ts": "2026-12-01T09:00:00", "handoff_id": "h1", "account": "a"}])
    out = run_cli(command, str(log), *more, "--assume-tz", blank, env={"TZ": "UTC"})
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert f"--assume-tz {blank!r} names no time zone" in out.stderr
    assert not out.stdout
