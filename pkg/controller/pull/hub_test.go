package pull

import (
	"strings"
	"testing"
)

// TestCheckHubIdentity: an agent publishes only as the agent of the hub
// namespace its own ClusterProperty names; any other identity is refused
// at the start, saying which is which.
func TestCheckHubIdentity(t *testing.T) {
	for _, tc := range []struct {
		username, clusterID string
		want                string // a part of the refusal; "" for none
	}{
		{"system:serviceaccount:cluster-a:mcs-member-agent", "cluster-a", ""},
		// A member whose administrator renamed it, or was handed another
		// member's hub token.
		{"system:serviceaccount:cluster-b:mcs-member-agent", "cluster-a", `cluster "cluster-b"'s agent`},
		{"system:serviceaccount:cluster-a:default", "cluster-a", "not as a member agent"},
		{"system:serviceaccount:cluster-a:mcs-member-agent:x", "cluster-a", "not as a member agent"},
		{"kubernetes-admin", "cluster-a", "not as a member agent"},
		{"system:serviceaccount:mcs-plan:mcs-member-agent", "mcs-plan", "keeps for itself"},
		{"system:serviceaccount:Cluster-A:mcs-member-agent", "Cluster-A", "cannot name a hub namespace"},
	} {
		err := CheckHubIdentity(tc.username, tc.clusterID)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s as %s: %v, want accepted", tc.clusterID, tc.username, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s as %s: %v, want refused with %q", tc.clusterID, tc.username, err, tc.want)
		}
	}
}
