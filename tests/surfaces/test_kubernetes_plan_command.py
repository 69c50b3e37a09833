"""`distrun plan` for Kubernetes as a command: the objects as YAML and JSON, the seed forms' target
names, the kubernetes-validate CLI over the stream, and max_restarts shown or refused per form."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.cli import REPO

SEEDS = REPO / "tests" / "data" / "seed001"
DDP = REPO / "examples" / "pytorch-ddp" / "job.yml"


def test_plan_output_yaml_prints_the_objects_and_seed_forms_name_their_target(run_cli, distrun_home: Path) -> None:
    job = SEEDS / "pytorch-k8s.yml"
    missing = run_cli("plan", str(job), "--output", "yaml")
    assert missing.returncode != 0 and "unknown compute target 'my-aks-cluster'" in missing.stderr
    assert "--type kubernetes" in missing.stderr and "Traceback" not in missing.stderr
    made = run_cli(
        "compute",
        "create",
        "--name",
        "my-aks-cluster",
        "--type",
        "kubernetes",
        "--set",
        "namespace=ml",
        "--set",
        "jobset=never",
    )
    assert made.returncode == 0, made.stderr
    shown = run_cli("plan", str(job), "--output", "yaml")
    assert shown.returncode == 0, shown.stderr
    from ruamel.yaml import YAML

    docs = list(YAML(typ="safe").load_all(shown.stdout))
    # The Secret holds the token of the pods' exchange (hang detection, `job stacks`).
    assert [d["kind"] for d in docs] == ["ConfigMap", "Secret", "Service", "Job"]
    assert json.dumps(docs[3]).count("nvidia.com/gpu") == 1
    # The same objects the dry run returns as data (what submit creates).
    as_json = json.loads(run_cli("plan", str(job), "--output", "json").stdout)
    assert as_json["objects"] == docs
    # The seed form `infrastructure: k8s` must not land on a target of another type.
    run_cli("compute", "create", "--name", "my-aks-cluster", "--type", "slurm")
    wrong = run_cli("plan", str(SEEDS / "mpi-k8s.yml"))
    assert wrong.returncode != 0 and "infrastructure k8s" in wrong.stderr and "type slurm" in wrong.stderr


def test_kubernetes_validate_cli_accepts_the_yaml_stream(run_cli, distrun_home: Path, tmp_path: Path) -> None:
    """The very command the docs give: `kubernetes-validate --strict` on `distrun plan -o yaml`."""
    import shutil

    run_cli(
        "compute", "create", "--name", "c", "--type", "kubernetes", "--set", "jobset=never", "--set", "image=reg/x:1"
    )
    shown = run_cli("plan", str(REPO / "examples" / "pytorch-ddp" / "job.yml"), "--compute", "c", "--output", "yaml")
    assert shown.returncode == 0, shown.stderr
    manifest = tmp_path / "job.yaml"
    manifest.write_text(shown.stdout)
    beside = Path(sys.executable).parent / "kubernetes-validate"  # the test environment's own
    exe = str(beside) if beside.exists() else shutil.which("kubernetes-validate")
    assert exe is not None, "kubernetes-validate is installed by scripts/deps/60-kubernetes.sh"
    done = subprocess.run([exe, "--strict", "-k", "1.32.0", str(manifest)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_distrun_plan_shows_max_restarts_and_refuses_them_without_jobset(run_cli, distrun_home: Path) -> None:
    for name, form in (("js", "always"), ("ij", "never")):
        made = run_cli(
            "compute",
            "create",
            "--name",
            name,
            "--type",
            "kubernetes",
            "--set",
            f"jobset={form}",
            "--set",
            "image=r/i:1",
        )
        assert made.returncode == 0, made.stderr
    shown = run_cli("plan", str(DDP), "--compute", "js", "--set", "limits.max_restarts=3")
    assert shown.returncode == 0, shown.stderr
    assert "maxRestarts: 3" in shown.stdout and "restartStrategy: BlockingRecreate" in shown.stdout
    refused = run_cli("plan", str(DDP), "--compute", "ij", "--set", "limits.max_restarts=3")
    assert refused.returncode != 0 and "needs JobSet" in refused.stderr and "Traceback" not in refused.stderr
