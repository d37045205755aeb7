// Package features registers the feature gates of this kube-proxy build in
// kube-proxy's own feature gate, so they are set with --feature-gates or the
// featureGates field of a KubeProxyConfiguration, like upstream gates.
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

var versionedFeatureGates = map[featuregate.Feature]featuregate.VersionedSpecs{
	MultiClusterServices: {
		{Version: version.MustParse("1.37"), Default: false, PreRelease: featuregate.Alpha},
	},
}

func init() {
	runtime.Must(utilfeature.DefaultMutableFeatureGate.AddVersioned(versionedFeatureGates))
}

// Enabled tells whether kube-proxy programs ServiceImports.
func Enabled() bool {
	return utilfeature.DefaultFeatureGate.Enabled(MultiClusterServices)
}
