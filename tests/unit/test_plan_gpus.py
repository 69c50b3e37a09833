"""GPU slicing between simulated nodes, on the plan, with CUDA_VISIBLE_DEVICES standing in for the
driver (these tests need no GPU: the plan only reads the device list distrun found)."""

from __future__ import annotations

import json

import pytest

from distrun.core.errors import DistrunError
from distrun.prepare.machine_gpus import parse_gpu_list
from support.gpu_plans import job, plan, visible_per_node


def test_two_nodes_of_four_on_eight_gpus_get_disjoint_halves() -> None:
    launch = plan(job("pytorch", 2, 4))
    assert visible_per_node(launch) == {0: {"0,1,2,3"}, 1: {"4,5,6,7"}}
    assert [node.gpus for node in launch.nodes] == [("0", "1", "2", "3"), ("4", "5", "6", "7")]
    # LOCAL_RANK indexes into the node's own GPUs, as on a real node.
    assert [p.env["LOCAL_RANK"] for p in launch.nodes[1].processes] == ["0", "1", "2", "3"]
    assert any("node 1: 4,5,6,7" in note for note in launch.notes)


def test_slices_are_disjoint_for_any_node_count() -> None:
    for nodes in (1, 2, 3, 4, 8):
        launch = plan(job("pytorch", nodes, 1))
        seen = [gpu for node in launch.nodes for gpu in node.gpus]
        assert len(seen) == len(set(seen)) == (8 // nodes) * nodes


def test_the_plan_json_shows_each_nodes_gpus() -> None:
    shown = json.loads(json.dumps(plan(job("pytorch", 2, 2)).to_dict()))
    assert [node["gpus"] for node in shown["nodes"]] == [["0", "1", "2", "3"], ["4", "5", "6", "7"]]


def test_asked_gpus_per_node_gives_exactly_that_many() -> None:
    launch = plan(job("pytorch", 2, 2, gpus=2))
    assert visible_per_node(launch) == {0: {"0,1"}, 1: {"2,3"}}


@pytest.mark.parametrize("asked", [2, "2", "a100:2"])
def test_more_processes_than_asked_gpus_is_an_error(asked: object) -> None:
    with pytest.raises(DistrunError) as caught:
        plan(job("pytorch", 2, 4, gpus=asked))
    assert "gpus_per_node is 2 but each node runs 4 processes" in caught.value.message
    assert "process_count_per_instance" in (caught.value.hint or "")


def test_asking_for_more_gpus_than_there_are_is_an_error() -> None:
    with pytest.raises(DistrunError, match=r"3 nodes x 4 GPUs = 12 GPUs, but this machine has 8"):
        plan(job("pytorch", 3, 4, gpus=4))
    with pytest.raises(DistrunError, match="has 0"):
        plan(job("pytorch", 1, 1, gpus=1), visible=None)


def test_a_gpu_count_that_is_not_a_number_is_an_error() -> None:
    with pytest.raises(DistrunError, match=r"gpus_per_node: 'many' is not a number of GPUs"):
        plan(job("pytorch", 1, 1, gpus="many"))


def test_more_processes_than_gpus_without_asking_is_a_note() -> None:
    launch = plan(job("pytorch", 2, 8))
    assert visible_per_node(launch) == {0: {"0,1,2,3"}, 1: {"4,5,6,7"}}
    assert any("LOCAL_RANK >= 4 have no GPU of their own" in note for note in launch.notes)


def test_no_gpus_leaves_cuda_visible_devices_alone() -> None:
    for visible in (None, "", "-1"):
        launch = plan(job("pytorch", 2, 2), visible=visible)
        assert visible_per_node(launch) == {0: {None}, 1: {None}}
        assert all(node.gpus == () for node in launch.nodes)


def test_fewer_gpus_than_nodes_is_a_note_and_no_slicing() -> None:
    launch = plan(job("pytorch", 3, 1), visible="0,1")
    assert visible_per_node(launch) == {0: {None}, 1: {None}, 2: {None}}
    assert any("2 GPU(s) for 3 simulated nodes" in note for note in launch.notes)


def test_the_jobs_own_cuda_visible_devices_is_what_is_sliced() -> None:
    spec = job("pytorch", 2, 1, environment_variables={"CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b,GPU-c,GPU-d"})
    assert visible_per_node(plan(spec)) == {0: {"GPU-a,GPU-b"}, 1: {"GPU-c,GPU-d"}}


def test_real_nodes_keep_their_own_gpus() -> None:
    launch = plan(job("pytorch", 2, 4, gpus=4), simulated=False)
    assert visible_per_node(launch) == {0: {None}, 1: {None}}


def test_tensorflow_tasks_see_their_nodes_gpus() -> None:
    launch = plan(job("tensorflow", 2, 2))
    assert visible_per_node(launch) == {0: {"0,1,2,3"}, 1: {"4,5,6,7"}}


def test_an_own_launcher_gets_each_nodes_first_gpus_in_node_order() -> None:
    spec = job("mpi", 2, 2, command="deepspeed --master_port $MASTER_PORT train.py")
    launch = plan(spec)
    launcher = launch.nodes[0].processes[0]
    # Local rank r (0..3 on this one host) picks GPU r % 2 of node r // 2.
    assert launcher.env["CUDA_VISIBLE_DEVICES"] == "0,1,4,5"
    assert any("--include localhost:0,1,4,5" in note for note in launch.notes)


def test_nvidia_smi_listing_is_parsed_into_indices() -> None:
    listing = (
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n"
        "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-2)\n"
        "  MIG 1g.5gb     Device  0: (UUID: MIG-3)\n"
    )
    assert parse_gpu_list(listing) == ("0", "1")


# ---------------------------------------------------------------- NCCL, UCX and gloo settings

NETWORK_ENV = {
    "NCCL_DEBUG": "INFO",
    "NCCL_SOCKET_IFNAME": "eth0",
    "NCCL_IB_HCA": "mlx5_0",
    "UCX_NET_DEVICES": "mlx5_0:1",
    "GLOO_SOCKET_IFNAME": "eth0",
}


@pytest.mark.parametrize("kind", [None, "pytorch", "tensorflow"])
def test_network_settings_reach_every_process(kind: str | None) -> None:
    launch = plan(job(kind, 2, 2, environment_variables=NETWORK_ENV))
    for process in launch.processes():
        assert {k: process.env[k] for k in NETWORK_ENV} == NETWORK_ENV


def test_network_settings_reach_every_rank_through_distruns_mpirun() -> None:
    for simulated in (True, False):
        launch = plan(job("mpi", 2, 2, environment_variables=NETWORK_ENV), simulated=simulated)
        launcher = launch.nodes[0].processes[0]
        assert {k: launcher.env[k] for k in NETWORK_ENV} == NETWORK_ENV  # node 0's ranks inherit them
        exported = {launcher.argv[i + 1] for i, word in enumerate(launcher.argv) if word == "-x"}
        assert set(NETWORK_ENV) <= exported  # ranks on other hosts get them through -x


@pytest.mark.parametrize("command", ["mpirun -np 4 python train.py", "deepspeed --master_port 1 train.py"])
def test_network_settings_reach_the_commands_own_launcher(command: str) -> None:
    launcher = plan(job("mpi", 2, 2, command=command, environment_variables=NETWORK_ENV)).nodes[0].processes[0]
    assert {k: launcher.env[k] for k in NETWORK_ENV} == NETWORK_ENV  # its ranks inherit them
    # Open MPI refuses `-x` beside mca_base_env_list: distrun must not set it for a mpirun it did not write.
    assert "OMPI_MCA_mca_base_env_list" not in launcher.env
