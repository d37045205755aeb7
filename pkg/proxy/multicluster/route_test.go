package multicluster

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// TestRouteOfFollowsTheRules: routeOf, which reads the labels once, routes
// every slice as mcsproxy's rules say.
func TestRouteOfFollowsTheRules(t *testing.T) {
	for _, labels := range []map[string]string{
		nil,
		{},
		{discoveryv1.LabelServiceName: "web"},
		{discoveryv1.LabelServiceName: ""},
		{discoveryv1.LabelServiceName: "web.clusterset"},
		{discoveryv1.LabelServiceName: "web.clusterset", mcsv1beta1.LabelServiceName: "web"},
		{discoveryv1.LabelServiceName: "web", mcsv1beta1.LabelServiceName: "web"},
		{mcsv1beta1.LabelServiceName: "web"},
		{mcsv1beta1.LabelServiceName: ""},
		{"app": "web"},
	} {
		slice := &discoveryv1.EndpointSlice{}
		slice.Labels = labels
		want := routeLocal
		switch {
		case mcsproxy.ClaimsImportService(slice):
			want = routeDropped
		case mcsproxy.IsMultiClusterEndpointSlice(slice):
			want = routeMultiCluster
		}
		if got := routeOf(slice); got != want {
			t.Errorf("labels %v: route %d, want %d", labels, got, want)
		}
	}
	if got := routeOf(nil); got != routeNone {
		t.Errorf("no slice: route %d, want %d", got, routeNone)
	}
}
