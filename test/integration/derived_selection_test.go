package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/app"
)

// TestClusterSelectionDerivedMember: a derived member's proxies (stock
// kube-proxy) program its derived Service's endpoints as they are, so
// the controller applies the consumer's rule of KEP-5939 for it. With
// story 1's selectors (my cluster, then my region) and cluster-c derived
// in eu beside cluster-a (eu) and cluster-b (us), c's derived slices hold
// c's endpoints only; when c's endpoint is not ready, those of c's region
// (a and c); when none there is ready, every cluster's; and c's own again
// once it is ready. A native member keeps every cluster's slices: its
// kube-proxy chooses per node.
func TestClusterSelectionDerivedMember(t *testing.T) {
	members, kubeconfig := startRegions(t, "eu", "us", "eu")
	a, c := members[0], members[2]
	startControllerWith(t, kubeconfig, "replica-1", 8*time.Second, func(o *app.Options) {
		o.DerivedMembers = []string{"cluster-c"}
		withClusterSelection(t)(o)
	})

	for i, m := range members {
		exportService(t, m, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, fmt.Sprintf("10.%d.0.1", i+1)))
		setSelectors(t, m, "demo", "web", storySelectors)
	}
	const (
		onlyC   = "cluster-c=10.3.0.1 ports http:8080"
		regionC = "cluster-a=10.1.0.1 ports http:8080;cluster-c=10.3.0.1 ports http:8080"
		every   = "cluster-a=10.1.0.1 ports http:8080;cluster-b=10.2.0.1 ports http:8080;cluster-c=10.3.0.1 ports http:8080"
	)
	waitResults(t, c, "demo", "web", storySelectors, "[cluster-c] [cluster-a cluster-c]")
	waitDerived(t, c, "demo", "web", onlyC)
	waitSlices(t, a, "demo", "web", every)
	// The controller records through the events API; the same event is
	// read through core/v1 (kubectl describe, kubectl mcs) too.
	waitEventOn(t, c, "ServiceImport", "demo", "web", "DerivedServiceCreated")
	eventually(t, 30*time.Second, "the DerivedServiceCreated event through events.k8s.io", func() (bool, string) {
		list, err := c.kube.EventsV1().Events("demo").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Reason == "DerivedServiceCreated" && e.Regarding.Name == "web" && e.ReportingController == "mcs-controller" && e.Action != "" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	})

	// c's endpoint goes: its region's clusters serve.
	setEndpointReady(t, c, "demo", "web", false)
	waitSlices(t, c, "demo", "web", regionC)
	// Each change says so on c's import, as kube-proxy does per node.
	waitSelectionChange(t, c, "demo", "web", "Result0ToResult1")
	// None of the region's is ready: every cluster serves.
	setEndpointReady(t, a, "demo", "web", false)
	waitSlices(t, c, "demo", "web", every)
	waitSelectionChange(t, c, "demo", "web", "Result1ToAllClusters")
	// c's endpoint is back: c's own again.
	setEndpointReady(t, c, "demo", "web", true)
	waitDerived(t, c, "demo", "web", onlyC)
	waitSelectionChange(t, c, "demo", "web", "AllClustersToResult0")
	waitSlices(t, a, "demo", "web", every)
}

// setEndpointReady sets the readiness of every endpoint of the slice
// exportService wrote for ns/name in m, as the EndpointSlice controller
// does when pods pass or fail their readiness probes.
func setEndpointReady(t *testing.T, m *testMember, ns, name string, ready bool) {
	t.Helper()
	api := m.kube.DiscoveryV1().EndpointSlices(ns)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := api.Get(context.Background(), name+"-local", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range s.Endpoints {
			s.Endpoints[i].Conditions.Ready = ptr.To(ready)
			s.Endpoints[i].Conditions.Serving = ptr.To(ready)
		}
		_, err = api.Update(context.Background(), s, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// waitSelectionChange waits for a ClusterSelectionChanged event with
// action on m's import ns/name.
func waitSelectionChange(t *testing.T, m *testMember, ns, name, action string) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("a ClusterSelectionChanged %s event on %s/%s in %s", action, ns, name, m.id), func() (bool, string) {
		list, err := m.kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, e := range list.Items {
			if e.Reason == "ClusterSelectionChanged" && e.Regarding.Name == name {
				if e.Action == action {
					return true, ""
				}
				got = append(got, e.Action)
			}
		}
		return false, fmt.Sprint(got)
	})
}
