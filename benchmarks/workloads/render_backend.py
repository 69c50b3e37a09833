"""B8: plan and render one job for one compute target in this process, as `distrun plan -o json`.

    python render_backend.py JOB_FILE COMPUTE   (with distrun importable, DISTRUN_HOME set)

Prints one JSON line: the seconds to plan and render (the backend's own request: local
launcher, Slurm batch script, Ray placement request, Kubernetes manifests) and to encode what
`distrun plan --output json` prints, and the process's peak RSS (VmHWM) before and after.
Beside it, not in the total: the seconds to encode plan.json as a backend writes it when the
job is submitted.
"""

from __future__ import annotations

import json
import sys
import time

from plan_scale import CountingSink, peak_rss_mb


def main(job_file: str, compute: str) -> None:
    from distrun.core.errors import DistrunError
    from distrun.core.json_encoding import compact_json, shown_json
    from distrun.loading.loader import load_job_file
    from distrun.runner.jobs import plan_job
    from distrun.store.layout import Layout

    before = peak_rss_mb()
    t0 = time.perf_counter()
    c0 = time.process_time()
    try:
        rendered = plan_job(load_job_file(job_file, ()), Layout(), compute)
        t1 = time.perf_counter()
        sink = CountingSink()
        sink.write(shown_json(rendered.show()))  # as `distrun plan -o json` encodes it
    except DistrunError as exc:
        print(json.dumps({"skipped": exc.message}))
        return
    t2 = time.perf_counter()
    c2 = time.process_time()
    plan_file = compact_json(rendered.plan.to_dict())
    t3 = time.perf_counter()
    print(
        json.dumps(
            {
                "plan+render s": t2 - t0,
                "plan+render CPU s": c2 - c0,
                "plan s": t1 - t0,
                "encode s": t2 - t1,
                "rendered MB": sink.size / 1e6,
                "plan.json s": t3 - t2,
                "plan.json MB": len(plan_file) / 1e6,
                "peak RSS before MB": before,
                "peak RSS MB": peak_rss_mb(),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
