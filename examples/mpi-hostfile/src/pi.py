"""Pi by the midpoint rule, the intervals shared out over the MPI ranks and summed with allreduce.

Run it as `python -m mpi4py pi.py`: then an exception in one rank aborts every rank at
once (MPI_Abort) instead of leaving the others waiting in a collective.
"""

import argparse
import math
import os

from mpi4py import MPI


def partial_sum(rank: int, size: int, intervals: int) -> float:
    width = 1.0 / intervals
    return sum(4.0 / (1.0 + ((i + 0.5) * width) ** 2) for i in range(rank, intervals, size)) * width


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--intervals", type=int, default=1_000_000)
    args = parser.parse_args()

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    print(f"rank {rank}/{size} on {MPI.Get_processor_name()}, hostfile {os.environ.get('AZUREML_MPI_HOSTFILE')}")
    pi = comm.allreduce(partial_sum(rank, size, args.intervals), op=MPI.SUM)
    if rank == 0:
        print(f"pi = {pi:.12f} (error {abs(pi - math.pi):.2e}) from {size} ranks")


if __name__ == "__main__":
    main()
