"""Run a command and write its peak RSS in MB to a file: `peak_rss.py OUT_FILE -- ARGV...`.

getrusage's ru_maxrss of a child starts from its parent's size at fork, so a big parent (the
benchmark harness) inflates it. This small program is that parent instead; run it with
`python -S -I` so that it stays small. Exits with the command's exit status.
"""

import os
import sys


def main() -> int:
    out, sep, *argv = sys.argv[1:]
    assert sep == "--", "usage: peak_rss.py OUT_FILE -- ARGV..."
    pid = os.posix_spawnp(argv[0], argv, os.environ)
    _, status, usage = os.wait4(pid, 0)
    with open(out, "w") as handle:
        handle.write(f"{usage.ru_maxrss / 1024:.1f}")
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
