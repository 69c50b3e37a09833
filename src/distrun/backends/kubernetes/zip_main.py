"""The `__main__.py` of the zip a pod runs (agent_zip): `python3 distrun.zip MODULE ARGS...`.

Runs MODULE (a distrun module in the zip) as `python -m MODULE ARGS...` would, once the image's
Python is known to be new enough. distrun's modules need Python 3.10; on an older one they would
stop at a SyntaxError, so this file is written for any Python 3 (no annotations, no f-strings)
and says what is wrong instead: on stderr, which is the pod's log, and as the pod's termination
message, where the distrun client reads each pod's outcome.
"""

import json
import os
import sys

OLDEST = (3, 10)


def too_old(version):
    """Why `version` (sys.version_info) cannot run distrun's pod agent; None when it can."""
    if tuple(version[:2]) >= OLDEST:
        return None
    found = ".".join(str(part) for part in version[:3])
    return (
        "the image's Python is " + found + " (" + sys.executable + "); distrun's pod agent needs Python 3.10 "
        "or newer: use an image with python3 >= 3.10, or set the compute target's python (its `python` "
        "setting in config.yaml) to a newer one in the image"
    )


def failure_outcome(env, message):
    """The pod's outcome as the agent reports one that could not start (see pod_agent.main)."""
    pod = env.get("DISTRUN_K8S_POD_NAME", "")
    index, first = env.get("JOB_COMPLETION_INDEX", ""), env.get("DISTRUN_K8S_FIRST_NODE", "")
    rank = int(first) + int(index) if index.isdigit() and first.isdigit() else -1
    return {
        "node_rank": rank,
        "node_name": pod,
        "engine_job_id": pod,
        "status": "Failed",
        "reason": "the node agent on node " + str(rank) + " (" + pod + ") could not start: " + message,
        "pod": pod,
        "node": env.get("DISTRUN_K8S_NODE_NAME", ""),
    }


def report(env, message):
    sys.stderr.write("distrun pod agent: error: " + message + "\n")
    sys.stderr.flush()
    work = env.get("DISTRUN_K8S_WORK_DIR", "/distrun")
    try:
        with open(os.path.join(work, "termination-log"), "w") as log:
            log.write(json.dumps(failure_outcome(env, message)))
    except OSError as exc:  # the log line above still says it
        sys.stderr.write("distrun pod agent: could not write the termination message: " + str(exc) + "\n")


def main(argv):
    message = too_old(sys.version_info)
    if message is not None:
        report(os.environ, message)
        return 1
    if len(argv) < 2 or not argv[1].startswith("distrun."):
        sys.stderr.write("usage: python3 distrun.zip MODULE ARGS...  (MODULE: a distrun module in the zip)\n")
        return 2
    import runpy

    sys.argv = [argv[0]] + argv[2:]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
