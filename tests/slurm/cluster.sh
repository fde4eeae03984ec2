#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, for the profile's tests (tests/test_slurm_cluster.py) or for trying
# `--profile profiles/slurm` on a workstation. Needs root (the daemons) and Debian's packages.
#
#   bash tests/slurm/cluster.sh install   # apt-get install slurmctld slurmd slurm-client munge (Debian 12: Slurm 22.05)
#   bash tests/slurm/cluster.sh start     # munge key, /etc/slurm/slurm.conf (one node, partitions cpu and gpu), daemons
#   bash tests/slurm/cluster.sh status    # the controller's answer and the node
#   bash tests/slurm/cluster.sh stop      # daemons down; removes the slurm.conf it wrote and the cluster's state
#
# The node has this machine's CPUs and memory (`slurmd -C`) and no GPU (no GRES). No accounting daemon: the profile's
# status command must be squeue (README "Running on a Slurm cluster"). A slurm.conf this script did not write is never
# touched: `start` refuses instead.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
CONF=/etc/slurm/slurm.conf
MARK="Written by DataFlex-RL tests/slurm/cluster.sh"
STATE="${DATAFLEX_SLURM_STATE:-/var/lib/dataflex-slurm}"
PACKAGES=(slurmctld slurmd slurm-client munge)

die() { echo "cluster.sh: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" = 0 ] || die "$1 needs root (the Slurm and munge daemons run as root here); try: sudo bash $0 $1"; }
ours() { [ -f "$CONF" ] && grep -q "$MARK" "$CONF"; }

install_packages() {
    need_root install
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q "${PACKAGES[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null; apt-get install -y -q "${PACKAGES[@]}" >/dev/null; }
    echo "installed: $(slurmctld -V)"
}

wait_for() {  # wait_for <seconds> <what> <command...>
    local seconds=$1 what=$2; shift 2
    for _ in $(seq "$seconds"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
    die "$what did not come up within ${seconds} s; see $STATE/*.log"
}

start() {
    need_root start
    for binary in slurmctld slurmd munged sinfo; do
        command -v "$binary" >/dev/null || die "$binary not found; run: bash $0 install"
    done
    if [ -f "$CONF" ] && ! ours; then
        die "$CONF exists and was not written by this script: a Slurm is configured here already (use it, or move the file away)"
    fi
    if ! munge -n </dev/null >/dev/null 2>&1; then
        [ -s /etc/munge/munge.key ] || { mungekey --create --keyfile /etc/munge/munge.key; chown munge:munge /etc/munge/munge.key; }
        install -d -o munge -g munge -m 0755 /run/munge
        runuser -u munge -- /usr/sbin/munged
        wait_for 10 munged munge -n
    fi
    read -r cpus memory < <(slurmd -C | sed -n 's/.* CPUs=\([0-9]*\) .*RealMemory=\([0-9]*\).*/\1 \2/p')
    [ -n "${cpus:-}" ] || die "slurmd -C did not report this machine's CPUs and memory"
    mkdir -p "$STATE/ctld" "$STATE/spool" /etc/slurm
    sed -e "s|@HOST@|$(hostname -s)|g" -e "s|@STATE@|$STATE|g" -e "s|@CPUS@|$cpus|g" -e "s|@MEMORY@|$memory|g" \
        "$HERE/slurm.conf.in" > "$CONF.tmp"
    mv "$CONF.tmp" "$CONF"
    pgrep -x slurmctld >/dev/null || slurmctld -c
    wait_for 30 slurmctld scontrol ping
    pgrep -x slurmd >/dev/null || slurmd
    wait_for 30 "the node" bash -c "sinfo -h -N -o %t | grep -qx idle"
    echo "Slurm $(sinfo -V | cut -d' ' -f2) up: node $(hostname -s), ${cpus} CPUs, ${memory} MB, partitions $(sinfo -h -o %P | paste -sd' ')"
}

stop() {
    need_root stop
    if ours; then
        scontrol shutdown >/dev/null 2>&1 || true
        for _ in $(seq 20); do pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null || break; sleep 1; done
        pkill -x slurmctld 2>/dev/null || true
        pkill -x slurmd 2>/dev/null || true
        rm -f "$CONF"
        rm -rf "$STATE"
        echo "Slurm stopped; $CONF and $STATE removed"
    else
        echo "no cluster of this script's here ($CONF is absent or not ours): nothing stopped"
    fi
}

status() {
    scontrol ping && sinfo -N -o "%N %P %c %m %t"
}

case "${1:-}" in
    install) install_packages ;;
    start | stop | status) "$1" ;;
    *) die "usage: bash $0 install|start|status|stop" ;;
esac
