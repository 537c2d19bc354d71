# shellcheck shell=bash
# What hack/cluster.sh and hack/kind-cluster.sh both do to this machine, and undo, sourced by
# both (it runs nothing itself):
# - the kernel settings a kubelet rewrites: `up` saves them (save_sysctls) before its node starts,
#   `down` writes them back (restore_sysctls). The caller names the file in SAVED_SYSCTLS; keep it
#   outside the cluster's own folder, so it survives an `up` that crashed;
# - the raw-table chain EGRESS_CHAIN (the caller's name) that lets a cluster's traffic reach only
#   the ranges given and drops the rest (egress_chain), and the rules ahead of everything in
#   PREROUTING that send traffic into it (first_in_prerouting): which traffic that is, the caller
#   says, since a pod range and kind's Docker bridge are matched differently;
# - the line each stage of `up` prints, with its time (step);
# - the check that a pid crictl gave for a container names a live process, before `kill-container`
#   sends it SIGKILL (live_pid).

# The kernel settings the kubelet, kube-proxy and the cluster scripts change.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward
  net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
  net.ipv4.conf.all.route_localnet net.netfilter.nf_conntrack_max
  net.netfilter.nf_conntrack_tcp_timeout_established
  net.netfilter.nf_conntrack_tcp_timeout_close_wait)

save_sysctls() {
  # A file left by a cluster that was never taken down holds the values from before it: keep it.
  [ -s "$SAVED_SYSCTLS" ] && return
  local key value
  : >"$SAVED_SYSCTLS.tmp"
  for key in "${SYSCTLS[@]}"; do
    value="$(sysctl -n "$key" 2>/dev/null)" && printf '%s=%s\n' "$key" "$value" >>"$SAVED_SYSCTLS.tmp"
  done
  mv "$SAVED_SYSCTLS.tmp" "$SAVED_SYSCTLS"
}

restore_sysctls() {
  [ -s "$SAVED_SYSCTLS" ] || return 0
  local line
  while IFS= read -r line; do
    sysctl -q -w "$line" >/dev/null 2>&1 || echo "    could not restore $line" >&2
  done <"$SAVED_SYSCTLS"
  rm -f "$SAVED_SYSCTLS"
}

# EGRESS_CHAIN, made anew: traffic to one of the ranges given passes on, any other is dropped
# (the DROP rule carries the comment, for a person reading `iptables -t raw -S`).
egress_chain() { # comment, allowed range...
  local comment="$1" range
  shift
  iptables -t raw -N "$EGRESS_CHAIN" 2>/dev/null || iptables -t raw -F "$EGRESS_CHAIN"
  for range in "$@"; do
    iptables -t raw -A "$EGRESS_CHAIN" -d "$range" -j RETURN
  done
  iptables -t raw -A "$EGRESS_CHAIN" -m comment --comment "$comment" -j DROP
}

# The rule, first in the raw table's PREROUTING, unless it is there already (an `up` run again).
first_in_prerouting() { # iptables|ip6tables, the rule's match and target...
  local tool="$1"
  shift
  "$tool" -t raw -C PREROUTING "$@" 2>/dev/null || "$tool" -t raw -I PREROUTING 1 "$@"
}

step() { # description, command...
  local what="$1" start=$SECONDS
  shift
  echo "==> $what"
  "$@"
  echo "    done in $((SECONDS - start))s"
}

# Prints $1 if it is the pid of a live process other than init; else says why not on stderr and
# returns 1. crictl gives pid 0 for a container that has exited (or is starting), and
# `kill -KILL 0` kills every process of the caller's process group: this script, and the test
# run or shell that called it. 1 is the init of the node or of a pid namespace. The rest of the
# arguments are the command that runs `kill -0` where the pid lives (none: on this machine; a
# kind node's `docker exec` otherwise).
live_pid() {
  local pid="$1"
  shift
  if ! [[ "$pid" =~ ^[0-9]+$ ]] || [ "$pid" -le 1 ]; then
    echo "refusing to kill pid '$pid': not a live container process (has it exited?)" >&2
    return 1
  fi
  if ! "$@" kill -0 "$pid" 2>/dev/null; then
    echo "refusing to kill pid $pid: no such process (the container has exited)" >&2
    return 1
  fi
  echo "$pid"
}
