"""Step 2 of the chain pipeline: read step 1's output, write a "model" (rank 0 only)."""

import argparse
import os
import pathlib

parser = argparse.ArgumentParser()
parser.add_argument("--data")
parser.add_argument("--epochs", type=int)
parser.add_argument("--lr", type=float)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--model")
args = parser.parse_args()
text = (pathlib.Path(args.data) / "prepared.csv").read_text()
if os.environ.get("RANK", "0") == "0":
    (pathlib.Path(args.model) / "model.txt").write_text(f"epochs={args.epochs} lr={args.lr} data={text.strip()}\n")
print("trained on rank", os.environ.get("RANK"))
