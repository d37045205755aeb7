package multicluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// TestLocalClusterID: the endpoints of this cluster's own export keep their
// node names once the proxier knows which cluster it runs in, and lose
// them again when it no longer does; another cluster's never have them.
func TestLocalClusterID(t *testing.T) {
	f := newFixture(t)
	p := f.proxier
	withNode := func(s *discoveryv1.EndpointSlice, node string) *discoveryv1.EndpointSlice {
		for i := range s.Endpoints {
			s.Endpoints[i].NodeName = &node
		}
		return s
	}
	p.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.250.0.10"))
	DeliverSlice(p, withNode(mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1"), "node-1"))
	DeliverSlice(p, withNode(mcsSlice("ns", "web-b", "web", "cluster-b", "10.2.0.1"), "node-1"))
	f.expectCalls("ServiceAdd ns/web.clusterset", "SliceAdd ns/web-a", "SliceAdd ns/web-b")
	nodeNames := func() map[string]string {
		out := map[string]string{}
		for _, key := range []string{"ns/web-a", "ns/web-b"} {
			for _, ep := range f.provider.slices[key].Endpoints {
				if ep.NodeName != nil {
					out[key] = *ep.NodeName
				}
			}
		}
		return out
	}
	if got := nodeNames(); len(got) != 0 {
		t.Errorf("node names programmed while the cluster ID is unknown: %v", got)
	}

	p.SetLocalClusterID("cluster-a")
	f.expectCalls("SliceUpdate ns/web-a")
	if diff := cmp.Diff(map[string]string{"ns/web-a": "node-1"}, nodeNames()); diff != "" {
		t.Errorf("node names in cluster-a (-want +got):\n%s", diff)
	}
	if p.LocalClusterID() != "cluster-a" {
		t.Errorf("LocalClusterID() = %q", p.LocalClusterID())
	}
	// The same ID again changes nothing.
	p.SetLocalClusterID("cluster-a")
	f.expectCalls()
	// A slice arriving later is translated with the ID.
	DeliverSlice(p, withNode(mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.2"), "node-2"))
	f.expectCalls("SliceUpdate ns/web-a")
	if diff := cmp.Diff(map[string]string{"ns/web-a": "node-2"}, nodeNames()); diff != "" {
		t.Errorf("node names after an update (-want +got):\n%s", diff)
	}

	p.SetLocalClusterID("")
	f.expectCalls("SliceUpdate ns/web-a")
	if got := nodeNames(); len(got) != 0 {
		t.Errorf("node names programmed after the cluster ID went: %v", got)
	}
}
