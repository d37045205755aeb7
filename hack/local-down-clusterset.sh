#!/usr/bin/env bash
# Stops a running local clusterset and removes what a crashed one left.
# Every process of a clusterset dies with the harness (SIGKILL on parent
# death), so after a crash only network namespaces and the host's
# unreachable routes remain: `clusterset down` deletes the namespaces named
# <prefix>-* (their veth pairs, bridge and nftables tables live inside them
# and go with them), kills any process still in them, removes their
# /etc/netns/<prefix>-* entries and the routes. Without the built command,
# this script removes the namespaces itself.
#
# Usage: hack/local-down-clusterset.sh [--prefix=cset] [--dir=_output/clusterset]
#   (the demo uses --prefix=demo --dir=_output/demo)
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREFIX=cset
DIR="${ROOT}/_output/clusterset"
for arg in "$@"; do
  case "${arg}" in
    --prefix=*) PREFIX=${arg#--prefix=} ;;
    --dir=*) DIR=${arg#--dir=} ;;
    *) echo "unknown argument ${arg}; usage: $0 [--prefix=cset] [--dir=DIR]" >&2; exit 2 ;;
  esac
done
if [[ ! "${PREFIX}" =~ ^[a-z][a-z0-9]{0,9}$ ]]; then
  echo "invalid prefix ${PREFIX}" >&2
  exit 2
fi

if [[ -x "${ROOT}/_output/bin/clusterset" ]]; then
  exec "${ROOT}/_output/bin/clusterset" down --prefix="${PREFIX}" --dir="${DIR}"
fi

# A harness that is still running cleans up after itself when asked to stop.
pidfile="${DIR}/clusterset.pid"
if [[ -f "${pidfile}" ]]; then
  pid=$(cat "${pidfile}")
  if [[ "${pid}" =~ ^[0-9]+$ ]] && grep -qa clusterset "/proc/${pid}/cmdline" 2>/dev/null; then
    echo "stopping the clusterset harness (pid ${pid}) ..."
    kill -TERM "${pid}" 2>/dev/null || true
    for _ in $(seq 1 300); do
      kill -0 "${pid}" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "${pid}" 2>/dev/null || true
  fi
  rm -f "${pidfile}"
fi

removed=0
for ns in $(ip netns list | awk '{print $1}' | grep "^${PREFIX}-" || true); do
  pids=$(ip netns pids "${ns}" 2>/dev/null || true)
  if [[ -n "${pids}" ]]; then
    # shellcheck disable=SC2086
    kill -KILL ${pids} 2>/dev/null || true
  fi
  ip netns del "${ns}"
  removed=$((removed + 1))
done
rm -rf /etc/netns/"${PREFIX}"-*
rmdir /etc/netns 2>/dev/null || true
echo "removed ${removed} network namespace(s) ${PREFIX}-*"
