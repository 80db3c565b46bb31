"""``eventlog serve`` (the operators' HTTP API and console) and ``eventlog keys add``."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from typing import Any

from eventlog import keys as keyfile
from eventlog.cli.common import (
    UsageError,
    add_assume_tz,
    add_log,
    command_parser,
    duration,
    error,
    mark_done,
    zone,
)
from eventlog.logs import LogUnavailable

SERVE = """\
Follow LOG in memory (as follow does) and answer the operators' HTTP API and the
console on http://HOST:PORT/ (spec: Operator HTTP API). Every route but /healthz
and the console's pages needs Authorization: Bearer KEY with a key of --keys
(made by `eventlog keys add`); a decision is appended with actor = the key's
name. Views are judged as of now (a judgement is reused for at most a second
while the log has not moved) unless ?at=TIME or ?at=log. Serve plain HTTP on
127.0.0.1 and put a TLS reverse proxy in front (README). --port 0 takes a free
port; the address is said on stderr. SIGINT and SIGTERM stop it after the
requests in flight are answered."""

SERVE_EXITS = """\
0  stopped by SIGINT or SIGTERM
2  bad usage, an unusable key file or LOG, or the address cannot be listened on"""

KEYS_ADD = """\
Add a new random key named NAME with the given scopes to FILE (created with mode
0600) and print the key once on stdout: only its SHA-256, the name and the scopes
are stored. Scopes: read, events:append, sessions:recover. NAME is the actor of
the decisions sent with the key."""

KEYS_EXITS = """\
0  added (the key is printed)
2  bad usage, a bad name or scope, a name already in FILE, or a FILE that cannot be used"""


def register(sub: Any) -> None:
    """Add ``serve`` and ``keys``."""
    p = command_parser(sub, "serve", help="the operators' HTTP API and live console over LOG",
                       description=SERVE, exits=SERVE_EXITS)
    add_log(p)
    p.add_argument("--keys", required=True, metavar="FILE", help="the key file (eventlog keys add)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port to listen on (8080; 0: a free one)")
    p.add_argument("--tick", type=duration, default=5.0, metavar="DURATION",
                   help="event streams re-judge at least this often when no line arrives (5s)")
    p.add_argument("--no-access-log", dest="access_log", action="store_false",
                   help="do not log each request (method, path, status; never a header)")
    add_assume_tz(p)
    p.set_defaults(run=run_serve)

    k = command_parser(sub, "keys", help="manage the API keys of eventlog serve", exits=KEYS_EXITS)
    ksub = k.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    a = command_parser(ksub, "add", help="add a new random key and print it once", description=KEYS_ADD,
                       exits=KEYS_EXITS)
    a.add_argument("file", metavar="FILE")
    a.add_argument("name", metavar="NAME")
    a.add_argument("--scope", action="append", required=True, choices=keyfile.SCOPES, metavar="SCOPE",
                   help=f"one of {', '.join(keyfile.SCOPES)} (repeat for more)")
    a.set_defaults(run=run_keys_add)


def run_keys_add(args: argparse.Namespace) -> int:
    """Print the new key once; exit 2 when it cannot be added."""
    try:
        key = keyfile.add_key(args.file, args.name, args.scope)
    except keyfile.KeyError_ as err:
        error(str(err))
        return 2
    mark_done(f"key {args.name!r} added to {args.file}, but it was never shown and cannot be used: delete its entry "
              f"from {args.file} to add {args.name!r} again")
    print(key)
    error(f"added key {args.name!r} ({', '.join(sorted(set(args.scope)))}) to {args.file}; "
          "it is shown only this once")
    return 0


def run_serve(args: argparse.Namespace) -> int:
    """Serve until SIGINT/SIGTERM; exit 0 then, 2 when it cannot start."""
    from eventlog.serve import listen, serve

    try:
        tz = zone(args.assume_tz)
        keys = keyfile.load(args.keys)
    except (UsageError, keyfile.KeyError_) as err:
        error(str(err))
        return 2
    mode = stat.S_IMODE(os.stat(args.keys).st_mode)
    if mode & 0o077:
        error(f"key file {args.keys} has mode {mode:04o}: others may read it; chmod 600 {args.keys}")
    if not keys.keys:
        error(f"key file {args.keys} has no key: every request but /healthz will be refused (401)")
    try:
        sock = listen(args.host, args.port)
    except OSError as err:
        error(f"cannot listen on {args.host}:{args.port}: {err.strerror or err}")
        return 2
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    error(f"serving {args.log} on http://{shown}:{port}/ (console at /, API at /v1/)")
    sys.stderr.flush()
    try:
        serve(args.log, args.keys, sock, assume_tz=tz, tick_s=args.tick, access_log=args.access_log)
    except LogUnavailable as err:
        error(str(err))
        return 2
    return 0
