"""Step 1 of the chain pipeline: copy the raw sample into the step's output."""

import argparse
import pathlib
import shutil

parser = argparse.ArgumentParser()
parser.add_argument("--raw")
parser.add_argument("--rows", type=int)
parser.add_argument("--out")
args = parser.parse_args()
shutil.copy(pathlib.Path(args.raw) / "sample.csv", pathlib.Path(args.out) / "prepared.csv")
print("prepared", args.rows, "rows")
