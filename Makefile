# The two commands a new user runs (see README.md):
#   make demo   installs what is needed and runs the local multi-cluster demo
#   make test   installs what is needed and runs every test
SHELL := /usr/bin/env bash
STAGING := staging/src/k8s.io/multiclusterservices
GO_TEST_FLAGS ?= -timeout 40m
FUZZTIME ?= 30s
# The flags hack/build.sh builds with (hack/lib-build.sh): tests compiled
# with them reuse the packages the build compiled instead of compiling the
# Kubernetes tree a second time. The race detector needs cgo.
export CGO_ENABLED := 0
export GOFLAGS := -trimpath
RACE := CGO_ENABLED=1 go test -race

.PHONY: all deps tools build binaries kube-proxy test test-minors unit-test integration-test fuzz demo bench bench-memory kind-e2e upstream-e2e rollout clean

all: build

# Installs the Debian packages hack/deps.txt lists for the target (demo or
# test) when missing, then checks every command, cgo library and kernel
# feature: a missing one stops the target here, in seconds, with the
# package's name (hack/check-deps.sh).
DEPS_PROFILE ?= test
deps:
	hack/install-deps.sh $(DEPS_PROFILE)

tools:
	hack/build-tools.sh

build:
	hack/build.sh

# kube-proxy for one Kubernetes release: KUBERNETES_VERSION=1.34, 1.35,
# 1.36 (minors/, into _output/v1.MINOR/bin) or 1.37 (the pinned one, into
# _output/bin). See docs/kubernetes-versions.md.
KUBERNETES_VERSION ?=
kube-proxy:
	KUBERNETES_VERSION=$(KUBERNETES_VERSION) hack/build.sh kube-proxy kube-proxy-upstream

# Every other release's kube-proxy: built, its seam and data plane tested
# against that release, its binaries against the local control plane.
test-minors: deps binaries
	hack/test-minors.sh

# Both of the above, side by side (what demo and test use).
binaries:
	hack/build-all.sh

test: deps binaries
	# Helm, for the chart's tests (test/kindconfig) and its install on kind.
	hack/build-tools.sh helm
	cd $(STAGING) && go test $(GO_TEST_FLAGS) ./...
	# Each test once: the controller's under the race detector below; the
	# KEP-1645 suite in push and pull mode, the dual-stack cases and the
	# derived member's cases on kind (hack/kind-e2e.sh, the same cases and
	# checks; `go test ./test/e2e` runs them on the local clusterset).
	go test $(GO_TEST_FLAGS) -skip '^(TestMCSController.*|TestMultiClusterServices|TestMultiClusterServicesPullMode|TestDualStack|TestDualStackPullMode|TestDerivedMember)$$' ./...
	# The controller's workers share its state: its tests run under the
	# race detector, beside the kube-proxy of every other supported
	# Kubernetes release (built and tested by hack/test-minors.sh); each
	# output is printed whole when it is done. The race binaries are
	# compiled first, so that two builds never share the 2 cores.
	$(RACE) $(GO_TEST_FLAGS) -run '^$$' ./pkg/controller/... ./test/integration >/dev/null
	hack/beside.sh race \
	  "$(RACE) $(GO_TEST_FLAGS) ./pkg/controller/... && $(RACE) $(GO_TEST_FLAGS) -run '^TestMCSController' ./test/integration" \
	  minors hack/test-minors.sh
	# Last, the adoption path on real kind clusters, every image built
	# here (hack/kind-e2e.sh; it removes everything it made). It runs the
	# end-to-end suite with its clients in pods on real kubelets, asked
	# through the apiserver's pod proxy, which the local-exec provider
	# stands in for on the local clusterset (run by hand: test/e2e/README.md).
	hack/kind-e2e.sh

# Unit tests only: no root, no binaries.
unit-test:
	cd $(STAGING) && go test -short ./...
	go test -short ./pkg/...

fuzz:
	cd $(STAGING) && go test -run '^$$' -fuzz FuzzServiceForImport -fuzztime $(FUZZTIME) ./proxy
	cd $(STAGING) && go test -run '^$$' -fuzz FuzzEndpointSliceForImport -fuzztime $(FUZZTIME) ./proxy
	cd $(STAGING) && go test -run '^$$' -fuzz FuzzSelectForLocalService -fuzztime $(FUZZTIME) ./proxy

# The demo builds what a local clusterset runs (hack/demo.sh), not the
# binaries only the tests use.
demo: DEPS_PROFILE := demo
demo: deps
	hack/demo.sh

bench: deps build
	hack/bench-kube-proxy.sh

bench-memory: deps binaries
	hack/bench-kube-proxy-memory.sh

# kind clusters on this machine, offline (see docs/kind.md): as root,
# starts Docker if none answers (hack/kind-docker.sh), builds every image
# here (hack/kind-images.sh), runs the suite on two single-node clusters
# and removes everything again. KIND_E2E_FLAGS: e.g. --keep, --clean-images.
KIND_E2E_FLAGS ?=
kind-e2e: deps
	hack/kind-e2e.sh $(KIND_E2E_FLAGS)

# Kubernetes' own sig-network specs of the pinned release: every
# [sig-network] Services spec and every sig-network [Conformance] spec
# (not [Slow], [Serial], [Disruptive], [Flaky], LoadBalancer or
# [Feature:...]) on a two-node kind cluster, first with this project's
# kube-proxy (gate on) and packages, then with kubeadm's stock kube-proxy;
# each run's summary is printed (docs/testing.md has the last one). `make
# test` runs the Conformance ones, against ours.
upstream-e2e: deps
	hack/kind-e2e.sh --upstream-only all $(KIND_E2E_FLAGS)

# kube-proxy swapped under traffic and back on kind, measured step by step
# (docs/install.md, "A rollout under traffic").
rollout: deps
	hack/kind-e2e.sh --rollout-only $(KIND_E2E_FLAGS)

clean:
	rm -rf _output
