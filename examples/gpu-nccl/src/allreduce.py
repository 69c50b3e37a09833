"""NCCL all_reduce across every rank of the job: a correctness check and a bandwidth figure.

Each rank takes the GPU its LOCAL_RANK names among the GPUs it can see (distrun gives each
simulated node its own CUDA_VISIBLE_DEVICES), sums a tensor with every other rank and checks the
result, then times all_reduce of a large buffer and prints the bus bandwidth NCCL's own tests
report (2 * (n - 1) / n * bytes / time).
"""

import argparse
import os
import time

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args()

    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", local_rank)
    print(
        f"rank {rank}/{world}: CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')} "
        f"device {local_rank} = {torch.cuda.get_device_name(device)}, "
        f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}",
        flush=True,
    )

    # Correctness: every rank contributes rank + 1, so the sum is world * (world + 1) / 2.
    check = torch.full((1024,), float(rank + 1), device=device)
    dist.all_reduce(check)
    expected = world * (world + 1) / 2
    if not torch.all(check == expected):
        raise SystemExit(f"rank {rank}: all_reduce gave {check[0].item()}, expected {expected}")

    buffer = torch.ones(args.size_mib * 1024 * 1024 // 4, device=device)
    for _ in range(3):  # warm-up: NCCL builds its rings and channels on the first calls
        dist.all_reduce(buffer)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.iterations):
        dist.all_reduce(buffer)
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / args.iterations
    size = buffer.numel() * 4
    bus_gbs = (2 * (world - 1) / world * size / seconds / 1e9) if world > 1 else 0.0
    if rank == 0:
        traffic = f"bus bandwidth {bus_gbs:.1f} GB/s" if world > 1 else "one GPU: no traffic between GPUs"
        print(
            f"all_reduce of {size / 2**20:.0f} MiB on {world} GPU(s): {seconds * 1e3:.2f} ms, {traffic}; "
            "result checked",
            flush=True,
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
