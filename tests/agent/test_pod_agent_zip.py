"""A Kubernetes pod's distrun, run from the zip its job's ConfigMap carries by a Python without site-packages.

`python -I -S` is an image's python3 with nothing installed: no distrun, no pydantic. The pod's
side must run there from the zip alone (the closure read from the source is checked in
tests/unit/test_pod_agent_closure.py; here it is imported and run).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

from distrun.backends.kubernetes.agent_zip import agent_zip, pod_closure, zip_name

# Run in the bare interpreter: import what it is given, then report every module it has.
IMPORT_ALL = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
try:
    import pydantic
    bare = False
except ImportError:
    bare = True
modules = {name: getattr(module, "__file__", None) for name, module in sys.modules.items()}
print(json.dumps({"bare": bare, "modules": modules, "path": sys.path}))
"""


def _outside_stdlib(names: list[str]) -> list[str]:
    own = {"distrun", "__main__"}
    return sorted(n for n in names if n.split(".")[0] not in sys.stdlib_module_names and n.split(".")[0] not in own)


def test_every_module_a_pod_may_import_imports_from_the_zip_without_site_packages(tmp_path: Path) -> None:
    archive = tmp_path / "distrun.zip"
    archive.write_bytes(agent_zip())
    script = f"import sys; sys.path.insert(0, {str(archive)!r})\n" + IMPORT_ALL
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script, *sorted(pod_closure())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    assert seen["bare"], "the interpreter could import pydantic: it is not a bare one"
    assert _outside_stdlib(list(seen["modules"])) == []
    distrun_files = {name: file for name, file in seen["modules"].items() if name.split(".")[0] == "distrun"}
    assert set(distrun_files) == set(pod_closure())
    assert all(file.startswith(f"{archive}/") for file in distrun_files.values()), distrun_files


def test_a_pod_agent_runs_its_job_from_the_zip_importing_only_the_standard_library(
    write_job, distrun_home: Path, tmp_path: Path
) -> None:
    """The agent's real run (unpack, plan, start the rank, report), as a pod's container runs it."""
    from distrun.backends.kubernetes.backend import preview
    from distrun.loading.loader import load_job_file
    from distrun.prepare.compute import ComputeTarget
    from distrun.store.layout import Layout

    work = tmp_path / "pod"
    job = write_job("command: echo hello from the pod\nenvironment: {image: reg/python:3.12}\ncode: src\n")
    target = ComputeTarget("cluster", "kubernetes", {"work_dir": str(work), "jobset": "always"})
    rendered = preview(load_job_file(str(job), ()), Layout(distrun_home), target, "zipped").show()
    config_map = next(o for o in rendered["objects"] if o["kind"] == "ConfigMap")
    container = next(o for o in rendered["objects"] if o["kind"] == "JobSet")["spec"]["replicatedJobs"][0]
    command = container["template"]["spec"]["template"]["spec"]["containers"][0]["command"]
    (work / "files").mkdir(parents=True)
    for key, value in config_map["binaryData"].items():
        (work / "files" / key).write_bytes(base64.b64decode(value))
    env = {
        "PATH": "/usr/bin:/bin",
        "DISTRUN_K8S_WORK_DIR": str(work),
        "DISTRUN_K8S_JOB_DIR": str(work / "zipped"),
        "DISTRUN_K8S_POD_NAME": "zipped-worker-0-0",
        "DISTRUN_K8S_FIRST_NODE": "0",
        "JOB_COMPLETION_INDEX": "0",
    }
    # The image's python3 (here: this one, without site-packages), `-X importtime` to see every import.
    argv = [sys.executable, "-I", "-S", "-X", "importtime", *command[1:]]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert f"distrun from {work}/files/distrun.zip" in done.stdout
    assert "[0/0] hello from the pod" in done.stdout
    outcome = json.loads((work / "termination-log").read_text())
    assert outcome["status"] == "Completed", outcome
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")][1:]  # after its header
    # Every import tried (failed ones too: the standard library's `copy` probes Jython's org.python.core).
    imported = [name for line in lines if (name := line.rsplit("|", 1)[1].strip()).split(".")[0] != "org"]
    assert {"distrun.backends.kubernetes.pod_contract", "distrun.agent.node", "distrun.agent.gang"} <= set(imported)
    assert _outside_stdlib(imported) == [], _outside_stdlib(imported)
    zipped = {zip_name(module) for module in pod_closure()}
    assert [m for m in imported if m.split(".")[0] == "distrun" and zip_name(m) not in zipped] == []
