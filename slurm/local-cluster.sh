#!/usr/bin/env bash
# A single-node Slurm cluster on localhost, for trying `mascot slurm submit` on one machine and for CI.
# Debian/Ubuntu, run as root, no systemd needed (daemons run as plain background processes).
#
#   slurm/local-cluster.sh start    install (apt) if needed, configure, start munged/slurmctld/slurmd
#   source /tmp/mascot-slurm/env    exports SLURM_CONF for sbatch/squeue in this shell
#   slurm/local-cluster.sh status   sinfo + squeue
#   slurm/local-cluster.sh stop     cancel jobs, stop the daemons (by PID, reverse start order)
#
# Env: MASCOT_SLURM_BASE (default /tmp/mascot-slurm) holds config, state, logs and PIDs;
# MASCOT_SLURM_INSTALL=0 never installs packages (start fails with exit 3 when they are missing);
# MASCOT_SLURM_PORT (default 6817) is slurmctld's port, slurmd takes the next. Each base runs its own munged
# (socket in $BASE/munge), and stop cancels jobs only on a controller this base started and that still runs.
# Pitfalls handled here: postinst scripts must not try to start services (policy-rc.d); munged refuses
# to run as root (setpriv to 'munge'); /run/munge must exist; slurmd must bind 127.0.0.1
# (NoInAddrAny); MinJobAge<=5 and batch_sched_delay=0 keep array dispatch and `squeue` polling fast.
set -euo pipefail
BASE=${MASCOT_SLURM_BASE:-/tmp/mascot-slurm}
CTLD_PORT=${MASCOT_SLURM_PORT:-6817}  # slurmctld's port; slurmd takes the next one
D_PORT=$((CTLD_PORT + 1))
export DEBIAN_FRONTEND=noninteractive
export SLURM_CONF="$BASE/etc/slurm.conf"

wait_for() {  # wait_for <tenths of seconds> <command...>
  local n=$1; shift
  for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  "$@"
}

install_pkgs() {
  local missing=0 p
  for p in slurmctld slurmd slurm-client munge; do dpkg -s "$p" >/dev/null 2>&1 || missing=1; done
  [ "$missing" = 0 ] && return 0
  if [ "${MASCOT_SLURM_INSTALL:-1}" = 0 ]; then
    echo "Slurm's daemons are not installed (needs slurmctld slurmd slurm-client munge) and MASCOT_SLURM_INSTALL=0" >&2
    exit 3
  fi
  apt-get update -qq
  local made=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; made=1; fi
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
  [ "$made" = 1 ] && rm -f /usr/sbin/policy-rc.d
  return 0
}

ours_running() {  # every daemon this base started is alive (a controller answering on its port may be another's)
  [ -s "$BASE/run/pids" ] || return 1
  local p
  while read -r p; do kill -0 "$p" 2>/dev/null || return 1; done < "$BASE/run/pids"
  return 0
}

start() {
  if ours_running && scontrol ping >/dev/null 2>&1; then echo "already running ($BASE)"; return 0; fi
  install_pkgs
  local host; host=$(hostname)
  rm -rf "$BASE"; mkdir -p "$BASE"/{etc,state/ctld,state/d,log,run}
  # munged of its own (socket, pid, log and seed files in $BASE/munge): a cluster never talks to another's
  install -d -o munge -g munge -m 0755 "$BASE/munge"
  local sock="$BASE/munge/munge.socket"
  cat > "$SLURM_CONF" <<CONF
ClusterName=mascot
SlurmctldHost=${host}(127.0.0.1)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$D_PORT
StateSaveLocation=$BASE/state/ctld
SlurmdSpoolDir=$BASE/state/d
SlurmctldPidFile=$BASE/run/slurmctld.pid
SlurmdPidFile=$BASE/run/slurmd.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
CommunicationParameters=NoInAddrAny
MinJobAge=5
KillWait=5
SchedulerParameters=batch_sched_delay=0
$(/usr/sbin/slurmd -C | head -n1) NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --force; chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
  fi
  # each daemon's pid is recorded as it starts: a start that fails half-way is stopped, not left running
  failed() {
    echo "Slurm did not start ($1); logs in $BASE/log" >&2
    tail -n 20 "$BASE"/log/*.log "$BASE"/log/*.out >&2 2>/dev/null || true
    stop >/dev/null
    exit 1
  }
  setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged --foreground --socket="$sock" \
    --pid-file="$BASE/munge/munged.pid" --log-file="$BASE/munge/munged.log" --seed-file="$BASE/munge/munged.seed" \
    >"$BASE/log/munged.out" 2>&1 &
  echo $! >> "$BASE/run/pids"
  wait_for 50 sh -c "munge --socket='$sock' -n | unmunge --socket='$sock'" || failed munged
  /usr/sbin/slurmctld -D -f "$SLURM_CONF" >"$BASE/log/slurmctld.out" 2>&1 &
  echo $! >> "$BASE/run/pids"
  # answered by this slurmctld (alive), not by another controller that holds the port
  ctld_up() { ours_running && scontrol ping; }
  wait_for 100 ctld_up || failed slurmctld
  /usr/sbin/slurmd -D -f "$SLURM_CONF" >"$BASE/log/slurmd.out" 2>&1 &
  echo $! >> "$BASE/run/pids"
  echo "export SLURM_CONF=$SLURM_CONF" > "$BASE/env"
  node_idle() { ours_running && [ "$(sinfo -h -n "$host" -o %t)" = idle ]; }
  wait_for 300 node_idle || failed "the node never became idle"
  sinfo
  echo "single-node Slurm up; run: source $BASE/env"
}

stop() {
  [ -s "$BASE/run/pids" ] || { echo "not running"; return 0; }
  set +e
  if ours_running && scontrol ping >/dev/null 2>&1; then  # never cancel the jobs of a controller not ours
    scancel --user="$(id -un)" 2>/dev/null
    for _ in $(seq 150); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.2; done
  fi
  mapfile -t pids < "$BASE/run/pids"
  for (( i=${#pids[@]}-1; i>=0; i-- )); do
    p=${pids[$i]}
    kill "$p" 2>/dev/null
    for _ in $(seq 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -9 "$p"
  done
  rm -f "$BASE/run/pids"
  set -e
  echo "stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) sinfo; squeue ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
