package kubectlmcs

import (
	"fmt"
	"sort"
	"strings"
)

// probeDNS is the probe pod's answer as diagnose's DNS result, for a
// member where no --dns-pod was asked.
func probeDNS(o ProbeOutcome) DNSResult {
	r := DNSResult{Queried: true, From: "probe pod " + o.Pod, Answer: o.Result.DNS.Answer, Err: o.Result.DNS.Err}
	if r.Err == "" && len(r.Answer) == 0 {
		r.Err = "empty answer"
	}
	return r
}

// probeChecks are the probe's verdicts in member m: each source cluster's
// endpoints reached directly (the route between the clusters), then each
// clusterset IP and port (the node's rules), with the source clusters
// that answered behind it.
func probeChecks(m MemberState) []Check {
	o := m.Probe
	where := "probe pod " + o.Pod
	if o.Node != "" {
		where += " on " + o.Node
	}
	switch {
	case o.Result == nil && o.Pod == "":
		return []Check{{Cluster: m.Context, Subject: "probe", Detail: o.Err,
			Fix: "the probe needs to create a pod in the namespace (--probe-namespace, default the Service's): check your permissions and the namespace's admission"}}
	case o.Result == nil:
		return []Check{{Cluster: m.Context, Subject: "probe", Detail: "pod " + o.Pod + ": " + o.Err,
			Fix: "the probe pod runs --probe-image (default " + DefaultProbeImage + ", which carries /kubectl-mcs): check that the member's nodes have it or can pull it"}}
	}
	var out []Check
	// Which source an answer identifies: the answer each source's
	// endpoints gave directly, when no other source gave the same.
	owner := map[string]string{}
	var clusters []string
	byCluster := map[string][]ProbeHop{}
	for _, h := range o.Result.Hops {
		if h.Cluster == "" {
			continue
		}
		if _, ok := byCluster[h.Cluster]; !ok {
			clusters = append(clusters, h.Cluster)
		}
		byCluster[h.Cluster] = append(byCluster[h.Cluster], h)
		for a := range h.Answers {
			if a == "" {
				continue
			}
			if prev, ok := owner[a]; ok && prev != h.Cluster {
				owner[a] = ""
			} else if !ok {
				owner[a] = h.Cluster
			}
		}
	}
	sort.Strings(clusters)
	for _, cluster := range clusters {
		hops := byCluster[cluster]
		c := Check{Cluster: m.Context, Subject: "probe: " + cluster + "'s endpoints"}
		var failed []string
		for _, h := range hops {
			if h.Reached == 0 {
				failed = append(failed, h.Address+"/"+string(h.Protocol)+" ("+h.Err+")")
			}
		}
		if len(failed) > 0 {
			c.Detail = fmt.Sprintf("%d of %d not reached from %s: %s", len(failed), len(hops), where, strings.Join(failed, ", "))
			c.Fix = "the endpoints are in " + cluster + "'s slice but do not answer from this member: check the route between the clusters' pod networks (and NetworkPolicies in " + cluster + ")"
		} else {
			c.Passed, c.Detail = true, fmt.Sprintf("%d of %d reached from %s", len(hops), len(hops), where)
		}
		out = append(out, c)
	}
	for _, h := range o.Result.Hops {
		if h.Cluster != "" {
			continue
		}
		c := Check{Cluster: m.Context, Subject: "probe: clusterset IP " + h.Address + "/" + string(h.Protocol)}
		if h.Reached < h.Attempts {
			c.Detail = fmt.Sprintf("%d of %d connections from %s answered; last error: %s", h.Reached, h.Attempts, where, h.Err)
			c.Fix = "kube-proxy on " + orNone([]string{o.Node}) + " does not forward the clusterset IP to a reachable endpoint: see the node and endpoint checks above"
		} else {
			c.Passed = true
			c.Detail = fmt.Sprintf("%d of %d connections from %s answered%s", h.Reached, h.Attempts, where, answeredBy(h, owner))
		}
		out = append(out, c)
	}
	return out
}

// answeredBy names the source clusters whose endpoints answered behind a
// clusterset IP, with how many connections each; or why it cannot tell.
func answeredBy(h ProbeHop, owner map[string]string) string {
	count := map[string]int{}
	unknown := 0
	silent := 0
	for a, n := range h.Answers {
		switch cluster := owner[a]; {
		case a == "":
			silent += n
		case cluster == "":
			unknown += n
		default:
			count[cluster] += n
		}
	}
	var parts []string
	for cluster, n := range count {
		parts = append(parts, fmt.Sprintf("%s (%d)", cluster, n))
	}
	sort.Strings(parts)
	if unknown > 0 {
		parts = append(parts, fmt.Sprintf("an answer no single source's endpoint gave (%d)", unknown))
	}
	if silent > 0 {
		parts = append(parts, fmt.Sprintf("a server that sent nothing to tell its source by (%d)", silent))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; answered by " + strings.Join(parts, ", ")
}
