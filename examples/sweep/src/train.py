"""Gradient descent with momentum on f(w) = (w - 3)^2, from w = 0: a trial of the example sweep.
It logs `loss` at each step, which the sweep ranks its trials by and stops poor ones early on."""

import argparse

import mlflow


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--momentum", type=float, required=True)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    weight, velocity = 0.0, 0.0
    for step in range(args.steps):
        gradient = 2 * (weight - 3.0)
        velocity = args.momentum * velocity - args.lr * gradient
        weight += velocity
        loss = (weight - 3.0) ** 2
        mlflow.log_metric("loss", loss, step=step)
    print(f"lr={args.lr:.4g} momentum={args.momentum}: w={weight:.4f}, loss={loss:.6g}")


if __name__ == "__main__":
    main()
