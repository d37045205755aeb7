package inventory

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
)

// MergeProperties returns a member's cluster properties, the ones cluster
// selection (KEP-5939) matches: its own ClusterProperties (KEP-2149) and
// its ClusterProfile's status.properties, by name.
//
// Where both define a name, the profile's wins: it is the cluster
// manager's word, in the hub, while a member's ClusterProperty is written
// by the member's own administrator, who could otherwise claim a region
// to draw the traffic that selection sends by region. A member only adds
// the names its profile does not give. (The cluster ID is no exception:
// a profile whose ID disagrees with its cluster's is refused before.)
func MergeProperties(profile []inventoryv1alpha1.Property, own map[string]string) map[string]string {
	out := make(map[string]string, len(profile)+len(own))
	for name, value := range own {
		out[name] = value
	}
	for _, p := range profile {
		out[p.Name] = p.Value
	}
	return out
}

// ClusterProperties returns the merged cluster properties
// (MergeProperties) of the member with cluster ID id, reading its own
// ClusterProperties from its apiserver; a member not listed by a profile
// has its own only.
func (inv *Inventory) ClusterProperties(ctx context.Context, id string) (map[string]string, error) {
	inv.mu.Lock()
	var cfg = inv.configOf(id)
	var profile []inventoryv1alpha1.Property
	for _, e := range inv.entries {
		if e.id != id {
			continue
		}
		if u, ok := e.obj.(*unstructured.Unstructured); ok && strings.HasPrefix(e.key, profilePrefix) {
			cp := &inventoryv1alpha1.ClusterProfile{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cp); err == nil {
				profile = cp.Status.Properties
			}
		}
	}
	inv.mu.Unlock()
	if cfg == nil {
		return nil, fmt.Errorf("cluster %s is not a member", id)
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	resource, err := topology.PropertiesResource(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovering the ClusterProperty version of cluster %s: %w", id, err)
	}
	list, err := client.Resource(resource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the ClusterProperties of cluster %s: %w", id, err)
	}
	own := map[string]string{}
	for _, p := range list.Items {
		v, _, _ := unstructured.NestedString(p.Object, "spec", "value")
		own[p.GetName()] = v
	}
	return MergeProperties(profile, own), nil
}

// configOf returns the client configuration of the joined member id.
// Members given as contexts keep theirs in Config.Contexts. Called with
// inv.mu held.
func (inv *Inventory) configOf(id string) *rest.Config {
	for _, e := range inv.entries {
		if e.id != id || e.state != Joined {
			continue
		}
		if e.config != nil {
			return e.config
		}
		if name, ok := contextOf(e.key); ok {
			return inv.cfg.Contexts[name]
		}
	}
	return nil
}
