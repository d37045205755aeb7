// Package features registers the feature gates of this kube-proxy build in
// kube-proxy's own feature gate, so they are set with --feature-gates or the
// featureGates field of a KubeProxyConfiguration, like upstream gates; and
// gives the mcs-controller the gates it shares, for its own --feature-gates.
package features

import (
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
)

// MultiClusterServices makes kube-proxy program the clusterset IPs of
// ServiceImports (KEP-1645, Multi-Cluster Services API) over the
// EndpointSlices of every exporting cluster.
const MultiClusterServices featuregate.Feature = "MultiClusterServices"

// MultiClusterServiceClusterSelection is cluster selection (KEP-5939):
// the mcs-controller resolves ServiceExport.spec.clusterSelectors into
// ServiceImport.spec.clusterSelectors and, per importing cluster,
// status.clusterSelectorResults; kube-proxy sends an import's traffic to
// the first result with a usable endpoint. Off, neither reads nor writes
// those fields. In kube-proxy it needs MultiClusterServices too.
const MultiClusterServiceClusterSelection featuregate.Feature = "MultiClusterServiceClusterSelection"

// MultiClusterServiceExportClusters has the mcs-controller report, in
// each ServiceExport's status.clusters, the member clusters the Service
// is exported to (imported in), as proposed for KEP-1645 (exporting to
// any set of clusters; informational only). mcs-api does not have the
// field yet: it is written only with this gate on and the CRD from
// deploy/crds, which serves it. Controller only.
const MultiClusterServiceExportClusters featuregate.Feature = "MultiClusterServiceExportClusters"

// oldestRelease is the oldest Kubernetes release kube-proxy is built for
// (docs/kubernetes-versions.md). The gates are alpha from it on: a
// versioned gate is PreAlpha, and cannot be turned on, in a binary whose
// Kubernetes version is older than its first spec.
var oldestRelease = version.MustParse("1.34")

var versionedFeatureGates = map[featuregate.Feature]featuregate.VersionedSpecs{
	MultiClusterServices: {
		{Version: oldestRelease, Default: false, PreRelease: featuregate.Alpha},
	},
	MultiClusterServiceClusterSelection: clusterSelectionSpecs,
}

var clusterSelectionSpecs = featuregate.VersionedSpecs{
	{Version: oldestRelease, Default: false, PreRelease: featuregate.Alpha},
}

func init() {
	runtime.Must(utilfeature.DefaultMutableFeatureGate.AddVersioned(versionedFeatureGates))
}

// Enabled tells whether kube-proxy programs ServiceImports.
func Enabled() bool {
	return utilfeature.DefaultFeatureGate.Enabled(MultiClusterServices)
}

// ClusterSelectionEnabled tells whether kube-proxy applies cluster
// selection results; only with MultiClusterServices on.
func ClusterSelectionEnabled() bool {
	return Enabled() && utilfeature.DefaultFeatureGate.Enabled(MultiClusterServiceClusterSelection)
}

// NewControllerFeatureGate returns the mcs-controller's own feature gate
// (its --feature-gates), holding the gates it shares with kube-proxy.
func NewControllerFeatureGate() featuregate.MutableVersionedFeatureGate {
	gate := featuregate.NewVersionedFeatureGate(version.MustParse("1.37"))
	runtime.Must(gate.AddVersioned(map[featuregate.Feature]featuregate.VersionedSpecs{
		MultiClusterServiceClusterSelection: clusterSelectionSpecs,
		MultiClusterServiceExportClusters: {
			{Version: version.MustParse("1.37"), Default: false, PreRelease: featuregate.Alpha},
		},
	}))
	return gate
}
