#!/usr/bin/env bash
# The README's `make demo`: brings up two local clusters, deploys Service
# demo/web with pods in both and a client pod in the second, exports the
# Service from both and shows the client reaching pods of both clusters
# through the clusterset IP and web.demo.svc.clusterset.local, printing
# which pod answered each request; then removes everything (also on
# Ctrl-C). Logs stay in _output/demo.
#
# The ServiceImport and MCS EndpointSlices come from _output/bin/mcs-controller
# when it is built (make build), otherwise from a stand-in exporter
# (test/clusterset/standin); choose with --exporter=mcs-controller|stand-in.
#
# Usage: hack/demo.sh [--exporter=auto] [--requests=10] [--proxy-mode=nftables]
# After a crash: hack/local-down-clusterset.sh --prefix=demo --dir=_output/demo
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
source hack/lib-clusterset.sh
ensure_binaries
exec _output/bin/clusterset demo --prefix=demo --dir=_output/demo "$@"
