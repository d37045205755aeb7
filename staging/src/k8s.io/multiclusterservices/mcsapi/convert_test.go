package mcsapi

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestServiceImportFromV1Alpha1(t *testing.T) {
	local := v1.ServiceInternalTrafficPolicyLocal
	timeout := int32(30)
	in := &mcsv1alpha1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u"},
		Spec: mcsv1alpha1.ServiceImportSpec{
			Type:                  mcsv1alpha1.ClusterSetIP,
			IPs:                   []string{"10.250.0.1"},
			Ports:                 []mcsv1alpha1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
			SessionAffinity:       v1.ServiceAffinityClientIP,
			SessionAffinityConfig: &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &timeout}},
			InternalTrafficPolicy: &local,
		},
	}
	got, err := ServiceImportFromV1Alpha1(in)
	if err != nil {
		t.Fatal(err)
	}
	want := &mcsv1beta1.ServiceImport{
		TypeMeta:   metav1.TypeMeta{APIVersion: "multicluster.x-k8s.io/v1beta1"},
		ObjectMeta: in.ObjectMeta,
		Spec: mcsv1beta1.ServiceImportSpec{
			Type:                  mcsv1beta1.ClusterSetIP,
			IPs:                   []string{"10.250.0.1"},
			Ports:                 []mcsv1beta1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
			SessionAffinity:       v1.ServiceAffinityClientIP,
			SessionAffinityConfig: &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &timeout}},
			InternalTrafficPolicy: &local,
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
