#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A slow link for SSH (its ProxyCommand): connects to HOST:PORT and relays standard input and output to it,
holding every chunk DELAY_MS in each direction (a round trip of twice that: this kernel has no netem), and appends
the size of each chunk sent back to COUNT_FILE (a line each; /dev/null when not wanted). Run it where the link
starts (`ip netns exec NS delay_relay.py ...` for a host of tests/rigs/netns_rig.sh).
Usage (ssh_config): ProxyCommand python3 delay_relay.py %h %p DELAY_MS COUNT_FILE
"""
import os, selectors, socket, sys, time, collections
host, port, delay, count_file = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) / 1000, sys.argv[4]
sock = socket.create_connection((host, port))
sel = selectors.DefaultSelector()
sel.register(0, selectors.EVENT_READ, "up")
sel.register(sock, selectors.EVENT_READ, "down")
queues = {"up": collections.deque(), "down": collections.deque()}
counts = open(count_file, "a", buffering=1)  # a line per chunk: ssh ends its ProxyCommand with a signal
open_ends = 2
while open_ends or queues["up"] or queues["down"]:
    now = time.monotonic()
    due = [q[0][0] for q in queues.values() if q]
    timeout = max(0.0, min(due) - now) if due else None
    for key, _ in sel.select(timeout if open_ends else (timeout or 0)):
        data = os.read(0, 65536) if key.data == "up" else sock.recv(65536)
        if not data:
            sel.unregister(key.fileobj)
            open_ends -= 1
            queues[key.data].append((time.monotonic() + delay, b""))
            continue
        queues[key.data].append((time.monotonic() + delay, data))
    now = time.monotonic()
    for direction, queue in queues.items():
        while queue and queue[0][0] <= now:
            _, data = queue.popleft()
            if direction == "up":
                if data:
                    sock.sendall(data)
                else:
                    sock.shutdown(socket.SHUT_WR)
            elif data:
                counts.write(f"{len(data)}\n")
                os.write(1, data)
            else:
                open_ends = 0
    if not open_ends and not any(queues.values()):
        break
