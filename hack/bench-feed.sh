#!/usr/bin/env bash
# Measures the feed alone (BenchmarkFeed: handing upstream's nftables
# proxier N objects before its first sync) in paired rounds, and prints,
# for each path against the Services handed to upstream alone, the ratio of
# the medians and the median of the rounds' ratios, of CPU time (garbage
# collection included) and of wall time. The paths:
#
#   services          N Services, upstream alone (the denominator)
#   imports           N ServiceImports through the multi-cluster Proxier
#   translate-only    the same imports checked and translated, nothing kept:
#                     the floor of the imports path
#   services-gate-on  the N Services through the Proxier (the gate on)
#
# Every run is its own process in a fresh network namespace, and each
# round runs the paths in a rotated order, so no path inherits another's
# heap or always runs first. Needs root.
#
# Usage: hack/bench-feed.sh [ROUNDS] [N...]   (default: 20 rounds, N = 1000 10000)
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
ROUNDS=${1:-20}
shift || true
SIZES=("$@")
if (( ${#SIZES[@]} == 0 )); then
  SIZES=(1000 10000)
fi
PATHS=(services imports translate-only services-gate-on)
OUT=_output/bench
mkdir -p "${OUT}"

echo "Compiling the benchmark..."
go test -c -o "${OUT}/multicluster.test" ./pkg/proxy/multicluster/
RESULTS="${OUT}/feed-bench.txt"
: >"${RESULTS}"
run() {
  unshare --net -- env MCS_BENCH_IN_NETNS=1 "${OUT}/multicluster.test" \
    -test.run '^$' -test.bench "^BenchmarkFeed$/^$1$/^$2$" -test.benchtime 1x 2>>"${OUT}/feed-bench.log" |
    awk -v round="$3" -v path="$1" -v n="$2" '/^BenchmarkFeed/ {
      for (i = 1; i <= NF; i++) if ($i == "cpu-ms/op") cpu = $(i - 1)
      print round, n, path, cpu, $3 / 1e6
    }' >>"${RESULTS}"
}
for n in "${SIZES[@]}"; do
  echo "N=${n}: ${ROUNDS} rounds..."
  for round in $(seq "${ROUNDS}"); do
    for i in "${!PATHS[@]}"; do
      run "${PATHS[$(((i + round) % ${#PATHS[@]}))]}" "${n}" "${round}"
    done
  done
done

awk '
  function median(s,   a, k, t, i, j) {
    k = split(s, a, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  { cpu[$2, $3] = cpu[$2, $3] " " $4; wall[$2, $3] = wall[$2, $3] " " $5; c[$1, $2, $3] = $4; w[$1, $2, $3] = $5; rounds[$1] = 1; sizes[$2] = 1; paths[$3] = 1 }
  END {
    printf "%6s  %-17s %12s %12s %10s %10s\n", "N", "path", "cpu-ms", "wall-ms", "cpu ratio", "wall ratio"
    for (n in sizes) for (p in paths) {
      rc = ""; rw = ""
      for (r in rounds) if (((r, n, p) in c) && ((r, n, "services") in c)) {
        rc = rc " " c[r, n, p] / c[r, n, "services"]; rw = rw " " w[r, n, p] / w[r, n, "services"]
      }
      mc = median(cpu[n, p]); mw = median(wall[n, p])
      printf "%6s  %-17s %12.1f %12.1f %5.2f (%.2f) %5.2f (%.2f)\n", n, p, mc, mw,
        mc / median(cpu[n, "services"]), median(rc), mw / median(wall[n, "services"]), median(rw)
    }
  }' "${RESULTS}" | sort -k1,1n -k2,2 | tee "${OUT}/feed-bench-ratios.txt"
