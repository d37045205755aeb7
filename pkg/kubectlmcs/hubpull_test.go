package kubectlmcs

import (
	"bytes"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
)

// TestHubMember: `kubectl mcs hub member ID` prints the member's part of
// pull mode's hub, object by object as pull.MemberObjects gives it, and
// refuses a cluster ID that cannot be a member's namespace of its own.
func TestHubMember(t *testing.T) {
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &bytes.Buffer{}})
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), err
	}
	got, err := run("hub", "member", "cluster-a")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := pull.MemberObjects("cluster-a", pull.DefaultMemberLimits)
	docs := strings.Split(got, "\n---\n")
	if len(docs) != len(want) {
		t.Fatalf("%d objects printed, want %d:\n%s", len(docs), len(want), got)
	}
	for i, doc := range docs {
		w, _ := yaml.Marshal(want[i])
		if strings.TrimSpace(doc) != strings.TrimSpace(string(w)) {
			t.Errorf("object %d:\n%s\nwant\n%s", i, doc, w)
		}
	}
	if !strings.Contains(got, "name: mcs-member-agent-cluster-a\n  namespace: mcs-plan") {
		t.Errorf("no binding to read the plan:\n%s", got)
	}
	if out, err := run("hub", "member", "cluster-a", "--max-exports=7", "--max-endpointslices=30"); err != nil ||
		!strings.Contains(out, "count/memberexports.hub.multiclusterservices.k8s.io: \"7\"") || !strings.Contains(out, "count/endpointslices.discovery.k8s.io: \"30\"") {
		t.Errorf("hub member --max-exports=7 --max-endpointslices=30: %v\n%s", err, out)
	}
	if out, err := run("hub", "member", "cluster-a", "--max-exports=0"); err == nil || out != "" {
		t.Errorf("hub member --max-exports=0: %q, %v; want refused, nothing printed", out, err)
	}
	if out, err := run("hub", "member", "kube-system"); err == nil || out != "" {
		t.Errorf("hub member kube-system: %q, %v; want refused, nothing printed", out, err)
	}
}

// TestPullMembers: the hub's members as an operator reads them — only
// namespaces labelled with their own name are members; a Lease older than
// the TTL is expired; a member counts as an importer of the planned names
// that list it.
func TestPullMembers(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	member := func(name, label string) v1.Namespace {
		return v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{pull.LabelMemberCluster: label}}}
	}
	lease := func(ago time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now.Add(-ago)}}}
	}
	plan := func(in ...string) hubv1alpha1.ServicePlan {
		return hubv1alpha1.ServicePlan{Spec: hubv1alpha1.ServicePlanSpec{Import: &hubv1alpha1.PlannedImport{}, ImportedIn: in}}
	}
	got := pullMembers(
		[]v1.Namespace{member("cluster-b", "cluster-b"), member("cluster-a", "cluster-a"), member("impostor", "cluster-a"), member("cluster-c", "cluster-c")},
		map[string]bool{"cluster-a": true, "cluster-b": true},
		map[string]*coordinationv1.Lease{"cluster-a": lease(5 * time.Second), "cluster-b": lease(time.Minute)},
		map[string]int{"cluster-a": 3, "impostor": 9},
		[]hubv1alpha1.ServicePlan{plan("cluster-a", "cluster-b"), plan("cluster-a"), {Spec: hubv1alpha1.ServicePlanSpec{ImportedIn: []string{"cluster-b"}}}},
		40*time.Second, now)
	var out bytes.Buffer
	if err := printPullMembers(&out, got, now, false); err != nil {
		t.Fatal(err)
	}
	want := `CLUSTER     AGENT        LEASE RENEWED       EXPORTS   IMPORTS
cluster-a   publishing   5s ago              3         2
cluster-b   publishing   60s ago (expired)   0         1
cluster-c   none         never               0         0
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
