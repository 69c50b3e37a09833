"""Every rank reads the file of the step before and all-reduces its rank over gloo; rank 0 writes both."""

import os
import sys

data, out = sys.argv[1], sys.argv[2]
with open(os.path.join(data, "rows.txt")) as f:
    rows = f.read().strip()
rank = os.environ["RANK"]
print(f"rank {rank} read {rows!r} in {data}", flush=True)
if os.environ.get("FAIL_RANK") == rank:
    raise ValueError(f"bad rows on rank {rank}: {rows}")

import torch  # noqa: E402  (a failing rank fails before paying for it)
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo")
total = torch.ones(1) * dist.get_rank()
dist.all_reduce(total)
print(f"rank {rank} of {os.environ['WORLD_SIZE']} sum {int(total.item())}", flush=True)
if dist.get_rank() == 0:
    with open(os.path.join(out, "result.txt"), "w") as f:
        f.write(f"sum {int(total.item())} of {rows}\n")
dist.destroy_process_group()
