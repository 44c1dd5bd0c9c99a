#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A throwaway Slurm cluster for tests (Debian slurm-wlm + munge, as root), everything in DIR:
#   slurm_rig.sh start DIR            one node (this machine): munged, slurmctld and slurmd on free ports
#   slurm_rig.sh start DIR NETNS_DIR [N]  one node per host of a tests/rigs/netns_rig.sh rig (its first N hosts
#                                     when given; the others are machines without Slurm): slurmctld and each
#                                     slurmd in their host's namespaces (own address and host name), munged here
#   slurm_rig.sh stop DIR             stops the daemons by their PID files
# `start` prints DIR/slurm.conf once every node is idle. Clients use it with SLURM_CONF=DIR/slurm.conf (with a
# netns rig, from inside a host: netns_rig.sh exec NETNS_DIR 0 ...). The recipe is ../shared/reference/launch.md's.
set -euo pipefail
action=${1:?start or stop}
dir=$(cd "${2:?the rig directory}" && pwd)
netns=${3:-}
node_count=${4:-0}

stop() {
  for pidfile in "$dir"/slurmd*.pid "$dir/slurmctld.pid" "$dir/munged.pid"; do
    local pid
    pid=$(cat "$pidfile" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

case "$action" in
  stop) stop; exit 0 ;;
  start) ;;
  *) echo "usage: slurm_rig.sh start|stop DIR [NETNS_DIR [N]]" >&2; exit 2 ;;
esac

for tool in munged slurmctld slurmd sbatch; do
  command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || { echo "slurm_rig: $tool is not installed (Debian: slurm-wlm munge)" >&2; exit 3; }
done
[ "$(id -u)" = 0 ] || { echo "slurm_rig: needs root (the daemons run as root, munged as munge)" >&2; exit 3; }
# Whatever stops the start (a failed command, a signal) stops what it started; success clears this.
trap 'stop' EXIT
trap 'exit 1' TERM INT

mkdir -p "$dir/munge" "$dir/state"
chmod 0755 "$dir" "$dir/munge"
chown munge:munge "$dir/munge"
head -c 128 /dev/urandom > "$dir/munge/munge.key"
chown munge:munge "$dir/munge/munge.key"
chmod 0400 "$dir/munge/munge.key"
runuser -u munge -- /usr/sbin/munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" --force
for _ in $(seq 50); do [ -s "$dir/munge/munged.pid" ] && break; sleep 0.1; done
cp "$dir/munge/munged.pid" "$dir/munged.pid"

# The nodes: this machine, or the netns rig's hosts h0, h1... (each with its own address and host name).
names=() addresses=()
if [ -n "$netns" ]; then
  i=0
  while read -r address; do
    if [ "$node_count" -gt 0 ] && [ "$i" -ge "$node_count" ]; then break; fi
    names+=("h$i"); addresses+=("$address"); i=$((i + 1))
  done < "$netns/addresses"
  # Inside a namespace nothing else listens: fixed ports cannot collide.
  ctld_port=6817 slurmd_port=6818
else
  names=("$(hostname -s)") addresses=(127.0.0.1)
  ctld_port=$(free_port) slurmd_port=$(free_port)
fi
# Each node's files carry its name (%n): several slurmd may share this file system.
cat > "$dir/slurm.conf" <<CONF
ClusterName=spurtest
SlurmctldHost=${names[0]}(${addresses[0]})
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
MpiDefault=none
KillWait=5
CONF
for i in "${!names[@]}"; do
  echo "NodeName=${names[$i]} NodeAddr=${addresses[$i]} CPUs=$(nproc) State=UNKNOWN" >> "$dir/slurm.conf"
done
echo "PartitionName=debug Nodes=$(IFS=,; echo "${names[*]}") Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4" \
  >> "$dir/slurm.conf"
export SLURM_CONF="$dir/slurm.conf"
in_host() {  # in_host I CMD...: on node I (this machine without a netns rig)
  local index=$1; shift
  # nsenter joins the host's network namespace only: `ip netns exec` would also remount /sys, hiding the cgroup
  # file systems slurmd needs to see.
  if [ -n "$netns" ]; then nsenter --net="/run/netns/$(sed -n "$((index + 2))p" "$netns/namespaces")" "$@"; else "$@"; fi
}
for i in "${!names[@]}"; do mkdir -p "$dir/spool-${names[$i]}"; done
if [ -n "$netns" ]; then
  # Host names by UTS namespace: slurmctld and each slurmd find themselves by name.
  in_host 0 unshare --uts sh -c "hostname h0 && exec /usr/sbin/slurmctld -f '$SLURM_CONF' -i"
  for i in "${!names[@]}"; do
    in_host "$i" unshare --uts sh -c "hostname ${names[$i]} && exec /usr/sbin/slurmd -f '$SLURM_CONF'"
  done
else
  /usr/sbin/slurmctld -f "$SLURM_CONF" -i
  /usr/sbin/slurmd -f "$SLURM_CONF"
fi
for _ in $(seq 150); do
  states=$(in_host 0 sinfo -h -N -o %t 2>/dev/null | sort -u | tr '\n' ' ' || true)
  idle=$(in_host 0 sinfo -h -N -o %t 2>/dev/null | grep -c -E '^(idle|mix|alloc)$' || true)
  if [ "$idle" = "${#names[@]}" ]; then trap - EXIT; echo "$SLURM_CONF"; exit 0; fi
  sleep 0.2
done
echo "slurm_rig: the nodes did not become idle within 30 s (states: $states); see $dir/slurmctld.log and $dir/slurmd-*.log" >&2
stop
exit 1
