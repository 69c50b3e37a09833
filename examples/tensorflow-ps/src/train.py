"""Train a small Keras model with TF2's ParameterServerStrategy on synthetic data.

One script for every task, as TF_CONFIG says which one it is:
- `ps` and `worker` tasks start a TensorFlow server and serve until distrun stops them
  (they never exit on their own);
- the `chief` (distribution.chief_count: 1) builds the model, whose variables live on the
  parameter servers, schedules training steps on the workers, and exits when done. distrun
  then stops the workers and parameter servers and the job is Completed.

--crash-ps-after S makes ps 0 raise S seconds after it started, to see how a failing
parameter server is reported.
"""

from __future__ import annotations

import argparse
import json
import os
import time

# Keras 3 does not support ParameterServerStrategy: use tf-keras as `tf.keras`.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40, help="training steps scheduled on the workers")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--crash-ps-after", type=float, default=0, help="seconds; ps 0 then raises (a demo failure)")
    return parser.parse_args()


def serve(resolver: tf.distribute.cluster_resolver.TFConfigClusterResolver, crash_after: float) -> None:
    server = tf.distribute.Server(
        resolver.cluster_spec(),
        job_name=resolver.task_type,
        task_index=resolver.task_id,
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    print(f"{resolver.task_type} {resolver.task_id}: serving at {server.target}", flush=True)
    if crash_after and (resolver.task_type, resolver.task_id) == ("ps", 0):
        time.sleep(crash_after)
        raise RuntimeError(f"ps 0 failed after {crash_after:g} s (injected)")
    server.join()


def dataset_fn(batch_size: int):
    def make() -> tf.data.Dataset:
        rng = np.random.default_rng(0)
        x = rng.normal(size=(1024, 16)).astype("float32")
        w = rng.normal(size=(16, 1)).astype("float32")
        y = x @ w
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1024).repeat().batch(batch_size)

    return make


def coordinate(resolver: tf.distribute.cluster_resolver.TFConfigClusterResolver, args: argparse.Namespace) -> None:
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = tf.keras.Sequential(
            [tf.keras.Input(shape=(16,)), tf.keras.layers.Dense(32, activation="relu"), tf.keras.layers.Dense(1)]
        )
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.05)
        loss_metric = tf.keras.metrics.Mean("loss")
    for variable in model.trainable_variables:
        print(f"chief: variable {variable.name} on {variable.device}", flush=True)

    @tf.function
    def step(iterator: tf.distribute.DistributedIterator) -> tf.Tensor:
        def replica_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            loss_metric.update_state(loss)
            return loss

        x, y = next(iterator)
        return strategy.run(replica_step, args=(x, y))

    per_worker_dataset = coordinator.create_per_worker_dataset(dataset_fn(args.batch_size))
    per_worker_iterator = iter(per_worker_dataset)
    for _ in range(args.steps):
        coordinator.schedule(step, args=(per_worker_iterator,))
    coordinator.join()
    print(f"chief: {args.steps} steps done, mean loss {loss_metric.result().numpy():.6f}", flush=True)


def main() -> None:
    args = parse_args()
    print(f"TF_CONFIG task: {json.loads(os.environ['TF_CONFIG'])['task']}", flush=True)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type in ("ps", "worker"):
        serve(resolver, args.crash_ps_after)
    else:
        coordinate(resolver, args)


if __name__ == "__main__":
    main()
