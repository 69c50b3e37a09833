"""The Kubernetes backend's rendering, offline: every job type and every seed 001 example.

Each rendered object is validated against the official schemas (kubernetes-validate, strict)
or the JobSet CRD (jsonschema, defaults applied first); the layout, names, environment,
resources and images are checked against what the job says. No cluster is needed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from distrun.backends.kubernetes.backend import preview
from distrun.backends.kubernetes.display import TOKEN_SHOWN
from distrun.backends.kubernetes.pods import object_name
from distrun.core.errors import DistrunError
from distrun.loading.loader import load_job_file
from distrun.prepare.compute import ComputeTarget
from distrun.store.layout import Layout
from support.cli import REPO
from support.k8s_schemas import validate_object

SEEDS = REPO / "tests" / "data" / "seed001"
JOB_FILES = sorted([*REPO.glob("examples/*/job*.yml"), *SEEDS.glob("*.yml")], key=lambda p: str(p.relative_to(REPO)))
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def render(path: Path, home: Path, *, jobset: bool = True, overrides: tuple[str, ...] = (), **settings: Any) -> dict:
    loaded = load_job_file(str(path), overrides)
    target = ComputeTarget(
        "cluster",
        "kubernetes",
        {"namespace": "ml", "jobset": "always" if jobset else "never", "image": "reg/distrun:1", **settings},
    )
    return preview(loaded, Layout(home), target).show()


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


def pod_specs(rendered: dict) -> dict[str, dict]:
    """role -> (pod template spec, Job spec) for either form."""
    out = {}
    for obj in rendered["objects"]:
        if obj["kind"] == "JobSet":
            for rj in obj["spec"]["replicatedJobs"]:
                out[rj["name"]] = rj["template"]["spec"]
        elif obj["kind"] == "Job":
            out[obj["metadata"]["labels"]["distrun.io/role"]] = obj["spec"]
    return out


@pytest.mark.parametrize("jobset", [True, False], ids=["jobset", "indexed-jobs"])
@pytest.mark.parametrize("path", JOB_FILES, ids=[str(p.relative_to(REPO)) for p in JOB_FILES])
def test_every_job_renders_objects_that_validate(path: Path, jobset: bool, tmp_path: Path) -> None:
    rendered = render(path, tmp_path, jobset=jobset)
    kinds = [o["kind"] for o in rendered["objects"]]
    # First what the pods use: the files they mount, the Secret with the job's token.
    first = ["ConfigMap", "Secret"]
    if jobset:
        assert kinds == [*first, "JobSet"]
    else:
        assert kinds[: len(first) + 1] == [*first, "Service"] and set(kinds[len(first) + 1 :]) == {"Job"}
    for obj in rendered["objects"]:
        validate_object(obj)
        assert DNS_LABEL.match(obj["metadata"]["name"]) and len(obj["metadata"]["name"]) <= 63
        assert obj["metadata"]["labels"]["distrun.io/job"] == object_name(rendered["plan"]["job_name"])
    plan = rendered["plan"]
    for role, job_spec in pod_specs(rendered).items():
        assert job_spec["completionMode"] == "Indexed" and job_spec["backoffLimit"] == 0
        assert job_spec["completions"] == job_spec["parallelism"] >= 1
        pod = job_spec["template"]["spec"]
        assert pod["restartPolicy"] == "Never"
        for index in range(job_spec["completions"]):
            hostname = f"{object_name(plan['job_name'])}-{role}-{'0-' if jobset else ''}{index}"
            assert DNS_LABEL.match(hostname) and len(hostname) <= 63
    # MASTER_ADDR is node 0's stable DNS name, `<pod hostname>.<subdomain>`.
    name = object_name(plan["job_name"])
    assert plan["master_addr"].endswith(f".{name}") and plan["master_addr"].startswith(name + "-")


def test_seed_pytorch_k8s_maps_to_four_gpu_workers(tmp_path: Path) -> None:
    rendered = render(SEEDS / "pytorch-k8s.yml", tmp_path)
    (jobset,) = by_kind(rendered["objects"], "JobSet")
    (worker,) = jobset["spec"]["replicatedJobs"]
    assert worker["name"] == "worker" and worker["template"]["spec"]["completions"] == 4
    container = worker["template"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "docker.io/pytorch"  # environment.docker.image
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "4"}}
    assert {"name": "LANGUAGE", "value": "en-us"} in container["env"]
    assert jobset["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["worker"]}
    assert jobset["spec"]["failurePolicy"] == {"maxRestarts": 0}
    hosts = [n["host"] for n in rendered["plan"]["nodes"]]
    name = object_name(rendered["plan"]["job_name"])
    assert hosts == [f"{name}-worker-0-{i}.{name}" for i in range(4)]


def test_seed_mpi_k8s_has_a_launcher_with_its_resources_and_gpu_workers(tmp_path: Path) -> None:
    rendered = render(SEEDS / "mpi-k8s.yml", tmp_path)
    roles = pod_specs(rendered)
    assert set(roles) == {"launcher", "worker"}
    launcher = roles["launcher"]["template"]["spec"]["containers"][0]
    worker = roles["worker"]["template"]["spec"]["containers"][0]
    assert roles["launcher"]["completions"] == 1 and roles["worker"]["completions"] == 4
    assert launcher["resources"] == {"limits": {"cpu": "1", "memory": "2Gi"}}
    assert worker["resources"] == {"limits": {"nvidia.com/gpu": "4"}}
    # No SSH: every pod runs distrun's agent; the workers' agents start mpirun's daemons on request.
    assert worker["command"] == launcher["command"] and worker["command"][-1] == "distrun.backends.kubernetes.pod_agent"
    (secret,) = by_kind(rendered["objects"], "Secret")
    # The plan masks the token; each submission makes its own (tests/engines/kubernetes uses it).
    assert secret["type"] == "Opaque" and secret["stringData"] == {"remote-start-token": TOKEN_SHOWN}
    for container in (launcher, worker):
        env = {e["name"]: e for e in container["env"]}
        ref = {"secretKeyRef": {"name": secret["metadata"]["name"], "key": "remote-start-token"}}
        assert env["DISTRUN_K8S_REMOTE_START_TOKEN"]["valueFrom"] == ref
        # Node 0's exchange (pod_exchange) takes the same token, on the port after the workers' remote starts.
        assert env["DISTRUN_K8S_EXCHANGE_TOKEN"]["valueFrom"] == ref
        base = int(env["DISTRUN_K8S_REMOTE_START_PORT"]["value"])
        assert int(env["DISTRUN_K8S_EXCHANGE_PORT"]["value"]) == base + 4
    (jobset,) = by_kind(rendered["objects"], "JobSet")
    assert jobset["spec"]["successPolicy"]["targetReplicatedJobs"] == ["launcher"]
    (node0,) = [n for n in rendered["plan"]["nodes"] if n["node_rank"] == 0]
    name = object_name(rendered["plan"]["job_name"])
    assert node0["files"]["mpi/hostfile"].splitlines()[0].startswith(f"{name}-worker-0-0.{name} ")


def test_seed_tensorflow_ps_gets_its_own_image_env_and_resources(tmp_path: Path) -> None:
    rendered = render(SEEDS / "tensorflow-parameter-server.yml", tmp_path, jobset=False)
    roles = pod_specs(rendered)
    assert {r: s["completions"] for r, s in roles.items()} == {"worker": 2, "ps": 4}
    ps = roles["ps"]["template"]["spec"]["containers"][0]
    worker = roles["worker"]["template"]["spec"]["containers"][0]
    assert ps["image"] == "docker.io/python" and worker["image"] == "docker.io/tensorflow"
    assert ps["resources"] == {"limits": {"nvidia.com/gpu": "4", "memory": "2Gi"}}
    assert worker["resources"] == {"limits": {"cpu": "4"}}
    assert {"name": "MAGIC", "value": "newnumber"} in ps["env"]
    assert {"name": "MAGIC", "value": "number"} in worker["env"]
    env = {p["name"]: p["env"] for n in rendered["plan"]["nodes"] for p in n["processes"]}
    assert env["ps_0"]["MAGIC"] == "newnumber" and env["worker_0"]["MAGIC"] == "number"
    (service,) = by_kind(rendered["objects"], "Service")
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    for job in by_kind(rendered["objects"], "Job"):
        assert job["spec"]["template"]["spec"]["subdomain"] == service["metadata"]["name"]
        assert job["spec"]["podFailurePolicy"]["rules"][0]["action"] == "FailJob"
    # One pod per task: TF_CONFIG addresses are the pods' stable names, each task its own port.
    cluster = rendered["plan"]["tf_cluster"]
    name = object_name(rendered["plan"]["job_name"])
    assert cluster["worker"][0].startswith(f"{name}-worker-0.{name}:")
    assert len({a.split(":")[1] for role in cluster.values() for a in role}) == 6


def test_every_process_gets_the_environment_it_gets_locally(tmp_path: Path) -> None:
    from distrun.runner.jobs import plan_job

    job = REPO / "examples" / "pytorch-ddp" / "job.yml"
    k8s = render(job, tmp_path / "a")["plan"]
    local = plan_job(load_job_file(str(job), ()), Layout(tmp_path / "b"), "local").show()["plan"]
    k8s_procs = [p for n in k8s["nodes"] for p in n["processes"]]
    local_procs = [p for n in local["nodes"] for p in n["processes"]]
    assert [p["name"] for p in k8s_procs] == [p["name"] for p in local_procs]
    # On local compute the job (its environment a curated name, run without its image) runs in a
    # layer of its own over distrun's Python, which PATH and VIRTUAL_ENV name; a pod runs its image's.
    own_layer = {"PATH", "VIRTUAL_ENV"}
    for mine, theirs in zip(k8s_procs, local_procs, strict=True):
        assert own_layer <= set(theirs["env"]) and not own_layer & set(mine["env"])
        theirs = {**theirs, "env": {k: v for k, v in theirs["env"].items() if k not in own_layer}}
        assert set(mine["env"]) == set(theirs["env"])
        placed = {
            "MASTER_ADDR",
            "MASTER_PORT",
            "AZ_BATCH_HOST_LIST",
            "AZ_BATCH_MASTER_NODE",
            "AZ_BATCHAI_MPI_MASTER_NODE",
        }
        placed |= {"DISTRUN_JOB_DIR", "AZUREML_RUN_ID", "DISTRUN_JOB_NAME"} | {
            k for k in mine["env"] if k.startswith("AZURE_ML_OUTPUT")
        }
        assert {k: v for k, v in mine["env"].items() if k not in placed} == {
            k: v for k, v in theirs["env"].items() if k not in placed
        }
        assert mine["env"]["MASTER_ADDR"] == k8s["nodes"][0]["host"]
        assert mine["env"]["NODE_RANK"] == str(mine["node_rank"])


def test_job_names_become_dns_labels(tmp_path: Path) -> None:
    for name in ("My_Job.v2", "9lives", "x" * 200, "a--b"):
        label = object_name(name)
        assert DNS_LABEL.match(label) and len(label) <= 40 and label[0].isalpha(), name
    assert object_name("ddp-1") == "ddp-1"
    assert object_name("My_Job") != object_name("my-job")  # shortened or changed names carry a hash


def test_curated_environment_without_an_image_runs_in_the_curated_image_and_unknown_names_are_an_error(
    tmp_path: Path,
) -> None:
    job = REPO / "examples" / "pytorch-ddp" / "job.yml"
    loaded = load_job_file(str(job), ())
    assert loaded.spec.environment == "azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest"
    shown = preview(loaded, Layout(tmp_path), ComputeTarget("c", "kubernetes", {"jobset": "always"})).show()
    images = {c["image"] for spec in pod_specs(shown).values() for c in spec["template"]["spec"]["containers"]}
    assert images == {"mcr.microsoft.com/azureml/curated/acpt-pytorch-2.2-cuda12.1:latest"}
    unknown = tmp_path / "job.yml"
    unknown.write_text("command: echo hi\nenvironment: azureml:my-own-env:3\n")
    with pytest.raises(DistrunError) as err:
        preview(load_job_file(str(unknown), ()), Layout(tmp_path), ComputeTarget("c", "kubernetes", {}))
    assert "Azure ML environment" in err.value.message and "image" in err.value.hint


def test_code_over_the_configmap_limit_says_to_use_the_image(tmp_path: Path) -> None:
    import os

    code = tmp_path / "code"
    code.mkdir()
    (code / "blob.bin").write_bytes(os.urandom(800 * 1024))
    job = tmp_path / "job.yml"
    job.write_text("command: python -c pass\ncode: ./code\nenvironment: {image: reg/x:1}\n")
    with pytest.raises(DistrunError) as err:
        render(job, tmp_path / "home")
    assert "ConfigMap" in err.value.message and "code_in_image" in err.value.hint
    rendered = render(job, tmp_path / "home", code_in_image="/app")
    env = rendered["objects"][2]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0][
        "env"
    ]
    assert {"name": "DISTRUN_K8S_CODE_IN_IMAGE", "value": "/app"} in env


def test_target_settings_in_their_text_forms_are_accepted() -> None:
    """As `compute create --set K=V` gives them: lists comma-separated, mappings as JSON text.
    (A wrong or misspelled setting: tests/unit/test_backend_conformance.py.)"""
    from distrun.backends.kubernetes.backend import BACKEND

    BACKEND.validate_settings(
        "c",
        {
            "context": "aks",
            "namespace": "ml",
            "image": "reg/x:1",
            "service_account": "trainer",
            "image_pull_secrets": "regcred,other",
            "node_selector": '{"pool": "gpu"}',
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "priority_class": "high",
            "queue": "team-a",
        },
    )


def test_target_settings_reach_every_pod_and_validate(tmp_path: Path) -> None:
    rendered = render(
        REPO / "examples" / "tensorflow-ps" / "job.yml",
        tmp_path,
        service_account="trainer",
        image_pull_secrets=["regcred"],
        node_selector={"pool": "gpu"},
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        priority_class="high",
        queue="team-a",
    )
    for obj in rendered["objects"]:
        validate_object(obj)
    (jobset,) = by_kind(rendered["objects"], "JobSet")
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    for role, spec in pod_specs(rendered).items():
        pod = spec["template"]["spec"]
        assert pod["serviceAccountName"] == "trainer" and pod["imagePullSecrets"] == [{"name": "regcred"}]
        assert pod["nodeSelector"] == {"pool": "gpu"} and pod["priorityClassName"] == "high", role
        assert pod["tolerations"][0]["key"] == "gpu"


def test_the_schema_checks_refuse_what_a_cluster_refuses(tmp_path: Path) -> None:
    """The validation above can fail: unknown fields and wrong values are caught in both kinds."""
    import copy

    import jsonschema
    import kubernetes_validate

    rendered = render(REPO / "examples" / "pytorch-ddp" / "job.yml", tmp_path)
    configmap, _, jobset = rendered["objects"]
    broken = copy.deepcopy(jobset)
    broken["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["imagee"] = "x"
    with pytest.raises(jsonschema.ValidationError):
        validate_object(broken)
    broken = copy.deepcopy(jobset)
    broken["spec"]["successPolicy"]["operator"] = "Sometimes"
    with pytest.raises(jsonschema.ValidationError):
        validate_object(broken)
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_object({**configmap, "binaryDatta": {}})


def test_an_environment_name_mapped_to_an_image_in_config_runs_that_image(tmp_path: Path) -> None:
    job = REPO / "examples" / "pytorch-ddp" / "job.yml"
    loaded = load_job_file(str(job), ())
    name = str(loaded.spec.environment).removeprefix("azureml:").split("@")[0]
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(f"environments:\n  {name}:\n    image: registry.example/acpt:2\n")
    rendered = preview(loaded, Layout(home), ComputeTarget("c", "kubernetes", {"jobset": "always"})).show()
    (role,) = pod_specs(rendered).values()
    assert role["template"]["spec"]["containers"][0]["image"] == "registry.example/acpt:2"


def test_plan_with_jobset_auto_says_which_form_it_shows(tmp_path: Path) -> None:
    """The JobSet form, said to be the one shown. That rendering it asks no cluster (the form is
    decided at submit) is the contract's: tests/unit/test_backend_conformance.py."""
    loaded = load_job_file(str(REPO / "examples" / "pytorch-ddp" / "job.yml"), ())
    target = ComputeTarget("c", "kubernetes", {"image": "reg/distrun:1"})
    rendered = preview(loaded, Layout(tmp_path / "home"), target).show()
    assert [o["kind"] for o in rendered["objects"]] == ["ConfigMap", "Secret", "JobSet"]
    assert any("jobset: auto" in n and "Indexed Jobs" in n for n in rendered["notes"])


def test_the_text_plan_lists_the_files_in_the_configmap_and_yaml_keeps_every_byte(tmp_path: Path) -> None:
    import base64

    from distrun.backends.kubernetes.agent_zip import pod_closure
    from distrun.backends.kubernetes.bundle import unpack
    from distrun.backends.kubernetes.display import objects_yaml

    rendered = render(REPO / "examples" / "pytorch-ddp" / "job.yml", tmp_path)
    configmap = rendered["objects"][0]
    data, agent = configmap["binaryData"]["bundle.tgz"], configmap["binaryData"]["distrun.zip"]
    unpacked = tmp_path / "unpacked"
    unpack(base64.b64decode(data), unpacked)
    shipped = sorted(str(p.relative_to(unpacked)) for p in unpacked.rglob("*") if p.is_file())
    assert any(name.startswith("code/") for name in shipped)
    text = rendered["script"]
    assert data not in text and agent not in text
    for name in shipped:
        assert name in text
    assert f"a zip of {len(base64.b64decode(agent))} bytes, the {len(pod_closure())} distrun modules" in text
    assert data in objects_yaml(rendered["objects"]) and agent in objects_yaml(rendered["objects"])


def test_a_job_with_a_hang_timeout_or_a_target_with_stacks_gets_ptrace_in_every_pod(tmp_path: Path) -> None:
    ptrace = {"capabilities": {"add": ["SYS_PTRACE"]}}
    example = REPO / "examples" / "pytorch-ddp" / "job.yml"
    plain = render(example, tmp_path)
    for spec in pod_specs(plain).values():
        assert "securityContext" not in spec["template"]["spec"]["containers"][0]
    for rendered in (
        render(example, tmp_path, overrides=("limits.hang_timeout=60",)),
        render(example, tmp_path, jobset=False, overrides=("limits.hang_timeout=60",)),
        render(REPO / "examples" / "tensorflow-ps" / "job.yml", tmp_path, stacks=True),
    ):
        for obj in rendered["objects"]:
            validate_object(obj)
        for spec in pod_specs(rendered).values():
            assert spec["template"]["spec"]["containers"][0]["securityContext"] == ptrace
