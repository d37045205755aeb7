package kubectlmcs

// The import side of diagnose: what an importing member holds of the
// name, and what its nodes and DNS make of it.

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
)

func importChecks(m MemberState, s ServiceState, ref string) []Check {
	var out []Check
	if m.Import == nil {
		if annotations, ok := selection(s); ok && !export.Consumes(annotations, m.ClusterID) {
			return append(out, Check{Cluster: m.Context, Subject: "ServiceImport", Passed: true,
				Detail: "none: not a consumer cluster (" + export.AnnotationConsumerClusters + "=" + annotations[export.AnnotationConsumerClusters] + ")"})
		}
		return append(out, Check{Cluster: m.Context, Subject: "ServiceImport", Detail: "no ServiceImport " + ref,
			Fix: "export " + ref + " from a member, and check that the mcs-controller serves " + m.Context})
	}
	si := m.Import
	sources := importSources(si)
	headless := si.Spec.Type == mcsv1beta1.Headless
	what := "headless"
	if !headless {
		what = "ClusterSetIP " + strings.Join(si.Spec.IPs, ",")
	}
	c := Check{Cluster: m.Context, Subject: "ServiceImport", Detail: fmt.Sprintf("%s, ports %s, sources %s",
		what, importPorts(si.Spec.Ports), orNone(sources))}
	switch {
	case !headless && len(si.Spec.IPs) == 0:
		c.Detail = "no clusterset IP yet, sources " + orNone(sources)
		c.Fix = "the mcs-controller allocates it: check its health (kubectl mcs status)"
	case len(sources) == 0:
		c.Fix = "no source cluster: check the exports above"
	default:
		c.Passed = true
	}
	if m.ImportIgnored != "" {
		c.Passed = false
		c.Detail += "; kube-proxy ignores it: " + m.ImportIgnored
		c.Fix = "only the mcs-controller writes imports; delete this one, or give diagnose the managers the members' kube-proxy trusts (--multicluster-endpointslice-managers)"
	}
	out = append(out, c)
	out = append(out, modeChecks(m, ref)...)
	out = append(out, ignoredChecks(m)...)
	out = append(out, sliceChecks(m, sources)...)
	out = append(out, selectionChecks(m)...)
	if s.Hub == nil {
		// In pull mode a source's liveness is its Lease in the hub
		// (hubLeaseChecks), once for every importer.
		out = append(out, leaseChecks(m, sources, s.Now)...)
	}
	if !headless {
		out = append(out, nodeChecks(m)...)
	}
	out = append(out, dnsCheck(m, ref, headless))
	if m.Probe != nil {
		out = append(out, probeChecks(m)...)
	}
	return out
}

// selection returns the exportedAnnotations of the exports, where one
// limits the consumer clusters.
func selection(s ServiceState) (map[string]string, bool) {
	for _, m := range s.Members {
		if m.Export == nil {
			continue
		}
		if _, ok := m.Export.Spec.ExportedAnnotations[export.AnnotationConsumerClusters]; ok {
			return m.Export.Spec.ExportedAnnotations, true
		}
	}
	return nil, false
}

// modeChecks say what derived mode and native names decided for the
// import in this member.
func modeChecks(m MemberState, ref string) []Check {
	var out []Check
	si := m.Import
	if name := si.Annotations[mcsproxy.AnnotationDerivedService]; name != "" {
		c := Check{Cluster: m.Context, Subject: "derived Service " + name}
		switch {
		case m.DerivedService == nil:
			c.Detail = "missing: this member is served in derived mode, its clients need that Service"
			c.Fix = "the mcs-controller writes it (--derived-members): check its events on the import"
		case !sameAddresses(m.DerivedService.Spec.ClusterIPs, si.Spec.IPs):
			c.Detail = fmt.Sprintf("cluster IPs %s, the import says %s", orNone(m.DerivedService.Spec.ClusterIPs), orNone(si.Spec.IPs))
			c.Fix = "the mcs-controller writes the import's IPs after the Service: wait, or check its log"
		default:
			c.Passed, c.Detail = true, "cluster IPs "+strings.Join(si.Spec.IPs, ",")+" (served by upstream kube-proxy's Service path)"
		}
		out = append(out, c)
	}
	if mode := si.Annotations[mcsproxy.AnnotationNativeNames]; mode != "" {
		c := Check{Cluster: m.Context, Subject: "native names (" + mode + ")"}
		if m.Service == nil {
			c.Detail = "no Service " + ref + " here to answer the cluster.local name"
			c.Fix = "the mcs-controller creates a selector-less one: check its events on the import"
		} else {
			c.Passed, c.Detail = true, "Service "+ref+" "+m.Service.Spec.ClusterIP+" serves the clusterset's endpoints (decided per node by kube-proxy)"
		}
		out = append(out, c)
	}
	return out
}

// ignoredChecks says which slices labelled with the import's name
// kube-proxy drops, and why: nothing of them was checked or probed. A
// slice someone else wrote there is worth a look, so each fails.
func ignoredChecks(m MemberState) []Check {
	var out []Check
	for _, s := range m.Ignored {
		out = append(out, Check{Cluster: m.Context, Subject: "EndpointSlice " + s.Name,
			Detail: "ignored (kube-proxy does not program it, diagnose neither checks nor probes it): " + s.Reason,
			Fix:    "MCS EndpointSlices are the mcs-controller's: find who wrote this one (its managedFields) and delete it"})
	}
	return out
}

func sliceChecks(m MemberState, sources []string) []Check {
	ready := map[string]int{}
	total := map[string]int{}
	for _, slice := range m.Slices {
		src := slice.Labels[mcsv1beta1.LabelSourceCluster]
		for _, ep := range slice.Endpoints {
			total[src] += len(ep.Addresses)
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				ready[src] += len(ep.Addresses)
			}
		}
	}
	var out []Check
	for _, src := range sources {
		c := Check{Cluster: m.Context, Subject: "EndpointSlices from " + src,
			Detail: fmt.Sprintf("%d ready of %d endpoints", ready[src], total[src])}
		switch {
		case total[src] == 0:
			c.Detail = "none"
			c.Fix = "no endpoints of " + src + " here: its pods are not ready, or its lease expired"
		case ready[src] == 0:
			c.Fix = "no ready endpoint in " + src + ": check its pods' readiness"
		default:
			c.Passed = true
		}
		out = append(out, c)
	}
	return out
}

func leaseChecks(m MemberState, sources []string, now time.Time) []Check {
	var out []Check
	for _, src := range sources {
		name := SourceLeasePrefix + src
		c := Check{Cluster: m.Context, Subject: "Lease " + name}
		i := slices.IndexFunc(m.Leases, func(l coordinationv1.Lease) bool { return l.Name == name })
		if i < 0 {
			c.Detail = "missing"
			c.Fix = "the mcs-controller writes it while " + src + " answers: check both (kubectl mcs status); in pull mode a source's liveness is its agent's Lease in the hub: diagnose with --hub-context"
			out = append(out, c)
			continue
		}
		fresh, detail := leaseFreshness(m.Leases[i], now)
		c.Passed, c.Detail = fresh, detail
		if !fresh {
			c.Fix = src + "'s API has not answered the mcs-controller: its endpoints are withdrawn (or kept if it is the only source)"
		}
		out = append(out, c)
	}
	return out
}

// hubLeaseChecks are pull mode's source Leases: each source's agent
// renews one in its hub namespace while its own cluster answers, and the
// planner withdraws its endpoints from the plan once it is older than the
// endpoint TTL. The sources are those of every importer checked.
func hubLeaseChecks(s ServiceState) []Check {
	h := s.Hub
	if h.Unreachable != "" {
		return []Check{{Cluster: h.Context, Subject: "hub", Detail: "unreachable: " + h.Unreachable,
			Fix: "check the hub context's server and credentials; the sources' liveness is unknown"}}
	}
	var sources []string
	for _, ctx := range s.Importers {
		if m := s.member(ctx); m != nil && m.Import != nil {
			for _, src := range importSources(m.Import) {
				if !slices.Contains(sources, src) {
					sources = append(sources, src)
				}
			}
		}
	}
	sort.Strings(sources)
	var out []Check
	for _, src := range sources {
		c := Check{Cluster: h.Context, Subject: "Lease " + src + "/" + pull.AgentLeaseName}
		l := h.Leases[src]
		switch {
		case l == nil:
			c.Detail = "missing"
			c.Fix = src + "'s member agent renews it while " + src + "'s API answers: check the agent there (its /readyz) and kubectl mcs hub members"
		case l.Spec.RenewTime == nil:
			c.Detail = "never renewed"
			c.Fix = src + "'s agent created it and has not renewed it: check the agent there (its /readyz and logs)"
		default:
			c.Passed = pull.AgentLeaseAlive(l, h.TTL, s.Now)
			c.Detail = fmt.Sprintf("renewed %s ago, endpoint TTL %s", shortDuration(s.Now.Sub(l.Spec.RenewTime.Time)), shortDuration(h.TTL))
			if !c.Passed {
				c.Detail = "stale: " + c.Detail
				c.Fix = src + "'s agent has not renewed it within the planner's TTL: its endpoints are withdrawn from the plan (or kept if it is the only source)"
			}
		}
		out = append(out, c)
	}
	return out
}

// leaseFreshness says whether a Lease was renewed within its duration.
func leaseFreshness(l coordinationv1.Lease, now time.Time) (bool, string) {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false, "never renewed"
	}
	age := now.Sub(l.Spec.RenewTime.Time)
	ttl := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	if age > ttl {
		return false, fmt.Sprintf("stale: renewed %s ago, TTL %s", shortDuration(age), shortDuration(ttl))
	}
	return true, fmt.Sprintf("renewed %s ago, TTL %s", shortDuration(age), shortDuration(ttl))
}

func nodeChecks(m MemberState) []Check {
	var out []Check
	for _, n := range m.Nodes {
		c := Check{Cluster: m.Context, Subject: "kube-proxy on " + n.Name}
		switch {
		case n.Gate == "off":
			c.Detail = "MultiClusterServices gate off: clusterset IPs get no rules on this node"
			c.Fix = "run kube-proxy with --feature-gates=MultiClusterServices=true (featureGates in its config file)"
		case n.Last != nil && n.Last.Type == v1.EventTypeWarning:
			c.Detail = fmt.Sprintf("refused (%s): %s", n.Last.Reason, n.Last.Note)
			c.Fix = refusalFix(n.Last.Reason)
		case n.Last != nil && n.Last.Reason == ReasonProgrammed:
			c.Passed, c.Detail = true, "programmed"
		case n.Last != nil && n.Last.Reason == ReasonClusterSelectionChanged:
			c.Passed, c.Detail = true, "programmed; cluster selection changed: "+n.Last.Note
		case n.Gate == "on":
			c.Passed, c.Detail = true, "gate on, no refusal reported"
		default:
			c.Passed, c.Detail = true, "no refusal reported (gate not readable)"
		}
		out = append(out, c)
	}
	return out
}

func refusalFix(reason string) string {
	switch reason {
	case string(mcsproxy.ReasonIPInUseByImport), string(mcsproxy.ReasonIPInUseByService):
		return "another import or a local Service holds this IP: the older one keeps it (kubectl mcs get imports -A)"
	case string(mcsproxy.ReasonIPOutsideClusterSetCIDR):
		return "the import's IPs are outside kube-proxy's --clusterset-ip-cidrs: align them with the mcs-controller's"
	case string(mcsproxy.ReasonUntrustedManager):
		return "only the mcs-controller may write imports: check who wrote this one"
	}
	return "see kube-proxy's log on the node"
}

func dnsCheck(m MemberState, ref string, headless bool) Check {
	parts := strings.SplitN(ref, "/", 2)
	name := parts[1] + "." + parts[0] + ".svc.clusterset.local"
	c := Check{Cluster: m.Context, Subject: "DNS " + name}
	want := m.Import.Spec.IPs
	if headless {
		want = readyAddresses(m.Slices)
	}
	d := m.DNS
	if d.Queried && len(want) > 0 {
		// One question, of the primary family: the addresses of that family.
		v6 := strings.Contains(want[0], ":")
		want = slices.DeleteFunc(slices.Clone(want), func(a string) bool { return strings.Contains(a, ":") != v6 })
	}
	if !d.Queried {
		// No pod to ask from: what CoreDNS's multicluster option serves.
		c.Subject = "DNS (objects only)"
		if len(want) == 0 {
			c.Detail = "nothing to serve for " + name + ": no IP or ready endpoint"
			c.Fix = "see the checks above"
			return c
		}
		c.Passed, c.Detail = true, name+" would be "+strings.Join(want, ",")+"; not asked (pass --dns-pod)"
		return c
	}
	switch {
	case d.Err != "":
		c.Detail = "no answer from " + d.From + ": " + d.Err
		c.Fix = "check CoreDNS (kube-system/kube-dns) and its multicluster clusterset.local option"
	case !sameAddresses(d.Answer, want):
		c.Detail = fmt.Sprintf("answered %s, want %s (asked from %s)", orNone(d.Answer), orNone(want), d.From)
		c.Fix = "CoreDNS serves another answer: check its kubernetes plugin's multicluster option and its RBAC"
	default:
		c.Passed, c.Detail = true, strings.Join(d.Answer, ",")+" (asked from "+d.From+")"
	}
	return c
}

func readyAddresses(slices []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				out = append(out, ep.Addresses...)
			}
		}
	}
	return out
}

func sameAddresses(a, b []string) bool {
	norm := func(in []string) []string {
		var out []string
		for _, s := range in {
			if ip, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil {
				out = append(out, ip.String())
			}
		}
		sort.Strings(out)
		return out
	}
	na, nb := norm(a), norm(b)
	return len(na) > 0 && slices.Equal(na, nb)
}
