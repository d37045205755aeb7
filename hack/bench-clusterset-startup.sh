#!/usr/bin/env bash
# Measures the local clusterset's start-up: the time from `clusterset up`
# to "clusterset ready" (warm: binaries built, page cache hot) and the peak
# resident memory of the harness and everything it started (etcd,
# apiservers, controller-managers, kube-proxies, CoreDNS, pods), sampled
# every 100 ms until 10 s after ready. Runs RUNS (default 3) times and
# prints each run and the medians.
#
# Usage: hack/bench-clusterset-startup.sh [CLUSTERSET_BINARY] [clusterset up flags...]
# Needs root; the binaries of make binaries.
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

binary=${1:-_output/bin/clusterset}
shift || true
runs=${RUNS:-3}
dir=$(mktemp -d /tmp/bench-clusterset.XXXXXX)
trap 'rm -rf "${dir}"' EXIT

# tree_rss PID prints the summed RSS (KiB) of PID and its descendants.
tree_rss() {
  ps -e -o pid=,ppid=,rss= | awk -v root="$1" '
    { parent[$1] = $2; rss[$1] = $3 }
    END {
      for (p in rss) {
        for (q = p; q != "" && q != 0; q = parent[q]) {
          if (q == root) { total += rss[p]; break }
        }
      }
      print total + 0
    }'
}

times=() peaks=()
for run in $(seq 1 "${runs}"); do
  log="${dir}/up-${run}.log"
  start=$(date +%s.%N)
  "${binary}" up --dir="${dir}/cs" --prefix=bench "$@" >"${log}" 2>&1 &
  pid=$!
  ready="" peak=0
  while kill -0 "${pid}" 2>/dev/null; do
    rss=$(tree_rss "${pid}")
    ((rss > peak)) && peak=${rss}
    if [[ -z "${ready}" ]] && grep -q 'clusterset ready' "${log}"; then
      ready=$(date +%s.%N)
    fi
    if [[ -n "${ready}" ]] && (($(date +%s) - ${ready%.*} >= 10)); then
      break
    fi
    sleep 0.1
  done
  kill -INT "${pid}" 2>/dev/null || true
  wait "${pid}" 2>/dev/null || true
  if [[ -z "${ready}" ]]; then
    echo "run ${run}: the clusterset did not come up:" >&2
    tail -20 "${log}" >&2
    exit 1
  fi
  t=$(awk -v a="${ready}" -v b="${start}" 'BEGIN { print a - b }')
  times+=("${t}") peaks+=("${peak}")
  printf 'run %d: ready in %.2f s, peak RSS %d MiB\n' "${run}" "${t}" $((peak / 1024))
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
printf 'RESULT %s %s: ready in %.2f s (median of %d), peak RSS %d MiB\n' "${binary}" "$*" "$(median "${times[@]}")" "${runs}" $(($(median "${peaks[@]}") / 1024))
