package export

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Export is one cluster's valid export of a name.
type Export struct {
	// Cluster is the ID of the exporting (source) cluster.
	Cluster string
	// ServiceExport is the cluster's export; its creationTimestamp orders
	// the exports for conflict resolution.
	ServiceExport *mcsv1beta1.ServiceExport
	// Service is the exported Service (Validate must have accepted it).
	Service *v1.Service
}

// Result is what the exports of a name become.
type Result struct {
	// Spec is the ServiceImport spec, without IPs: clusterset IPs are
	// allocated by the caller, which owns the clusterset's address range.
	Spec mcsv1beta1.ServiceImportSpec
	// Labels and Annotations are the exportedLabels and
	// exportedAnnotations of the oldest ServiceExport (each map is one
	// property: it is never merged key by key).
	Labels, Annotations map[string]string
	// Clusters are the source clusters, sorted (ServiceImport
	// status.clusters).
	Clusters []string
	// Conflicts are the fields the exports disagree on. KEP-1645 sets the
	// Conflict condition on every export of the name.
	Conflicts []Conflict
	// ServedPorts maps each source cluster to the names of the merged ports
	// its endpoints serve: the ports whose number, protocol and
	// appProtocol in that cluster are those of the import.
	ServedPorts map[string]map[string]bool
}

// Merge combines the valid exports of one namespace/name. It returns the
// zero Result for no exports. The order of the argument does not matter:
// exports are ordered by creationTimestamp, oldest first, then by cluster ID
// so that equal timestamps still give one answer everywhere.
func Merge(exports []Export) Result {
	if len(exports) == 0 {
		return Result{}
	}
	ordered := oldestFirst(exports)

	var r Result
	for _, e := range ordered {
		r.Clusters = append(r.Clusters, e.Cluster)
	}
	slices.Sort(r.Clusters)

	var c []Conflict
	r.Spec.Type, c = resolve(ordered, "type", mcsv1beta1.ServiceExportReasonTypeConflict, importType, eq, quote)
	r.Conflicts = append(r.Conflicts, c...)
	r.Spec.Ports, r.ServedPorts, c = mergePorts(ordered)
	r.Conflicts = append(r.Conflicts, c...)

	r.Spec.SessionAffinity, c = resolve(ordered, "sessionAffinity", mcsv1beta1.ServiceExportReasonSessionAffinityConflict, sessionAffinity, eq, quote)
	r.Conflicts = append(r.Conflicts, c...)
	// The timeout only means something among the exports that use ClientIP
	// affinity; a disagreement on the affinity itself is reported above.
	if r.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		var timeout int32
		clientIP := filter(ordered, func(e Export) bool { return sessionAffinity(e) == v1.ServiceAffinityClientIP })
		timeout, c = resolve(clientIP, "sessionAffinityConfig.clientIP.timeoutSeconds", mcsv1beta1.ServiceExportReasonSessionAffinityConfigConflict, clientIPTimeout, eq, func(v int32) string { return fmt.Sprint(v) })
		c = countAll(c, len(ordered))
		r.Conflicts = append(r.Conflicts, c...)
		r.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &timeout}}
	}

	itp, c := resolve(ordered, "internalTrafficPolicy", mcsv1beta1.ServiceExportReasonInternalTrafficPolicyConflict, internalTrafficPolicy, eq, quote)
	r.Conflicts = append(r.Conflicts, c...)
	r.Spec.InternalTrafficPolicy = &itp

	td, c := resolve(ordered, "trafficDistribution", mcsv1beta1.ServiceExportReasonTrafficDistributionConflict, trafficDistribution, eq, quoteOrUnset)
	r.Conflicts = append(r.Conflicts, c...)
	if td != "" {
		r.Spec.TrafficDistribution = &td
	}

	// Families are compared as sets: the order only says which is
	// primary, and a different order serves the same endpoints.
	r.Spec.IPFamilies, c = resolve(ordered, "ipFamilies", mcsv1beta1.ServiceExportReasonIPFamilyConflict, ipFamilies, sameFamilies, func(f []v1.IPFamily) string { return fmt.Sprint(f) })
	r.Conflicts = append(r.Conflicts, c...)

	r.Labels, c = resolveMap(ordered, "exportedLabels", mcsv1beta1.ServiceExportReasonLabelsConflict, func(e Export) map[string]string { return e.ServiceExport.Spec.ExportedLabels })
	r.Conflicts = append(r.Conflicts, c...)
	r.Annotations, c = resolveMap(ordered, "exportedAnnotations", mcsv1beta1.ServiceExportReasonAnnotationsConflict, func(e Export) map[string]string { return e.ServiceExport.Spec.ExportedAnnotations })
	r.Conflicts = append(r.Conflicts, c...)
	return r
}

// oldestFirst orders exports as the KEP's conflict resolution does
// (CompareAge): by creationTimestamp, oldest first, then by cluster ID so
// that equal timestamps still give one answer everywhere.
func oldestFirst(exports []Export) []Export {
	ordered := slices.Clone(exports)
	slices.SortFunc(ordered, func(a, b Export) int {
		return CompareAge(a.ServiceExport.CreationTimestamp.Time, a.Cluster, b.ServiceExport.CreationTimestamp.Time, b.Cluster)
	})
	return ordered
}

// resolve applies the KEP's policy to a property that cannot be merged:
// the oldest export's value wins, and anyone else's different value is a
// conflict. ordered must be oldest first.
func resolve[T any](ordered []Export, field string, reason mcsv1beta1.ServiceExportConditionReason, get func(Export) T, equal func(a, b T) bool, format func(T) string) (T, []Conflict) {
	var zero T
	if len(ordered) == 0 {
		return zero, nil
	}
	winner := get(ordered[0])
	var losers []string
	for _, e := range ordered[1:] {
		if !equal(get(e), winner) {
			losers = append(losers, e.Cluster)
		}
	}
	if len(losers) == 0 {
		return winner, nil
	}
	slices.Sort(losers)
	return winner, []Conflict{{Reason: reason, Field: field, Winner: ordered[0].Cluster, Value: format(winner), Losers: losers, Of: len(ordered)}}
}

// resolveMap applies the policy to exportedLabels or exportedAnnotations.
// mcs-api v1beta1 treats each map as one property: the oldest export's map
// is used whole, without keys of any other, and every export whose map is
// not identical to it is a conflict (an unset map and an empty one are the
// same).
func resolveMap(ordered []Export, field string, reason mcsv1beta1.ServiceExportConditionReason, get func(Export) map[string]string) (map[string]string, []Conflict) {
	m, c := resolve(ordered, field, reason, get, maps.Equal[map[string]string, map[string]string], formatMap)
	if len(m) == 0 {
		return nil, c
	}
	return maps.Clone(m), c
}

// formatMap writes a map as sorted key=value pairs, as a label selector
// would, so that a conflict message says exactly what was used.
func formatMap(m map[string]string) string {
	if len(m) == 0 {
		return "none"
	}
	var pairs []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		pairs = append(pairs, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return "{" + strings.Join(pairs, ", ") + "}"
}

func filter(in []Export, keep func(Export) bool) []Export {
	var out []Export
	for _, e := range in {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// countAll makes "N/M clusters disagree" count every export of the name.
func countAll(c []Conflict, of int) []Conflict {
	for i := range c {
		c[i].Of = of
	}
	return c
}

func eq[T comparable](a, b T) bool { return a == b }

func quote[T ~string](v T) string { return fmt.Sprintf("%q", string(v)) }

func quoteOrUnset(v string) string {
	if v == "" {
		return "unset"
	}
	return quote(v)
}

// Accessors normalise a Service the way the apiserver defaults it, so that
// an unset field and its default do not conflict.

func importType(e Export) mcsv1beta1.ServiceImportType {
	if e.Service.Spec.ClusterIP == v1.ClusterIPNone {
		return mcsv1beta1.Headless
	}
	return mcsv1beta1.ClusterSetIP
}

func sessionAffinity(e Export) v1.ServiceAffinity {
	if e.Service.Spec.SessionAffinity == "" {
		return v1.ServiceAffinityNone
	}
	return e.Service.Spec.SessionAffinity
}

func clientIPTimeout(e Export) int32 {
	if c := e.Service.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
		return *c.ClientIP.TimeoutSeconds
	}
	return v1.DefaultClientIPServiceAffinitySeconds
}

func internalTrafficPolicy(e Export) v1.ServiceInternalTrafficPolicy {
	if p := e.Service.Spec.InternalTrafficPolicy; p != nil && *p != "" {
		return *p
	}
	return v1.ServiceInternalTrafficPolicyCluster
}

func trafficDistribution(e Export) string {
	if d := e.Service.Spec.TrafficDistribution; d != nil {
		return *d
	}
	return ""
}

func ipFamilies(e Export) []v1.IPFamily {
	if f := e.Service.Spec.IPFamilies; len(f) > 0 {
		return slices.Clone(f)
	}
	// Only a Service that was never defaulted has no families; IPv4 is
	// the apiserver's default for a single-stack cluster.
	return []v1.IPFamily{v1.IPv4Protocol}
}

func sameFamilies(a, b []v1.IPFamily) bool {
	if len(a) != len(b) {
		return false
	}
	for _, f := range a {
		if !slices.Contains(b, f) {
			return false
		}
	}
	return true
}

// BoundCreation returns se with its creationTimestamp, which decides
// conflicts, kept within [notBefore, notAfter]: an export cannot be older
// than the namespace it lives in, nor younger than now. A member whose
// apiserver or clock claims otherwise would otherwise win (or lose) every
// conflict of the clusterset. se itself when it is within; otherwise a
// copy. A zero bound is no bound.
func BoundCreation(se *mcsv1beta1.ServiceExport, notBefore, notAfter time.Time) *mcsv1beta1.ServiceExport {
	t := se.CreationTimestamp.Time
	switch {
	case !notBefore.IsZero() && t.Before(notBefore):
		t = notBefore
	case !notAfter.IsZero() && t.After(notAfter):
		t = notAfter
	default:
		return se
	}
	out := se.DeepCopy()
	out.CreationTimestamp = metav1.NewTime(t)
	return out
}
