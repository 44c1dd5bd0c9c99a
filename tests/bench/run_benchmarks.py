#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Spur's step benchmarks (reference/benchmarks.md), as ratios measured side by side in one run:
  1 process:  Spur step / hand-written LibTorch step             (target <= 1.01)
  2 ranks:    Spur DDP step / Accelerate's step, same torch       (target <= 0.85 small, <= 0.95 large)
              (Accelerate launched with `accelerate launch`, from the Python environment given by --python)
              Spur memory per rank / Accelerate's                  (target <= 0.5)
              the Spur step with progress reporting on (`--hang_timeout`'s progress files) / off (target <= 1.01)
  LibTorch:   the same Spur step built against another LibTorch (--other-bench: Debian's 1.13 tree) / this one
  data:       prepared (sharded) loader / plain loader, 2 workers  (target >= 0.98: sharding costs < 2%)
              Spur loader / LibTorch's torch::data loader, 2 workers
Memory is shown three ways: peak RSS (counts the LibTorch code pages both ranks share: any LibTorch
program starts at ~150 MiB RSS here, `import torch` at ~225 MiB), PSS (shared pages split between the
processes using them) and private memory (what one more rank costs). The target is checked on private.
  tracking:   accelerator.log cost per value on the training thread (target <= 1 us; baseline: a vector append),
              also with the tensorboard tracker on; values/s the history writer sustains (target > 500,000), read
              of a 1,000,000-point series (< 100 ms); TensorBoard event files written, against PyTorch's SummaryWriter
  studio:     a plot's replot at 1,000,000 points (< 16 ms), the Compare tab over 50 runs (< 100 ms), GUI-thread lag
              while 10 runs stream (p99 < 16 ms)
  launch:     `spur launch --num_processes 2` / torchrun, to both ranks' first line and to exit (launch_bench.py)
  accuracy:   time for the Fashion-MNIST example to reach 90% test accuracy on 2 processes, Spur (`spur launch`)
              against the same under `accelerate launch` (train_peer.py); program start to the epoch's test result
Usage: run_benchmarks.py --bench build/tests/bench/step_bench [--steps 200] [--workloads small,large]
                         [--loader-bench build/tests/bench/loader_bench] [--spur build/app/spur]
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile

TARGETS = {("single", "small"): 1.01, ("single", "large"): 1.01, ("ddp", "small"): 0.85, ("ddp", "large"): 0.95,
           ("ddp", "cnn"): 0.90, ("ddp", "gpt"): 0.95,
           ("private", "small"): 0.5, ("private", "large"): 0.5,
           ("progress", "small"): 1.01, ("progress", "large"): 1.01}


def progress_files(directory, world):
    """What `spur launch --hang_timeout` gives each rank: a 128-byte progress file (engine/core/include/spur/core/progress_file.h)."""
    paths = []
    for rank in range(world):
        path = os.path.join(directory, f"rank{rank}")
        with open(path, "wb") as f:
            f.write(bytes(128))
        paths.append(path)
    return paths


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


progress_records = []  # what the ranks measured of progress reporting (step_bench with SPUR_PROGRESS_FILE)


def run_ranks(command, world, timeout, progress=None):
    """Starts `world` ranks of `command` with torchrun's variables; returns rank 0..N-1's JSON records.
    `progress`: a progress file per rank (the ranks then report their progress, as under --hang_timeout)."""
    port = free_port()
    procs = []
    try:
        for rank in range(world):
            env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                       LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                       OMP_NUM_THREADS="1")
            if progress:
                env["SPUR_PROGRESS_FILE"] = progress[rank]
            procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
        records = []
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            if proc.returncode != 0:
                raise RuntimeError(f"{command[0]} exited {proc.returncode}:\n{err}")
            records += [r for r in json_lines(out) if r.get("kind") != "progress"]
            if progress:
                progress_records.extend(r for r in json_lines(out) if r.get("kind") == "progress")
        return sorted(records, key=lambda r: r["rank"])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def run_accelerate(python, script, workload, steps, timeout):  # noqa: C901
    """Both ranks of the Accelerate peer under `accelerate launch`; returns their JSON records by rank."""
    import tempfile
    accelerate = os.path.join(os.path.dirname(python), "accelerate")
    with tempfile.TemporaryDirectory() as home:
        # HF_HOME: no user configuration of Accelerate's may change the run; ACCELERATE_USE_CPU: its MULTI_CPU state.
        env = dict(os.environ, HF_HOME=home, ACCELERATE_USE_CPU="1", OMP_NUM_THREADS="1")
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(name, None)
        done = subprocess.run([accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                               "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port",
                               str(free_port()), script, workload, str(steps)],
                              env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"accelerate launch exited {done.returncode}:\n{done.stderr[-3000:]}")
    records = sorted(json_lines(done.stdout), key=lambda r: r["rank"])
    if len(records) != 2 or records[0]["distributed_type"] != "DistributedType.MULTI_CPU":
        raise RuntimeError(f"Accelerate did not run 2 MULTI_CPU ranks: {records}\n{done.stderr[-3000:]}")
    return records


ACCURACY_LINE = re.compile(r"epoch (\d+) test accuracy ([0-9.]+) .*at ([0-9.]+) s")


def first_reaching(output, target):
    """(epoch, accuracy, seconds) of the first epoch at or above `target`, else of the last epoch, else None."""
    epochs = [(int(m[1]), float(m[2]), float(m[3])) for m in ACCURACY_LINE.finditer(output)]
    reached = [e for e in epochs if e[1] >= target]
    return reached[0] if reached else (epochs[-1] if epochs else None)


def time_to_accuracy(args, here, target=0.90):
    """The Fashion-MNIST example under `spur launch` against train_peer.py under `accelerate launch`, 2 processes."""
    import tempfile
    extra = ["--max_steps", str(args.accuracy_max_steps)] if args.accuracy_max_steps else []
    accelerate = os.path.join(os.path.dirname(args.python), "accelerate")
    timeout = 3600
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, HF_HOME=tmp, ACCELERATE_USE_CPU="1", SPUR_HISTORY=os.path.join(tmp, "history.db"))
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS"):
            env.pop(name, None)
        spur = subprocess.run([args.spur, "launch", "--num_processes", "2", args.fashion_example, "--epochs",
                               str(args.accuracy_epochs), "--output_dir", os.path.join(tmp, "spur")] + extra,
                              env=env, capture_output=True, text=True, timeout=timeout)
        if spur.returncode != 0:
            raise RuntimeError(f"spur launch exited {spur.returncode}:\n{spur.stdout[-3000:]}{spur.stderr[-3000:]}")
        peer = subprocess.run([accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                               "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port",
                               str(free_port()), os.path.join(here, "train_peer.py"), "--epochs",
                               str(args.accuracy_epochs), "--target", str(target)] + extra,
                              env=env, capture_output=True, text=True, timeout=timeout)
        if peer.returncode != 0:
            raise RuntimeError(f"accelerate launch exited {peer.returncode}:\n{peer.stderr[-3000:]}")
    sp, py = first_reaching(spur.stdout + spur.stderr, target), first_reaching(peer.stdout, target)
    if sp is None or py is None:
        raise RuntimeError(f"no test accuracy in the output:\n{spur.stdout[-2000:]}\n{peer.stdout[-2000:]}")
    for name, (epoch, accuracy, seconds) in (("Accelerate", py), ("Spur", sp)):
        status = "reached" if accuracy >= target else "did not reach"
        print(f"cnn    {name:10} {status} {target:.0%} test accuracy: epoch {epoch}, {accuracy:.4f} at {seconds:.0f} s")
    if sp[1] >= target and py[1] >= target:
        print(f"cnn    time to {target:.0%} test accuracy, 2 processes  Accelerate {py[2]:7.0f} s   spur {sp[2]:7.0f} s  "
              f"ratio {sp[2] / py[2]:6.3f}")


def row(what, workload, unit, baseline_name, baseline, spur, target_key):
    ratio = spur / baseline if baseline else float("nan")
    target = TARGETS.get((target_key, workload))
    verdict = "" if target is None else ("meets" if ratio <= target else "MISSES") + f" <= {target}"
    print(f"{workload:6} {what:34} {baseline_name:>14} {baseline:9.3f}{unit:4} spur {spur:9.3f}{unit:4} "
          f"ratio {ratio:6.3f}  {verdict}")
    return ratio


def tensorboard_peer(python, values):
    """PyTorch's SummaryWriter.add_scalar, 4 values a step, until close() returns: values/s (None without torch)."""
    code = (
        "import sys, tempfile, time\n"
        "from torch.utils.tensorboard import SummaryWriter\n"
        "n = int(sys.argv[1])\n"
        "with tempfile.TemporaryDirectory() as d:\n"
        "    w = SummaryWriter(d)\n"
        "    start = time.perf_counter()\n"
        "    for step in range(n // 4):\n"
        "        v = float(step)\n"
        "        w.add_scalar('loss', v, step); w.add_scalar('lr', v * 2, step)\n"
        "        w.add_scalar('accuracy', v * 3, step); w.add_scalar('grad_norm', v * 4, step)\n"
        "    w.close()\n"
        "    print(n / (time.perf_counter() - start))\n")
    try:
        out = subprocess.run([python, "-c", code, str(values)], check=True, capture_output=True, text=True,
                             timeout=600).stdout
        return float(out.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, OSError):
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", required=True, help="path to the step_bench binary")
    parser.add_argument("--python", required=True,
                        help="the Python environment with torch and accelerate (installer/setup.sh makes it)")
    parser.add_argument("--other-bench", help="step_bench built against another LibTorch (Debian's 1.13 tree)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--workloads", default="small,large")
    parser.add_argument("--repeats", type=int, default=3,
                        help="2-rank runs of each implementation, interleaved; the median run counts")
    parser.add_argument("--workload-bench", help="path to workload_bench: the examples' CNN and GPT against Accelerate")
    parser.add_argument("--workload-steps", type=int, default=60)
    parser.add_argument("--loader-bench", help="path to the loader_bench binary")
    parser.add_argument("--loader-samples", type=int, default=40000)
    parser.add_argument("--tracking-bench", help="path to the tracking_bench binary")
    parser.add_argument("--tracking-values", type=int, default=2000000)
    parser.add_argument("--plot-bench", help="path to the plot_bench binary (Spur Studio)")
    parser.add_argument("--compare-bench", help="path to compare_bench (the Studio's Compare tab over 50 runs)")
    parser.add_argument("--studio-bench", help="path to studio_stream_bench (Spur Studio with 10 runs streaming)")
    parser.add_argument("--history-rig", help="path to spur_history_rig (the writers studio_stream_bench starts)")
    parser.add_argument("--studio-points", type=int, default=30000, help="points per streaming run")
    parser.add_argument("--spur", help="path to the spur command (launch latency against torchrun)")
    parser.add_argument("--fashion-example", help="path to train_fashion_mnist: time to 90%% test accuracy against "
                                                  "Accelerate (needs --spur)")
    parser.add_argument("--accuracy-epochs", type=int, default=5)
    parser.add_argument("--accuracy-max-steps", type=int, default=0, help="cut each run short (a check of the tooling)")
    args = parser.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    timeout = 60 + args.steps * 2
    other_bench = args.other_bench if args.other_bench and os.path.exists(args.other_bench) else None
    if args.other_bench and not other_bench:
        print(f"(no {args.other_bench}: build the other tree to compare LibTorch versions)")

    print(f"Spur step benchmarks: median of {args.steps} steps after 20 warm-up, OMP_NUM_THREADS=1 per process; "
          f"2-rank figures from the median of {args.repeats} interleaved runs")
    for workload in filter(None, args.workloads.split(",")):
        env = dict(os.environ, OMP_NUM_THREADS="1")
        out = subprocess.run([args.bench, "single", workload, "--steps", str(args.steps)], env=env, check=True,
                             capture_output=True, text=True, timeout=timeout).stdout
        single = json_lines(out)[0]
        row("1-process step", workload, "ms", "LibTorch", single["plain_ms"], single["spur_ms"], "single")

        # Interleaved repeats: this 2-core machine drifts by tens of percent between runs.
        py_runs, sp_runs, other_runs, progress_runs = [], [], [], []
        with tempfile.TemporaryDirectory() as scratch:
            progress = progress_files(scratch, 2)
            for _ in range(args.repeats):
                py_runs.append(run_accelerate(args.python, os.path.join(here, "accelerate_peer.py"), workload,
                                              args.steps, timeout))
                sp_runs.append(run_ranks([args.bench, "rank", workload, "--steps", str(args.steps)], 2, timeout))
                progress_runs.append(run_ranks([args.bench, "rank", workload, "--steps", str(args.steps)], 2,
                                               timeout, progress))
                if other_bench:
                    other_runs.append(run_ranks([args.other_bench, "rank", workload, "--steps", str(args.steps)], 2,
                                                timeout))
        py = sorted(py_runs, key=lambda run: run[0]["median_ms"])[len(py_runs) // 2]
        sp = sorted(sp_runs, key=lambda run: run[0]["median_ms"])[len(sp_runs) // 2]
        reporting = sorted(progress_runs, key=lambda run: run[0]["median_ms"])[len(progress_runs) // 2]
        peer = f"Accelerate"
        row("2-rank DDP step (rank 0)", workload, "ms", peer, py[0]["median_ms"], sp[0]["median_ms"], "ddp")
        row("2-rank step, progress reported", workload, "ms", "not reported", sp[0]["median_ms"],
            reporting[0]["median_ms"], "")
        # The whole-step comparison drifts by more than the cost on this machine: the cost itself, measured. Each
        # operation changes the file twice (enter, leave), a step once more.
        mine = [r for r in progress_records if r["rank"] == 0]
        if mine:
            changes = statistics.median(r["changes_per_step"] for r in mine)
            scope_ns = statistics.median(r["scope_ns"] for r in mine)
            cost_ms = changes / 2 * scope_ns / 1e6
            row("progress reporting, cost per step", workload, "ms", "step", sp[0]["median_ms"],
                sp[0]["median_ms"] + cost_ms, "progress")
            print(f"       ({changes:.1f} changes of the progress file per step, {scope_ns:.0f} ns per operation "
                  "reported)")
        progress_records.clear()
        for rank in range(2):
            for key, label in (("peak_rss_mib", "peak RSS"), ("pss_mib", "PSS"), ("private_mib", "private")):
                row(f"{label}, rank {rank}", workload, "MiB", peer, py[rank][key], sp[rank][key], key.split("_")[0])
        if other_bench:
            out = subprocess.run([other_bench, "single", workload, "--steps", str(args.steps)], env=env,
                                 check=True, capture_output=True, text=True, timeout=timeout).stdout
            other_single = json_lines(out)[0]
            other = sorted(other_runs, key=lambda run: run[0]["median_ms"])[len(other_runs) // 2]
            row("Spur 1-process step, this/other", workload, "ms", "other LibTorch", other_single["spur_ms"],
                single["spur_ms"], "")
            row("Spur 2-rank step, this/other", workload, "ms", "other LibTorch", other[0]["median_ms"],
                sp[0]["median_ms"], "")

    if args.workload_bench:
        # The examples' models (Fashion-MNIST CNN, byte-level GPT), 2 ranks, against the same under Accelerate.
        for workload in ("cnn", "gpt"):
            py_runs, sp_runs = [], []
            for _ in range(args.repeats):
                py_runs.append(run_accelerate(args.python, os.path.join(here, "workload_peer.py"), workload,
                                              args.workload_steps, timeout * 4))
                sp_runs.append(run_ranks([args.workload_bench, workload, "--steps", str(args.workload_steps)], 2,
                                         timeout * 4))
            py = sorted(py_runs, key=lambda run: run[0]["median_ms"])[len(py_runs) // 2]
            sp = sorted(sp_runs, key=lambda run: run[0]["median_ms"])[len(sp_runs) // 2]
            row("2-rank training step (rank 0)", workload, "ms", "Accelerate", py[0]["median_ms"], sp[0]["median_ms"],
                "ddp")
            for rank in range(2):
                row(f"private, rank {rank}", workload, "MiB", "Accelerate", py[rank]["private_mib"],
                    sp[rank]["private_mib"], "private")

    if args.loader_bench:
        env = dict(os.environ, OMP_NUM_THREADS="1")
        out = subprocess.run([args.loader_bench, "--samples", str(args.loader_samples)], env=env, check=True,
                             capture_output=True, text=True, timeout=600).stdout
        r = json_lines(out)[0]
        # Throughput ratios (higher is better): shown as spur / baseline rates.
        sharded = r["sharded_per_s"] / r["plain_per_s"]
        vs_libtorch = r["plain_per_s"] / r["libtorch_per_s"]
        print(f"data   prepared loader (rank 0 of 2) vs plain, samples/s   {r['plain_per_s']:10.0f} -> "
              f"{r['sharded_per_s']:10.0f}  ratio {sharded:6.3f}  {'meets' if sharded >= 0.98 else 'MISSES'} >= 0.98")
        print(f"data   Spur loader vs LibTorch torch::data, samples/s     {r['libtorch_per_s']:10.0f} -> "
              f"{r['plain_per_s']:10.0f}  ratio {vs_libtorch:6.3f}")

    if args.tracking_bench:
        out = subprocess.run([args.tracking_bench, "--values", str(args.tracking_values)], check=True,
                             capture_output=True, text=True, timeout=600).stdout
        t = json_lines(out)[0]
        log_ns = t["log_ns_per_value"]
        print(f"track  accelerator.log per value, training thread    baseline {t['baseline_ns_per_value']:8.1f} ns  "
              f"spur {log_ns:8.1f} ns  ratio {log_ns / t['baseline_ns_per_value']:6.2f}  "
              f"{'meets' if log_ns <= 1000 else 'MISSES'} <= 1000 ns")
        for key, label in (("writer_values_per_s", "history writer alone"),
                           ("drain_values_per_s", "log -> in the database (end_training)")):
            print(f"track  {label:44} {t[key]:12.0f} values/s  {'meets' if t[key] > 500000 else 'MISSES'} > 500,000")
        print(f"track  read one series of {t['read_points']} points, first  {t['read_ms']:8.2f} ms  "
              f"{'meets' if t['read_ms'] < 100 else 'MISSES'} < 100 ms (best of 5 more: {t['read_best_ms']:.2f} ms)")
        print(f"track  log -> seen by a reader, worst of 10         {t['visible_ms']:8.1f} ms  "
              f"{'meets' if t['visible_ms'] < 250 else 'MISSES'} < 250 ms")
        tb_ns = t["log_tensorboard_ns_per_value"]
        print(f"track  accelerator.log per value with tensorboard too     spur {tb_ns:8.1f} ns  "
              f"{'meets' if tb_ns <= 1000 else 'MISSES'} <= 1000 ns")
        if "save_rotating_ms" in t:
            # Against Accelerate's way (the oldest removed on the training thread before the save); saves that keep
            # every checkpoint are shown too (slower here: the dirty pages of all of them wait to be written back).
            rotation = t["save_rotating_ms"] / t["save_removing_first_ms"]
            print(f"ckpt   save_state() 16 MB, median of 16: removing first (Accelerate) "
                  f"{t['save_removing_first_ms']:7.1f} ms  total_limit 2 {t['save_rotating_ms']:7.1f} ms  "
                  f"ratio {rotation:5.2f}  {'meets' if rotation <= 1.10 else 'MISSES'} <= 1.10 (no blocking removal; "
                  f"keeping all: {t['save_ms']:.1f} ms)")
        # The peer: PyTorch's SummaryWriter.add_scalar (what Accelerate's tensorboard tracker calls), same values.
        peer = tensorboard_peer(args.python or sys.executable, args.tracking_values)
        if peer:
            print(f"track  TensorBoard, values/s to a closed file: SummaryWriter {peer:12.0f}  spur (both trackers) "
                  f"{t['tensorboard_drain_values_per_s']:12.0f}  ratio {t['tensorboard_drain_values_per_s'] / peer:6.2f}")

    if args.plot_bench:
        out = subprocess.run([args.plot_bench, "1000000"], check=True, capture_output=True, text=True,
                             timeout=300).stdout
        p = json_lines(out)[0]
        print(f"studio replot one plot of {p['points']} points (offscreen 800x500) {p['replot_ms']:8.2f} ms  "
              f"{'meets' if p['replot_ms'] < 16 else 'MISSES'} < 16 ms")

    if args.compare_bench:
        out = subprocess.run([args.compare_bench, "50", "2000"], check=True, capture_output=True, text=True,
                             timeout=300).stdout
        c = json_lines(out)[0]
        print(f"studio compare {c['runs']} runs x 10 metrics x {c['points_per_series']} points: read {c['read_ms']:.1f} ms "
              f"(reader thread) + shown {c['show_ms']:.1f} ms (GUI thread) = {c['total_ms']:.1f} ms  "
              f"{'meets' if c['total_ms'] < 100 else 'MISSES'} < 100 ms")

    if args.studio_bench and args.history_rig:
        out = subprocess.run([args.studio_bench, args.history_rig, "10", str(args.studio_points)], check=True,
                             capture_output=True, text=True, timeout=600).stdout
        st = json_lines(out)[0]
        # Responsive: the GUI thread answers within a 60 Hz frame (16 ms) at the 99th percentile.
        print(f"studio GUI-thread lag, {st['runs']} runs streaming {st['points_per_run']} points each and the system/ "
              f"series of {st['system_ranks']} ranks and a GPU ({st['system_plots']} system plots) over "
              f"{st['stream_s']:.1f} s: idle p99 {st['idle_lag_p99_ms']:6.2f} ms  streaming p50 "
              f"{st['stream_lag_p50_ms']:6.2f} / p99 {st['stream_lag_p99_ms']:6.2f} / max {st['stream_lag_max_ms']:6.2f} ms  "
              f"{'meets' if st['stream_lag_p99_ms'] < 16 else 'MISSES'} p99 < 16 ms; every point drawn "
              f"{st['drawn_after_writers_ms']} ms after the writers ended")

    if args.fashion_example and args.spur:
        time_to_accuracy(args, here)

    if args.spur:
        import launch_bench
        launch_bench.report(launch_bench.measure(args.spur, args.python, max(args.repeats, 1) * 2 - 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
