package proxy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	"k8s.io/multiclusterservices/clusterselection"
)

// An exporter chooses whether an exported Service is also reachable by its
// own name (name.ns.svc.cluster.local and the local Service's ClusterIP)
// in the clusters that import it. The choice travels the KEP-1645 v1beta1
// way: in the ServiceExport's spec.exportedAnnotations, which the
// controller puts on the ServiceImport, and exports that disagree get an
// AnnotationsConflict, the oldest export's choice winning.
const (
	// AnnotationNativeNames names the strategy: RemoteAndLocal or
	// LocalFirst. Absent, the import is reachable by its clusterset IP and
	// clusterset.local name only (the KEP's default).
	AnnotationNativeNames = "multiclusterservices.k8s.io/native-names"
	// AnnotationLocalFirstMinimum is, for LocalFirst, how many of the local
	// Service's own endpoints must be ready for the remote ones to stay
	// out: a count ("2") or a share of the local endpoints listed ("50%").
	// Absent, one.
	AnnotationLocalFirstMinimum = "multiclusterservices.k8s.io/local-first-minimum"
)

// NativeNames is how a local Service of an import's name is served.
type NativeNames string

const (
	// NativeNamesOff: the local Service keeps its own endpoints only.
	NativeNamesOff NativeNames = ""
	// RemoteAndLocal: the local Service load-balances over its own
	// endpoints and every source cluster's.
	RemoteAndLocal NativeNames = "RemoteAndLocal"
	// LocalFirst: the local Service's own endpoints while enough of them
	// are ready, every source cluster's as well otherwise.
	LocalFirst NativeNames = "LocalFirst"
)

// Minimum is LocalFirst's threshold: Count ready endpoints, or Percent of
// the local endpoints listed (rounded up), whichever is set; cluster
// selection's minimum, since LocalFirst is a cluster selection.
type Minimum = clusterselection.Minimum

// NativeNamesPolicy is what an import's annotations ask of its local
// Services.
type NativeNamesPolicy struct {
	Strategy NativeNames
	Minimum  Minimum
}

// AnnotationAcceptNativeNames, set to "true" on a local Service by its
// owner, accepts native names: the remote endpoints of the import of the
// Service's name join the Service's own when the import asks for them.
// Without it an import's native names reach no Service its owner did not
// agree to share: an exporter in another cluster, or whoever holds the
// mcs-controller's credentials, would otherwise add endpoints of their
// choosing behind any Service of the namespace (an admission webhook's,
// an ingress controller's). The mcs-controller cannot set it: it may
// write only the Services it creates (the admission policy).
const AnnotationAcceptNativeNames = "multiclusterservices.k8s.io/accept-native-names"

// AcceptsNativeNames tells whether local Service svc takes native names:
// its owner set AnnotationAcceptNativeNames to "true", or it is the
// Service the mcs-controller created for an import where the cluster had
// none (labelled LabelImportManagedBy with a trusted manager), which
// belongs to nobody else.
func AcceptsNativeNames(svc *v1.Service, trustedManagers []string) bool {
	if svc == nil {
		return false
	}
	if svc.Annotations[AnnotationAcceptNativeNames] == "true" {
		return true
	}
	manager, ok := svc.Labels[LabelImportManagedBy]
	return ok && slices.Contains(trustedManagers, manager)
}

// SystemService tells whether the local Service namespace/name is one of
// the cluster's own: those of the system namespaces and the apiserver's
// default/kubernetes. No import's native names ever reach one, whoever
// wrote the import: remote endpoints beside kube-dns or the apiserver
// would capture the whole cluster's DNS or API traffic.
func SystemService(namespace, name string) bool {
	switch namespace {
	case "kube-system", "kube-public", "kube-node-lease":
		return true
	case "default":
		return name == "kubernetes"
	}
	return false
}

// NativeNamesOf reads an import's annotations. An unknown strategy or a
// malformed minimum is an error and the policy is off: a typo must not
// send a Service's traffic elsewhere.
func NativeNamesOf(annotations map[string]string) (NativeNamesPolicy, error) {
	p := NativeNamesPolicy{Minimum: Minimum{Count: 1}}
	switch s := NativeNames(annotations[AnnotationNativeNames]); s {
	case NativeNamesOff, RemoteAndLocal, LocalFirst:
		p.Strategy = s
	default:
		return NativeNamesPolicy{}, fmt.Errorf("annotation %s=%q is neither %s nor %s", AnnotationNativeNames, s, RemoteAndLocal, LocalFirst)
	}
	raw, set := annotations[AnnotationLocalFirstMinimum]
	if !set {
		return p, nil
	}
	if p.Strategy != LocalFirst {
		return NativeNamesPolicy{}, fmt.Errorf("annotation %s is only meaningful with %s=%s", AnnotationLocalFirstMinimum, AnnotationNativeNames, LocalFirst)
	}
	if pct, ok := strings.CutSuffix(raw, "%"); ok {
		n, err := strconv.Atoi(pct)
		if err != nil || n < 1 || n > 100 {
			return NativeNamesPolicy{}, fmt.Errorf("annotation %s=%q: a share must be 1%%..100%%", AnnotationLocalFirstMinimum, raw)
		}
		p.Minimum = Minimum{Percent: n}
		return p, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		return NativeNamesPolicy{}, fmt.Errorf("annotation %s=%q: want a count of at least 1 or a share such as 50%%", AnnotationLocalFirstMinimum, raw)
	}
	p.Minimum = Minimum{Count: n}
	return p, nil
}

// LocalFirstSelectors is LocalFirst as cluster selection (KEP-5939): the
// importing cluster's own endpoints, then (no result left) every
// cluster's. RemoteAndLocal is no selector at all: every cluster's.
func LocalFirstSelectors() []csv1beta1.ClusterSelector {
	return []csv1beta1.ClusterSelector{{PropertySelector: &csv1beta1.PropertySelector{
		MatchExpressions: []csv1beta1.PropertySelectorRequirement{{
			Key:      aboutv1alpha1.ClusterIDProperty,
			Operator: csv1beta1.PropertySelectorOpIn,
			Values:   []string{csv1beta1.SameAsImporter},
		}},
	}}}
}

// SelectForLocalService returns the slices a proxy programs for a local
// Service that has an import of the same name: its own slices (local,
// those of localCluster, the cluster the proxy runs in), and the import's
// remote ones (already translated for this proxy) as the policy says.
//
// It is cluster selection over the clusters of both: the policy's
// selectors (none for RemoteAndLocal, LocalFirstSelectors for LocalFirst)
// resolved for localCluster by clusterselection.Resolve, as the
// mcs-controller resolves an export's, and the result chosen by
// clusterselection.ChooseSources, as kube-proxy chooses an import's, with
// LocalFirst's minimum (ready endpoints only). The choice is made per IP
// family, since a dual-stack Service's families fail independently, and
// for all ports at once (the local Service's slices are handed over
// whole). Joining never removes the local endpoints, so the proxy's own
// rules decide as for any Service: serving-terminating endpoints are used
// only while no endpoint of the set is ready, local or remote.
func SelectForLocalService(policy NativeNamesPolicy, localCluster string, local []*discoveryv1.EndpointSlice, remote []clusterselection.Source) []*discoveryv1.EndpointSlice {
	out := slices.Clone(local)
	var selectors []csv1beta1.ClusterSelector
	switch policy.Strategy {
	case RemoteAndLocal:
	case LocalFirst:
		selectors = LocalFirstSelectors()
	default:
		return out
	}
	clusters := []clusterselection.Properties{clusterProperties(localCluster)}
	sources := make([]clusterselection.Source, 0, len(local)+len(remote))
	for _, s := range local {
		sources = append(sources, clusterselection.Source{Cluster: localCluster, Slice: s})
	}
	for _, r := range remote {
		if !slices.ContainsFunc(clusters, func(c clusterselection.Properties) bool { return c.ID == r.Cluster }) {
			clusters = append(clusters, clusterProperties(r.Cluster))
		}
		sources = append(sources, r)
	}
	results, err := clusterselection.Resolve(selectors, clusters[0], clusters)
	if err != nil {
		// The selectors are this package's own and valid: no remote
		// endpoint joins on an error that cannot happen.
		return out
	}
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		i, chosen := clusterselection.ChooseSources(results, sources, clusterselection.Traffic{AnyPort: true, AddressType: family}, policy.Minimum)
		for _, r := range remote {
			if r.Slice.AddressType == family && (i == clusterselection.AllClusters || chosen.Has(r.Cluster)) {
				out = append(out, r.Slice)
			}
		}
	}
	return out
}

// clusterProperties is a cluster as selection sees it when only its ID is
// known.
func clusterProperties(id string) clusterselection.Properties {
	return clusterselection.Properties{ID: id, Properties: map[string]string{aboutv1alpha1.ClusterIDProperty: id}}
}

// CanCarry tells whether local, one of a local Service's own slices, can
// carry remote's endpoints: the same address type and the same ports (in
// any order), so that every endpoint keeps the port numbers its own slice
// gave it. A proxy applies a change of one slice whole, so a local slice
// that carries the remote endpoints a decision adds or takes back turns a
// failover or a failback into one change the proxy never sees half done.
func CanCarry(local, remote *discoveryv1.EndpointSlice) bool {
	if local.AddressType != remote.AddressType || len(local.Ports) != len(remote.Ports) {
		return false
	}
	for _, p := range remote.Ports {
		if !slices.ContainsFunc(local.Ports, func(q discoveryv1.EndpointPort) bool { return samePort(p, q) }) {
			return false
		}
	}
	return true
}

func samePort(a, b discoveryv1.EndpointPort) bool {
	return ptr.Equal(a.Name, b.Name) && ptr.Equal(a.Port, b.Port) &&
		ptr.Deref(a.Protocol, v1.ProtocolTCP) == ptr.Deref(b.Protocol, v1.ProtocolTCP) &&
		ptr.Equal(a.AppProtocol, b.AppProtocol)
}

// Carrying returns local with the endpoints of remote after its own, each
// of which CanCarry. It shares with local everything but the endpoint
// list, and with remote the endpoints themselves.
func Carrying(local *discoveryv1.EndpointSlice, remote []*discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	out := *local
	n := len(local.Endpoints)
	for _, r := range remote {
		n += len(r.Endpoints)
	}
	out.Endpoints = make([]discoveryv1.Endpoint, 0, n)
	out.Endpoints = append(out.Endpoints, local.Endpoints...)
	for _, r := range remote {
		out.Endpoints = append(out.Endpoints, r.Endpoints...)
	}
	return &out
}
