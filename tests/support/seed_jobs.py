"""Seed 001's draft MPI job forms, as the seed document writes them (`distributed.mpi`,
`compute.infrastructure`): the same text is loaded by the plan's unit tests and run for real by
tests/frameworks/test_mpi_jobs.py. Each runs `python train.py` from `code: ./src`.
"""

from __future__ import annotations

SEED_001_HOROVODRUN = """\
command: >-
  horovodrun -np 16 --hostfile $AZUREML_MPI_HOSTFILE python train.py
code:
  path: ./src
environment:
  docker:
    image: docker.io/pytorch
distributed:
  mpi:
    worker:
      count: 4
compute:
  infrastructure: managed
  instance_type: Standard_NC24
"""

SEED_001_MPIRUN = """\
code:
  path: ./src
environment:
  docker:
    image: docker.io/pytorch
command: >-
  mpirun -np 16 --hostfile $AZUREML_MPI_HOSTFILE
  -bind-to none -map-by slot -x NCCL_DEBUG=INFO -x LD_LIBRARY_PATH -x PATH
  -mca pml ob1 -mca btl ^openib
  python train.py
distributed:
  mpi:
    worker:
      count: 4
      slots_per: 4 # optional, workers have defaults
compute:
  infrastructure: managed
  instance_type: Standard_NC24
"""

SEED_001_LAUNCHER_IS_WORKER = """\
command: >-
  mpirun -np 16 --hostfile $AZUREML_MPI_HOSTFILE
  -bind-to none -map-by slot -x NCCL_DEBUG=INFO -x LD_LIBRARY_PATH -x PATH
  -mca pml ob1 -mca btl ^openib
  python train.py
code:
  path: ./src
environment:
  docker:
    image: docker.io/pytorch
compute:
  infrastructure: managed
  instance_type: Standard_NC24
distributed:
  mpi:
    worker:
      count: 4
"""

SEED_001_K8S = """\
environment:
  docker:
    image: docker.io/pytorch
code:
  path: ./src
command: >-
    mpirun -np 16 --allow-run-as-root -bind-to none -map-by slot
    -x LD_LIBRARY_PATH -x PATH -mca pml ob1 -mca btl ^openib
    python train.py
distributed:
  mpi:
    launcher:
      resources:
        limits:
          cpu: 1
          memory: 2Gi
    worker:
      count: 4
      resources:
        limits:
          gpu: 4
compute:
  infrastructure: k8s
  target: my-aks-cluster
"""

SEED_001 = {
    "horovodrun": SEED_001_HOROVODRUN,
    "mpirun": SEED_001_MPIRUN,
    "launcher-is-worker": SEED_001_LAUNCHER_IS_WORKER,
    "k8s": SEED_001_K8S,
}
