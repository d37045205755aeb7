package multicluster

import (
	"fmt"
	"slices"
	"testing"

	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
)

// The first full state is chosen over once per import, not once per
// slice: before the informers have synced, an import's S slices listed one
// after the other would each choose over all of them (S² per import, 3.3×
// the Services' feed at 100 sources). The import's own event chooses, the
// sync once more over every slice, and from then on each slice's event.
// What is programmed is the same: only the chosen cluster's slices.
func TestClusterSelectionChoosesOncePerImportUntilSynced(t *testing.T) {
	for _, sources := range []int{4, 40} {
		t.Run(fmt.Sprint(sources), func(t *testing.T) {
			f := newFixture(t)
			p := f.proxier
			p.SetClusterSelection(true)
			p.OnServiceImportSelected(serviceImport("ns", "api", 0, "10.250.0.10"), []csv1beta1.ClusterSelectorResult{{Clusters: []string{"cluster-1"}}})
			for i := 0; i < sources; i++ {
				DeliverSlice(p, mcsSlice("ns", fmt.Sprintf("api-%d", i), "api", fmt.Sprintf("cluster-%d", i), fmt.Sprintf("10.1.%d.1", i)))
			}
			if got := p.im.choices; got != 1 {
				t.Errorf("%d choices while %d slices were listed, want 1 (the import's own event)", got, sources)
			}
			p.OnServiceSynced()
			p.OnEndpointSlicesSynced()
			p.MultiClusterSynced()
			if got := p.im.choices; got != 2 {
				t.Errorf("%d choices once synced, want 2", got)
			}
			var held []string
			for key := range f.provider.slices {
				held = append(held, key)
			}
			if !slices.Equal(held, []string{"ns/api-1"}) {
				t.Errorf("the proxier holds %v once synced, want only the chosen cluster-1's slice", held)
			}
			DeliverSlice(p, unready(mcsSlice("ns", "api-1", "api", "cluster-1", "10.1.1.1")))
			if got := p.im.choices; got != 3 {
				t.Errorf("%d choices after a slice's change once synced, want 3", got)
			}
		})
	}
}
