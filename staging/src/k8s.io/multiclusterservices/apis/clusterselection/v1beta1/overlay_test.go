package v1beta1

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Decoding a whole ServiceImport into the overlay reads only the KEP's
// fields, and the overlay writes back only them (a merge patch of its own).
func TestOverlayReadsOnlyItsFields(t *testing.T) {
	whole := `{"apiVersion":"multicluster.x-k8s.io/v1beta1","kind":"ServiceImport","metadata":{"name":"api","namespace":"ns","generation":4},
	"spec":{"type":"ClusterSetIP","ips":["242.0.0.1"],"ports":[{"port":80}],
	  "clusterSelectors":[{"propertySelector":{"matchExpressions":[{"key":"cluster.clusterset.k8s.io","operator":"In","values":["@SameAsImporter@"]}]}},
	                      {"propertySelector":{"matchProperties":{"region.topology.k8s.io":"@SameAsImporter@"}}}]},
	"status":{"clusters":[{"cluster":"cluster-a"}],"observedGeneration":4,"clusterSelectorResults":[{"clusters":["cluster-a"]},{}]}}`
	var si ServiceImport
	if err := json.Unmarshal([]byte(whole), &si); err != nil {
		t.Fatal(err)
	}
	want := ServiceImportSpec{ClusterSelectors: []ClusterSelector{
		{PropertySelector: &PropertySelector{MatchExpressions: []PropertySelectorRequirement{{Key: "cluster.clusterset.k8s.io", Operator: PropertySelectorOpIn, Values: []string{SameAsImporter}}}}},
		{PropertySelector: &PropertySelector{MatchProperties: map[string]string{"region.topology.k8s.io": SameAsImporter}}},
	}}
	if diff := cmp.Diff(want, si.Spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	if si.Status.ObservedGeneration != 4 || len(si.Status.ClusterSelectorResults) != 2 || si.Status.ClusterSelectorResults[1].Clusters != nil {
		t.Errorf("status %+v", si.Status)
	}
	out, err := json.Marshal(ServiceImport{Status: si.Status})
	if err != nil {
		t.Fatal(err)
	}
	const wantJSON = `{"metadata":{},"spec":{},"status":{"observedGeneration":4,"clusterSelectorResults":[{"clusters":["cluster-a"]},{}]}}`
	if string(out) != wantJSON {
		t.Errorf("wrote %s, want %s", out, wantJSON)
	}
	if c := si.DeepCopy(); !cmp.Equal(c, &si) {
		t.Errorf("DeepCopy differs")
	}
}
