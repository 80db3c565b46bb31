"""A key file that is a FIFO is refused, never read (review R9).

``serve --keys FIFO`` hung at its start with nothing said, and a key file swapped for a FIFO hung every request,
``/healthz`` and SIGTERM included: it is refused as the runners refuse a FIFO source. A real server and client.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import run_cli, write_log
from tests.serving import make_keys, start_server


def test_serve_refuses_a_fifo_key_file_at_start(tmp_path: Path) -> None:
    log = write_log(tmp_path / "e.jsonl", [])
    os.mkfifo(tmp_path / "keys.json", 0o600)
    out = run_cli("serve", str(log), "--keys", str(tmp_path / "keys.json"), "--port", "0", timeout=60)
    assert out.returncode == 2
    assert f"cannot read key file {tmp_path / 'keys.json'}: is a FIFO, not a regular file" in out.stderr


def test_a_key_file_swapped_for_a_fifo_is_unusable_not_a_hang(tmp_path: Path) -> None:
    log = write_log(tmp_path / "e.jsonl", [])
    path = tmp_path / "keys.json"
    keys = make_keys(path, {"ops": ["read"]})
    server = start_server(log, tmp_path, keys)  # it serves tmp_path / "keys.json"
    try:
        assert server.client().get("/v1/status").status_code == 200
        path.unlink()
        os.mkfifo(path, 0o600)
        got = server.client(timeout=30).get("/v1/status")
        assert got.status_code == 503 and "is a FIFO, not a regular file" in got.text
        assert server.client(None).get("/healthz").status_code == 200
    finally:
        assert server.stop() == 0
