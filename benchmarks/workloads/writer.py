"""B4: write this rank's numbered lines to stdout in fixed-size chunks that cut lines anywhere,
the hard case for whoever reads the pipe.

The lines are made before the clock starts (`<BENCH_LINES_DIR>/lines_<rank>.bin`, see
`numbered_lines`), so what is timed is moving them, not making them. BENCH_CHUNK: bytes per write.
"""

from __future__ import annotations

import os

from stamps import rank


def main() -> None:
    with open(os.path.join(os.environ["BENCH_LINES_DIR"], f"lines_{rank()}.bin"), "rb") as handle:
        data = handle.read()
    chunk = int(os.environ.get("BENCH_CHUNK", "65536"))
    view = memoryview(data)
    while view:
        written = os.write(1, view[:chunk])
        view = view[written:]


if __name__ == "__main__":
    main()
