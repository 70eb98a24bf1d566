#!/usr/bin/env bash
# Removes what `strata dev` left on this machine: its data directory, the
# containers of its agents (containerd namespaces strata-dev-*), its VMs,
# its HAProxy processes, its bridges and its nftables tables. Agents never delete replicas when
# they stop (an agent restart must lose nothing), so stopping the dev
# cluster leaves them running; this is the way to start from scratch.
set -uo pipefail
dir=${1:-.dev}
log() { printf '[dev-clean] %s\n' "$*"; }

if command -v ctr >/dev/null && ctr --timeout 2s version >/dev/null 2>&1; then
  for ns in $(ctr namespaces ls -q | grep '^strata-dev-'); do
    log "containerd namespace $ns"
    for t in $(ctr -n "$ns" tasks ls -q 2>/dev/null); do ctr -n "$ns" tasks kill -s SIGKILL "$t" >/dev/null 2>&1; done
    for t in $(ctr -n "$ns" tasks ls -q 2>/dev/null); do ctr -n "$ns" tasks delete -f "$t" >/dev/null 2>&1; done
    for c in $(ctr -n "$ns" containers ls -q 2>/dev/null); do ctr -n "$ns" containers delete "$c" >/dev/null 2>&1; done
    for i in $(ctr -n "$ns" images ls -q 2>/dev/null); do ctr -n "$ns" images rm "$i" >/dev/null 2>&1; done
    ctr -n "$ns" content ls -q 2>/dev/null | xargs -r ctr -n "$ns" content rm >/dev/null 2>&1
    ctr -n "$ns" snapshots ls 2>/dev/null | awk 'NR>1{print $1}' | xargs -r ctr -n "$ns" snapshots rm >/dev/null 2>&1
    ctr namespaces rm "$ns" >/dev/null 2>&1 || log "  namespace $ns not empty yet; run again"
  done
fi
if command -v virsh >/dev/null && virsh -c qemu:///system version >/dev/null 2>&1; then
  for d in $(virsh -c qemu:///system list --all --name | grep '^strata-'); do
    if virsh -c qemu:///system dumpxml "$d" 2>/dev/null | grep -q 'node>dev-'; then
      log "VM $d"
      virsh -c qemu:///system destroy "$d" >/dev/null 2>&1
      virsh -c qemu:///system undefine "$d" --nvram >/dev/null 2>&1
    fi
  done
  for p in $(virsh -c qemu:///system pool-list --all --name | grep '^strata-dev-'); do
    log "storage pool $p"
    virsh -c qemu:///system pool-destroy "$p" >/dev/null 2>&1
    virsh -c qemu:///system pool-undefine "$p" >/dev/null 2>&1
  done
fi
abs=$(cd "$dir" 2>/dev/null && pwd) || abs=""
if [ -n "$abs" ]; then
  for pid in $(pgrep -f "haproxy.*$abs" 2>/dev/null); do log "haproxy $pid"; kill "$pid" 2>/dev/null; done
  for ns in $(ls /var/run/netns 2>/dev/null | grep '^strata-dev-'); do ip netns delete "$ns" 2>/dev/null; done
  log "data directory $abs"
  rm -rf "$abs"
fi
# One bridge per agent (strata<region><agent>: strata0a, strata1b, ...;
# strata0 and strata1 from releases with one per region) and each
# region's nftables tables (strata-dev-<n>, its policy tables
# strata-dev-<n>-policy-<bridge>).
for br in $(ip -o link show type bridge 2>/dev/null | awk -F': ' '{print $2}' | grep -E '^strata[0-9]+[a-z]?$'); do
  log "bridge $br"; ip link delete "$br"
done
if command -v nft >/dev/null; then
  for t in $(nft list tables ip 2>/dev/null | awk '{print $3}' | grep '^strata-dev-'); do
    log "nftables table $t"; nft delete table ip "$t"
  done
fi
log "done"
