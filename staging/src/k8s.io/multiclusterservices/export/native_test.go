package export

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestNativeService(t *testing.T) {
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1"},
		Spec: mcsv1beta1.ServiceImportSpec{
			Type:                  mcsv1beta1.ClusterSetIP,
			IPs:                   []string{"10.250.0.10"},
			SessionAffinity:       v1.ServiceAffinityClientIP,
			SessionAffinityConfig: &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}},
			Ports: []mcsv1beta1.ServicePort{
				{Name: "http", Port: 80},
				{Name: "grpc", Protocol: v1.ProtocolTCP, Port: 9000, AppProtocol: ptr.To("kubernetes.io/h2c")},
			},
		},
	}
	got := NativeService(si, "mcs-controller.multicluster.x-k8s.io")
	want := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "web",
			Labels:          map[string]string{LabelManagedBy: "mcs-controller.multicluster.x-k8s.io", mcsv1beta1.LabelServiceName: "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "multicluster.x-k8s.io/v1beta1", Kind: "ServiceImport", Name: "web", UID: "uid-1"}},
		},
		Spec: v1.ServiceSpec{
			Type:                  v1.ServiceTypeClusterIP,
			IPFamilyPolicy:        ptr.To(v1.IPFamilyPolicyPreferDualStack),
			SessionAffinity:       v1.ServiceAffinityClientIP,
			SessionAffinityConfig: &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}},
			Ports: []v1.ServicePort{
				{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)},
				{Name: "grpc", Protocol: v1.ProtocolTCP, Port: 9000, TargetPort: intstr.FromInt32(9000), AppProtocol: ptr.To("kubernetes.io/h2c")},
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NativeService (-want +got):\n%s", diff)
	}
	if got.Spec.Selector != nil {
		t.Errorf("a native Service must select no pods: its endpoints are the import's")
	}
}

func TestConsumes(t *testing.T) {
	for _, tt := range []struct {
		annotations map[string]string
		cluster     string
		want        bool
	}{
		{nil, "cluster-a", true},
		{map[string]string{AnnotationConsumerClusters: "cluster-b, cluster-c"}, "cluster-c", true},
		{map[string]string{AnnotationConsumerClusters: "cluster-b,cluster-c"}, "cluster-a", false},
		{map[string]string{AnnotationConsumerClusters: ""}, "cluster-a", false},
		{map[string]string{AnnotationConsumerClusters: "cluster-ab"}, "cluster-a", false},
	} {
		if got := Consumes(tt.annotations, tt.cluster); got != tt.want {
			t.Errorf("Consumes(%v, %s) = %v, want %v", tt.annotations, tt.cluster, got, tt.want)
		}
	}
}

func TestProviders(t *testing.T) {
	if got, limited := Providers(nil); limited || got != nil {
		t.Errorf("no annotation: %v %v, want every cluster", got, limited)
	}
	if got, limited := Providers(map[string]string{AnnotationProviderClusters: " cluster-a, ,cluster-b"}); !limited || len(got) != 2 || got[0] != "cluster-a" || got[1] != "cluster-b" {
		t.Errorf("Providers = %v %v", got, limited)
	}
	conds := NotAProvider(Validity{Valid: true, Reason: "Valid"}, "cluster-c", []string{"cluster-a"}, nil)
	if conds[0].Status != metav1.ConditionTrue || conds[1].Status != metav1.ConditionFalse || conds[1].Reason != ReasonNotAProvider {
		t.Errorf("conditions %+v", conds)
	}
}
