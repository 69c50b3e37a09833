"""distrun's benchmarks: launch, failure fan-out, logs, plan scale and footprint, against the
tools people use today (a bare shell loop, torchrun, TorchX). Run with `python -m benchmarks`."""
