"""A fake --kick-cmd for the catch-up runner tests.

Usage: catchup_kick.py RECORD PLAN LABEL. PLAN is a JSON object
``{LABEL: MODE}``; MODE is ``ok`` (exit 0 at once), ``exit:N``, ``sleep:S``
(sleep S seconds, then exit 0), ``wait:FILE`` (exit 0 once FILE exists, at
most 20 s), ``ignore-term`` (ignore SIGTERM, start a child
that sleeps in the same process group, sleep 30 s), ``ran:OTHER:LOG`` (append
a ``job_ran`` of OTHER to LOG, as the guard would if OTHER ran meanwhile) or
``full:LOG`` (exit 0, leaving the catch-up that runs it no room to write past
LOG's size: its RLIMIT_FSIZE, as a disk that just filled up).

On start it appends ``{"label", "env", "pid", "alive"}`` to RECORD, where
``alive`` lists the pids of earlier kicks (and their children) still running:
it must stay empty, re-runs never overlap.
"""

import json
import os
import signal
import subprocess
import sys
import time


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


record, plan, label = sys.argv[1:4]
mode = json.loads(plan).get(label, "ok")
earlier = []
if os.path.exists(record):
    with open(record, encoding="utf-8") as f:
        for line in f:
            entry = json.loads(line)
            earlier.extend(entry.get("pids", [entry["pid"]]))
pids = [os.getpid()]
child = None
if mode == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    pids.append(child.pid)
with open(record, "a", encoding="utf-8") as f:
    f.write(json.dumps({
        "label": label,
        "env": os.environ.get("CATCHUP_LABEL"),
        "pid": os.getpid(),
        "pids": pids,
        "alive": [pid for pid in earlier if alive(pid)],
        "mode": mode,
    }) + "\n")
if mode.startswith("exit:"):
    sys.exit(int(mode[5:]))
if mode.startswith("sleep:"):
    time.sleep(float(mode[6:]))
elif mode.startswith("wait:"):
    deadline = time.monotonic() + 20
    while not os.path.exists(mode[5:]) and time.monotonic() < deadline:
        time.sleep(0.02)
elif mode == "ignore-term":
    time.sleep(30)
elif mode.startswith("full:"):
    import resource

    size = os.path.getsize(mode[5:])
    resource.prlimit(os.getppid(), resource.RLIMIT_FSIZE, (size, size))
elif mode.startswith("ran:"):
    _, other, log = mode.split(":", 2)
    from eventlog.appender import EventLog

    EventLog(log).append([{"type": "job_ran", "label": other, "exit": 0}])
