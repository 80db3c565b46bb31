"""A real ``eventlog serve`` process on 127.0.0.1 (a free port) for the tests, and its keys."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import ROOT, run_cli

#: How long a server may take to read its log and answer /healthz.
START_TIMEOUT_S = 60.0
SCOPES = {"ops": ["read", "events:append", "sessions:recover"], "viewer": ["read"], "writer": ["events:append"],
          "decider": ["sessions:recover"]}


def make_keys(path: Path, names: dict[str, list[str]] | None = None) -> dict[str, str]:
    """Add one key per name (``eventlog keys add``); the keys printed, by name."""
    out = {}
    for name, scopes in (names or SCOPES).items():
        args = ["keys", "add", str(path), name]
        for scope in scopes:
            args += ["--scope", scope]
        done = run_cli(*args)
        assert done.returncode == 0, done.stderr
        out[name] = done.stdout.strip()
    return out


@dataclass
class Server:
    """A running server: its base URL, process, keys and where its output goes."""

    proc: subprocess.Popen[bytes]
    url: str
    keys: dict[str, str]
    stdout: Path
    stderr: Path
    log: str
    clients: list[httpx.Client] = field(default_factory=list)

    def client(self, name: str | None = "ops", **kw: Any) -> httpx.Client:
        """An httpx client for the server, sending the named key (None: no key)."""
        headers = {"Authorization": f"Bearer {self.keys[name]}"} if name else {}
        c = httpx.Client(base_url=self.url, headers=headers, timeout=kw.pop("timeout", 30.0), **kw)
        self.clients.append(c)
        return c

    def output(self) -> str:
        """Everything the server printed so far (stdout and stderr)."""
        return self.stdout.read_text(errors="replace") + self.stderr.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Send ``sig`` and wait for the exit status."""
        for c in self.clients:
            c.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise


def start_server(log: str | Path, tmp: Path, keys: dict[str, str] | None = None, *extra: str,
                 ready: bool = True, cwd: Path = ROOT, via: Sequence[str] = (),
                 preexec: Callable[[], None] | None = None) -> Server:
    """Start ``eventlog serve LOG --port 0`` in ``cwd`` and wait until /healthz answers 200 (when ``ready``).

    A LOG that starts with ``-`` is given after ``--``. ``via``: a command that runs it (``setpriv ... --``);
    ``preexec``: what its process does before it starts (``resource.setrlimit``).
    """
    key_file = tmp / "keys.json"
    if keys is None:
        keys = make_keys(key_file)
    stdout, stderr = tmp / "serve.out", tmp / "serve.err"
    proc = subprocess.Popen(
        [*via, sys.executable, "-m", "eventlog", "serve", "--keys", str(key_file), "--port", "0", *extra, "--",
         str(log)],
        stdout=stdout.open("wb"), stderr=stderr.open("wb"), stdin=subprocess.DEVNULL, cwd=cwd, preexec_fn=preexec,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    url = None
    while url is None:
        m = re.search(r"on (http://127\.0\.0\.1:\d+)/", stderr.read_text(errors="replace"))
        if m:
            url = m.group(1)
        elif proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"serve did not start: {stderr.read_text(errors='replace')}")
        else:
            time.sleep(0.05)
    server = Server(proc, url, keys, stdout, stderr, str(log))
    if ready:
        wait_healthy(server)
    return server


def wait_healthy(server: Server, timeout: float = START_TIMEOUT_S) -> None:
    """Poll /healthz until it answers 200."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(server.url + "/healthz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if server.proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"serve never became healthy: {server.output()}")
        time.sleep(0.05)
