#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""MLflow's own Python client (the `mlflow` package pinned in installer/python-requirements.txt) against a tracking
server, for the tests of Spur's mlflow tracker and `spur runs import mlflow://`.
  mlflow_rig.py read URI EXPERIMENT   prints [{"run_id", "run_name", "status", "params", "tags",
                                      "metrics": {key: [[step, value, timestamp_ms], ...]}}, ...] (every point,
                                      through MlflowClient.get_metric_history; NaN as the string "NaN")
  mlflow_rig.py write URI EXPERIMENT  logs two runs as a user's script would (log_params, log_metrics with steps,
                                      one metric of 30,000 points so the reader pages, a NaN, a failed run) and
                                      prints what it logged, in the same shape as `read`"""
import json
import math
import sys

from mlflow import MlflowClient
from mlflow.entities import Metric, Param


def number(value):
    if math.isnan(value):
        return "NaN"
    return value if math.isfinite(value) else ("Infinity" if value > 0 else "-Infinity")


def read(uri, experiment):
    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return []
    out = []
    for run in client.search_runs([found.experiment_id], order_by=["attributes.start_time ASC"]):
        metrics = {}
        for key in run.data.metrics:
            history = client.get_metric_history(run.info.run_id, key)
            metrics[key] = sorted([[m.step, number(m.value), m.timestamp] for m in history],
                                  key=lambda point: (point[0], point[2]))
        out.append({"run_id": run.info.run_id, "run_name": run.info.run_name, "status": run.info.status,
                    "params": run.data.params, "tags": run.data.tags, "metrics": metrics})
    return out


def write(uri, experiment):
    client = MlflowClient(uri)
    experiment_id = client.create_experiment(experiment)
    start = 1_790_000_000_000
    # A finished run: parameters of each kind, a long loss curve, a metric with a NaN.
    run = client.create_run(experiment_id, run_name="lr-sweep 1", start_time=start)
    client.log_batch(run.info.run_id, params=[Param("lr", "0.003"), Param("optimizer", "adamw"),
                                              Param("batch_size", "64"), Param("warmup", "True")])
    loss = [Metric("train/loss", 2.0 / (1 + step) + (step % 7) * 1e-9, start + 10 * step, step)
            for step in range(30000)]
    for i in range(0, len(loss), 1000):
        client.log_batch(run.info.run_id, metrics=loss[i:i + 1000])
    accuracy = [Metric("eval/accuracy", value, start + 1000 * step, step)
                for step, value in enumerate([0.5, 0.75, float("nan"), 0.875])]
    client.log_batch(run.info.run_id, metrics=accuracy)
    client.set_terminated(run.info.run_id, "FINISHED", end_time=start + 400_000)
    # A failed run.
    failed = client.create_run(experiment_id, run_name="diverged", start_time=start + 500_000)
    client.log_param(failed.info.run_id, "lr", "10.0")
    client.log_batch(failed.info.run_id, metrics=[Metric("train/loss", v, start + 500_000 + s, s)
                                                  for s, v in enumerate([1.0, 4.0, float("inf")])])
    client.set_terminated(failed.info.run_id, "FAILED", end_time=start + 600_000)
    return read(uri, experiment)


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("read", "write"):
        sys.exit(__doc__)
    action, uri, experiment = sys.argv[1:]
    print(json.dumps(read(uri, experiment) if action == "read" else write(uri, experiment)))


if __name__ == "__main__":
    main()
