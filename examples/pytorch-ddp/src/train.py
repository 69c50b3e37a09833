"""Data-parallel training of a small network on synthetic data with DDP over gloo.

Reads the variables distrun (or Azure ML, or torchrun) sets: RANK, WORLD_SIZE, LOCAL_RANK,
NODE_RANK, MASTER_ADDR, MASTER_PORT. Rank 0 prints the loss and saves the model.
"""

import argparse
import gc
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def synthetic_data(samples: int = 4096, features: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """The same data on every rank: y = X w + noise, from a fixed seed."""
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(samples, features, generator=gen)
    w = torch.randn(features, 1, generator=gen)
    y = x @ w + 0.1 * torch.randn(samples, 1, generator=gen)
    return x, y


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--model-dir", default="outputs")
    args = parser.parse_args()

    dist.init_process_group("gloo")  # env:// reads MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    rank, world = dist.get_rank(), dist.get_world_size()
    print(
        f"rank {rank}/{world} on node {os.environ.get('NODE_RANK')} "
        f"(local rank {os.environ.get('LOCAL_RANK')}), master {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    )

    x, y = synthetic_data()
    x, y = x[rank::world], y[rank::world]  # this rank's shard
    torch.manual_seed(0)  # identical initial weights (DDP also broadcasts them from rank 0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(x.shape[1], 64), nn.ReLU(), nn.Linear(64, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = nn.MSELoss()

    for epoch in range(args.epochs):
        total = torch.zeros(2)
        for start in range(0, len(x), args.batch_size):
            xb, yb = x[start : start + args.batch_size], y[start : start + args.batch_size]
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()  # DDP averages the gradients over all ranks here
            optimizer.step()
            total += torch.tensor([loss.item() * len(xb), len(xb)])
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch + 1}/{args.epochs} loss {total[0].item() / total[1].item():.4f}")

    if rank == 0:
        out = Path(args.model_dir)
        out.mkdir(parents=True, exist_ok=True)
        torch.save(model.module.state_dict(), out / "model.pt")
        print(f"saved model to {out / 'model.pt'}")
    # Shut down in order: free DDP's pending gloo work (it holds tensors) while Python is still
    # alive, then leave the process group together. Leaving that to interpreter exit makes
    # gloo's threads abort now and then ("terminate called without an active exception").
    del model, optimizer
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
