package export

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestValidate(t *testing.T) {
	deleting := metav1.Now()
	tests := []struct {
		name   string
		svc    *v1.Service
		valid  bool
		reason mcsv1beta1.ServiceExportConditionReason
	}{
		{"no Service", nil, false, mcsv1beta1.ServiceExportReasonNoService},
		{"Service being deleted", &v1.Service{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deleting}}, false, mcsv1beta1.ServiceExportReasonNoService},
		{"ExternalName", &v1.Service{Spec: v1.ServiceSpec{Type: v1.ServiceTypeExternalName}}, false, mcsv1beta1.ServiceExportReasonInvalidServiceType},
		{"ClusterIP", &v1.Service{Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP}}, true, mcsv1beta1.ServiceExportReasonValid},
		{"NodePort exports as a ClusterSetIP service", &v1.Service{Spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort}}, true, mcsv1beta1.ServiceExportReasonValid},
		{"headless", &v1.Service{Spec: v1.ServiceSpec{ClusterIP: v1.ClusterIPNone}}, true, mcsv1beta1.ServiceExportReasonValid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Validate(tt.svc)
			if v.Valid != tt.valid || v.Reason != tt.reason {
				t.Errorf("Validate = %v %s, want %v %s", v.Valid, v.Reason, tt.valid, tt.reason)
			}
			conds := ExportConditions(v, []Conflict{{Reason: mcsv1beta1.ServiceExportReasonPortConflict}}, "")
			want := map[string]metav1.ConditionStatus{"Valid": metav1.ConditionFalse, "Ready": metav1.ConditionFalse, "Conflict": metav1.ConditionFalse}
			if tt.valid {
				want = map[string]metav1.ConditionStatus{"Valid": metav1.ConditionTrue, "Ready": metav1.ConditionTrue, "Conflict": metav1.ConditionTrue}
			}
			for _, c := range conds {
				if c.Status != want[c.Type] {
					t.Errorf("condition %s = %s, want %s", c.Type, c.Status, want[c.Type])
				}
			}
		})
	}
}
