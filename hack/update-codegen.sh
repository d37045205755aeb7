#!/usr/bin/env bash
# Regenerates what is generated from the Go types of the staging module's
# own APIs (the service catalog, apis/catalog/v1alpha1, and the Cluster
# Inventory API's ClusterProfile, apis/inventory/v1alpha1, written here from
# the published API; the fields cluster selection adds to ServiceExport
# and ServiceImport, apis/clusterselection/v1beta1; pull mode's hub API,
# apis/hub/v1alpha1): DeepCopy methods (zz_generated.deepcopy.go) and the
# CustomResourceDefinitions (crds/catalog/, crds/inventory/,
# crds/clusterselection/, crds/hub/), with
# controller-gen at the version pinned here; and the catalog's typed
# clientset, listers and informers (client/catalog/), with
# k8s.io/code-generator at the version of client-go. The output is
# committed; `go test ./crds` in the staging module fails when the CRDs
# are stale.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STAGING="${ROOT}/staging/src/k8s.io/multiclusterservices"
CONTROLLER_GEN="sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0"
CODE_GENERATOR="k8s.io/code-generator/cmd"
CODE_GENERATOR_VERSION="v0.37.2"
PKG="k8s.io/multiclusterservices"

cd "${STAGING}"
export GOFLAGS=-trimpath GOWORK=off
go run "${CONTROLLER_GEN}" object paths=./apis/catalog/...
go run "${CONTROLLER_GEN}" crd paths=./apis/catalog/... output:crd:artifacts:config=crds/catalog
# The catalog's clients: what the mcs-controller reads and writes the hub's
# catalog with (the output directory is emptied first, so that a type
# renamed or removed leaves no client behind).
CATALOG_CLIENT=client/catalog
rm -rf "${CATALOG_CLIENT}"
go run "${CODE_GENERATOR}/client-gen@${CODE_GENERATOR_VERSION}" --go-header-file /dev/null \
	--clientset-name versioned --input-base "${PKG}/apis" --input catalog/v1alpha1 \
	--output-dir "${CATALOG_CLIENT}/clientset" --output-pkg "${PKG}/${CATALOG_CLIENT}/clientset"
go run "${CODE_GENERATOR}/lister-gen@${CODE_GENERATOR_VERSION}" --go-header-file /dev/null \
	--output-dir "${CATALOG_CLIENT}/listers" --output-pkg "${PKG}/${CATALOG_CLIENT}/listers" \
	"${PKG}/apis/catalog/v1alpha1"
go run "${CODE_GENERATOR}/informer-gen@${CODE_GENERATOR_VERSION}" --go-header-file /dev/null \
	--versioned-clientset-package "${PKG}/${CATALOG_CLIENT}/clientset/versioned" \
	--listers-package "${PKG}/${CATALOG_CLIENT}/listers" \
	--output-dir "${CATALOG_CLIENT}/informers" --output-pkg "${PKG}/${CATALOG_CLIENT}/informers" \
	"${PKG}/apis/catalog/v1alpha1"
go run "${CONTROLLER_GEN}" object paths=./apis/inventory/...
go run "${CONTROLLER_GEN}" crd paths=./apis/inventory/... output:crd:artifacts:config=crds/inventory
go run "${CONTROLLER_GEN}" object paths=./apis/clusterselection/...
go run "${CONTROLLER_GEN}" crd paths=./apis/clusterselection/... output:crd:artifacts:config=crds/clusterselection
go run "${CONTROLLER_GEN}" object paths=./apis/hub/...
go run "${CONTROLLER_GEN}" crd paths=./apis/hub/... output:crd:artifacts:config=crds/hub
go test ./crds -run TestKustomizePatchesAreGenerated -update
# The Helm chart's CRDs are the ones crds.All gives (test/kindconfig).
(cd "${ROOT}" && MCS_UPDATE_CHART=1 go test ./test/kindconfig -run '^TestChartCRDs$' -count=1)
