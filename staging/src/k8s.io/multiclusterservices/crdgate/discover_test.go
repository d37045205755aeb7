package crdgate

import (
	"cmp"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// TestDiscover: the first wanted version the server lists the resource
// in, whichever order the server lists its versions in; none when the
// server serves the group without the resource, or not at all.
func TestDiscover(t *testing.T) {
	gr := schema.GroupResource{Group: "about.k8s.io", Resource: "clusterproperties"}
	wanted := []string{"v1beta1", "v1alpha1"}
	served := func(versions ...string) []*metav1.APIResourceList {
		var out []*metav1.APIResourceList
		for _, v := range versions {
			out = append(out, &metav1.APIResourceList{GroupVersion: "about.k8s.io/" + v, APIResources: []metav1.APIResource{{Name: "clusterproperties"}}})
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		resources []*metav1.APIResourceList
		want      string
	}{
		{name: "both: the newest", resources: served("v1alpha1", "v1beta1"), want: "v1beta1"},
		{name: "v1alpha1 only", resources: served("v1alpha1"), want: "v1alpha1"},
		{name: "v1beta1 only", resources: served("v1beta1"), want: "v1beta1"},
		{name: "a version not wanted only", resources: served("v1"), want: ""},
		{name: "the group without the resource", resources: []*metav1.APIResourceList{{GroupVersion: "about.k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "others"}}}}, want: ""},
		{name: "nothing", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.resources}}
			got, err := Discover(d, gr, wanted)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Discover = %q, want %q", got, tc.want)
			}
			// Resource: that version, or the default's when none is
			// served.
			def := gr.WithVersion("v1alpha1")
			r, err := Resource(d, def, wanted)
			if want := cmp.Or(tc.want, "v1alpha1"); err != nil || r != gr.WithVersion(want) {
				t.Errorf("Resource = %v, %v; want %s", r, err, gr.WithVersion(want))
			}
		})
	}
}
