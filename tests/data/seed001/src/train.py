"""Placeholder training script: the seed examples only need their code folder to exist."""
