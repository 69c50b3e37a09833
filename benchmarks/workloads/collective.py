"""B2: init_process_group (gloo) and one all_reduce; `start_R` when the interpreter runs this
file, `done_R` when this rank is past the all_reduce."""

from __future__ import annotations

import time

STARTED = time.time()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from stamps import stamp  # noqa: E402


def main() -> None:
    stamp("start", STARTED)
    dist.init_process_group("gloo")
    value = torch.ones(1)
    dist.all_reduce(value)
    stamp("done")
    assert int(value.item()) == dist.get_world_size()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
