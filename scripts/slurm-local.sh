#!/usr/bin/env bash
# slurm-local.sh: a real one-node SLURM cluster on this machine, for tests and local sweeps.
#
#   bash scripts/slurm-local.sh start --allow-system-changes
#                                        install what is missing (apt-get), write the configs,
#                                        start munged, mariadbd, slurmdbd, slurmctld, slurmd and
#                                        wait until the node takes jobs
#   bash scripts/slurm-local.sh stop     cancel all jobs, stop the daemons this script started
#   bash scripts/slurm-local.sh status   controller, node, queue and accounting (one line and
#                                        exit status 1 when SLURM is not installed)
#
# Debian 12 (bookworm), as root, no systemd needed. Both start and stop are idempotent.
# Partition "debug" (the default) with one node named `hostname -s`.
#
# `start` changes the machine: it installs Debian packages (slurm-wlm, munge, and for accounting
# slurmdbd and mariadb-server), writes /etc/slurm/slurm.conf and slurmdbd.conf and starts system
# daemons. It refuses to unless told so: --allow-system-changes, or CSCORE_ALLOW_SYSTEM_CHANGES=1
# in the environment (what .ci/run sets). A cluster that is up already is used as it is.
#
# Environment:
#   SLURM_LOCAL_DIR         state, spool, logs, pid files (default /tmp/slurm-local)
#   SLURM_LOCAL_CPUS        CPUs the node advertises (default nproc; more lets more 1-CPU jobs
#                           run at once; nothing enforces CPU or memory limits here)
#   SLURM_LOCAL_ACCOUNTING  1 (default): slurmdbd + MariaDB, so sacct works and a killed or
#                           cancelled job is reported as failed (without it submitit waits
#                           forever for a job that died without writing its result);
#                           0: no accounting, only for runs where every job ends normally
#   SLURM_LOCAL_FORCE       1: overwrite an /etc/slurm/slurm.conf this script did not write
#   CSCORE_ALLOW_SYSTEM_CHANGES  1: same as --allow-system-changes
#
# tests/system/test_slurm.py uses a cluster that is up; with CSCORE_ALLOW_SYSTEM_CHANGES=1 it starts one
# itself when none is, and stops it at the end if no other pytest session still uses it. A manual
# `stop` while a test session runs breaks that session (its jobs vanish).
#
# The configs go to /etc/slurm (where the client commands look). Every start is a fresh
# cluster: the state dir and the accounting database are recreated, job ids restart at 1.
set -euo pipefail

DIR=${SLURM_LOCAL_DIR:-/tmp/slurm-local}
ACCOUNTING=${SLURM_LOCAL_ACCOUNTING:-1}
CLUSTER=cscorelocal
PARTITION=debug
NODE=$(hostname -s)
CONF=/etc/slurm/slurm.conf
DBDCONF=/etc/slurm/slurmdbd.conf
MARK="# written by cscore scripts/slurm-local.sh"
DB=slurm_local_acct_db       # own names, so a MariaDB that was already there is not disturbed
DBUSER=slurm_local
DBPASS=slurm_local_pw        # socket-only, local test database

say() { echo "[slurm-local $(date +%T)] $*" >&2; }
die() { say "error: $*"; exit 1; }

# retry SECONDS CMD...: 0 as soon as CMD succeeds, 1 when SECONDS have passed
retry() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.25
  done
}

have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

install_missing() {
  local want=(slurm-wlm munge) missing=() p
  [[ $ACCOUNTING == 1 ]] && want+=(slurmdbd mariadb-server)
  for p in "${want[@]}"; do have_pkg "$p" || missing+=("$p"); done
  ((${#missing[@]})) || return 0
  command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them"
  say "installing ${missing[*]} (apt-get)"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
}

write_configs() {
  if [[ -e $CONF ]] && ! grep -qF "$MARK" "$CONF" && [[ ${SLURM_LOCAL_FORCE:-0} != 1 ]]; then
    die "$CONF exists and was not written by this script (a real cluster?); set SLURM_LOCAL_FORCE=1 to overwrite it"
  fi
  local cpus real mem extra="" acct
  real=$(nproc)
  cpus=${SLURM_LOCAL_CPUS:-$real}
  # more CPUs than slurmd finds drains the node unless the config is allowed to override it
  ((cpus > real)) && extra="SlurmdParameters=config_overrides"
  mem=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
  [[ -n $mem ]] || die "slurmd -C reported no RealMemory"
  mem=$((mem * 9 / 10))    # at or above what slurmd detects, the node drains
  if [[ $ACCOUNTING == 1 ]]; then
    acct="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30"
  else
    acct="AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none"
  fi
  mkdir -p /etc/slurm
  cat >"$CONF" <<EOF
$MARK (state in $DIR)
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
# no cgroups here: processes are tracked by parent pid, nothing pins or limits them
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobCompType=jobcomp/none
$acct
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# a job without --mem would otherwise reserve the whole node
DefMemPerCPU=1024
ReturnToService=2
# submitit ignores SIGTERM: a cancelled job is SIGKILLed this many seconds later
KillWait=5
MailProg=/bin/true
MaxArraySize=10001
$extra
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
  if [[ $ACCOUNTING == 1 ]]; then
    (umask 077 && cat >"$DBDCONF" <<EOF
$MARK
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
LogFile=$DIR/log/slurmdbd.log
PidFile=$DIR/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=$DBUSER
StoragePass=$DBPASS
StorageLoc=$DB
EOF
    )
    chmod 600 "$DBDCONF"     # slurmdbd refuses a config others can read
  fi
}

start_munge() {
  if [[ ! -s /etc/munge/munge.key ]]; then   # the package's postinst normally makes it
    mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
  fi
  if ! munge -n </dev/null >/dev/null 2>&1; then
    install -d -o munge -g munge -m 0755 /run/munge   # what systemd's RuntimeDirectory would make
    runuser -u munge -- /usr/sbin/munged 9>&-
    touch "$DIR/owns-munged"
  fi
  retry 20 sh -c 'munge -n </dev/null | unmunge' || die "munged did not start"
}

start_mariadb() {
  if ! mariadb-admin ping >/dev/null 2>&1; then
    install -d -o mysql -g mysql -m 0755 /run/mysqld
    setsid /usr/sbin/mariadbd --user=mysql --skip-log-bin --innodb-lock-wait-timeout=900 \
      </dev/null >>"$DIR/log/mariadb.log" 2>&1 9>&- &
    touch "$DIR/owns-mariadbd"
    retry 60 mariadb-admin ping || { tail -n 20 "$DIR/log/mariadb.log" >&2; die "mariadbd did not start"; }
  fi
  # a fresh database each start (fresh state dir, job ids from 1); OR REPLACE so that an old
  # password never survives (slurmdbd would loop on "Access denied")
  mariadb -e "DROP DATABASE IF EXISTS $DB; CREATE DATABASE $DB;
    CREATE OR REPLACE USER '$DBUSER'@'localhost' IDENTIFIED BY '$DBPASS';
    GRANT ALL ON $DB.* TO '$DBUSER'@'localhost'; FLUSH PRIVILEGES;"
}

start_slurmdbd() {
  slurmdbd 9>&-
  # sacctmgr needs slurm.conf to name accounting_storage/slurmdbd: written before this
  retry 60 sacctmgr -n list cluster || { tail -n 20 "$DIR/log/slurmdbd.log" >&2; die "slurmdbd did not start"; }
  # register the cluster before slurmctld starts; rc 1 when it exists already
  sacctmgr -i add cluster "$CLUSTER" >/dev/null 2>&1 || true
}

node_ready() { sinfo -h -n "$NODE" -o %T | grep -Eq '^(idle|mixed|allocated)'; }

start() {
  [[ $(id -u) == 0 ]] || die "run as root (installs packages, starts system daemons)"
  if scontrol ping >/dev/null 2>&1 && [[ -s $DIR/slurmctld.pid ]]; then
    retry 60 node_ready || die "controller up but node $NODE not ready: $(sinfo -R -h)"
    say "already up"
    return 0
  fi
  [[ $ALLOW == 1 ]] || die "start changes this machine (apt-get install slurm-wlm munge slurmdbd mariadb-server," \
    "writes /etc/slurm, starts daemons); allow it with --allow-system-changes or CSCORE_ALLOW_SYSTEM_CHANGES=1"
  trap 'rc=$?; if ((rc)); then say "start failed: stopping what was started"; stop || true; fi' EXIT
  install_missing
  rm -rf "$DIR/state" "$DIR/spool"
  mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log"
  write_configs
  start_munge
  if [[ $ACCOUNTING == 1 ]]; then
    start_mariadb
    start_slurmdbd
  fi
  slurmctld 9>&-
  retry 60 scontrol ping || { tail -n 20 "$DIR/log/slurmctld.log" >&2; die "slurmctld did not start"; }
  slurmd 9>&-
  retry 60 node_ready || { sinfo -R >&2; tail -n 20 "$DIR/log/slurmd.log" >&2; die "node $NODE not ready"; }
  trap - EXIT
  say "up: partition $PARTITION, node $NODE, $(sinfo -h -o %c) CPUs, state in $DIR"
}

# stop_pidfile NAME FILE: SIGTERM the pid in FILE and wait for it (SIGKILL after 30 s)
stop_pidfile() {
  local name=$1 file=$2 pid
  [[ -s $file ]] || return 0
  pid=$(<"$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    retry 30 sh -c "! kill -0 $pid" || { say "$name ($pid) ignored SIGTERM: SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; }
  fi
  rm -f "$file"
}

stop() {
  [[ $(id -u) == 0 ]] || die "run as root"
  if [[ -s $DIR/slurmctld.pid ]] && scontrol ping >/dev/null 2>&1; then
    scancel --partition="$PARTITION" 2>/dev/null || true
    retry 30 sh -c '[ -z "$(squeue -h -o %i)" ]' || say "jobs still queued after 30 s"
  fi
  # the order matters: node, controller, accounting, database, authentication
  stop_pidfile slurmd "$DIR/slurmd.pid"
  stop_pidfile slurmctld "$DIR/slurmctld.pid"
  stop_pidfile slurmdbd "$DIR/slurmdbd.pid"
  if [[ -e $DIR/owns-mariadbd ]]; then stop_pidfile mariadbd /run/mysqld/mysqld.pid; rm -f "$DIR/owns-mariadbd"; fi
  if [[ -e $DIR/owns-munged ]]; then stop_pidfile munged /run/munge/munged.pid; rm -f "$DIR/owns-munged"; fi
  say "stopped"
}

status() {
  local rc=0
  if ! command -v scontrol >/dev/null; then
    say "SLURM is not installed here (no scontrol on PATH): bash $0 start --allow-system-changes sets up a local cluster"
    return 1
  fi
  scontrol ping || rc=1
  if ((rc == 0)); then
    sinfo -N -o "%N %P %T %c %m" || rc=1
    squeue || rc=1
    if [[ $ACCOUNTING == 1 ]]; then
      if sacct -n -X -o JobID >/dev/null 2>&1; then echo "sacct: ok"; else echo "sacct: failing"; rc=1; fi
    fi
  fi
  return $rc
}

# start and stop hold this lock, so that concurrent calls run one after the other (the daemons
# are started with fd 9 closed: they must not inherit the lock)
serialized() {
  mkdir -p "$DIR"
  exec 9>"$DIR/.lock"
  flock 9
  "$@"
}

ALLOW=0
[[ ${CSCORE_ALLOW_SYSTEM_CHANGES:-0} == 1 ]] && ALLOW=1
usage="usage: $0 start [--allow-system-changes] | stop | status"
cmd=${1:-}
(($#)) && shift
for arg in "$@"; do
  case "$arg" in
    --allow-system-changes) ALLOW=1 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
case "$cmd" in
  start) serialized start ;;
  stop) serialized stop ;;
  status) status ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
