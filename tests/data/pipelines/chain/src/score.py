"""Step 3 of the chain pipeline: read step 2's model, write a report."""

import argparse
import pathlib

parser = argparse.ArgumentParser()
parser.add_argument("--model")
parser.add_argument("--report")
args = parser.parse_args()
model = (pathlib.Path(args.model) / "model.txt").read_text()
(pathlib.Path(args.report) / "report.txt").write_text("scored " + model)
print("scored", model.strip())
