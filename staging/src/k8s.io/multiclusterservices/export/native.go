package export

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// LabelManagedBy marks the Services the mcs-controller writes (native
// names) with the label it puts on its imports: it changes or deletes a
// Service only when it carries its own value.
const LabelManagedBy = proxy.LabelImportManagedBy

// NativeService is the Service a member gets for import si when the
// exporter asks for native names and the member has no Service of that
// name: selector-less (its endpoints are the import's, which proxies add),
// with the import's ports and session affinity, owned by the import so
// that it goes with it. The apiserver picks its cluster IPs from the
// member's own Service ranges, in the families the member serves.
func NativeService(si *mcsv1beta1.ServiceImport, managedBy string) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: si.Namespace,
			Name:      si.Name,
			Labels: map[string]string{
				LabelManagedBy:              managedBy,
				mcsv1beta1.LabelServiceName: si.Name,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: mcsv1beta1.GroupVersion.String(),
				Kind:       mcsv1beta1.ServiceImportKindName,
				Name:       si.Name,
				UID:        si.UID,
			}},
		},
		Spec: v1.ServiceSpec{
			Type:           v1.ServiceTypeClusterIP,
			IPFamilyPolicy: ptr.To(v1.IPFamilyPolicyPreferDualStack),
		},
	}
	setImportedPortsAndAffinity(&svc.Spec, si)
	return svc
}

// setImportedPortsAndAffinity gives a Service that stands for import si in
// a member (a native-names or a derived Service) the import's ports, each
// targeting the same port number (the endpoints' ports come from their
// slices), and its session affinity.
func setImportedPortsAndAffinity(spec *v1.ServiceSpec, si *mcsv1beta1.ServiceImport) {
	spec.SessionAffinity = si.Spec.SessionAffinity
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = v1.ServiceAffinityNone
	}
	if spec.SessionAffinity == v1.ServiceAffinityClientIP && si.Spec.SessionAffinityConfig != nil {
		spec.SessionAffinityConfig = si.Spec.SessionAffinityConfig.DeepCopy()
	}
	for _, p := range si.Spec.Ports {
		sp := v1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, TargetPort: intstr.FromInt32(p.Port)}
		if sp.Protocol == "" {
			sp.Protocol = v1.ProtocolTCP
		}
		if p.AppProtocol != nil {
			sp.AppProtocol = ptr.To(*p.AppProtocol)
		}
		spec.Ports = append(spec.Ports, sp)
	}
}

// AnnotationConsumerClusters, in a ServiceExport's exportedAnnotations
// (and so on the import), names the clusters that import the service,
// comma-separated: the others get no ServiceImport, no EndpointSlices, and
// so no rules and no DNS name for it. Absent, every cluster imports it
// (KEP-1645); present and empty, none does.
const AnnotationConsumerClusters = "multiclusterservices.k8s.io/consumer-clusters"

// Consumes tells whether cluster imports a service whose import carries
// annotations.
func Consumes(annotations map[string]string, cluster string) bool {
	list, limited := annotations[AnnotationConsumerClusters]
	if !limited {
		return true
	}
	for _, c := range strings.Split(list, ",") {
		if strings.TrimSpace(c) == cluster {
			return true
		}
	}
	return false
}

// AnnotationProviderClusters, in a ServiceExport's exportedAnnotations,
// names the clusters whose endpoints serve the service (provision),
// comma-separated: the exports of any other cluster shape nothing and
// serve nothing. Absent, every exporting cluster provides (KEP-1645).
const AnnotationProviderClusters = "multiclusterservices.k8s.io/provider-clusters"

// ReasonNotAProvider is the Ready reason of an export from a cluster the
// providers list leaves out.
const ReasonNotAProvider = "NotAProvider"

// Providers returns the provider clusters the annotations name, and
// whether they name any list at all.
func Providers(annotations map[string]string) ([]string, bool) {
	list, limited := annotations[AnnotationProviderClusters]
	if !limited {
		return nil, false
	}
	var out []string
	for _, c := range strings.Split(list, ",") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out, true
}

// NotAProvider returns the conditions of a valid export (v) from a cluster
// that the providers list leaves out.
func NotAProvider(v Validity, cluster string, providers []string, conflicts []Conflict) []metav1.Condition {
	conds := ExportConditions(v, conflicts, "")
	conds[1].Status = metav1.ConditionFalse
	conds[1].Reason = ReasonNotAProvider
	conds[1].Message = fmt.Sprintf("the exporters name the providers of this service %v: cluster %s's endpoints are not exported", providers, cluster)
	return conds
}
