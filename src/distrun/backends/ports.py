"""The TCP ports distrun hands to jobs (MASTER_PORT, TensorFlow task ports): one finder for every backend.

From a range below Linux's ephemeral range (32768-60999): ports handed to outgoing connections
and to bind(0) come from there, and one could take ours in the seconds between our check and the
framework's bind (TensorFlow servers bind only after importing TensorFlow).

Light on purpose: a cluster node asks for free ports (`python -m distrun.backends.slurm.node_agent
--free-ports N`) before anything else runs there, and must not pay for importing pydantic.
"""

from __future__ import annotations

import random
import socket
from typing import TYPE_CHECKING

from distrun.errors import DistrunError

if TYPE_CHECKING:
    from distrun.store.port_leases import PortLeases

PORT_RANGE = (20000, 32767)
ALL_INTERFACES = ""


def free_ports(count: int, leases: PortLeases | None = None, *, address: str = ALL_INTERFACES) -> list[int]:
    """`count` distinct TCP ports from PORT_RANGE, each free on `address` when checked.

    `address` is where the job's processes will bind: the loopback address for simulated nodes,
    every interface ("") on a cluster node. With `leases`, each port is also leased until the
    job ends, so no other distrun job on this machine gets it meanwhile. Raises `DistrunError`
    when the range has not `count` free ports.
    """
    chosen: list[int] = []
    sockets: list[socket.socket] = []
    tries = 0
    try:
        while len(chosen) < count:
            tries += 1
            if tries > 50 * (count + 10):
                raise DistrunError(f"no {count} free TCP port(s) found in {PORT_RANGE[0]}-{PORT_RANGE[1]}")
            port = random.randint(*PORT_RANGE)
            if port in chosen:
                continue
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((address, port))
                if leases is not None and not leases.take(port):
                    raise OSError("leased to another job")
            except OSError:
                sock.close()
                continue
            # Held bound until all are found, so the same port is not checked free twice.
            sockets.append(sock)
            chosen.append(port)
        return chosen
    finally:
        for sock in sockets:
            sock.close()
