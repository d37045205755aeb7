package pull

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"
	"k8s.io/multiclusterservices/export"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// The plan's EndpointSlices, as pure functions: the planner writes, in the
// plan namespace, each slice every member is to hold of an import; each
// agent turns it back into the slice it writes into its own cluster, under
// its own manager. In the hub such a slice carries none of KEP-1645's
// labels, so that a hub that is a member too neither programs nor serves
// the plan as an import of its own (its kube-proxy and CoreDNS read those
// labels in every namespace).

// PlannerManager is the endpointslice.kubernetes.io/managed-by of the
// plan's EndpointSlices.
const PlannerManager = "planner.hub.multiclusterservices.k8s.io"

// PlanName is the name of the ServicePlan of namespace/name, and the
// prefix of its slices' names.
func PlanName(namespace, name string) string { return MemberExportName(namespace, name) }

// GlobalServiceDigest stands for global service key (the hub's
// namespace/name of a GlobalService of the service catalog) in the
// plan's names and labels, which its key may be too long for.
func GlobalServiceDigest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// CatalogPlanName is the name of the ServicePlan placing global service
// global under namespace/name: PlanName and the global service's digest
// (no Service name holds a dot, so no export's plan has such a name).
func CatalogPlanName(namespace, name, global string) string {
	return PlanName(namespace, name) + "." + GlobalServiceDigest(global)
}

// PlanSlice is the plan's EndpointSlice of imported, a slice members are
// to hold (export.ImportedSlice, or with entryPoints its source's entry
// points, export.IngressSlices), whose source's change happened at
// trigger (zero: unknown).
func PlanSlice(imported *discoveryv1.EndpointSlice, trigger time.Time, entryPoints bool) *discoveryv1.EndpointSlice {
	annotations := maps.Clone(imported.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[hubv1alpha1.AnnotationImportedSlice] = imported.Name
	if !trigger.IsZero() {
		annotations[v1.EndpointsLastChangeTriggerTime] = trigger.UTC().Format(time.RFC3339Nano)
	}
	ps := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      PublishedSliceName(imported.Namespace, imported.Name),
			Namespace: PlanNamespace,
			Labels: map[string]string{
				hubv1alpha1.LabelServiceNamespace: imported.Namespace,
				hubv1alpha1.LabelServiceName:      imported.Labels[mcsv1beta1.LabelServiceName],
				hubv1alpha1.LabelSourceCluster:    imported.Labels[mcsv1beta1.LabelSourceCluster],
				discoveryv1.LabelManagedBy:        PlannerManager,
			},
			Annotations: annotations,
		},
		AddressType: imported.AddressType,
		Endpoints:   imported.Endpoints,
		Ports:       imported.Ports,
	}
	if entryPoints {
		ps.Labels[hubv1alpha1.LabelEntryPoints] = "true"
	}
	return ps
}

// IsEntryPoints tells whether ps, a slice of the plan, holds its source
// cluster's entry points rather than its pods (PlanSlice).
func IsEntryPoints(ps *discoveryv1.EndpointSlice) bool {
	return ps.Labels[hubv1alpha1.LabelEntryPoints] == "true"
}

// SliceOfPlan is the EndpointSlice a member holds of ps, a slice of the
// plan, written by managedBy, and when its source's change happened (zero:
// unknown); an error names what of ps is missing. Only the planner writes
// the plan namespace (RBAC), so ps is not checked further.
func SliceOfPlan(ps *discoveryv1.EndpointSlice, managedBy string) (*discoveryv1.EndpointSlice, time.Time, error) {
	ns, service, cluster := ps.Labels[hubv1alpha1.LabelServiceNamespace], ps.Labels[hubv1alpha1.LabelServiceName], ps.Labels[hubv1alpha1.LabelSourceCluster]
	name := ps.Annotations[hubv1alpha1.AnnotationImportedSlice]
	if ns == "" || service == "" || cluster == "" || name == "" {
		return nil, time.Time{}, fmt.Errorf("the plan's EndpointSlice %s lacks its service's namespace, name, source cluster or imported name", ps.Name)
	}
	var trigger time.Time
	annotations := maps.Clone(ps.Annotations)
	if t, err := time.Parse(time.RFC3339Nano, annotations[v1.EndpointsLastChangeTriggerTime]); err == nil {
		trigger = t
	}
	delete(annotations, v1.EndpointsLastChangeTriggerTime)
	delete(annotations, hubv1alpha1.AnnotationImportedSlice)
	if len(annotations) == 0 {
		annotations = nil
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   ns,
			Labels:      export.ImportedSliceLabels(service, cluster, managedBy),
			Annotations: annotations,
		},
		AddressType: ps.AddressType,
		Endpoints:   ps.Endpoints,
		Ports:       ps.Ports,
	}, trigger, nil
}
