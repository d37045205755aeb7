package app

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
)

// TestPlannerProfiles: --inventory-namespace makes the planner read the
// ClusterProfile version the hub serves; a hub that serves none stops the
// planner at start with an error that says what to install, rather than
// a planner that would match the members' own word; without the flag no
// profile is read.
func TestPlannerProfiles(t *testing.T) {
	serving := func(versions ...string) *fakediscovery.FakeDiscovery {
		d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
		for _, v := range versions {
			d.Resources = append(d.Resources, &metav1.APIResourceList{
				GroupVersion: inventoryv1alpha1.GroupName + "/" + v,
				APIResources: []metav1.APIResource{{Name: "clusterprofiles", Namespaced: true, Kind: "ClusterProfile"}},
			})
		}
		return d
	}
	o := NewOptions()
	if p, err := plannerProfiles(o, serving()); p != nil || err != nil {
		t.Errorf("without --inventory-namespace: %+v, %v; want none read", p, err)
	}
	o.InventoryNamespace, o.InventorySelector, o.ClusterSet = "fleet", "x-k8s.io/cluster-manager=ocm", "prod"
	p, err := plannerProfiles(o, serving("v1alpha1", "v1alpha2"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Resource != inventoryv1alpha1.ResourceOf("v1alpha2") || p.Namespace != "fleet" || p.Selector.String() != "x-k8s.io/cluster-manager=ocm" || p.ClusterSet != "prod" {
		t.Errorf("profiles read as %+v, want v1alpha2 (the newest served) in fleet, selected, of clusterset prod", p)
	}
	_, err = plannerProfiles(o, serving())
	if err == nil || !strings.Contains(err.Error(), "serves no ClusterProfiles") || !strings.Contains(err.Error(), "install") {
		t.Errorf("a hub serving no ClusterProfiles: %v, want an error saying so and what to install", err)
	}
	o.InventorySelector = "=="
	if _, err := plannerProfiles(o, serving("v1alpha1")); err == nil || !strings.Contains(err.Error(), "--inventory-selector") {
		t.Errorf("a bad selector: %v, want refused", err)
	}
}
