package export

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// ReasonNamespaceNotAllowed is the Valid reason of an export from a
// namespace the clusterset refuses exports from. KEP-1645 advises refusing
// kube-system and default unless there is a clear use case.
const ReasonNamespaceNotAllowed mcsv1beta1.ServiceExportConditionReason = "NamespaceNotAllowed"

// Validity is the outcome of validating one export.
type Validity struct {
	Valid   bool
	Reason  mcsv1beta1.ServiceExportConditionReason
	Message string
}

// Validate says whether a cluster's ServiceExport can take part in the
// clusterset service. svc is the Service of the same namespace and name in
// the export's cluster, nil if there is none.
func Validate(svc *v1.Service) Validity {
	switch {
	case svc == nil || svc.DeletionTimestamp != nil:
		return Validity{Reason: mcsv1beta1.ServiceExportReasonNoService, Message: "there is no Service of the same namespace and name to export"}
	case svc.Spec.Type == v1.ServiceTypeExternalName:
		// KEP-1645: ExternalName Services cannot be merged across clusters;
		// create them in each cluster instead.
		return Validity{Reason: mcsv1beta1.ServiceExportReasonInvalidServiceType, Message: "ExternalName Services cannot be exported; create the ExternalName Service in each cluster instead"}
	}
	return Validity{Valid: true, Reason: mcsv1beta1.ServiceExportReasonValid, Message: "the Service can be exported"}
}

// NamespaceNotAllowed is the Validity of an export from a refused namespace.
func NamespaceNotAllowed(namespace string) Validity {
	return Validity{Reason: ReasonNamespaceNotAllowed, Message: fmt.Sprintf("exports from namespace %q are refused by the mcs-controller's configuration", namespace)}
}

// NamespaceNotAllowedForCluster is the Validity of an export from a
// namespace a cluster may not export from: its operator gave the
// cluster a list of namespaces, and this one is not on it.
func NamespaceNotAllowedForCluster(namespace, cluster string, allowed []string) Validity {
	return Validity{Reason: ReasonNamespaceNotAllowed, Message: fmt.Sprintf("cluster %s may export only from namespaces %v, not from %q", cluster, allowed, namespace)}
}

// AnyNamespace, as a cluster's namespace in the operator's export
// namespaces, lets that cluster export from every namespace not refused.
const AnyNamespace = "*"

// CheckExportNamespace applies the operator's export namespaces (cluster
// ID → the only namespaces it may export from) to an export of cluster
// from namespace, and returns the refusal, or nil. Once the operator
// confines any cluster, a cluster the list does not name exports from no
// namespace: the confinement fails closed, so that a member which could
// appear under an ID nobody named (a new member, a renamed one) gains
// nothing by it. AnyNamespace names a cluster without confining it.
func CheckExportNamespace(limits map[string][]string, cluster, namespace string) *Validity {
	if len(limits) == 0 {
		return nil
	}
	allowed, named := limits[cluster]
	switch {
	case !named:
		return &Validity{Reason: ReasonNamespaceNotAllowed, Message: fmt.Sprintf("cluster %s is not named by the mcs-controller's export namespaces, which confine the clusterset's members: it may export from no namespace", cluster)}
	case slices.Contains(allowed, AnyNamespace) || slices.Contains(allowed, namespace):
		return nil
	}
	v := NamespaceNotAllowedForCluster(namespace, cluster, allowed)
	return &v
}

// ExportConditions returns the Valid, Ready and Conflict conditions of one
// export. readyMessage says where the import exists (empty for the default).
// Conditions carry no LastTransitionTime: callers apply them with
// meta.SetStatusCondition, which keeps the time of unchanged conditions.
func ExportConditions(v Validity, conflicts []Conflict, readyMessage string) []metav1.Condition {
	valid := metav1.Condition{Type: string(mcsv1beta1.ServiceExportConditionValid), Status: metav1.ConditionTrue, Reason: string(v.Reason), Message: v.Message}
	ready := metav1.Condition{Type: string(mcsv1beta1.ServiceExportConditionReady), Status: metav1.ConditionTrue, Reason: string(mcsv1beta1.ServiceExportReasonExported), Message: readyMessage}
	if ready.Message == "" {
		ready.Message = "the Service is exported to the clusterset"
	}
	if !v.Valid {
		valid.Status = metav1.ConditionFalse
		ready.Status = metav1.ConditionFalse
		ready.Reason = string(mcsv1beta1.ServiceExportReasonFailed)
		ready.Message = "not exported: " + v.Message
		// An invalid export takes no part in the merge, so it cannot
		// conflict with anything.
		conflicts = nil
	}
	return []metav1.Condition{valid, ready, ConflictCondition(conflicts)}
}
