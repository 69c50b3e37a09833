"""Slurm host lists read in Python agree with `scontrol show hostnames` on the real test cluster.

The node agent reads its allocation's hosts without scontrol when the list is in the common form
(distrun.backends.slurm.hostlist); whatever it reads must be exactly what scontrol says, and any
other form must still reach scontrol.
"""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distrun.backends.slurm.client import SlurmClient
from distrun.backends.slurm.hostlist import expand_hostlist
from support.clusters.slurm_cluster import SlurmCluster


def scontrol_hostnames(cluster: SlurmCluster, node_list: str) -> list[str] | None:
    out = subprocess.run(
        ["scontrol", "show", "hostnames", node_list], env=cluster.env(), capture_output=True, text=True, timeout=30
    )
    return out.stdout.split() if out.returncode == 0 else None


# Names as sites give them: letters, digits, "-" and "." (never first), no digit right before a bracket.
prefixes = st.text(alphabet="abcxyz019-.", min_size=1, max_size=6).filter(
    lambda p: p[0] not in "-." and not p[-1].isdigit()
)


@st.composite
def ranges(draw: st.DrawFn) -> str:
    low = draw(st.integers(0, 120))
    width = draw(st.integers(1, 4))
    text = f"{low:0{width}d}"
    if draw(st.booleans()):
        text += f"-{draw(st.integers(low, low + 12))}"
    return text


@st.composite
def host_lists(draw: st.DrawFn) -> str:
    items = []
    for _ in range(draw(st.integers(1, 3))):
        prefix = draw(prefixes)
        if draw(st.booleans()):
            prefix += "[" + ",".join(draw(st.lists(ranges(), min_size=1, max_size=3))) + "]"
        items.append(prefix)
    return ",".join(items)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(node_list=host_lists())
def test_what_is_read_here_is_what_scontrol_says(slurm_cluster: SlurmCluster, node_list: str) -> None:
    names = expand_hostlist(node_list)
    assert names is not None, node_list  # every list drawn here is in the form read here
    assert names == scontrol_hostnames(slurm_cluster, node_list)


@pytest.mark.parametrize(
    "node_list",
    ["n[3,1]", "node[008-011],login1", "n[9-11]", "n[01-3]", "n1,n1", "gpu-a100-[1-2]"],
)
def test_the_common_forms_are_read_here(slurm_cluster: SlurmCluster, node_list: str) -> None:
    names = expand_hostlist(node_list)
    assert names is not None and names == scontrol_hostnames(slurm_cluster, node_list)


@pytest.mark.parametrize("node_list", ["a[1-2]b[3-4]", "rack[1-2]-n[1-2]"])
def test_other_forms_are_left_to_scontrol(slurm_cluster: SlurmCluster, node_list: str) -> None:
    assert expand_hostlist(node_list) is None
    expected = scontrol_hostnames(slurm_cluster, node_list)
    assert expected and SlurmClient(slurm_cluster.env()).hostnames(node_list) == expected
