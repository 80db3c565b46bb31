"""A fake resume command: reports a handshake (or fails) as chosen by its first argument.

The handoff id is its last argument. Modes: verified, already_done, noisy (log lines, then the
handshake), conflict, fail (exits 3), hang (sleeps, to be killed), garbage (no JSON), wrong_id,
started (the cloud session started and reports later), failed_none (nothing happened outside,
exit 1), failed_unknown (exit 1, something may have happened).
With FAKE_RECORD set, it first appends one JSON line there: its argv, the FAILBACK_* environment
and the types of the log's lines as it saw them when it started.
"""

import json
import os
import sys
import time

mode, hid = sys.argv[1], sys.argv[-1]
record = os.environ.get("FAKE_RECORD")
if record:
    with open(os.environ["FAILBACK_LOG"], encoding="utf-8") as f:
        seen = [json.loads(line)["type"] for line in f if line.strip()]
    env = {k: v for k, v in os.environ.items() if k.startswith("FAILBACK_")}
    with open(record, "a", encoding="utf-8") as f:
        f.write(json.dumps({"argv": sys.argv[1:], "env": env, "seen": seen}) + "\n")

handshake = {"handoff_id": hid, "branch": "main", "head": "abc1234", "dirty": False, "todos": "taken_over"}
if mode == "verified":
    print(json.dumps(handshake))
elif mode == "already_done":
    print(json.dumps({**handshake, "dirty": True, "todos": "already_done"}))
elif mode == "noisy":
    print("starting cloud session...")
    print("checked branch, HEAD and the working tree")
    print(json.dumps(handshake))
elif mode == "conflict":
    print(json.dumps({"conflict": "HEAD moved from abc1234 to def5678 since the handoff was saved"}))
elif mode == "fail":
    print("session started", flush=True)
    print("connection reset by peer", file=sys.stderr)
    sys.exit(3)
elif mode == "hang":
    print("session started", flush=True)
    time.sleep(30)
elif mode == "garbage":
    print("session started, looks fine")
elif mode == "started":
    print("starting the cloud session...")
    print(json.dumps({"started": f"session-{hid}"}))
elif mode == "failed_none":
    print(json.dumps({"failed": "the cloud refused the session before it started", "effect": "none"}))
    sys.exit(1)
elif mode == "failed_unknown":
    print(json.dumps({"failed": "lost the session after it started", "effect": "unknown"}))
    sys.exit(1)
elif mode == "wrong_id":
    print(json.dumps({**handshake, "handoff_id": "someone-else"}))
else:
    sys.exit(f"unknown mode {mode}")
