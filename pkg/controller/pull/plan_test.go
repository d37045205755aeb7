package pull

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"
	"k8s.io/multiclusterservices/export"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// TestPlanSlice: a slice members are to hold goes into the plan without
// a label of KEP-1645's (a hub that is a member would take it for an
// import of its own) and comes back, under the agent's own manager, as
// it was planned, with when its source changed, and whether it holds its
// source's entry points.
func TestPlanSlice(t *testing.T) {
	trigger := time.Date(2026, 12, 2, 10, 0, 0, 123456789, time.UTC)
	for i, name := range []string{"web-cluster-a-abcde", strings.Repeat("x", 250), "web-cluster-a-ingress-ipv4"} {
		entryPoints := i == 2
		imported := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: "demo",
				Labels: export.ImportedSliceLabels("web", "cluster-a", "mcs-controller.multicluster.x-k8s.io"),
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		}
		ps := PlanSlice(imported, trigger, entryPoints)
		if IsEntryPoints(ps) != entryPoints {
			t.Errorf("%s read back as entry points: %v, want %v", name, IsEntryPoints(ps), entryPoints)
		}
		if ps.Namespace != PlanNamespace || len(ps.Name) > 253 {
			t.Errorf("planned as %s/%s, want a name of at most 253 characters in %s", ps.Namespace, ps.Name, PlanNamespace)
		}
		for k := range ps.Labels {
			if strings.Contains(k, "kubernetes.io/service-name") || k == mcsv1beta1.LabelSourceCluster {
				t.Errorf("the plan's slice carries %s, which a hub's kube-proxy or CoreDNS reads", k)
			}
		}
		back, when, err := SliceOfPlan(ps, "member-writer")
		if err != nil {
			t.Fatal(err)
		}
		want := imported.DeepCopy()
		want.Labels = export.ImportedSliceLabels("web", "cluster-a", "member-writer")
		if diff := cmp.Diff(want, back); diff != "" {
			t.Errorf("read back (-planned +read):\n%s", diff)
		}
		if !when.Equal(trigger) {
			t.Errorf("the source's change read back at %v, want %v", when, trigger)
		}
	}
	if _, when, err := SliceOfPlan(PlanSlice(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "demo", Labels: export.ImportedSliceLabels("web", "a", "m")}}, time.Time{}, false), "m"); err != nil || !when.IsZero() {
		t.Errorf("a slice of unknown change: %v at %v, want none known", err, when)
	}
	broken := PlanSlice(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "demo", Labels: export.ImportedSliceLabels("web", "a", "m")}}, time.Time{}, false)
	delete(broken.Labels, hubv1alpha1.LabelSourceCluster)
	if _, _, err := SliceOfPlan(broken, "m"); err == nil {
		t.Error("a plan's slice without its source cluster was read")
	}
}
