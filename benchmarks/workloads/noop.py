"""B1 under TorchX, which runs scripts: a rank that does nothing, like `python -c pass`."""
