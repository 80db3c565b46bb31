"""A fake --probe-cmd: appends a line to RECORD, then exits with STATUS (or sleeps 30 s for ``sleep``).

Usage: catchup_probe.py RECORD STATUS
"""

import sys
import time

record, status = sys.argv[1:3]
with open(record, "a", encoding="utf-8") as f:
    f.write("probe\n")
if status == "sleep":
    time.sleep(30)
sys.exit(int(status))
