#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The cost of logging to an MLflow tracking server (issue 40), Spur against its peers in one sitting.

Starts `mlflow server` on loopback (SQLite backend in a temporary folder; its process group stopped at the end) and
measures, 4 values a `log` call:
  spur       tracking_bench --mlflow N: accelerator.log per value on the training thread with the history alone and
             with the mlflow tracker added (log_with), and values/s until end_training() returns with the server
             holding every value (checked here with MLflow's client)
  accelerate Accelerate's MLflowTracker.log (mlflow.log_metrics, one request a call, on the training thread)
  mlflow     MLflow's own asynchronous logging, mlflow.log_metrics(..., synchronous=False), until
             flush_async_logging() returns
and, with --spur, reading Spur's run back: `spur runs import mlflow://...` (every point, into a fresh history)
against MLflow's client reading the same points (MlflowClient.get_metric_history for each metric)

  mlflow_bench.py --tracking-bench build/tests/bench/tracking_bench [--spur build/app/spur] [--values 200000]
                  [--peer-values 8000]"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(folder):
    port = free_port()
    env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
    log = open(os.path.join(folder, "server.log"), "wb")
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                               "--workers", "1", "--backend-store-uri", f"sqlite:///{folder}/mlflow.db",
                               "--default-artifact-root", f"{folder}/artifacts"],
                              stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            with urllib.request.urlopen(uri + "/health", timeout=2) as answer:
                if answer.status == 200:
                    return server, uri
        except OSError:
            time.sleep(0.2)
    os.killpg(server.pid, signal.SIGKILL)
    sys.exit("mlflow server did not start: see " + folder + "/server.log")


def accelerate_peer(uri, values):
    from accelerate.tracking import MLflowTracker
    import mlflow
    os.environ["MLFLOW_TRACKING_URI"] = uri
    tracker = MLflowTracker(experiment_name="accelerate-bench")
    tracker.start()
    tracker.store_init_configuration({"lr": 0.1})
    begin = time.perf_counter()
    for step in range(values // 4):
        v = float(step)
        tracker.log({"loss": v, "lr": v * 2, "accuracy": v * 3, "grad_norm": v * 4}, step=step)
    seconds = time.perf_counter() - begin
    mlflow.end_run()
    return seconds * 1e9 / values


def mlflow_async_peer(uri, values):
    import mlflow
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("mlflow-async-bench")
    mlflow.start_run()
    begin = time.perf_counter()
    for step in range(values // 4):
        v = float(step)
        mlflow.log_metrics({"loss": v, "lr": v * 2, "accuracy": v * 3, "grad_norm": v * 4}, step=step,
                           synchronous=False)
    logged = time.perf_counter() - begin
    mlflow.flush_async_logging()
    drained = time.perf_counter() - begin
    mlflow.end_run()
    return logged * 1e9 / values, values / drained


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tracking-bench", required=True)
    parser.add_argument("--spur", help="the spur command, to time `spur runs import mlflow://`")
    parser.add_argument("--values", type=int, default=200000)
    parser.add_argument("--peer-values", type=int, default=8000)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="spur-mlflow-bench-")
    server, uri = start_server(folder)
    try:
        env = dict(os.environ, MLFLOW_TRACKING_URI=uri, MLFLOW_EXPERIMENT_NAME="spur-bench")
        out = subprocess.run([args.tracking_bench, "--mlflow", str(args.values)], check=True, env=env,
                             capture_output=True, text=True)
        spur = json.loads(out.stdout.strip().splitlines()[-1])
        from mlflow import MlflowClient
        client = MlflowClient(uri)
        run = client.search_runs([client.get_experiment_by_name("spur-bench").experiment_id])[0]
        begin = time.perf_counter()
        held = sum(len(client.get_metric_history(run.info.run_id, key)) for key in run.data.metrics)
        client_read_s = time.perf_counter() - begin
        import_s = None
        if args.spur:
            history = os.path.join(folder, "imported.db")
            begin = time.perf_counter()
            subprocess.run([args.spur, "runs", "import", "mlflow://" + uri[len("http://"):] + "/spur-bench"],
                           check=True, env=dict(os.environ, SPUR_HISTORY=history), capture_output=True)
            import_s = time.perf_counter() - begin
        accelerate_ns = accelerate_peer(uri, args.peer_values)
        async_ns, async_rate = mlflow_async_peer(uri, args.peer_values)
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        shutil.rmtree(folder, ignore_errors=True)
    print(f"| Spur `accelerator.log`, history alone | {spur['log_ns_per_value']:.0f} ns per value |")
    print(f"| Spur `accelerator.log`, history + mlflow tracker | {spur['log_mlflow_ns_per_value']:.0f} ns per value |")
    print(f"| Spur: first `log` to `end_training()` with the server holding all {spur['mlflow_values']} values "
          f"({held} held) | {spur['mlflow_drain_values_per_s']:.0f} values/s |")
    print(f"| Accelerate's `MLflowTracker.log` ({args.peer_values} values) | {accelerate_ns:.0f} ns per value |")
    print(f"| MLflow's `log_metrics(synchronous=False)` ({args.peer_values} values) | {async_ns:.0f} ns per value, "
          f"{async_rate:.0f} values/s to flush |")
    print(f"| MLflow's client reading those {held} points back (`get_metric_history`) | {client_read_s:.2f} s |")
    if import_s is not None:
        print(f"| `spur runs import mlflow://...` of that run (every point, into a new history) | {import_s:.2f} s |")
    print(json.dumps({"spur": spur, "held": held, "client_read_s": client_read_s, "import_s": import_s, "accelerate_ns_per_value": accelerate_ns,
                      "mlflow_async_ns_per_value": async_ns, "mlflow_async_values_per_s": async_rate}))
    if held != spur["mlflow_values"]:
        sys.exit(f"the server holds {held} of Spur's {spur['mlflow_values']} values")


if __name__ == "__main__":
    main()
