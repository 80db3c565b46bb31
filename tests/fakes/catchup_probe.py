"""A fake --probe-cmd: appends a line to RECORD, prints TEXT (PING_OK), then exits with STATUS.

Usage: catchup_probe.py RECORD STATUS [TEXT]. STATUS ``sleep`` sleeps 30 s (to be killed).
"""

import sys
import time

record, status = sys.argv[1:3]
text = sys.argv[3] if len(sys.argv) > 3 else "PING_OK"
with open(record, "a", encoding="utf-8") as f:
    f.write("probe\n")
print(text, flush=True)
if status == "sleep":
    time.sleep(30)
sys.exit(int(status))
