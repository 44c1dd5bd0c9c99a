#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Several "machines" on one: network namespaces joined by veth pairs to a bridge, each with its own address, host
# name and sshd (as root; Debian's iproute2 and openssh-server). Everything is named per run and kept in DIR:
#   netns_rig.sh start DIR N     N hosts h0..h(N-1); writes DIR/ssh_config (Host h0... with each address),
#                                DIR/addresses (one per line) and DIR/namespaces; prints the namespace prefix
#   netns_rig.sh exec DIR I CMD  runs CMD in host I's namespace
#   netns_rig.sh cut DIR I       takes host I's link down (its cable pulled)
#   netns_rig.sh join DIR I      brings host I's link up again (the cable back)
#   netns_rig.sh stop DIR        kills every process left in the namespaces, deletes them (also after a failure)
# The recipe is ../shared/reference/launch.md's. Inside a namespace nothing else listens, so sshd takes port 22.
set -euo pipefail
action=${1:?start, exec, cut, join or stop}
dir=$(cd "${2:?the rig directory}" && pwd)

namespaces() { cat "$dir/namespaces" 2>/dev/null || true; }

stop() {
  for ns in $(namespaces); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
}

case "$action" in
  stop) stop; exit 0 ;;
  exec) index=${3:?host index}; shift 3; exec ip netns exec "$(sed -n "$((index + 2))p" "$dir/namespaces")" "$@" ;;
  cut) ip -n "$(sed -n "$((${3:?host index} + 2))p" "$dir/namespaces")" link set eth0 down; exit 0 ;;
  join) ip -n "$(sed -n "$((${3:?host index} + 2))p" "$dir/namespaces")" link set eth0 up; exit 0 ;;
  start) ;;
  *) echo "usage: netns_rig.sh start|exec|cut|join|stop DIR ..." >&2; exit 2 ;;
esac

count=${3:?how many hosts}
[ "$(id -u)" = 0 ] || { echo "netns_rig: needs root (ip netns)" >&2; exit 3; }
command -v ip >/dev/null || { echo "netns_rig: ip is not installed (Debian: iproute2)" >&2; exit 3; }
[ -x /usr/sbin/sshd ] || { echo "netns_rig: /usr/sbin/sshd is missing (Debian: openssh-server)" >&2; exit 3; }
# Whatever stops the start (a failed command, a signal) deletes what it made; success clears this.
trap 'stop' EXIT
trap 'exit 1' TERM INT

prefix="spur$$x$RANDOM"
veth="sp$RANDOM"  # interface names: at most 15 bytes
subnet="10.$((200 + RANDOM % 50)).$((RANDOM % 250))"
: > "$dir/namespaces"
: > "$dir/addresses"
echo "${prefix}sw" >> "$dir/namespaces"
ip netns add "${prefix}sw"
ip -n "${prefix}sw" link add br0 type bridge
ip -n "${prefix}sw" link set br0 up
ip -n "${prefix}sw" link set lo up

mkdir -p /run/sshd
ssh-keygen -q -t ed25519 -N "" -f "$dir/host_key" <<< y >/dev/null
ssh-keygen -q -t ed25519 -N "" -f "$dir/user_key" <<< y >/dev/null
cp "$dir/user_key.pub" "$dir/authorized_keys"
: > "$dir/ssh_config"
for i in $(seq 0 $((count - 1))); do
  ns="${prefix}h$i"
  address="$subnet.$((i + 1))"
  echo "$ns" >> "$dir/namespaces"
  echo "$address" >> "$dir/addresses"
  ip netns add "$ns"
  ip link add "${veth}a$i" type veth peer name "${veth}b$i"
  ip link set "${veth}a$i" netns "$ns"
  ip link set "${veth}b$i" netns "${prefix}sw"
  ip -n "$ns" link set "${veth}a$i" name eth0
  ip -n "$ns" addr add "$address/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip -n "${prefix}sw" link set "${veth}b$i" master br0
  ip -n "${prefix}sw" link set "${veth}b$i" up
  cat > "$dir/sshd_config_$i" <<CONF
Port 22
ListenAddress $address
HostKey $dir/host_key
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 100:30:200
PidFile $dir/sshd_$i.pid
ClientAliveInterval 2
ClientAliveCountMax 3
CONF
  # Its own host name too (a UTS namespace, inherited by everything its sshd starts): Spur tells machines apart
  # by host name and boot id, and these share the boot id.
  ip netns exec "$ns" unshare --uts sh -c "hostname h$i && exec /usr/sbin/sshd -f '$dir/sshd_config_$i' -E '$dir/sshd_$i.log'"
  cat >> "$dir/ssh_config" <<CONF
Host h$i
  HostName $address
  Port 22
  User root
  IdentityFile $dir/user_key
  IdentitiesOnly yes
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  LogLevel ERROR
  ServerAliveInterval 2
  ServerAliveCountMax 3
CONF
done
# Every host reaches every other's sshd before the rig is ready.
for i in $(seq 0 $((count - 1))); do
  for j in $(seq 0 $((count - 1))); do
    ok=
    for _ in $(seq 50); do
      if ip netns exec "${prefix}h$i" ssh -F "$dir/ssh_config" -o BatchMode=yes -o ConnectTimeout=2 "h$j" true 2>/dev/null; then ok=1; break; fi
      sleep 0.1
    done
    [ -n "$ok" ] || { echo "netns_rig: h$i cannot reach h$j's sshd" >&2; stop; exit 1; }
  done
done
trap - EXIT
echo "$prefix"
