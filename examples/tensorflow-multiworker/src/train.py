"""Train a small Keras model with MultiWorkerMirroredStrategy on synthetic data.

distrun (like Azure ML) gives each worker its TF_CONFIG; the strategy reads it. Every worker
prints a digest of its final weights: the workers hold replicas kept equal by all-reduce,
so the digests match. The chief (worker 0) saves the weights to --model-dir.

--crash-worker N --crash-at-batch B make worker N raise during training, to see how a
failing task is reported.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal

# Keras 3 does not support multi-worker strategies: use tf-keras as `tf.keras`.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64, help="global batch size")
    parser.add_argument("--samples", type=int, default=2048)
    parser.add_argument("--model-dir", default="")
    parser.add_argument("--crash-worker", type=int, default=-1)
    parser.add_argument("--crash-at-batch", type=int, default=3)
    return parser.parse_args()


def synthetic_data(samples: int) -> tuple[np.ndarray, np.ndarray]:
    """A fixed linear rule with noise; the same on every worker (seeded)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(samples, 16)).astype("float32")
    w = rng.normal(size=(16, 1)).astype("float32")
    y = (x @ w + 0.1 * rng.normal(size=(samples, 1))).astype("float32")
    return x, y


class CrashAt(tf.keras.callbacks.Callback):
    def __init__(self, batch: int) -> None:
        super().__init__()
        self.batch = batch

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if batch == self.batch:
            raise RuntimeError(f"injected failure at batch {batch}")


def weights_digest(weights: list[np.ndarray]) -> str:
    digest = hashlib.sha256()
    for array in weights:
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()[:16]


def main() -> None:
    args = parse_args()
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    name = f"{task['type']} {task['index']}"
    tf.keras.utils.set_random_seed(0)  # same initial weights on every worker

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    # TensorFlow's coordination service takes SIGTERM as a preemption notice and keeps
    # running; this script saves no checkpoint on preemption, so let SIGTERM end it at once
    # (distrun sends it to stop the other workers when one fails, or on cancel).
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    print(f"{name}: {strategy.num_replicas_in_sync} replicas in sync", flush=True)

    x, y = synthetic_data(args.samples)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(args.batch_size).with_options(options)

    with strategy.scope():
        model = tf.keras.Sequential(
            [tf.keras.Input(shape=(16,)), tf.keras.layers.Dense(32, activation="relu"), tf.keras.layers.Dense(1)]
        )
        model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate=0.05), loss="mse")

    crash = task["type"] == "worker" and task["index"] == args.crash_worker
    callbacks = [CrashAt(args.crash_at_batch)] if crash else []
    history = model.fit(dataset, epochs=args.epochs, verbose=2, callbacks=callbacks)

    weights = model.get_weights()
    print(f"{name}: final loss {history.history['loss'][-1]:.6f}", flush=True)
    print(f"{name}: final weights digest {weights_digest(weights)}", flush=True)
    is_chief = task["type"] == "chief" or (task["type"] == "worker" and task["index"] == 0)
    if is_chief and args.model_dir:
        os.makedirs(args.model_dir, exist_ok=True)
        np.savez(os.path.join(args.model_dir, "weights.npz"), *weights)
        print(f"{name}: weights saved to {args.model_dir}", flush=True)


if __name__ == "__main__":
    main()
