"""A fake --enqueue-cmd for the lane runner tests.

Usage: lanes_enqueue.py RECORD MODE PRODUCT KIND. Appends one JSON line to
RECORD (its argv and RESUME_* env), then by MODE: ``ok`` prints a task branch
after some chatter, ``quiet`` prints nothing, ``fail`` exits 4, ``sleep``
sleeps 30 s (to be killed by the runner's timeout), ``killed`` is killed by SIGKILL (not the runner's: as by
the OOM killer, after it may have sent), ``full:LOG`` does as ``ok``
and leaves the runner that runs it no room to write past LOG's size (its
RLIMIT_FSIZE, as a disk that just filled up).
"""

import json
import os
import sys
import time

record, mode, product, kind = sys.argv[1:5]
with open(record, "a", encoding="utf-8") as f:
    f.write(json.dumps({
        "argv": sys.argv[3:],
        "product": os.environ.get("RESUME_PRODUCT"),
        "kind": os.environ.get("RESUME_KIND"),
        "mode": mode,
        "pid": os.getpid(),
    }) + "\n")
if mode.startswith("full:"):
    import resource

    size = os.path.getsize(mode[5:])
    resource.prlimit(os.getppid(), resource.RLIMIT_FSIZE, (size, size))
if mode == "ok" or mode.startswith("full:"):
    print("enqueueing...")
    print(f"resume/{product}/{kind}")
    print("")
elif mode == "fail":
    print("queue is down", file=sys.stderr)
    sys.exit(4)
elif mode == "sleep":
    time.sleep(30)
elif mode == "killed":
    import signal

    os.kill(os.getpid(), signal.SIGKILL)
