"""The TCP ports distrun hands to jobs (MASTER_PORT, TensorFlow task ports): one finder for every backend.

From a range below Linux's ephemeral range (32768-60999): ports handed to outgoing connections
and to bind(0) come from there, and one could take ours in the seconds between our check and the
framework's bind (TensorFlow servers bind only after importing TensorFlow).

Light on purpose: a Slurm job's batch script asks for free ports (`python -m
distrun.backends.ports N`) before it starts the node agents, so every import here delays every
rank. This module imports only socket and random at run time (its error class when it raises):
the step takes about 20 ms on a 2-core machine, against 45 ms through the node agent's module.
"""

from __future__ import annotations

import random
import socket
import sys

TYPE_CHECKING = False
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
                from distrun.core.errors import DistrunError

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


def main(argv: list[str] | None = None) -> int:
    """`python -m distrun.backends.ports N`: N ports free on this node, comma-separated, for a batch script."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit():
        print("usage: python -m distrun.backends.ports N  (N: how many free TCP ports to print)", file=sys.stderr)
        return 2
    try:
        print(",".join(map(str, free_ports(int(args[0])))))
    except Exception as exc:  # a DistrunError, whose class is imported only when one is raised
        from distrun.core.errors import DistrunError

        if not isinstance(exc, DistrunError):
            raise
        print(f"distrun: {exc.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
