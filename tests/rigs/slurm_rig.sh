#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A throwaway one-node Slurm cluster for tests (Debian slurm-wlm + munge, as root), everything in DIR:
#   slurm_rig.sh start DIR   munged, slurmctld and slurmd on free ports; prints DIR/slurm.conf once the node is idle
#   slurm_rig.sh stop DIR    stops the daemons by their PID files (and anything left in the jobs' spool)
# Clients use it with SLURM_CONF=DIR/slurm.conf. The recipe is ../shared/reference/launch.md's, verified there.
set -euo pipefail
action=${1:?start or stop}
dir=$(cd "${2:?the rig directory}" && pwd)

stop() {
  for daemon in slurmd slurmctld munged; do
    local pid
    pid=$(cat "$dir/$daemon.pid" 2>/dev/null || true)
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
  *) echo "usage: slurm_rig.sh start|stop DIR" >&2; exit 2 ;;
esac

for tool in munged slurmctld slurmd sbatch; do
  command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || { echo "slurm_rig: $tool is not installed (Debian: slurm-wlm munge)" >&2; exit 3; }
done
[ "$(id -u)" = 0 ] || { echo "slurm_rig: needs root (the daemons run as root, munged as munge)" >&2; exit 3; }
trap 'stop' ERR

host=$(hostname -s)
mkdir -p "$dir/munge" "$dir/state" "$dir/spool"
chmod 0755 "$dir" "$dir/munge"
chown munge:munge "$dir/munge"
head -c 128 /dev/urandom > "$dir/munge/munge.key"
chown munge:munge "$dir/munge/munge.key"
chmod 0400 "$dir/munge/munge.key"
runuser -u munge -- /usr/sbin/munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" --force
for _ in $(seq 50); do [ -s "$dir/munge/munged.pid" ] && break; sleep 0.1; done
cp "$dir/munge/munged.pid" "$dir/munged.pid"

cat > "$dir/slurm.conf" <<CONF
ClusterName=spurtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
MpiDefault=none
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF="$dir/slurm.conf"
/usr/sbin/slurmctld -f "$SLURM_CONF" -i
/usr/sbin/slurmd -f "$SLURM_CONF"
for _ in $(seq 100); do
  state=$(sinfo -h -N -o %t 2>/dev/null | head -n1 || true)
  case "$state" in idle|mix|alloc) echo "$SLURM_CONF"; exit 0 ;; esac
  sleep 0.2
done
echo "slurm_rig: the node did not become idle within 20 s (state '$state'); see $dir/slurmctld.log and $dir/slurmd.log" >&2
stop
exit 1
