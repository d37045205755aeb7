#!/usr/bin/env bash
# Measures upstream's proxier syncing N ServiceImports (through the
# multi-cluster Proxier) against N equivalent plain Services in the same
# run, N = 1,000 and 10,000 with 10 endpoints each (nftables; iptables at
# 1,000), and prints the ratios (feed-ms: handing the objects to the
# proxier, before the sync; BenchmarkFeed measures it alone, with CPU
# time). Needs root; runs in a fresh network namespace so the host's rules
# are never touched.
#
# With "sources", it measures instead how the cost grows with the source
# clusters of each import (BenchmarkSourcesPerImport: 1,000 imports from
# 1, 10, 50 and 100 clusters, 2 endpoints per slice, against 1,000 Services
# with the same slices; the imports again with cluster selection on and 3
# selector results each, the path "selected"; and the imports asking
# LocalFirst native names, each beside a local Service of its name, the
# path "native", against upstream's way to the same endpoints, those
# 1,000 Services and the 1,000 local ones, the path "services-native").
# Each path's ratio is over services-PATH where there is one, else over
# services.
#
# Usage: hack/bench-kube-proxy.sh [sources] [COUNT]   (COUNT repetitions, default 3)
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
MODE=sync
if [[ "${1:-}" == sources ]]; then
  MODE=sources
  shift
fi
COUNT=${1:-3}
OUT=_output/bench
mkdir -p "${OUT}"

echo "Compiling the benchmark..."
go test -c -o "${OUT}/multicluster.test" ./pkg/proxy/multicluster/
TXT=${OUT}/kube-proxy-bench-${MODE}.txt
: >"${TXT}"
: >"${OUT}/kube-proxy-bench.log"
# run BENCHMARK SUB...: one sub-benchmark once, in a network namespace of
# its own.
run() {
  local bench=$1 pattern="^$1\$"
  shift
  for sub in "$@"; do pattern+="/^${sub}\$"; done
  unshare --net -- env MCS_BENCH_IN_NETNS=1 "${OUT}/multicluster.test" \
    -test.run '^$' -test.bench "${pattern}" -test.benchtime 1x -test.timeout 60m \
    2>>"${OUT}/kube-proxy-bench.log" | grep "^${bench}/" | tee -a "${TXT}"
}
# Each case runs services then imports, then the other way round, so that
# neither path always runs on a warmer machine.
pair() {
  local bench=$1 rep=$2
  shift 2
  if (( rep % 2 )); then
    run "${bench}" "$@" services; run "${bench}" "$@" imports
  else
    run "${bench}" "$@" imports; run "${bench}" "$@" services
  fi
}
for rep in $(seq "${COUNT}"); do
  if [[ "${MODE}" == sources ]]; then
    # Each repetition starts one path further on, so that no path always
    # runs first.
    paths=(services imports selected services-native native)
    np=${#paths[@]}
    for sources in 1 10 50 100; do
      for ((k = 0; k < np; k++)); do run BenchmarkSourcesPerImport "${sources}" "${paths[(rep + k) % np]}"; done
    done
  else
    for case in "nftables 1000" "nftables 10000" "iptables 1000"; do
      read -r mode n <<<"${case}"
      pair BenchmarkFirstSync "${rep}" "${mode}" "${n}"
    done
  fi
done

# Ratios of the medians, each path over its upstream path (services-PATH
# where it was measured, as native's is services-native, else services),
# for each case (the sub-benchmark's name without its last part) and
# metric.
awk '
  /^Benchmark[A-Za-z]*\// {
    k = split($1, p, "/"); path = p[k]; sub(/-[0-9]+$/, "", path)
    c = p[2]; for (j = 3; j < k; j++) c = c "/" p[j]
    for (i = 3; i < NF; i += 2) {
      v[c, path, $(i+1)] = v[c, path, $(i+1)] " " $i
      if (!((c, $(i+1)) in seen)) { seen[c, $(i+1)] = 1; metrics[c] = metrics[c] " " $(i+1) }
    }
    if (!(c in cases)) { cases[c] = 1; order[++n] = c }
    if (path != "services" && !(path in known)) { known[path] = 1; paths[++np] = path }
  }
  function median(s,   a, k, t, i, j) {
    k = split(s, a, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  END {
    printf "\n"
    for (q = 1; q <= np; q++) {
      pq = paths[q]; base[pq] = (("services-" pq) in known) ? "services-" pq : "services"
      w[pq] = (length(pq) > 12) ? length(pq) : 12
      if (base[pq] != "services") printf "%s: ratio over %s\n", pq, base[pq]
    }
    printf "%-16s %-20s %12s", "case", "metric", "services"
    for (q = 1; q <= np; q++) printf " %" w[paths[q]] "s %8s", paths[q], "ratio"
    printf "\n"
    for (o = 1; o <= n; o++) {
      c = order[o]; m = split(metrics[c], ms, " ")
      for (x = 1; x <= m; x++) {
        printf "%-16s %-20s %12.3f", c, ms[x], median(v[c, "services", ms[x]])
        for (q = 1; q <= np; q++) {
          pq = paths[q]; i = median(v[c, pq, ms[x]]); s = median(v[c, base[pq], ms[x]])
          printf " %" w[pq] ".3f %8s", i, (s > 0) ? sprintf("%.3f", i / s) : "-"
        }
        printf "\n"
      }
    }
  }' "${TXT}" | tee "${OUT}/kube-proxy-bench-${MODE}-ratios.txt"
