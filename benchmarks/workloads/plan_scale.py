"""B5: plan and render one big job in this process; prints what it cost as one JSON line.

    python plan_scale.py JOB_FILE NODES   (with distrun importable)

Loads the job file as `distrun` does, plans it for NODES hosts (`node-0000`, ... as a cluster
backend would give) and renders the plan as `distrun plan --output json` writes it. Memory is
the process's peak RSS (VmHWM: of this program alone, unlike getrusage's ru_maxrss, which
starts from the parent's size), after the imports and at the end.
"""

from __future__ import annotations

import json
import sys
import time


def peak_rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


class CountingSink:
    """Where the JSON goes: counted, not kept, as if written to a pipe."""

    def __init__(self) -> None:
        self.size = 0

    def write(self, text: str) -> None:
        self.size += len(text)


def main(job_file: str, nodes: int) -> None:
    t_import = time.perf_counter()
    from distrun.core.errors import DistrunError
    from distrun.core.json_encoding import shown_json
    from distrun.loading.loader import load_job_file
    from distrun.plan import Bindings, Placement, build_plan, task_port_count

    before = peak_rss_mb()
    t0 = time.perf_counter()
    loaded = load_job_file(job_file, ())
    ports = task_port_count(loaded.spec)
    placement = Placement(
        hosts=tuple(f"node-{i:04d}" for i in range(nodes)),
        master_port=29500,
        job_dir="/jobs/bench",
        run_id="bench",
        task_ports=tuple(20000 + i for i in range(ports)),
    )
    t1 = time.perf_counter()
    c1 = time.process_time()
    try:
        plan = build_plan(loaded.spec, placement, Bindings())
    except DistrunError as exc:
        print(json.dumps({"skipped": exc.message}))
        return
    t2 = time.perf_counter()
    # As `distrun plan --output json` encodes it.
    sink = CountingSink()
    sink.write(shown_json(plan.to_dict()))
    t3 = time.perf_counter()
    c3 = time.process_time()
    processes = sum(len(node.processes) for node in plan.nodes)
    print(
        json.dumps(
            {
                "processes": processes,
                "import s": t0 - t_import,
                "load s": t1 - t0,
                "plan s": t2 - t1,
                "render s": t3 - t2,
                "plan+render s": t3 - t1,
                "plan+render CPU s": c3 - c1,
                "rendered MB": sink.size / 1e6,
                "peak RSS before MB": before,
                "peak RSS MB": peak_rss_mb(),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
