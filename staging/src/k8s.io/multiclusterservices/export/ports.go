package export

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// mergePorts builds the union of the exports' ports (KEP-1645 "Service
// Port"). A port name used for different (port, protocol, appProtocol)
// values keeps the oldest export's value. Two more cases would make an
// import no proxy can program, so they are conflicts too and the younger
// port is left out: the same port/protocol under two names, and an unnamed
// port in an import with more than one port (endpoints are matched to
// ports by name). ordered must be oldest first.
//
// It also returns, per cluster, the merged port names the cluster's
// endpoints serve, so that its slices carry only those.
func mergePorts(ordered []Export) ([]mcsv1beta1.ServicePort, map[string]map[string]bool, []Conflict) {
	var merged []mcsv1beta1.ServicePort
	byName := map[string]int{}      // name -> index in merged
	owner := map[string]string{}    // name -> cluster that added it
	losers := map[string][]string{} // name -> clusters whose port lost
	served := map[string]map[string]bool{}
	var order []string // conflicting names, in the order first seen

	lose := func(name, cluster string) {
		if _, seen := losers[name]; !seen {
			order = append(order, name)
		}
		if !slices.Contains(losers[name], cluster) {
			losers[name] = append(losers[name], cluster)
		}
	}

	for _, e := range ordered {
		served[e.Cluster] = map[string]bool{}
		for _, sp := range e.Service.Spec.Ports {
			p := importPort(sp)
			if i, ok := byName[p.Name]; ok {
				if samePort(merged[i], p) {
					served[e.Cluster][p.Name] = true
				} else {
					lose(p.Name, e.Cluster)
				}
				continue
			}
			if i := indexOfNumber(merged, p); i >= 0 {
				// Same port and protocol under another name: the import
				// would list one port twice.
				lose(merged[i].Name, e.Cluster)
				continue
			}
			if len(merged) > 0 && (p.Name == "" || hasUnnamed(merged)) {
				// An unnamed port cannot live beside another port.
				if p.Name == "" {
					lose(merged[0].Name, e.Cluster)
				} else {
					lose("", e.Cluster)
				}
				continue
			}
			byName[p.Name] = len(merged)
			owner[p.Name] = e.Cluster
			merged = append(merged, p)
			served[e.Cluster][p.Name] = true
		}
	}

	var conflicts []Conflict
	for _, name := range order {
		l := losers[name]
		slices.Sort(l)
		p := merged[byName[name]]
		conflicts = append(conflicts, Conflict{
			Reason: mcsv1beta1.ServiceExportReasonPortConflict,
			Field:  fmt.Sprintf("port %q", name),
			Winner: owner[name],
			Value:  formatPort(p),
			Losers: l,
			Of:     len(ordered),
		})
	}
	return merged, served, conflicts
}

// importPort is a Service port as an import lists it: the port clients
// use, with the protocol defaulted as the apiserver does.
func importPort(sp v1.ServicePort) mcsv1beta1.ServicePort {
	p := mcsv1beta1.ServicePort{Name: sp.Name, Protocol: sp.Protocol, Port: sp.Port}
	if p.Protocol == "" {
		p.Protocol = v1.ProtocolTCP
	}
	if sp.AppProtocol != nil {
		p.AppProtocol = ptr.To(*sp.AppProtocol)
	}
	return p
}

func samePort(a, b mcsv1beta1.ServicePort) bool {
	return a.Name == b.Name && a.Port == b.Port && a.Protocol == b.Protocol && ptr.Equal(a.AppProtocol, b.AppProtocol)
}

func indexOfNumber(ports []mcsv1beta1.ServicePort, p mcsv1beta1.ServicePort) int {
	return slices.IndexFunc(ports, func(q mcsv1beta1.ServicePort) bool { return q.Port == p.Port && q.Protocol == p.Protocol })
}

func hasUnnamed(ports []mcsv1beta1.ServicePort) bool {
	return slices.ContainsFunc(ports, func(q mcsv1beta1.ServicePort) bool { return q.Name == "" })
}

func formatPort(p mcsv1beta1.ServicePort) string {
	s := fmt.Sprintf("%d/%s", p.Port, p.Protocol)
	if p.AppProtocol != nil {
		s += " (appProtocol " + *p.AppProtocol + ")"
	}
	return s
}
