package features

import (
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
)

func TestGatesAreAlphaAndOff(t *testing.T) {
	for _, f := range []featuregate.Feature{MultiClusterServices, MultiClusterServiceClusterSelection} {
		spec, ok := utilfeature.DefaultMutableFeatureGate.GetAll()[f]
		if !ok || spec.Default || spec.PreRelease != featuregate.Alpha {
			t.Errorf("%s: registered %v, %+v; want alpha, off", f, ok, spec)
		}
	}
	if ClusterSelectionEnabled() {
		t.Errorf("cluster selection on by default")
	}
}

// Cluster selection acts only on what kube-proxy programs: without
// MultiClusterServices it is off whatever its own gate says.
func TestClusterSelectionNeedsMultiClusterServices(t *testing.T) {
	set := func(m map[string]bool) {
		t.Helper()
		if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(m); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		set(map[string]bool{string(MultiClusterServices): false, string(MultiClusterServiceClusterSelection): false})
	})
	set(map[string]bool{string(MultiClusterServiceClusterSelection): true})
	if ClusterSelectionEnabled() {
		t.Errorf("enabled without MultiClusterServices")
	}
	set(map[string]bool{string(MultiClusterServices): true})
	if !ClusterSelectionEnabled() {
		t.Errorf("not enabled with both gates")
	}
}

// The controller's gates are alpha and off; MultiClusterServiceExportClusters
// is the controller's alone (kube-proxy has nothing to do with it).
func TestControllerGatesAreAlphaAndOff(t *testing.T) {
	gate := NewControllerFeatureGate()
	for _, f := range []featuregate.Feature{MultiClusterServiceClusterSelection, MultiClusterServiceExportClusters} {
		spec, ok := gate.GetAll()[f]
		if !ok || spec.Default || spec.PreRelease != featuregate.Alpha || gate.Enabled(f) {
			t.Errorf("%s: registered %v, %+v; want alpha, off", f, ok, spec)
		}
	}
	if err := gate.SetFromMap(map[string]bool{string(MultiClusterServiceExportClusters): true}); err != nil || !gate.Enabled(MultiClusterServiceExportClusters) {
		t.Errorf("MultiClusterServiceExportClusters cannot be turned on: %v", err)
	}
	if _, ok := utilfeature.DefaultMutableFeatureGate.GetAll()[MultiClusterServiceExportClusters]; ok {
		t.Errorf("kube-proxy's gates hold MultiClusterServiceExportClusters")
	}
}
