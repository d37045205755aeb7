package export

import (
	"strings"
	"testing"

	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"k8s.io/multiclusterservices/proxy"
)

// An exporter's exportedLabels and exportedAnnotations carry user choices
// only. Each refused key below is an attack: set by an exporter, it would
// reach the import that every member's proxies and the controller obey.
func TestValidateExportedMetadata(t *testing.T) {
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		valid       bool
		refused     string
	}{
		{name: "nothing exported", valid: true},
		{name: "the user's own keys", labels: map[string]string{"tier": "web", "example.com/team": "a"}, annotations: map[string]string{"note": "x"}, valid: true},
		{name: "recommended application labels", labels: map[string]string{"app.kubernetes.io/name": "web", "app.kubernetes.io/part-of": "shop"}, valid: true},
		{name: "the exportable user choices", annotations: map[string]string{
			proxy.AnnotationNativeNames: "LocalFirst", proxy.AnnotationLocalFirstMinimum: "2",
			AnnotationConsumerClusters: "a,b", AnnotationProviderClusters: "a",
		}, valid: true},
		// The capture: a derived import's clusterset IPs, programmed by
		// every proxy, naming another namespace's clusterset IP.
		{name: "clusterset IPs and derived service", annotations: map[string]string{
			proxy.AnnotationClusterSetIPs: "10.250.0.10", proxy.AnnotationDerivedService: "derived-x",
		}, refused: `exportedAnnotations["multicluster.kubernetes.io/derived-service"], exportedAnnotations["multiclusterservices.k8s.io/clusterset-ips"]`},
		{name: "clusterset IPs alone", annotations: map[string]string{proxy.AnnotationClusterSetIPs: "10.250.0.10"}, refused: "clusterset-ips"},
		{name: "the import's manager", labels: map[string]string{proxy.LabelImportManagedBy: "someone"}, refused: `exportedLabels["app.kubernetes.io/managed-by"]`},
		{name: "a slice label on the import", labels: map[string]string{mcsv1beta1.LabelServiceName: "db"}, refused: "multicluster.kubernetes.io/service-name"},
		{name: "a future key of the project", annotations: map[string]string{"multiclusterservices.k8s.io/anything": "x"}, refused: "anything"},
		{name: "a catalog key", annotations: map[string]string{"catalog.multiclusterservices.k8s.io/global-service": "x"}, refused: "global-service"},
		{name: "a key of Kubernetes", labels: map[string]string{"service.kubernetes.io/service-proxy-name": "none"}, refused: "service-proxy-name"},
		{name: "a key of mcs-api", annotations: map[string]string{"multicluster.x-k8s.io/x": "y"}, refused: "multicluster.x-k8s.io/x"},
		{name: "a bare k8s.io key", annotations: map[string]string{"k8s.io/x": "y"}, refused: "k8s.io/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			se := &mcsv1beta1.ServiceExport{Spec: mcsv1beta1.ServiceExportSpec{ExportedLabels: tc.labels, ExportedAnnotations: tc.annotations}}
			v := ValidateExportedMetadata(se)
			if v.Valid != tc.valid {
				t.Fatalf("valid = %v, want %v (%s)", v.Valid, tc.valid, v.Message)
			}
			if tc.valid {
				return
			}
			if v.Reason != ReasonReservedKey || !strings.Contains(v.Message, tc.refused) {
				t.Errorf("got %s %q, want %s naming %s", v.Reason, v.Message, ReasonReservedKey, tc.refused)
			}
			// Whatever a merge result holds, the controller copies none
			// of the refused keys.
			for _, m := range []map[string]string{tc.labels, tc.annotations} {
				for k := range WithoutReservedKeys(m) {
					if ReservedKey(k) {
						t.Errorf("WithoutReservedKeys kept %s", k)
					}
				}
			}
		})
	}
}

// Every key the project obeys is in Keys, and only user choices are
// exportable.
func TestKeysTable(t *testing.T) {
	for _, k := range Keys {
		if k.WrittenBy == "" || k.ReadBy == "" || k.On == "" {
			t.Errorf("%s: say what it is on, who writes and who reads it", k.Name)
		}
		if ReservedKey(k.Name) == k.Exportable {
			t.Errorf("%s: ReservedKey = %v, but Exportable = %v", k.Name, ReservedKey(k.Name), k.Exportable)
		}
	}
	m := map[string]string{"tier": "web"}
	if got := WithoutReservedKeys(m); len(got) != 1 {
		t.Errorf("WithoutReservedKeys dropped a user key: %v", got)
	}
}
