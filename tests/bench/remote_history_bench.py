#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A history on another machine over a slow link: `spur runs` through `ssh://HOST/PATH` against the same on the
file itself, in one sitting. The "other machine" is a throw-away sshd on a loopback port (its own keys, the OS's
port); the link is a relay (ssh's ProxyCommand) that holds every chunk for DELAY ms in each direction (20 ms round
trip by default: this kernel has no netem) and counts the bytes the serve sends. The history holds RUNS runs of
POINTS points each (tests/rigs/history_rig). Measured, median of REPEATS: `spur runs list` (every run, as a table),
`spur runs show ID` (one run in brief, from its summaries), `spur runs export ID --format csv`, the bare
`ssh HOST true` through the relay (what any connection costs), the bytes the serve sent for each, and the serve's
peak memory (GNU time around it). With --studio-bench, then Spur Studio (offscreen) on the same history through the
same link (tests/bench/studio_remote_bench.cpp): the runs table's first paint, 100 and 500 runs selected until drawn
with the bytes each cost, and a live run's points (one a second) from commit to screen.
Usage: remote_history_bench.py --spur build/app/spur --rig build/tests/spur_history_rig [--runs 1000]
       [--points 1000] [--delay_ms 10] [--repeats 5] [--studio-bench build/tests/bench/studio_remote_bench]
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

RELAY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "rigs", "delay_relay.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spur", required=True)
    parser.add_argument("--rig", required=True)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--delay_ms", type=float, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--studio-bench", help="path to studio_remote_bench (the Studio over the same link)")
    args = parser.parse_args()
    spur = os.path.abspath(args.spur)
    work = tempfile.mkdtemp(prefix="spur-remote-bench-")
    sshd = None
    try:
        for name in ("host_key", "user_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{work}/{name}"], check=True)
        shutil.copy(f"{work}/user_key.pub", f"{work}/authorized_keys")
        port = free_port()
        with open(f"{work}/sshd_config", "w") as f:
            f.write(f"Port {port}\nListenAddress 127.0.0.1\nHostKey {work}/host_key\n"
                    f"AuthorizedKeysFile {work}/authorized_keys\nPermitRootLogin prohibit-password\n"
                    "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                    f"PidFile {work}/sshd.pid\n")
        count_file = f"{work}/bytes"
        with open(f"{work}/ssh_config", "w") as f:
            f.write(f"Host far\n  HostName 127.0.0.1\n  Port {port}\n  User {os.environ.get('USER', 'root')}\n"
                    f"  IdentityFile {work}/user_key\n  IdentitiesOnly yes\n  UserKnownHostsFile /dev/null\n"
                    f"  StrictHostKeyChecking no\n  LogLevel ERROR\n"
                    f"  ProxyCommand {sys.executable} {RELAY} %h %p {args.delay_ms} {count_file}\n")
        os.makedirs("/run/sshd", exist_ok=True)
        sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", f"{work}/sshd_config"],
                                stderr=subprocess.DEVNULL)
        # The serve wrapped in GNU time: its peak memory per session, appended to a file.
        with open(f"{work}/spur-timed", "w") as f:
            f.write(f"#!/bin/sh\nexec /usr/bin/time -a -o {work}/rss -f %M {spur} \"$@\"\n")
        os.chmod(f"{work}/spur-timed", 0o755)
        history = f"{work}/history.db"
        started = time.perf_counter()
        for i in range(args.runs):
            subprocess.run([args.rig, history, f"run-{i}", str(args.points), str(args.points)], check=True,
                           stdout=subprocess.DEVNULL, env=dict(os.environ, SPUR_RIG_NOISY="1"))
        print(f"history: {args.runs} runs x {args.points} points in {time.perf_counter() - started:.0f} s",
              file=sys.stderr)
        time.sleep(0.5)
        env = dict(os.environ, SPUR_SSH_CONFIG=f"{work}/ssh_config", SPUR_REMOTE_SPUR=f"{work}/spur-timed")
        env.pop("SPUR_HISTORY", None)

        def timed(command):
            seconds, sent = [], []
            for _ in range(args.repeats):
                open(count_file, "w").close()
                start = time.perf_counter()
                out = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                seconds.append(time.perf_counter() - start)
                if out.returncode != 0:
                    sys.exit(f"{' '.join(command)}: {out.stderr.decode()}")
                with open(count_file) as f:
                    sent.append(sum(int(line) for line in f if line.strip()))
            return statistics.median(seconds), statistics.median(sent)

        remote = f"ssh://far{history}"
        rows = []
        connect, _ = timed(["ssh", "-F", f"{work}/ssh_config", "far", "true"])
        rows.append(("ssh far true (a connection)", connect, None, None))
        middle = str(max(1, args.runs // 2))
        for label, action in ((f"runs list ({args.runs} runs)", ["list"]),
                              ("runs show (one run in brief)", ["show", middle]),
                              (f"runs export --format csv ({args.points} points)",
                               ["export", middle, "--format", "csv"])):
            local, _ = timed([spur, "runs", *action, "--history", history])
            over, sent = timed([spur, "runs", *action, "--history", remote])
            rows.append((label, over, sent, local))
        with open(f"{work}/rss") as f:
            peak = max(int(line) for line in f if line.strip().isdigit())
        print(f"| {2 * args.delay_ms:g} ms round trip | over SSH | bytes from serve | on the file |")
        print("|---|---|---|---|")
        for label, over, sent, local in rows:
            print(f"| {label} | {over * 1000:.0f} ms | {'' if sent is None else f'{sent / 1024:.0f} KiB'} | "
                  f"{'' if local is None else f'{local * 1000:.0f} ms'} |")
        print(f"\nserve's peak memory (max RSS over every session): {peak / 1024:.1f} MiB")
        if args.studio_bench:
            # The Studio's own figures, its serve's memory appended to the same file.
            open(f"{work}/rss", "w").close()
            out = subprocess.run([os.path.abspath(args.studio_bench), remote, history, os.path.abspath(args.rig),
                                  count_file, str(args.points)], env=env, stdout=subprocess.PIPE, text=True)
            print(out.stdout, end="")
            time.sleep(1)  # the serves end as the Studio's connections close
            with open(f"{work}/rss") as f:
                peaks = [int(line) for line in f if line.strip().isdigit()]
            if peaks:
                print(f"the Studio's serve: peak memory {max(peaks) / 1024:.1f} MiB over {len(peaks)} session(s)")
            if out.returncode != 0:
                sys.exit(f"studio_remote_bench exited {out.returncode}")
    finally:
        if sshd:
            sshd.terminate()
            sshd.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
