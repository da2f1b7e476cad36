"""Another process holding an output's lock, the way a running mltk writer does (a held ``flock``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HOLD = """
import fcntl, os, sys, time
handle = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(handle, fcntl.LOCK_EX)
os.ftruncate(handle, 0)
os.write(handle, f"{os.getpid()} -\\n".encode())
print("held", flush=True)
time.sleep(120)
"""


def hold_lock(lock_file: Path) -> subprocess.Popen:
    """A live process that holds ``lock_file`` (returns once it does); kill it to let go."""
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(lock_file)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    return process
