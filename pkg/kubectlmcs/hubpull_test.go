package kubectlmcs

import (
	"bytes"
	"strings"
	"testing"

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
