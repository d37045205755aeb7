package inventory

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
)

// TestDecideListing: what a listing settles before the member's server is
// asked.
func TestDecideListing(t *testing.T) {
	joined := &known{id: "a", hash: "h1", state: Joined}
	for _, tc := range []struct {
		name    string
		k       *known
		l       listing
		context bool
		want    decision
		settled bool
	}{
		{name: "a joined member delisted leaves and is forgotten", k: joined, l: listing{gone: true},
			want: decision{leave: "its secret was deleted", forget: true}, settled: true},
		{name: "a member never joined, delisted, is forgotten", k: &known{state: Refused}, l: listing{gone: true},
			want: decision{forget: true}, settled: true},
		{name: "a listing gone that was never seen: nothing", l: listing{gone: true}, settled: true},
		{name: "a context not listed at start-up is none of the inventory's", context: true, l: listing{hash: "h1"}, settled: true},
		{name: "not now: a joined member leaves and waits", k: joined, l: listing{notNow: "ClusterProfile says ControlPlaneHealthy=False"},
			want: decision{leave: "ClusterProfile says ControlPlaneHealthy=False", state: Pending, message: "ClusterProfile says ControlPlaneHealthy=False"}, settled: true},
		{name: "not now: a new listing waits", l: listing{notNow: "not joined"},
			want: decision{state: Pending, message: "not joined"}, settled: true},
		{name: "otherwise the server is asked", k: joined, l: listing{hash: "h1"}},
		{name: "a new listing: the server is asked", l: listing{hash: "h1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, settled := decideListing("secret/mcs-system/a", tc.k, tc.l, tc.context)
			if settled != tc.settled {
				t.Errorf("settled = %v, want %v", settled, tc.settled)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(decision{})); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideAnswer: what the member's answer decides, with every branch
// of join, stay, leave and refuse.
func TestDecideAnswer(t *testing.T) {
	joined := known{id: "a", hash: "h1", props: "p1", state: Joined}
	down := &topology.UnreachableError{Err: errors.New("connection refused")}
	mismatch := fmt.Errorf("%w: it joined as cluster \"a\"", ErrIDMismatch)
	forbidden := errors.New("forbidden")
	for _, tc := range []struct {
		name   string
		k      known
		l      listing
		id     string
		err    error
		others others
		want   decision
	}{
		{name: "a new member joins", l: listing{hash: "h1"}, id: "a", want: decision{join: true}},
		{name: "unchanged: nothing", k: joined, l: listing{hash: "h1", props: "p1"}, id: "a", want: decision{}},
		{name: "unchanged but its profile's properties changed: selection planned again", k: joined, l: listing{hash: "h1", props: "p2"}, id: "a",
			want: decision{propertiesChanged: true}},
		{name: "new credentials, same cluster: joins again with them", k: joined, l: listing{hash: "h2", props: "p1"}, id: "a", want: decision{join: true}},
		{name: "the operator states another ID: leaves, joins as that one", k: joined, l: listing{hash: "h2"}, id: "b",
			want: decision{leave: `the operator states cluster ID "b" for it now`, join: true}},
		{name: "its ID is another listing's: refused", l: listing{hash: "h1"}, id: "a", others: others{holder: "secret/mcs-system/other"},
			want: decision{state: Refused, message: takenMessage("a", "secret/mcs-system/other")}},
		{name: "a profile of a cluster another manager's profile serves (the same inventory member ID): pending, not refused",
			l: listing{hash: "h1", memberID: "m1"}, id: "a", others: others{holder: "profile/fleet/ocm-a", twin: "profile/fleet/ocm-a", twinID: "a"},
			want: decision{state: Pending, message: `cluster a is served through profile/fleet/ocm-a, the profile with the same multicluster.x-k8s.io/inventory-member-id=m1; this one takes over if that one goes`}},
		{name: "two profiles with one inventory member ID reach two clusters: refused",
			l: listing{hash: "h1", memberID: "m1"}, id: "b", others: others{twin: "profile/fleet/ocm-a", twinID: "a"},
			want: decision{state: Refused, message: `profile/fleet/ocm-a carries the same multicluster.x-k8s.io/inventory-member-id=m1 but is cluster "a", and this listing's server answers for cluster "b": the two profiles say they are one cluster`}},
		{name: "the twin has no ID yet: joins", l: listing{hash: "h1", memberID: "m1"}, id: "a", others: others{twin: "profile/fleet/ocm-a"},
			want: decision{join: true}},
		{name: "its ID is held by a profile with another inventory member ID: refused as taken",
			l: listing{hash: "h1", memberID: "m1"}, id: "a", others: others{holder: "profile/fleet/x"},
			want: decision{state: Refused, message: takenMessage("a", "profile/fleet/x")}},
		{name: "a joined member renames itself: leaves, refused", k: joined, l: listing{hash: "h1"}, err: mismatch,
			want: decision{leave: mismatch.Error(), state: Refused, message: mismatch.Error()}},
		{name: "a joined member loses its ID: leaves, refused", k: joined, l: listing{hash: "h1"}, err: topology.ErrNoClusterID,
			want: decision{leave: topology.ErrNoClusterID.Error(), state: Refused, message: topology.ErrNoClusterID.Error()}},
		{name: "a joined member out of reach stays", k: joined, l: listing{hash: "h1"}, err: down,
			want: decision{stays: true, message: down.Error()}},
		{name: "new credentials out of reach: pending, retried, the member stays as it was", k: joined, l: listing{hash: "h2"}, err: down,
			want: decision{state: Pending, message: down.Error(), retry: true}},
		{name: "a new listing refused by its server: refused, not retried", l: listing{hash: "h1"}, err: forbidden,
			want: decision{state: Refused, message: "forbidden"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decideAnswer(tc.k, tc.l, tc.id, tc.err, tc.others)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(decision{})); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideJoined: joined, refused by the controller (waits for a
// change), or its caches too slow (retried).
func TestDecideJoined(t *testing.T) {
	if got := decideJoined("a", nil, false); got != (decision{state: Joined, message: "cluster a is a member of the clusterset", propertiesChanged: true}) {
		t.Errorf("joined: %+v", got)
	}
	refused := errors.New("its Service ranges overlap cluster b's")
	if got := decideJoined("a", refused, false); got != (decision{state: Refused, message: refused.Error()}) {
		t.Errorf("refused: %+v", got)
	}
	if got := decideJoined("a", errors.New("caches not synced"), true); got != (decision{state: Pending, message: "caches not synced", retry: true}) {
		t.Errorf("timed out: %+v", got)
	}
}
