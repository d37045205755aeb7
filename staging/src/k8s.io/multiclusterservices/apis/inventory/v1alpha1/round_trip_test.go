package v1alpha1

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Objects as the published CRD (cluster-inventory-api v1alpha1, its
// schema as of the accessProviders release) admits them, every field
// set, read into these types and written back: the same JSON, so that
// the controller's status write (one condition of its own) loses nothing
// a cluster manager wrote.
var published = []string{
	// Every field of the schema; a property without lastObservedTime
	// stays without it (omitzero: the published type writes null).
	`{
	  "apiVersion": "multicluster.x-k8s.io/v1alpha1",
	  "kind": "ClusterProfile",
	  "metadata": {"name": "east", "namespace": "fleet", "labels": {"x-k8s.io/cluster-manager": "ocm"}, "resourceVersion": "7", "generation": 2},
	  "spec": {"displayName": "East", "clusterManager": {"name": "ocm"}},
	  "status": {
	    "conditions": [
	      {"type": "ControlPlaneHealthy", "status": "True", "reason": "Healthy", "message": "", "lastTransitionTime": "2026-11-26T10:00:00Z", "observedGeneration": 2},
	      {"type": "Joined", "status": "True", "reason": "Joined", "message": "joined", "lastTransitionTime": "2026-11-26T09:00:00Z"}
	    ],
	    "version": {"kubernetes": "v1.37.2"},
	    "properties": [
	      {"name": "cluster.clusterset.k8s.io", "value": "east", "lastObservedTime": "2026-11-26T10:01:00Z"},
	      {"name": "location", "value": "eu-west"}
	    ],
	    "accessProviders": [{
	      "name": "token",
	      "cluster": {
	        "server": "https://192.0.2.1:6443/k8s/clusters/c-1",
	        "tls-server-name": "api.east",
	        "insecure-skip-tls-verify": true,
	        "certificate-authority": "/etc/ca.crt",
	        "certificate-authority-data": "LS0tLS1CRUdJTi0tLS0t",
	        "proxy-url": "socks5://192.0.2.9:1080",
	        "disable-compression": true,
	        "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"audience": "east", "nested": {"a": [1, 2]}}}]
	      }
	    }],
	    "credentialProviders": [{"name": "google", "cluster": {"server": "https://connectgateway.example/v1/east"}}]
	  }
	}`,
	// The least the schema requires; conditions is serialized even when
	// empty (no omitempty in the published type), as null.
	`{"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "min"}, "spec": {"clusterManager": {"name": "karmada"}}, "status": {"conditions": null, "version": {}}}`,
}

func TestPublishedObjectsRoundTrip(t *testing.T) {
	for _, in := range published {
		var want map[string]any
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		var cp ClusterProfile
		if err := json.Unmarshal([]byte(in), &cp); err != nil {
			t.Fatal(err)
		}
		// Through a deep copy too: what an informer's cache hands out.
		out, err := json.Marshal(cp.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		// metadata.creationTimestamp: null is metav1's own addition.
		delete(got["metadata"].(map[string]any), "creationTimestamp")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s changed on the way through (-published +written):\n%s", cp.Name, diff)
		}
	}
}
