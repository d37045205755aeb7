package export

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"k8s.io/multiclusterservices/proxy"
)

// The keys of the project's labels and annotations, who may write each and
// who obeys it, in one place. The rule behind the table: what kube-proxy or
// the mcs-controller obeys lives where only the controller (or the
// operator) can write it. An exporter reaches an import only through the
// ServiceExport's exportedLabels and exportedAnnotations, which the
// controller copies onto the ServiceImport whole; so those maps may carry
// the user choices marked Exportable and nothing else of a reserved key
// space (ReservedKey). Without this rule an export could write, say,
// proxy.AnnotationClusterSetIPs and have every proxy program another
// namespace's clusterset IP for its own endpoints.
//
// One rung up: who a member is and what it may publish is stated by the
// operator, in the hub (AnnotationMemberClusterID, the controller's
// flags), and a member can only narrow it; a local Service receives
// remote endpoints only when its owner asked for them
// (proxy.AnnotationAcceptNativeNames, which the controller cannot set).

// Key is one label or annotation key of the project.
type Key struct {
	Name string
	// On is the kind of object it is set on.
	On string
	// WrittenBy says who may write it; ReadBy who acts on it.
	WrittenBy, ReadBy string
	// Exportable keys are user choices that travel from a ServiceExport's
	// exportedAnnotations to the import, so the exporter writes them.
	Exportable bool
}

// Keys lists every label and annotation key the project reads or writes.
var Keys = []Key{
	{Name: proxy.AnnotationNativeNames, On: "ServiceImport", WrittenBy: "the exporter (exportedAnnotations)", ReadBy: "kube-proxy, mcs-controller (derived members)", Exportable: true},
	{Name: proxy.AnnotationLocalFirstMinimum, On: "ServiceImport", WrittenBy: "the exporter (exportedAnnotations)", ReadBy: "kube-proxy, mcs-controller (derived members)", Exportable: true},
	{Name: AnnotationConsumerClusters, On: "ServiceImport", WrittenBy: "the exporter (exportedAnnotations)", ReadBy: "mcs-controller", Exportable: true},
	{Name: AnnotationProviderClusters, On: "ServiceImport", WrittenBy: "the exporter (exportedAnnotations)", ReadBy: "mcs-controller", Exportable: true},
	{Name: proxy.AnnotationDerivedService, On: "ServiceImport", WrittenBy: "mcs-controller", ReadBy: "kube-proxy (leaves the import to the Service path)"},
	{Name: proxy.AnnotationClusterSetIPs, On: "ServiceImport", WrittenBy: "mcs-controller", ReadBy: "kube-proxy (programs these IPs on a derived import switching to native mode)"},
	{Name: proxy.LabelImportManagedBy, On: "ServiceImport, Services the controller creates", WrittenBy: "mcs-controller", ReadBy: "kube-proxy (trusts the import), mcs-controller"},
	{Name: discoveryv1.LabelManagedBy, On: "EndpointSlice", WrittenBy: "the slice's controller (admission reserves the MCS and EndpointSlice controllers' values)", ReadBy: "kube-proxy (trusts MCS slices), mcs-controller (mirrors a source's slices)"},
	{Name: mcsv1beta1.LabelServiceName, On: "EndpointSlice, derived Service", WrittenBy: "mcs-controller (admission)", ReadBy: "kube-proxy, CoreDNS, mcs-controller"},
	{Name: mcsv1beta1.LabelSourceCluster, On: "EndpointSlice, Lease", WrittenBy: "mcs-controller (admission)", ReadBy: "kube-proxy (own cluster's endpoints keep node names), mcs-controller"},
	{Name: discoveryv1.LabelServiceName, On: "EndpointSlice", WrittenBy: "slice writers; on MCS slices the mcs-controller, as the import's synthetic <import>.clusterset; admission refuses *.clusterset and derived-<hash> to all but the mcs-controller", ReadBy: "kube-proxy (keys slices by it; obeyed on an MCS slice only when it is that slice's own import's synthetic name)"},
	{Name: LabelIngressFor, On: "ingress Service", WrittenBy: "mcs-controller (admission)", ReadBy: "mcs-controller"},
	{Name: proxy.AnnotationAcceptNativeNames, On: "local Service", WrittenBy: "the Service's owner (the mcs-controller may write only the Services it creates: admission)", ReadBy: "kube-proxy, mcs-controller (derived members): an import's native names join the Service only with it"},
	{Name: LabelMember, On: "member Secret (hub)", WrittenBy: "the operator (RBAC on the hub's member namespace)", ReadBy: "mcs-controller (--member-secrets-selector: which Secrets list members), kubectl mcs status --hub-context"},
	{Name: AnnotationMemberClusterID, On: "member Secret (hub)", WrittenBy: "the operator (RBAC on the hub's member namespace)", ReadBy: "mcs-controller (the one cluster ID the listed member may join as; its own ClusterProperty only confirms it)"},
}

// AnnotationMemberClusterID, on a member Secret in the hub, is the cluster
// ID the operator states for that member. Who a member is comes from the
// operator, never from the member: a member whose own ClusterProperty
// says otherwise is refused, not rejoined under the ID it chose.
// ClusterProfiles state it in their cluster.clusterset.k8s.io property,
// kubeconfig contexts with the controller's --member-cluster-ids.
const AnnotationMemberClusterID = "multiclusterservices.k8s.io/cluster-id"

// LabelMember marks a Secret of the hub's member namespace as a member
// cluster's kubeconfig: the mcs-controller's --member-secrets-selector by
// default.
const LabelMember = "multiclusterservices.k8s.io/member"

// ConditionClusterSetMember is the mcs-controller's condition on each
// ClusterProfile of its inventory: whether the cluster is a member of the
// clusterset (reason Joined, Pending or Refused), and why not. KEP-4322
// leaves conditions open to other writers; this type is the controller's
// alone (a domain-qualified type, as the KEP's own are the cluster
// manager's).
const ConditionClusterSetMember = "multiclusterservices.k8s.io/ClusterSetMember"

// reservedDomains are the prefixes (and their subdomains) of keys no
// exporter may set on an import: those of Kubernetes' own components
// (kubernetes.io, k8s.io, which cover this project's
// multiclusterservices.k8s.io and multicluster.kubernetes.io) and of SIG
// projects (x-k8s.io, which covers mcs-api's multicluster.x-k8s.io).
var reservedDomains = []string{"kubernetes.io", "k8s.io", "x-k8s.io"}

// appLabels is the prefix of Kubernetes' recommended application labels,
// which users set freely; only its managed-by key is control data here.
const appLabels = "app.kubernetes.io"

// ReservedKey tells whether key may not travel from an export to an
// import: it is in a reserved domain and not an Exportable user choice,
// or it is app.kubernetes.io/managed-by.
func ReservedKey(key string) bool {
	if key == proxy.LabelImportManagedBy {
		return true
	}
	for _, k := range Keys {
		if k.Name == key {
			return !k.Exportable
		}
	}
	prefix, _, found := strings.Cut(key, "/")
	if !found || prefix == appLabels {
		return false
	}
	for _, d := range reservedDomains {
		if prefix == d || strings.HasSuffix(prefix, "."+d) {
			return true
		}
	}
	return false
}

// ReasonReservedKey is the Valid reason of an export whose exportedLabels
// or exportedAnnotations set a reserved key.
const ReasonReservedKey mcsv1beta1.ServiceExportConditionReason = "ReservedKey"

// ValidateExportedMetadata says whether se's exportedLabels and
// exportedAnnotations may reach the import: an export that sets a
// reserved key is invalid as a whole (it takes no part in the merge), so
// that a refused key is never silently dropped from what its exporter
// asked for.
func ValidateExportedMetadata(se *mcsv1beta1.ServiceExport) Validity {
	var bad []string
	for field, m := range map[string]map[string]string{"exportedLabels": se.Spec.ExportedLabels, "exportedAnnotations": se.Spec.ExportedAnnotations} {
		for k := range m {
			if ReservedKey(k) {
				bad = append(bad, fmt.Sprintf("%s[%q]", field, k))
			}
		}
	}
	if len(bad) == 0 {
		return Validity{Valid: true, Reason: mcsv1beta1.ServiceExportReasonValid, Message: "the Service can be exported"}
	}
	slices.Sort(bad)
	return Validity{Reason: ReasonReservedKey, Message: fmt.Sprintf("%s: keys of the kubernetes.io, k8s.io and x-k8s.io domains are reserved for the mcs-controller and Kubernetes, except the user choices %s", strings.Join(bad, ", "), strings.Join(exportableKeys(), ", "))}
}

// WithoutReservedKeys returns m without reserved keys (m itself when it
// has none). The controller applies it to what it copies from an export,
// so that no path (a merge result, a stored import) can carry one through.
func WithoutReservedKeys(m map[string]string) map[string]string {
	if !slices.ContainsFunc(slices.Collect(maps.Keys(m)), ReservedKey) {
		return m
	}
	out := maps.Clone(m)
	maps.DeleteFunc(out, func(k, _ string) bool { return ReservedKey(k) })
	return out
}

func exportableKeys() []string {
	var out []string
	for _, k := range Keys {
		if k.Exportable {
			out = append(out, k.Name)
		}
	}
	return out
}
