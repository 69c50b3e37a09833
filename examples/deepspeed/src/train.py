"""ZeRO stage 2 training of a small network on synthetic data with DeepSpeed, on CPU (gloo).

The same script runs under the three ways distrun starts DeepSpeed (docs/deepspeed.md):
- `type: pytorch`: distrun sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT for
  every process, and DeepSpeed initializes torch.distributed from them.
- `type: mpi`: mpirun starts the ranks without those variables; `deepspeed.init_distributed()`
  finds the ranks through MPI (mpi4py).
- the DeepSpeed launcher (`deepspeed ... train.py`): it sets the variables for every rank it
  starts and passes `--local_rank`.
The training settings (batch size, optimizer, ZeRO stage) come from ds_config.json, a plain
file of the code folder.
"""

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

import deepspeed
import torch
import torch.distributed as dist
from torch import nn


def say(line: str) -> None:
    """Print a line in one write, whole even when several processes share the output pipe."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def synthetic_data(samples: int = 2048, features: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """The same data on every rank: y = X w + noise, from a fixed seed."""
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(samples, features, generator=gen)
    w = torch.randn(features, 1, generator=gen)
    y = x @ w + 0.1 * torch.randn(samples, 1, generator=gen)
    return x, y


def weights_digest(model: nn.Module) -> str:
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return hashlib.sha256(flat.numpy().tobytes()).hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--deepspeed_config", default="ds_config.json")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--model-dir", default="")
    parser.add_argument("--local_rank", type=int, default=-1, help="passed by the DeepSpeed launcher")
    # Failure demonstration: this rank raises inside the forward pass of DeepSpeed's step.
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--fail-step", type=int, default=3)
    args = parser.parse_args()

    found_by = "environment" if "RANK" in os.environ else "MPI discovery"
    # Under mpirun DeepSpeed takes the ranks from MPI and MASTER_PORT from distributed_port
    # (29500 unless told): passing the job's port keeps two jobs on one machine apart.
    deepspeed.init_distributed(dist_backend="gloo", distributed_port=int(os.environ.get("MASTER_PORT", 29500)))
    rank, world = dist.get_rank(), dist.get_world_size()
    say(
        f"rank {rank}/{world} local rank {os.environ.get('LOCAL_RANK')} ({found_by}), "
        f"master {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    )

    with open(args.deepspeed_config) as handle:
        config = json.load(handle)
    torch.manual_seed(rank)  # different starting weights: DeepSpeed broadcasts rank 0's
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))
    fail_here = rank == args.fail_rank

    def forward_hook(module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
        if fail_here and engine.global_steps + 1 == args.fail_step:
            raise ValueError(f"bad batch on rank {rank} at step {args.fail_step}")

    model.register_forward_pre_hook(forward_hook)
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)

    x, y = synthetic_data()
    x, y = x[rank::world], y[rank::world]  # this rank's shard
    batch = engine.train_micro_batch_size_per_gpu()
    loss_fn = nn.MSELoss()
    for step in range(args.steps):
        start = (step * batch) % (len(x) - batch + 1)
        xb, yb = x[start : start + batch], y[start : start + batch]
        loss = loss_fn(engine(xb), yb)
        engine.backward(loss)  # ZeRO-2: each rank keeps its partition of the gradients
        engine.step()  # ... and of the optimizer state, then the new weights are gathered
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        if rank == 0:
            say(f"step {step + 1}/{args.steps} loss {mean.item() / world:.4f}")

    # One write per line: under the DeepSpeed launcher all ranks share one pipe, and print()
    # writes the text and its newline separately, so another rank's line could land between.
    say(f"rank {rank} zero stage {engine.zero_optimization_stage()} weights {weights_digest(engine.module)}")
    if rank == 0 and args.model_dir:
        out = Path(args.model_dir)
        out.mkdir(parents=True, exist_ok=True)
        torch.save(engine.module.state_dict(), out / "model.pt")
        print(f"saved model to {out / 'model.pt'}")
    # Every rank leaves together: without this one rank may abort while another still sends.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
