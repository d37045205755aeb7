package export

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	"k8s.io/multiclusterservices/clusterselection"
)

// The reasons of cluster selection (KEP-5939).
const (
	// ReasonClusterSelectorsConflict is the Conflict reason when the
	// exports of a name have different clusterSelectors lists.
	ReasonClusterSelectorsConflict mcsv1beta1.ServiceExportConditionReason = "ClusterSelectorsConflict"
	// ReasonInvalidClusterSelector is the Valid=False reason of an export
	// whose clusterSelectors cannot be evaluated.
	ReasonInvalidClusterSelector mcsv1beta1.ServiceExportConditionReason = "InvalidClusterSelector"
)

// ValidateClusterSelectors says whether an export may carry its
// clusterSelectors: they must be valid, and only a ClusterIP Service's
// export may have any (a headless import's clients get pod IPs from DNS,
// which cluster selection cannot steer). svc is the exported Service,
// already found valid by Validate.
func ValidateClusterSelectors(svc *v1.Service, selectors []csv1beta1.ClusterSelector) Validity {
	if len(selectors) == 0 {
		return Validity{Valid: true, Reason: mcsv1beta1.ServiceExportReasonValid, Message: "the Service can be exported"}
	}
	if svc != nil && svc.Spec.ClusterIP == v1.ClusterIPNone {
		return Validity{Reason: mcsv1beta1.ServiceExportReasonInvalidServiceType,
			Message: "clusterSelectors apply only to ClusterSetIP services; this Service is headless"}
	}
	if err := clusterselection.Validate(selectors); err != nil {
		return Validity{Reason: ReasonInvalidClusterSelector, Message: err.Error()}
	}
	return Validity{Valid: true, Reason: mcsv1beta1.ServiceExportReasonValid, Message: "the Service can be exported"}
}

// MergeClusterSelectors resolves the clusterSelectors of the valid exports
// of a name: the oldest export's list, whole (the lists are compared as
// ordered wholes, as the KEP says), and a ClusterSelectorsConflict naming
// every export whose list differs. selectorsOf gives a cluster's list.
func MergeClusterSelectors(exports []Export, selectorsOf func(cluster string) []csv1beta1.ClusterSelector) ([]csv1beta1.ClusterSelector, []Conflict) {
	return resolve(oldestFirst(exports), "clusterSelectors", ReasonClusterSelectorsConflict,
		func(e Export) []csv1beta1.ClusterSelector { return selectorsOf(e.Cluster) },
		func(a, b []csv1beta1.ClusterSelector) bool {
			return len(a) == 0 && len(b) == 0 || apiequality.Semantic.DeepEqual(a, b)
		},
		func(s []csv1beta1.ClusterSelector) string { return fmt.Sprintf("%d selectors", len(s)) })
}
