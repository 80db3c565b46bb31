"""``eventlog serve``: the operators' HTTP API and live console over one followed log.

:func:`serve` runs it until SIGINT or SIGTERM; :func:`eventlog.serve.app.make_app`
is the ASGI application alone (routes in :mod:`eventlog.serve.app`, the
followed log in :mod:`eventlog.serve.served`).
"""

from __future__ import annotations

import logging
import signal
import socket
from collections.abc import Callable
from datetime import tzinfo
from types import FrameType

import uvicorn

from eventlog.serve.app import TICK_S, make_app, stopping
from eventlog.serve.served import Served

#: How long in-flight requests get to finish after SIGINT or SIGTERM.
GRACE_S = 10.0


class _Server(uvicorn.Server):
    """uvicorn's server, whose SIGINT/SIGTERM also end the event streams and leave the exit status 0."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Stop accepting, let requests in flight finish (uvicorn), end the streams; the signal is not re-raised."""
        self._on_exit()
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        else:
            self.should_exit = True


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (port 0: a free one); OSError when it cannot be had."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto named: asyncio sets TCP_NODELAY only on sockets that say IPPROTO_TCP, and without it a
    # response's second write waits for the client's delayed ACK (40 ms on every kept-alive request)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(512)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def serve(
    target: str,
    keys_path: str,
    sock: socket.socket,
    *,
    assume_tz: tzinfo | None = None,
    tick_s: float = TICK_S,
    access_log: bool = True,
) -> None:
    """Follow ``target`` and answer on ``sock`` until SIGINT or SIGTERM (requests in flight are answered)."""
    served = Served(target, assume_tz=assume_tz, stale_s=tick_s)
    served.start()
    app = make_app(served, keys_path, tick_s=tick_s)
    config = uvicorn.Config(app, log_level="info", access_log=access_log, timeout_graceful_shutdown=int(GRACE_S),
                            server_header=False, proxy_headers=False, lifespan="on")
    server = _Server(config, lambda: stopping(app))
    try:
        server.run(sockets=[sock])
    finally:
        served.stop()
        logging.getLogger("eventlog.serve").info("stopped")


__all__ = ["GRACE_S", "listen", "serve"]
