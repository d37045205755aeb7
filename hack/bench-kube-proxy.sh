#!/usr/bin/env bash
# Measures upstream's proxier syncing N ServiceImports (through the
# multi-cluster Proxier) against N equivalent plain Services in the same
# run, N = 1,000 and 10,000 with 10 endpoints each (nftables; iptables at
# 1,000), and prints the ratios (feed-ms: handing the objects to the
# proxier, before the sync; BenchmarkFeed measures it alone, with CPU
# time). Needs root; runs in a fresh network namespace so the host's rules
# are never touched.
#
# Usage: hack/bench-kube-proxy.sh [COUNT]   (COUNT repetitions, default 3)
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
COUNT=${1:-3}
OUT=_output/bench
mkdir -p "${OUT}"

echo "Compiling the benchmark..."
go test -c -o "${OUT}/multicluster.test" ./pkg/proxy/multicluster/
# Every measurement runs in its own process and network namespace, and
# the two paths alternate which goes first, so neither inherits the
# other's garbage, conntrack state or kernel caches.
: >"${OUT}/kube-proxy-bench.txt"
: >"${OUT}/kube-proxy-bench.log"
run() {
  unshare --net -- env MCS_BENCH_IN_NETNS=1 "${OUT}/multicluster.test" \
    -test.run '^$' -test.bench "^BenchmarkFirstSync$/^$1$/^$2$/^$3$" -test.benchtime 1x -test.timeout 60m \
    2>>"${OUT}/kube-proxy-bench.log" | grep '^BenchmarkFirstSync' | tee -a "${OUT}/kube-proxy-bench.txt"
}
for rep in $(seq "${COUNT}"); do
  for case in "nftables 1000" "nftables 10000" "iptables 1000"; do
    read -r mode n <<<"${case}"
    if (( rep % 2 )); then
      run "${mode}" services "${n}"; run "${mode}" imports "${n}"
    else
      run "${mode}" imports "${n}"; run "${mode}" services "${n}"
    fi
  done
done

# Ratios of the medians, imports over services, for each mode and size.
awk '
  /^BenchmarkFirstSync\// {
    split($1, p, "/"); mode = p[2]; path = p[3]; n = p[4]; sub(/-[0-9]+$/, "", n)
    for (i = 3; i < NF; i += 2) { v[mode, n, path, $(i+1)] = v[mode, n, path, $(i+1)] " " $i }
    keys[mode SUBSEP n] = 1
  }
  function median(s,   a, k, t, i, j) {
    k = split(s, a, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  END {
    printf "\n%-9s %6s  %-20s %12s %12s %8s\n", "mode", "N", "metric", "services", "imports", "ratio"
    for (key in keys) {
      split(key, k, SUBSEP)
      for (m = 1; m <= 5; m++) {
        metric = (m == 1) ? "first-sync-s" : (m == 2) ? "incremental-sync-ms" : (m == 3) ? "rules" : (m == 4) ? "set-elements" : "feed-ms"
        s = median(v[k[1], k[2], "services", metric]); i = median(v[k[1], k[2], "imports", metric])
        printf "%-9s %6s  %-20s %12.3f %12.3f %8s\n", k[1], k[2], metric, s, i, (s > 0) ? sprintf("%.3f", i / s) : "-"
      }
    }
  }' "${OUT}/kube-proxy-bench.txt" | tee "${OUT}/kube-proxy-bench-ratios.txt"
