package kubectlmcs

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/multiclusterservices/export"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/inventory"
)

// The hub's keys are the controller's.
func TestHubKeysAreTheControllers(t *testing.T) {
	if export.ConditionClusterSetMember != inventory.ConditionMember || export.LabelMember != inventory.DefaultSelector {
		t.Errorf("kubectl mcs reads %s and %s, the controller writes %s and selects %s",
			export.ConditionClusterSetMember, export.LabelMember, inventory.ConditionMember, inventory.DefaultSelector)
	}
}

// A member Secret's state is the controller's latest event on it; a
// Secret it said nothing of yet is unknown; a profile's is its
// ClusterSetMember condition, and its cluster its cluster.clusterset.k8s.io
// property, as served (the list-map of v1alpha2 or the list of v1alpha1).
func TestGatherHub(t *testing.T) {
	secret := func(name, id string) *v1.Secret {
		s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "mcs-system", Labels: map[string]string{export.LabelMember: "true"}}}
		if id != "" {
			s.Annotations = map[string]string{export.AnnotationMemberClusterID: id}
		}
		return s
	}
	event := func(name, secret, reason, message string, at time.Time) *v1.Event {
		return &v1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "mcs-system"}, Reason: reason, Message: message,
			InvolvedObject: v1.ObjectReference{Kind: "Secret", Name: secret}, EventTime: metav1.NewMicroTime(at)}
	}
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	kube := fake.NewClientset(
		secret("cluster-a", "cluster-a"), secret("cluster-b", ""), secret("cluster-c", ""),
		event("e1", "cluster-a", "MemberPending", "its server does not answer", t0),
		event("e2", "cluster-a", "MemberJoined", "joined as cluster-a", t0.Add(time.Minute)),
		event("e3", "cluster-b", "MemberJoined", "joined", t0),
		event("e4", "cluster-b", "MemberRefused", `it answers as cluster "cluster-a", which another member holds`, t0.Add(time.Minute)),
	)
	members, note := hubSecrets(t.Context(), &member{Context: "hub", Kube: kube}, "mcs-system", export.LabelMember)
	want := []HubMember{
		{Source: "secret", Name: "mcs-system/cluster-a", Cluster: "cluster-a", State: "joined"},
		{Source: "secret", Name: "mcs-system/cluster-b", State: "refused", Message: `it answers as cluster "cluster-a", which another member holds`},
		{Source: "secret", Name: "mcs-system/cluster-c", State: "unknown"},
	}
	if diff := cmp.Diff(want, members); diff != "" || note != "" {
		t.Errorf("secrets (-want +got):\n%s%s", diff, note)
	}

	profile := func(name string, properties []any, conditions ...any) unstructured.Unstructured {
		return unstructured.Unstructured{Object: map[string]any{"apiVersion": "multicluster.x-k8s.io/v1alpha2", "kind": "ClusterProfile",
			"metadata": map[string]any{"name": name, "namespace": "fleet"},
			"status":   map[string]any{"properties": properties, "conditions": conditions}}}
	}
	id := []any{map[string]any{"name": "region.topology.k8s.io", "value": "eu"}, map[string]any{"name": "cluster.clusterset.k8s.io", "value": "cluster-x"}}
	for _, tc := range []struct {
		profile unstructured.Unstructured
		want    HubMember
	}{
		{profile("joined", id, map[string]any{"type": export.ConditionClusterSetMember, "status": "True", "reason": "Joined", "message": "joined"}),
			HubMember{Source: "profile", Name: "fleet/joined", Cluster: "cluster-x", State: "joined"}},
		{profile("pending", nil,
			map[string]any{"type": "ControlPlaneHealthy", "status": "False", "reason": "Unhealthy"},
			map[string]any{"type": export.ConditionClusterSetMember, "status": "False", "reason": "Pending", "message": "its profile says ControlPlaneHealthy=False"}),
			HubMember{Source: "profile", Name: "fleet/pending", State: "pending", Message: "its profile says ControlPlaneHealthy=False"}},
		{profile("new", nil), HubMember{Source: "profile", Name: "fleet/new", State: "unknown"}},
	} {
		if diff := cmp.Diff(tc.want, profileMember(tc.profile)); diff != "" {
			t.Errorf("profile %s (-want +got):\n%s", tc.profile.GetName(), diff)
		}
	}
}

// The hub's view says which view it is and why each listing not joined is
// not; --wait waits for those, and for a hub that does not answer, not
// for an API the hub does not serve.
func TestHubLinesAndWaiting(t *testing.T) {
	view := HubView{Context: "hub", Members: []HubMember{
		{Source: "profile", Name: "fleet/cluster-a", Cluster: "cluster-a", State: "joined"},
		{Source: "secret", Name: "mcs-system/cluster-b", State: "refused", Message: "it answers as another cluster"},
	}, Notes: []string{"the hub serves no ClusterProfile API"}}
	want := []string{
		"members as the mcs-controller sees them in the hub hub:",
		"SOURCE   NAME                  CLUSTER    STATE",
		"profile  fleet/cluster-a       cluster-a  joined",
		"secret   mcs-system/cluster-b  -          refused",
		"secret mcs-system/cluster-b: refused: it answers as another cluster",
		"the hub serves no ClusterProfile API",
	}
	if diff := cmp.Diff(want, HubLines(view)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"hub hub: secret mcs-system/cluster-b: refused"}, HubWaiting(view)); diff != "" {
		t.Errorf("waiting (-want +got):\n%s", diff)
	}
	if got := HubWaiting(HubView{Context: "hub", Unreachable: "connection refused"}); !cmp.Equal(got, []string{"hub hub: unreachable"}) {
		t.Errorf("waiting for an unreachable hub: %v", got)
	}
}
