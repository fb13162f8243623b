"""kill_check.py TMP FILE.et: `eintup check` killed with SIGKILL leaves
nothing behind.

Runs `eintup check` on FILE.et, whose framework call (of the hostile
stand-in, test/bridge/Inputs/hostile) never returns after writing
`bridge.pid` in its working directory, with TMPDIR=TMP. Once the call has
started, eintup is killed with SIGKILL (no destructor runs); then, polling
for at most 30 s, the bridge process must be gone and TMP must hold no
scratch directory. Exit 0 then; 1 with the reason otherwise (a surviving
bridge is killed so the test does not leak it).
"""

import glob
import os
import signal
import subprocess
import sys
import time

LIMIT_S = 30


def alive(pid):
    """Running (not merely a zombie awaiting its reaper)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except OSError:
        return False


def poll(cond):
    end = time.monotonic() + LIMIT_S
    while time.monotonic() < end:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    return None


def read_pid(tmp):
    for path in glob.glob(os.path.join(tmp, "eintup-check-*", "p*", "bridge.pid")):
        try:
            text = open(path).read().strip()
        except OSError:
            continue
        if text:
            return int(text)
    return None


def main(tmp, et):
    env = dict(os.environ, TMPDIR=tmp)
    eintup = subprocess.Popen(["eintup", "check", "--backend", "interp", "--call-timeout", "none", et], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid = poll(lambda: read_pid(tmp))
    if pid is None:
        eintup.kill()
        print(f"kill_check: the framework call did not start within {LIMIT_S} s")
        return 1
    eintup.send_signal(signal.SIGKILL)
    eintup.wait()
    problems = []
    if not poll(lambda: not alive(pid)):
        problems.append(f"the bridge process {pid} outlived eintup by {LIMIT_S} s")
        os.kill(pid, signal.SIGKILL)
    if not poll(lambda: not glob.glob(os.path.join(tmp, "eintup-check-*"))):
        problems.append(f"scratch left behind: {sorted(glob.glob(os.path.join(tmp, 'eintup-check-*')))}")
    for p in problems:
        print(f"kill_check: {p}")
    if not problems:
        print("kill_check: bridge gone, no scratch left")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(os.path.realpath(sys.argv[1]), sys.argv[2]))
