#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 38's benchmark: training steps across machines, where the link sets the pace.

  multihost_bench.py --spur build/app/spur --step-bench build/tests/bench/step_bench \\
      --python ~/.cache/spur/python/bin/python [--rates 1gbit,10gbit] [--hooks no,fp16,bf16] [--steps 20]

Two hosts made of network namespaces (tests/rigs/netns_rig.sh: veth links to a bridge, each host its own host
name), each host's link shaped on its way out with `tc qdisc ... tbf rate R` (this kernel has no netem: no added
latency). On them, 2 machines x 2 ranks train reference/benchmarks.md's `large` MLP (6.3 M parameters: 25 MB of
gradients a step, SGD, fp32; the same workload as run_benchmarks.py's): Spur's `step_bench rank` started on each
host by `spur launch --num_machines 2 --machine_rank R`, hierarchical (shared memory within a host, Gloo between
the two leaders) and flat (SPUR_HIERARCHICAL_ALLREDUCE=0: Gloo's ring over the four ranks), against PyTorch DDP
under `accelerate launch` (tests/bench/accelerate_peer.py, the pinned wheel, Gloo), each with every
communication hook (Accelerate's DistributedDataParallelKwargs(comm_hook=...) for the peer). Scaling: the same
per-rank batch on 1 x 1 and 1 x 2 ranks (one host, unshaped). Every figure is the largest of the ranks' median
step; all in one sitting. Prints a Markdown table (docs/benchmarks.md) and the JSON records.

Needs root (ip netns) and both binaries built; stops what it started, namespaces included, also on failure.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RIG = os.path.join(HERE, "..", "rigs", "netns_rig.sh")
PEER = os.path.join(HERE, "accelerate_peer.py")
PORT = 29611  # inside the run's own namespaces: nothing else listens there


def json_lines(text):
    return [json.loads(line[line.index("{"):]) for line in text.splitlines() if "{\"" in line]


def on_host(rig_dir, index, command):
    """`command` in host `index`'s namespace, under its own host name (Spur tells machines apart by it)."""
    return ["bash", RIG, "exec", rig_dir, str(index), "unshare", "--uts", "sh", "-c",
            f'hostname h{index} && exec "$@"', "sh"] + command


def run_hosts(commands, env, timeout):
    """Starts one command per host at once; returns every JSON record they print (ranks' step records)."""
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for c in commands]
    outputs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=timeout)
            outputs.append(out)
            if p.returncode != 0:
                raise RuntimeError(f"{' '.join(p.args[-12:])} exited {p.returncode}:\n{out[-3000:]}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    records = [r for out in outputs for r in json_lines(out) if r.get("mode") == "rank" or "median_ms" in r]
    return records, "\n".join(outputs)


def spur_command(args, hosts, per_host, index, address, hook, hierarchical):
    return [args.spur, "launch", "--num_processes", str(hosts * per_host), "--num_machines", str(hosts),
            "--machine_rank", str(index), "--main_process_ip", address, "--main_process_port", str(PORT), "--cpu",
            "--ddp_comm_hook", hook, "--system_metrics_interval", "0", "--env", "GLOO_SOCKET_IFNAME=eth0",
            "--env", f"SPUR_HIERARCHICAL_ALLREDUCE={1 if hierarchical else 0}",
            args.step_bench, "rank", args.workload, "--steps", str(args.steps)]


def peer_command(args, hosts, per_host, index, address):
    accelerate = os.path.join(os.path.dirname(args.python), "accelerate")
    if hosts * per_host == 1:  # one process: Accelerate refuses --multi_gpu
        return [accelerate, "launch", "--num_processes", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                PEER, args.workload, str(args.steps)]
    return [accelerate, "launch", "--multi_gpu", "--num_processes", str(hosts * per_host), "--num_machines",
            str(hosts), "--machine_rank", str(index), "--main_process_ip", address, "--main_process_port",
            str(PORT), "--mixed_precision", "no", "--dynamo_backend", "no", PEER, args.workload, str(args.steps)]


def step_ms(records, world):
    if len(records) != world:
        raise RuntimeError(f"expected {world} rank records, got {records}")
    return max(r["median_ms"] for r in records)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spur", required=True)
    parser.add_argument("--step-bench", required=True)
    parser.add_argument("--python", required=True, help="the Python with accelerate and the pinned torch")
    parser.add_argument("--rates", default="1gbit,10gbit")
    parser.add_argument("--hooks", default="no,fp16,bf16")
    parser.add_argument("--workload", default="large")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("multihost_bench: needs root (ip netns)")

    with tempfile.TemporaryDirectory() as rig_dir, tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, SPUR_HISTORY=os.path.join(home, "history.db"), HF_HOME=home, ACCELERATE_USE_CPU="1",
                   OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="eth0")
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SPUR_DDP_COMM_HOOK"):
            env.pop(name, None)
        started = subprocess.run(["bash", RIG, "start", rig_dir, "2"], capture_output=True, text=True, timeout=120)
        try:
            if started.returncode != 0:
                raise RuntimeError(f"netns_rig.sh start failed: {started.stderr}")
            with open(os.path.join(rig_dir, "addresses")) as f:
                addresses = f.read().split()
            with open(os.path.join(rig_dir, "namespaces")) as f:
                namespaces = f.read().split()
            results = []

            def measure(what, rate, hook, commands, world):
                run_env = dict(env, SPUR_PEER_COMM_HOOK=hook)
                records, _ = run_hosts(commands, run_env, timeout=600)
                ms = step_ms(records, world)
                results.append({"what": what, "rate": rate, "hook": hook, "step_ms": ms, "records": records})
                print(f"{what:<24} {rate:<8} hook {hook:<5} {ms:9.1f} ms", file=sys.stderr, flush=True)

            # Scaling's baselines: one host, its link unused (1 x 1 and 1 x 2 ranks).
            for per_host in (1, 2):
                measure(f"spur 1x{per_host}", "-", "no",
                        [on_host(rig_dir, 0, spur_command(args, 1, per_host, 0, addresses[0], "no", True))], per_host)
                measure(f"pytorch 1x{per_host}", "-", "no",
                        [on_host(rig_dir, 0, peer_command(args, 1, per_host, 0, addresses[0]))], per_host)
            for rate in args.rates.split(","):
                for ns in namespaces[1:]:
                    subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf",
                                    "rate", rate, "burst", "1mb", "latency", "100ms"], check=True)
                for hook in args.hooks.split(","):
                    for hierarchical in (True, False):
                        name = "spur 2x2 " + ("hierarchical" if hierarchical else "flat")
                        measure(name, rate, hook,
                                [on_host(rig_dir, i, spur_command(args, 2, 2, i, addresses[0], hook, hierarchical))
                                 for i in range(2)], 4)
                    measure("pytorch 2x2", rate, hook,
                            [on_host(rig_dir, i, peer_command(args, 2, 2, i, addresses[0])) for i in range(2)], 4)
        finally:
            subprocess.run(["bash", RIG, "stop", rig_dir], timeout=120)

    def find(what, rate, hook):
        return next(r["step_ms"] for r in results if r["what"] == what and r["rate"] == rate and r["hook"] == hook)

    print(f"| link, hook ({args.workload}, 2 machines x 2 ranks) | Spur hierarchical | Spur flat | PyTorch DDP "
          "| hierarchical / PyTorch |")
    print("|---|---|---|---|---|")
    for rate in args.rates.split(","):
        for hook in args.hooks.split(","):
            h, f, p = (find(w, rate, hook) for w in ("spur 2x2 hierarchical", "spur 2x2 flat", "pytorch 2x2"))
            print(f"| {rate}, {hook} | {h:.0f} ms | {f:.0f} ms | {p:.0f} ms | **{h / p:.2f}** |")
    s1, s2, p1, p2 = (find(w, "-", "no") for w in ("spur 1x1", "spur 1x2", "pytorch 1x1", "pytorch 1x2"))
    print(f"\nOne host, unshaped: Spur 1x1 {s1:.0f} ms, 1x2 {s2:.0f} ms; PyTorch 1x1 {p1:.0f} ms, 1x2 {p2:.0f} ms.")
    for rate in args.rates.split(","):
        h = find("spur 2x2 hierarchical", rate, "no")
        p = find("pytorch 2x2", rate, "no")
        print(f"Scaling at {rate} (step of 1x1 / step of 2x2, the same per-rank batch; 1.0 = perfect): "
              f"Spur {s1 / h:.2f} (1x2: {s1 / s2:.2f}), PyTorch {p1 / p:.2f} (1x2: {p1 / p2:.2f})")
    print(json.dumps([{k: v for k, v in r.items() if k != "records"} for r in results]))


if __name__ == "__main__":
    main()
