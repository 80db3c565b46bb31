"""``eventlog serve`` (the operators' HTTP API and console) and ``eventlog keys add|list|remove``."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import msgspec

from eventlog import keys as keyfile
from eventlog import logs
from eventlog.cli.common import (
    UsageError,
    add_assume_tz,
    add_log,
    command_parser,
    duration,
    error,
    mark_done,
    print_json,
    say,
    zone,
)
from eventlog.logs import LogUnavailable
from projections.triage import command

SERVE = """\
Follow LOG in memory (as follow does) and answer the operators' HTTP API and the
console on http://HOST:PORT/ (spec: Operator HTTP API). Every route but /healthz
and the console's pages needs Authorization: Bearer KEY with a key of --keys
(made by `eventlog keys add`; FILE is read again when it changes, so a key
removed by `eventlog keys remove` is refused at once, and a FILE that cannot be
used, missing or one its group or other users can write, is 503 until it can
be: said on stderr); a decision is appended
with actor = the key's name. Views are judged as of now unless ?at=TIME or
?at=log; a judgement costs O(entities), so one is reused for a second while the
log has not moved, and past that the newest is answered while the next is made:
an answer may be up to --tick old (5 s), plus the time one judgement takes. Its
as_of says when it was judged.
Serve plain HTTP on 127.0.0.1 and put a TLS reverse proxy in front (README).
--port 0 takes a free port; the address is said on stderr. A LOG that does not
exist yet is waited for (503 until it is there), as is one that goes away later,
whose path holds a directory, a FIFO or a device meanwhile, or that it may no
longer read (its permissions changed): 503 naming why, followed again once it can.
Committed lines that vanish while it runs (a truncated log, a log moved away
and made again: the log is never rotated; a nats:// stream gone and made again:
it is waited for meanwhile, as a missing file) are said in /v1/status, /v1/dump
and /metrics until it restarts. SIGINT and SIGTERM stop it
after the requests in flight are answered."""

SERVE_EXITS = """\
0  stopped by SIGINT or SIGTERM
2  bad usage, an unusable key file (one that cannot be read, a bad entry, or one its group
   or other users can write, or whose directory they can) or LOG (a directory, a FIFO or a
   device, a file that cannot be read, or one in a directory that does not exist), or the
   address cannot be listened on"""

KEYS_ADD = """\
Add a new random key named NAME with the given scopes to FILE (created with mode
0600) and print the key once on stdout: only its SHA-256, the name and the scopes
are stored. Scopes: read, events:append, sessions:recover. NAME is the actor of
the decisions sent with the key. A FILE that is a symlink: the file it names is
written."""

KEYS_ADD_EXITS = """\
0  added (the key is printed)
2  bad usage, a bad name or scope, a name already in FILE, or a FILE that cannot be used
   (also: its group or other users can write it or its directory, or it has other hard
   links)"""

KEYS_LIST = """\
Print the name and scopes of every key of FILE, one key a line (--json: one
object). The keys themselves are never stored, and their hashes are not
printed. Who else can write FILE (serve refuses it then) or read it is said on
stderr."""

KEYS_LIST_EXITS = """\
0  listed (also when FILE has no key)
2  bad usage, or a FILE that cannot be used"""

KEYS_REMOVE = """\
Remove the key named NAME from FILE (rewritten atomically, mode 0600; a FILE
that is a symlink: the file it names). A running eventlog serve reads FILE again
when it changes: from its next request on, the key is refused (401). A NAME that
starts with - is given after --."""

KEYS_REMOVE_EXITS = """\
0  removed
2  bad usage, no key named NAME in FILE, or a FILE that cannot be used (also: its group
   or other users can write it or its directory, or it has other hard links)"""

KEYS_EXITS = """\
0  done (see each ACTION's --help)
2  bad usage, or what each ACTION's --help says"""


def register(sub: Any) -> None:
    """Add ``serve`` and ``keys``."""
    p = command_parser(sub, "serve", help="the operators' HTTP API and live console over LOG",
                       description=SERVE, exits=SERVE_EXITS)
    add_log(p)
    p.add_argument("--keys", required=True, metavar="FILE", help="the key file (eventlog keys add)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port to listen on (8080; 0: a free one)")
    p.add_argument("--tick", type=duration, default=5.0, metavar="DURATION",
                   help="event streams re-judge at least this often when no line arrives, and no view as of "
                        "now is answered from a judgement older than this (5s)")
    p.add_argument("--no-access-log", dest="access_log", action="store_false",
                   help="do not log each request (method, path, status; never a header)")
    add_assume_tz(p, "; now (catch-up's today, its hours) is judged in ZONE; POST /v1/events writes such times "
                     "with ZONE's offset, as append --assume-tz does")
    p.set_defaults(run=run_serve)

    k = command_parser(sub, "keys", help="manage the API keys of eventlog serve", exits=KEYS_EXITS)
    ksub = k.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    a = command_parser(ksub, "add", help="add a new random key and print it once", description=KEYS_ADD,
                       exits=KEYS_ADD_EXITS)
    a.add_argument("file", metavar="FILE")
    a.add_argument("name", metavar="NAME")
    a.add_argument("--scope", action="append", required=True, choices=keyfile.SCOPES, metavar="SCOPE",
                   help=f"one of {', '.join(keyfile.SCOPES)} (repeat for more)")
    a.set_defaults(run=run_keys_add)
    ls = command_parser(ksub, "list", help="the names and scopes of the keys (never the keys)",
                        description=KEYS_LIST, exits=KEYS_LIST_EXITS)
    ls.add_argument("file", metavar="FILE")
    ls.add_argument("--json", action="store_true", help="print one JSON object")
    ls.set_defaults(run=run_keys_list)
    rm = command_parser(ksub, "remove", help="remove a key: refused by a running server at once",
                        description=KEYS_REMOVE, exits=KEYS_REMOVE_EXITS)
    rm.add_argument("file", metavar="FILE")
    rm.add_argument("name", metavar="NAME")
    rm.set_defaults(run=run_keys_remove)


def run_keys_add(args: argparse.Namespace) -> int:
    """Print the new key once; exit 2 when it cannot be added."""
    try:
        key = keyfile.add_key(args.file, args.name, args.scope)
    except keyfile.KeyError_ as err:
        error(str(err))
        return 2
    mark_done(f"key {args.name!r} added to {args.file}, but it was never shown and cannot be used: remove it "
              f"({command('eventlog keys remove', [args.file, args.name])}) and add it again")
    print(key)
    error(f"added key {args.name!r} ({', '.join(sorted(set(args.scope)))}) to {keyfile.named(args.file)}; "
          "it is shown only this once")
    return 0


def run_keys_list(args: argparse.Namespace) -> int:
    """Print each key's name and scopes (``--json``: ``{"file", "keys": [{"name", "scopes"}]}``); exit 2 when
    FILE cannot be used."""
    seen = keyfile.access(args.file)
    for said in [*seen.writable, *seen.readable]:
        error(said)
    try:
        keys = keyfile.list_keys(args.file)
    except keyfile.KeyError_ as err:
        error(str(err))
        return 2
    if args.json:
        print_json({"file": args.file, "keys": msgspec.to_builtins(keys)})
    else:
        for k in keys:
            say(f"{k.name}  {', '.join(k.scopes)}")
    if not keys:
        error(f"key file {args.file} has no key: every request but /healthz is refused (401)")
    return 0


def run_keys_remove(args: argparse.Namespace) -> int:
    """Remove the key; exit 2 naming it when FILE has none of that name or cannot be used."""
    try:
        gone = keyfile.remove_key(args.file, args.name)
    except keyfile.KeyError_ as err:
        error(str(err))
        return 2
    error(f"removed key {gone.name!r} ({', '.join(gone.scopes)}) from {keyfile.named(args.file)}; a running "
          "serve refuses it from its next request on")
    return 0


def run_serve(args: argparse.Namespace) -> int:
    """Serve until SIGINT/SIGTERM; exit 0 then, 2 when it cannot start."""
    from eventlog.serve import listen, serve

    try:
        tz = zone(args.assume_tz)
        keys, warnings = keyfile.serving(args.keys)
    except (UsageError, keyfile.KeyError_) as err:
        error(str(err))
        return 2
    unusable = logs.unusable(args.log)
    if unusable is not None:
        error(f"{unusable}; not serving it")
        return 2
    for warning in [*warnings, *filter(None, [logs.unwritable(args.log)])]:
        error(warning)
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
    if (note := logs.password_note(args.log)) is not None:
        error(note)
    sys.stderr.flush()
    try:
        # the commands it serves are pasted wherever the console is read: LOG in full
        served = args.log if logs.is_url(args.log) else os.path.abspath(args.log)
        serve(served, args.keys, sock, assume_tz=tz, tick_s=args.tick, access_log=args.access_log)
    except LogUnavailable as err:
        error(str(err))
        return 2
    return 0
