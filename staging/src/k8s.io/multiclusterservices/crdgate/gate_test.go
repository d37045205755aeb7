package crdgate

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const crdName = "serviceimports.multicluster.x-k8s.io"

func crd(established bool, served ...string) *apiextensionsv1.CustomResourceDefinition {
	c := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crdName}}
	for _, v := range []string{"v1alpha1", "v1beta1"} {
		s := false
		for _, w := range served {
			s = s || w == v
		}
		c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: s})
	}
	status := apiextensionsv1.ConditionFalse
	if established {
		status = apiextensionsv1.ConditionTrue
	}
	c.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: status}}
	return c
}

func TestServedVersion(t *testing.T) {
	wanted := []string{"v1beta1", "v1alpha1"}
	for _, tc := range []struct {
		name string
		crd  *apiextensionsv1.CustomResourceDefinition
		want string
	}{
		{"absent", nil, ""},
		{"not established", crd(false, "v1beta1"), ""},
		{"both served prefers the first wanted", crd(true, "v1alpha1", "v1beta1"), "v1beta1"},
		{"only the older one served", crd(true, "v1alpha1"), "v1alpha1"},
		{"none served", crd(true), ""},
	} {
		if got := ServedVersion(tc.crd, wanted); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestGateFollowsTheCRD walks a CRD through its life and checks that the
// gated work starts, switches version and stops accordingly.
func TestGateFollowsTheCRD(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	events := make(chan string, 10)
	g := &Gate{
		Name:     crdName,
		Versions: []string{"v1beta1", "v1alpha1"},
		Run: func(ctx context.Context, version string) {
			events <- "run " + version
			<-ctx.Done()
			events <- "stop " + version
		},
		Absent: func() { events <- "absent" },
	}
	g.Start(ctx, client)
	expect := func(want ...string) {
		t.Helper()
		for _, w := range want {
			select {
			case got := <-events:
				if got != w {
					t.Fatalf("got %q, want %q", got, w)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("timed out waiting for %q", w)
			}
		}
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()

	expect("absent")
	if _, err := crds.Create(ctx, crd(false, "v1beta1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := crds.Update(ctx, crd(true, "v1alpha1", "v1beta1"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("run v1beta1")
	if _, err := crds.Update(ctx, crd(true, "v1alpha1"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("stop v1beta1", "run v1alpha1")
	if err := crds.Delete(ctx, crdName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("stop v1alpha1", "absent")
	if _, err := crds.Create(ctx, crd(true, "v1beta1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("run v1beta1")
	cancel()
	expect("stop v1beta1")
}
