"""Horovod data-parallel training of a small network on synthetic data.

Horovod learns its rank and size from MPI (mpirun sets OMPI_COMM_WORLD_*); nothing else is
needed. Every rank starts from different random weights on purpose: broadcasting rank 0's
weights and averaging gradients keeps them identical, which each rank shows at the end by
printing a digest of its weights.
"""

import argparse
import hashlib
from pathlib import Path

import horovod.torch as hvd
import torch
from torch import nn


def synthetic_data(samples: int = 2048, features: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """The same data on every rank: y = X w + noise, from a fixed seed."""
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(samples, features, generator=gen)
    w = torch.randn(features, 1, generator=gen)
    y = x @ w + 0.1 * torch.randn(samples, 1, generator=gen)
    return x, y


def weights_digest(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--model-dir", default="outputs")
    args = parser.parse_args()

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    torch.set_num_threads(1)
    print(f"rank {rank}/{size} (local rank {hvd.local_rank()}/{hvd.local_size()})")

    x, y = synthetic_data()
    x, y = x[rank::size], y[rank::size]  # this rank's shard
    torch.manual_seed(rank)  # different starting weights on every rank...
    model = nn.Sequential(nn.Linear(x.shape[1], 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * size)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # ...until rank 0's are broadcast
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    loss_fn = nn.MSELoss()

    for epoch in range(args.epochs):
        total = torch.zeros(2)
        for start in range(0, len(x), args.batch_size):
            xb, yb = x[start : start + args.batch_size], y[start : start + args.batch_size]
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()  # gradients are averaged over all ranks here
            total += torch.tensor([loss.item() * len(xb), len(xb)])
        total = hvd.allreduce(total, op=hvd.Sum, name="epoch_loss")
        if rank == 0:
            print(f"epoch {epoch + 1}/{args.epochs} loss {total[0].item() / total[1].item():.4f}")

    print(f"rank {rank} weights {weights_digest(model)}")
    if rank == 0:
        out = Path(args.model_dir)
        out.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), out / "model.pt")
        print(f"saved model to {out / 'model.pt'}")
    hvd.join()
    hvd.shutdown()


if __name__ == "__main__":
    main()
