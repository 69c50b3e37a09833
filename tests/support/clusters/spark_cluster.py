"""A real Spark standalone cluster on this machine: one master and N workers on 127.0.0.1.

pyspark's distribution has Spark's jars (no `sbin/start-*.sh`): the master and each worker are
started as JVMs of their own (`java -cp JARS CLASS`, what `bin/spark-class` runs), each in its
own process group, and stopped by pid
(SIGTERM, then SIGKILL). Each worker offers `cores` cores (1 by default) and 512 MB a core, so a
job of 1-core executors sees one executor per worker, and with 2 two such jobs run side by side.
Every file (logs, the workers' folders, where the executors' logs are) is under `root`.

From a shell:

    python3 tests/support/clusters/spark_cluster.py /tmp/sc   # prints the master's URL; Ctrl-C stops it
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_S = 120.0
STOP_WAIT_S = 15.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class SparkCluster:
    root: Path
    workers: int = 2
    cores: int = 1  # each worker's
    port: int = 0
    ui_port: int = 0
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def master(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, *args: str) -> None:
        env = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            # What bin/load-spark-env.sh sets: a worker builds its executors' command with it.
            "SPARK_SCALA_VERSION": "2.13",
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_WORKER_DIR": str(self.root / f"{name}-work"),
            "PYSPARK_PYTHON": sys.executable,
        }
        log = (self.root / f"{name}.log").open("wb")
        # java itself, not bin/spark-class (which starts a JVM first only to build this command):
        # one JVM start per daemon instead of two; C1 only, which starts faster.
        classpath = f"{spark_home() / 'conf'}:{spark_home() / 'jars'}/*"
        argv = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", classpath, *args]
        self.processes.append(
            subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        )
        log.close()

    def start(self) -> SparkCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        self.port, self.ui_port = _free_port(), _free_port()
        master = "org.apache.spark.deploy.master.Master"
        self._start(
            "master", master, "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port)
        )
        for k in range(self.workers):
            worker = "org.apache.spark.deploy.worker.Worker"
            ui = str(_free_port())
            memory = f"{512 * self.cores}m"
            self._start(
                f"worker{k}", worker, "--cores", str(self.cores), "--memory", memory, "--webui-port", ui, self.master
            )
        give_up = time.monotonic() + START_TIMEOUT_S
        while self.alive_workers() < self.workers:
            if time.monotonic() > give_up or any(proc.poll() is not None for proc in self.processes):
                logs = "\n".join(p.read_text(errors="replace")[-2000:] for p in sorted(self.root.glob("*.log")))
                self.stop()
                raise RuntimeError(f"the Spark test cluster did not start:\n{logs}")
            time.sleep(0.5)
        return self

    def alive_workers(self) -> int:
        """Workers the master has registered (its web UI's JSON); 0 while it is not up."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as reply:
                return int(json.load(reply).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def executor_logs(self) -> list[Path]:
        """The executors' stderr files the workers wrote (app-*/N/stderr)."""
        return sorted(self.root.glob("worker*-work/app-*/*/stderr"))

    def stop(self) -> None:
        """SIGTERM each JVM's process group, then SIGKILL what is left."""
        for sig, wait in ((signal.SIGTERM, STOP_WAIT_S), (signal.SIGKILL, STOP_WAIT_S)):
            for proc in self.processes:
                if proc.poll() is None:
                    try:
                        os.killpg(proc.pid, sig)
                    except ProcessLookupError:
                        pass
            give_up = time.monotonic() + wait
            while any(proc.poll() is None for proc in self.processes) and time.monotonic() < give_up:
                time.sleep(0.1)
        for proc in self.processes:
            proc.wait(timeout=5)


if __name__ == "__main__":
    cluster = SparkCluster(Path(sys.argv[1])).start()
    print(cluster.master, flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
