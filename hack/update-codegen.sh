#!/usr/bin/env bash
# Regenerates what is generated from the Go types of the staging module's
# own APIs (the service catalog, apis/catalog/v1alpha1, and the Cluster
# Inventory API's ClusterProfile, apis/inventory/v1alpha1, written here from
# the published API; and the fields cluster selection adds to ServiceExport
# and ServiceImport, apis/clusterselection/v1beta1): DeepCopy methods
# (zz_generated.deepcopy.go) and the CustomResourceDefinitions
# (crds/catalog/, crds/inventory/, crds/clusterselection/), with
# controller-gen at the version pinned here. The
# output is committed; `go test ./crds` in the staging module fails when
# it is stale.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STAGING="${ROOT}/staging/src/k8s.io/multiclusterservices"
CONTROLLER_GEN="sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0"

cd "${STAGING}"
export GOFLAGS=-trimpath GOWORK=off
go run "${CONTROLLER_GEN}" object paths=./apis/catalog/...
go run "${CONTROLLER_GEN}" crd paths=./apis/catalog/... output:crd:artifacts:config=crds/catalog
go run "${CONTROLLER_GEN}" object paths=./apis/inventory/...
go run "${CONTROLLER_GEN}" crd paths=./apis/inventory/... output:crd:artifacts:config=crds/inventory
go run "${CONTROLLER_GEN}" object paths=./apis/clusterselection/...
go run "${CONTROLLER_GEN}" crd paths=./apis/clusterselection/... output:crd:artifacts:config=crds/clusterselection
go test ./crds -run TestKustomizePatchesAreGenerated -update
