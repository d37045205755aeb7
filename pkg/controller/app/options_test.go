package app

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExportNamespaces(t *testing.T) {
	o := NewOptions()
	o.ExportNamespaces = []string{"cluster-b=team-b, shared", "cluster-c=", "cluster-a=*"}
	got, err := o.exportNamespaces()
	if err != nil {
		t.Fatal(err)
	}
	// cluster-c may export from no namespace at all; cluster-a from any
	// (a cluster not named, from none).
	want := map[string][]string{"cluster-a": {"*"}, "cluster-b": {"team-b", "shared"}, "cluster-c": nil}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range [][]string{{"team-b"}, {"=team-b"}, {"cluster-b=Team_B"}, {"cluster-b=a", "cluster-b=b"}} {
		o.ExportNamespaces = bad
		if err := o.Validate(); err == nil {
			t.Errorf("--export-namespaces %q accepted", bad)
		}
	}
}

func TestMemberClusterIDs(t *testing.T) {
	o := NewOptions()
	o.MemberClusterIDs = []string{"kind-mcs-a=cluster-a", " kind-mcs-b = cluster-b "}
	got, err := o.memberClusterIDs()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"kind-mcs-a": "cluster-a", "kind-mcs-b": "cluster-b"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Two contexts may not state one ID: the operator would hand one
	// cluster's name to two servers.
	for _, bad := range [][]string{{"a"}, {"a="}, {"=x"}, {"a=Not_An_ID"}, {"a=x", "a=y"}, {"a=x", "b=x"}} {
		o.MemberClusterIDs = bad
		if err := o.Validate(); err == nil {
			t.Errorf("--member-cluster-ids %q accepted", bad)
		}
	}
}
