"""Outputs between jobs on engines whose nodes share nothing with this machine (Ray, Kubernetes).

- An input that is another job's output (a pipeline's upstream step) is copied into the job
  folder when the target's nodes do not see this machine's job folders, so it travels with the
  code (`distrun.prepare.submission.bind`); elsewhere it is read where it is.
- A node's outputs come back as one archive (`distrun.agent.output_archive`), unpacked only
  below the output folders, whatever the job's processes put in it.
- On Kubernetes the archive travels in the pod's log (`output_records`), read in as many looks
  as it takes (`collect.collect_pod_log`).
"""

from __future__ import annotations

import base64
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from distrun.agent.output_archive import pack_outputs, unpack_outputs
from distrun.backends.kubernetes import output_records
from distrun.backends.kubernetes.collect import collect_pod_log
from distrun.backends.kubernetes.job_files import K8sPaths
from distrun.backends.kubernetes.pod_contract import OUTCOME_MARK
from distrun.core.job_status import JobStatus
from distrun.prepare.compute import resolve_target
from distrun.prepare.submission import prepare_job
from distrun.store.index import JobIndex
from distrun.store.layout import JobFolder, Layout
from support.backend_contract import refuse_engines
from support.job_files import load_text

TARGETS = """\
compute:
  rc: {type: ray, address: '10.0.0.5:6379'}
  hpc: {type: slurm, partition: debug}
  cluster: {type: kubernetes, namespace: ml, jobset: always, image: 'reg/distrun:1'}
"""
READER = """\
command: cat ${{inputs.data}}/rows.txt ${{inputs.plain}}/rows.txt
inputs:
  data: {type: uri_folder, path: azureml://jobs/up/outputs/data}
  plain: {type: uri_folder, path: ./plain}
"""


@pytest.fixture
def layout(distrun_home: Path, monkeypatch: pytest.MonkeyPatch) -> Layout:
    refuse_engines(monkeypatch)
    distrun_home.mkdir(parents=True)
    (distrun_home / "config.yaml").write_text(TARGETS)
    return Layout(distrun_home)


def completed_upstream(layout: Layout, folder: Path) -> Path:
    """A completed local job `up` whose output `data` holds rows.txt; returns that output's folder."""
    folder.mkdir()
    loaded = load_text(folder, "command: 'true'\noutputs:\n  data: {type: uri_folder}\n", ["name=up"])
    up = prepare_job(loaded, layout, resolve_target("local", layout.config_path))
    JobIndex(layout.db_path).update("up", status=JobStatus.COMPLETED)
    output = Path(up.bindings.outputs["data"])
    (output / "rows.txt").write_text("rows\n")
    return output


@pytest.mark.parametrize(("target", "copied"), [("local", False), ("hpc", False), ("rc", True), ("cluster", True)])
def test_another_jobs_output_is_copied_into_the_job_only_where_the_nodes_share_nothing(
    layout: Layout, tmp_path: Path, target: str, copied: bool
) -> None:
    upstream = completed_upstream(layout, tmp_path / "up")
    (tmp_path / "reader" / "plain").mkdir(parents=True)
    (tmp_path / "reader" / "plain" / "rows.txt").write_text("plain\n")
    loaded = load_text(tmp_path / "reader", READER, [f"name=reader_{target}"])
    job = prepare_job(loaded, layout, resolve_target(target, layout.config_path))
    data = Path(job.bindings.inputs["data"])
    if copied:
        assert data == job.folder.inputs / "data"
        assert (data / "rows.txt").read_text() == "rows\n"
        assert job.bindings.input_sources["data"]["source"].endswith(", copied into the job folder to travel with it")
    else:
        assert data == upstream and not job.folder.inputs.exists()
    # A local path elsewhere is the user's to make visible to the nodes (a volume, mode: download).
    assert Path(job.bindings.inputs["plain"]) == (tmp_path / "reader" / "plain").resolve()


def test_an_archive_of_the_outputs_round_trips_and_is_empty_without_files(tmp_path: Path) -> None:
    node = tmp_path / "node"
    (node / "named-outputs" / "model").mkdir(parents=True)
    (node / "code").mkdir()
    assert pack_outputs(node) == b""  # empty folders: nothing to carry
    (node / "named-outputs" / "model" / "weights.bin").write_bytes(b"\x00\x01")
    (node / "code" / "outputs").mkdir()
    (node / "code" / "outputs" / "metrics.json").write_text("{}")
    (node / "code" / "train.py").write_text("not an output")
    here = tmp_path / "here"
    here.mkdir()
    assert unpack_outputs(pack_outputs(node), here) == []
    assert (here / "named-outputs" / "model" / "weights.bin").read_bytes() == b"\x00\x01"
    assert (here / "code" / "outputs" / "metrics.json").read_text() == "{}"
    assert not (here / "code" / "train.py").exists()


def _tar(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for info, data in members:
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return buffer.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, target: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def test_an_archive_from_a_hostile_node_unpacks_nothing_but_files_below_the_output_folders(tmp_path: Path) -> None:
    here = tmp_path / "job"
    (here / "named-outputs").mkdir(parents=True)
    (here / "job.json").write_text("the job")
    archive = _tar(
        [
            (_member("named-outputs/ok.txt"), b"ok"),
            (_member("job.json"), b"replaced"),  # a file of distrun's, next to the outputs
            (_member("named-outputs/../job.json"), b"replaced"),
            (_member("/etc/evil"), b"x"),
            (_member("named-outputs/link", tarfile.SYMTYPE, "../job.json"), b""),
            (_member("named-outputs/hard", tarfile.LNKTYPE, "job.json"), b""),
            (_member("named-outputs/fifo", tarfile.FIFOTYPE), b""),
        ]
    )
    left_out = unpack_outputs(archive, here)
    assert (here / "named-outputs" / "ok.txt").read_text() == "ok"
    assert (here / "job.json").read_text() == "the job"
    assert sorted(os.listdir(here / "named-outputs")) == ["ok.txt"]
    assert len(left_out) == 6, left_out
    assert "named-outputs/link: not a regular file or folder" in left_out
    assert "job.json: outside named-outputs, code/outputs, code/logs, hang" in left_out


def _pod_job(tmp_path: Path) -> tuple[JobFolder, K8sPaths]:
    folder = Layout(tmp_path / "home").job("step")
    for sub in (folder.system_logs, folder.named_outputs):
        sub.mkdir(parents=True)
    return folder, K8sPaths(folder.root)


def _outputs_log(tmp_path: Path, size: int) -> tuple[bytes, bytes]:
    """A pod's log with its rank's line, the archive of a `size`-byte output, then its outcome; and the file."""
    node = tmp_path / "pod"
    (node / "named-outputs" / "data").mkdir(parents=True)
    content = os.urandom(size)  # incompressible: the archive takes several records
    (node / "named-outputs" / "data" / "rows.bin").write_bytes(content)
    records = output_records.output_records(pack_outputs(node))
    assert len(records) >= 3  # the header and at least two chunks
    lines = ["[0/0] training", *records, OUTCOME_MARK + json.dumps({"status": "Completed", "node_rank": 0})]
    return "".join(line + "\n" for line in lines).encode(), content


def test_a_pods_outputs_come_back_through_its_log_read_in_several_looks(tmp_path: Path) -> None:
    folder, paths = _pod_job(tmp_path)
    log, content = _outputs_log(tmp_path, 2 * output_records.CHUNK)
    labels = {"0/0": "std_log_process_00.txt"}
    cut = log.index(b"\n", log.index(output_records.CHUNK_MARK.encode())) + 1  # after the first chunk
    collect_pod_log(folder, paths, "step-worker-0-0", log[:cut], labels)
    arrived = folder.named_outputs / "data" / "rows.bin"
    assert not arrived.exists()  # half an archive is kept aside, not unpacked
    collect_pod_log(folder, paths, "step-worker-0-0", log, labels)
    assert arrived.read_bytes() == content
    assert not any(paths.outputs.iterdir())  # nothing left aside
    pod_log = (folder.system_logs / "pod_step-worker-0-0.txt").read_text()
    assert "distrun-outputs" not in pod_log
    assert "distrun: the outputs of pod step-worker-0-0 were brought back into the job folder (" in pod_log
    assert (folder.user_logs / "std_log_process_00.txt").read_text() == "training\n"
    assert (paths.outcomes / "step-worker-0-0.json").exists()


def test_a_damaged_or_oversized_archive_is_said_and_not_unpacked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, paths = _pod_job(tmp_path)
    log, _ = _outputs_log(tmp_path, 2 * output_records.CHUNK)
    mark = output_records.CHUNK_MARK.encode()
    at = log.index(mark) + len(mark)
    chunk = base64.b64decode(log[at : log.index(b"\n", at)])
    damaged = log[:at] + base64.b64encode(bytes([chunk[0] ^ 1]) + chunk[1:]) + log[log.index(b"\n", at) :]
    collect_pod_log(folder, paths, "p", damaged, {})
    assert not (folder.named_outputs / "data").exists()
    said = (folder.system_logs / "pod_p.txt").read_text()
    assert "the outputs of pod p were not brought back: the archive came back damaged" in said

    monkeypatch.setattr(output_records, "OUTPUTS_LIMIT", 1024)
    (record,) = output_records.output_records(b"x" * 2048)
    assert output_records.receive(record.encode(), "q", paths.outputs, folder.root) == (
        "distrun: the outputs of pod q were not brought back: the outputs are 2.0 KiB compressed, more than the "
        "1.0 KiB a pod's log carries back; write large outputs to a datastore output "
        "(path: azureml://datastores/<name>/paths/...) or a volume"
    )
