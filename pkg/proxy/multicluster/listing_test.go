package multicluster

import (
	"fmt"
	"slices"
	"testing"

	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	mcsproxy "k8s.io/multiclusterservices/proxy"
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

// Native names likewise: while the first full state is listed, an
// import's slices do not each decide its native name over all of them
// (S² per import, 10× the Services' feed at 50 sources); the import's own
// event and the local slice's decide, the sync once more, and from then
// on each slice's event. The decision is the same: a LocalFirst Service
// whose own endpoint is not ready serves every source's.
func TestNativeNamesDecidedOncePerImportUntilSynced(t *testing.T) {
	listing := map[int]int{}
	for _, sources := range []int{4, 40} {
		t.Run(fmt.Sprint(sources), func(t *testing.T) {
			f := newFixture(t)
			p := f.proxier
			p.SetLocalClusterID("cluster-local")
			p.OnServiceAdd(accepting("ns", "web"))
			p.OnEndpointSliceAdd(localSlice("ns", "web-local", "web", false, "10.3.0.1"))
			si := serviceImport("ns", "web", 0, "10.250.0.10")
			si.Annotations = map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.LocalFirst)}
			p.OnServiceImportUpsert(si)
			var remote []string
			for i := 0; i < sources; i++ {
				addr := fmt.Sprintf("10.1.%d.1", i)
				DeliverSlice(p, mcsSlice("ns", fmt.Sprintf("web-%d", i), "web", fmt.Sprintf("cluster-%d", i), addr))
				remote = append(remote, addr)
			}
			listing[sources] = p.im.nativePlans
			p.OnServiceSynced()
			p.OnEndpointSlicesSynced()
			p.MultiClusterSynced()
			if got := p.im.nativePlans - listing[sources]; got != 1 {
				t.Errorf("%d native-name decisions once synced, want 1", got)
			}
			// The local slice carries them, its own endpoint (not ready)
			// beside them.
			want := append(remote, "10.3.0.1")
			slices.Sort(want)
			if got := f.provider.endpointsOf("ns/web"); !slices.Equal(got, want) {
				t.Errorf("LocalFirst without a ready local endpoint: ns/web has %v once synced, want every source's and its own %v", got, want)
			}
			before := p.im.nativePlans
			DeliverSlice(p, mcsSlice("ns", "web-1", "web", "cluster-1", "10.1.1.2"))
			if got := p.im.nativePlans - before; got != 1 {
				t.Errorf("%d native-name decisions after a slice's change once synced, want 1", got)
			}
		})
	}
	if listing[4] != listing[40] || listing[4] > 4 {
		t.Errorf("native-name decisions while listing: %d at 4 sources, %d at 40; want a few, the same at both", listing[4], listing[40])
	}
}
