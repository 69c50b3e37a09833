"""`python -m distrun.backends.spark.launcher NAME`: a Spark job on a standalone cluster,
supervised in the background (`distrun job create`) as the local launcher does, its executors'
logs followed into the job's folder beside it."""

from __future__ import annotations

import sys

from distrun.backends.local import launcher
from distrun.backends.spark.executor_logs import ExecutorLogs, driver_ui
from distrun.core.errors import DistrunError
from distrun.core.pydantic_plugins import skip_plugin_discovery
from distrun.prepare.submission import load_prepared
from distrun.store.layout import Layout

warm = launcher.warm  # what a launcher server does once before it forks supervisors


def main(name: str) -> int:
    follower = None
    try:
        prepared = load_prepared(Layout(), name)
        follower = ExecutorLogs(prepared.folder.root, driver_ui(prepared.spec.command or "")).start()
    except DistrunError:
        pass  # the local launcher says what is wrong with the job
    try:
        return launcher.main(name)
    finally:
        if follower is not None:
            follower.stop()


if __name__ == "__main__":
    skip_plugin_discovery()
    sys.exit(main(sys.argv[1]))
