"""A fake failback probe: prints what a real CLI probe would, chosen by its first argument.

Modes: ok, ok_mentions_limit, quota_explicit, quota_weekly, congestion, auth, timeout_text,
hang (sleeps, to be killed), unexpected, race (another watcher claims HANDOFF first, then ok).
"""

import os
import sys
import time

mode = sys.argv[1]
if mode == "ok":
    print("PING_OK")
elif mode == "ok_mentions_limit":
    print("PING_OK\n(note: 80% of your weekly usage limit used)")
elif mode == "quota_explicit":
    print("5-hour limit reached ∙ resets 5pm (Asia/Tokyo)", file=sys.stderr)
    sys.exit(1)
elif mode == "quota_weekly":
    print("Weekly limit reached", file=sys.stderr)
    sys.exit(1)
elif mode == "congestion":
    print('API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')
    sys.exit(1)
elif mode == "auth":
    print("Invalid API key · Please run /login")
    sys.exit(1)
elif mode == "timeout_text":
    print("API Error: Request timed out.", file=sys.stderr)
    sys.exit(1)
elif mode == "hang":
    time.sleep(30)
elif mode == "unexpected":
    print("Hello! How can I help you today?")
elif mode == "race":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    from eventlog.appender import EventLog

    EventLog(os.environ["FAILBACK_LOG"]).append(
        [{"type": "claimed", "handoff_id": sys.argv[2], "watcher": "watcher-b", "attempt": 1}]
    )
    print("PING_OK")
else:
    sys.exit(f"unknown mode {mode}")
