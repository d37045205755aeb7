#!/usr/bin/env bash
# Runs commands side by side and fails if any failed. Each command's
# output is kept in a file and printed whole, in the order given, once
# it is done, so that the log reads as if they had run one after the
# other; each is timed.
#
# Usage: hack/beside.sh NAME 'COMMAND' [NAME 'COMMAND']...
set -o errexit -o nounset -o pipefail

if (( $# == 0 || $# % 2 )); then
  echo "usage: $0 NAME 'COMMAND' [NAME 'COMMAND']..." >&2
  exit 2
fi
work=$(mktemp -d)
names=() pids=()
stop() {
  local pid
  for pid in "${pids[@]}"; do
    pkill -TERM -P "${pid}" 2>/dev/null || true
    kill "${pid}" 2>/dev/null || true
  done
  rm -rf "${work}"
}
trap stop EXIT
start=${SECONDS}
while (( $# )); do
  names+=("$1")
  (
    begun=${SECONDS}
    status=0
    bash -o errexit -o nounset -o pipefail -c "$2" || status=$?
    echo "==> ${1}: exit ${status} after $((SECONDS - begun))s"
    exit "${status}"
  ) >"${work}/${#names[@]}.log" 2>&1 &
  pids+=($!)
  shift 2
done
failed=()
for i in "${!pids[@]}"; do
  wait "${pids[${i}]}" || failed+=("${names[${i}]}")
  echo "==> ${names[${i}]} (run beside: ${names[*]})"
  cat "${work}/$((i + 1)).log"
done
pids=()
echo "==> ${names[*]}: done side by side in $((SECONDS - start))s"
if (( ${#failed[@]} )); then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
