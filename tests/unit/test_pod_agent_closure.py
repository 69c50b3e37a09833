"""What a Kubernetes pod imports of distrun, read from the source: only the standard library, all in the zip.

The same closure run for real, from the zip in an interpreter without site-packages, is in
tests/agent/test_pod_agent_zip.py.
"""

from __future__ import annotations

import ast
import io
import json
import zipfile
from pathlib import Path

from distrun.backends.kubernetes import zip_main
from distrun.backends.kubernetes.agent_zip import (
    POD_ENTRY_MODULES,
    ZIP_MAIN,
    agent_zip,
    imported_names,
    module_file,
    outside_imports,
    pod_closure,
    zip_name,
)
from distrun.backends.kubernetes.state import PodOutcome


def test_the_pods_modules_import_only_the_standard_library() -> None:
    closure = pod_closure()
    assert set(POD_ENTRY_MODULES) <= set(closure)
    assert outside_imports(closure) == {}
    # The client's side is left out: it is what brings pydantic and ruamel.
    assert not {
        "distrun.spec.models",
        "distrun.backends.kubernetes.target",
        "distrun.backends.kubernetes.manifests",
    } & set(closure)


def test_the_closure_follows_imports_inside_functions_but_not_type_checking_ones() -> None:
    source = (
        "from typing import TYPE_CHECKING\nimport json\nif TYPE_CHECKING:\n    import pydantic\n"
        "def f():\n    from distrun.core import errors\n    import yaml\n"
    )
    assert imported_names(source) == [
        "typing",
        "typing.TYPE_CHECKING",
        "json",
        "distrun.core",
        "distrun.core.errors",
        "yaml",
    ]
    closure = {"distrun.x": ("json", "yaml", "ruamel.yaml"), "distrun.y": ("os",)}
    assert outside_imports(closure) == {"yaml": "distrun.x", "ruamel": "distrun.x"}


def test_the_zip_holds_the_whole_closure_and_its_main() -> None:
    data = agent_zip()
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert names[0] == "__main__.py"
    expected = {zip_name(module) for module in pod_closure()}
    assert set(names[1:]) == expected and len(names) == len(expected) + 1
    for module in pod_closure():  # every package on the way has its __init__.py: zipimport needs it
        parts = module.split(".")
        assert {f"{'/'.join(parts[:i])}/__init__.py" for i in range(1, len(parts))} <= set(names), module
    main_file = module_file(ZIP_MAIN)
    assert main_file is not None
    assert zipfile.ZipFile(io.BytesIO(data)).read("__main__.py") == main_file.read_bytes()
    assert agent_zip.__wrapped__() == data  # built the same way every time: rendering stays pure
    # Beside the job's files in one ConfigMap (1 MiB): 176 KiB leaves the job's code more than 800 KiB.
    assert len(data) < 176 * 1024


def test_the_zips_main_parses_on_old_pythons_and_names_an_old_one(tmp_path: Path) -> None:
    main_file = module_file(ZIP_MAIN)
    assert main_file is not None
    ast.parse(main_file.read_text(), feature_version=(3, 7))  # no syntax newer than what it checks for
    assert zip_main.too_old((3, 10, 0)) is None and zip_main.too_old((3, 13, 1)) is None
    message = zip_main.too_old((3, 8, 18))
    assert message is not None and "Python is 3.8.18" in message and "needs Python 3.10 or newer" in message
    env = {
        "DISTRUN_K8S_WORK_DIR": str(tmp_path),
        "DISTRUN_K8S_POD_NAME": "ddp-worker-0-1",
        "JOB_COMPLETION_INDEX": "1",
        "DISTRUN_K8S_FIRST_NODE": "0",
    }
    zip_main.report(env, message)
    # The client reads it as it reads any pod agent's termination message.
    outcome = PodOutcome.kept(json.loads((tmp_path / "termination-log").read_text()))
    assert (outcome.status.value, outcome.node_rank, outcome.node_name) == ("Failed", 1, "ddp-worker-0-1")
    assert outcome.reason == f"the node agent on node 1 (ddp-worker-0-1) could not start: {message}"
