package export

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// mergePorts builds the union of the exports' ports, so that a client of
// the import reaches every port some cluster serves, and each cluster's
// endpoints receive traffic only for the ports it serves. A port name used
// for different (port, protocol, appProtocol) values keeps the oldest
// export's value. Two more cases would make an import no proxy can program,
// so the younger port is left out: the same port/protocol under two names,
// and an unnamed port in an import with more than one port (endpoints are
// matched to ports by name). ordered must be oldest first.
//
// mcs-api v1beta1 raises PortConflict "if the ports are not identical in
// all the constituent Services", so every merged port that some export does
// not serve is a conflict: whether that export has the port with other
// properties or lacks it altogether (Conflict.Missing).
//
// It also returns, per cluster, the merged port names the cluster's
// endpoints serve, so that its slices carry only those.
func mergePorts(ordered []Export) ([]mcsv1beta1.ServicePort, map[string]map[string]bool, []Conflict) {
	var merged []mcsv1beta1.ServicePort
	byName := map[string]int{}   // name -> index in merged
	owner := map[string]string{} // name -> cluster that added it
	served := map[string]map[string]bool{}
	named := map[string]map[string]bool{} // cluster -> its own port names

	for _, e := range ordered {
		served[e.Cluster] = map[string]bool{}
		named[e.Cluster] = map[string]bool{}
		for _, sp := range e.Service.Spec.Ports {
			p := importPort(sp)
			named[e.Cluster][p.Name] = true
			if i, ok := byName[p.Name]; ok {
				if samePort(merged[i], p) {
					served[e.Cluster][p.Name] = true
				}
				continue
			}
			if indexOfNumber(merged, p) >= 0 {
				// Same port and protocol under another name: the import
				// would list one port twice.
				continue
			}
			if len(merged) > 0 && (p.Name == "" || hasUnnamed(merged)) {
				// An unnamed port cannot live beside another port.
				continue
			}
			byName[p.Name] = len(merged)
			owner[p.Name] = e.Cluster
			merged = append(merged, p)
			served[e.Cluster][p.Name] = true
		}
	}

	var conflicts []Conflict
	for _, p := range merged {
		var losers, missing []string
		for _, e := range ordered {
			if served[e.Cluster][p.Name] {
				continue
			}
			losers = append(losers, e.Cluster)
			if !named[e.Cluster][p.Name] {
				missing = append(missing, e.Cluster)
			}
		}
		if len(losers) == 0 {
			continue
		}
		slices.Sort(losers)
		slices.Sort(missing)
		conflicts = append(conflicts, Conflict{
			Reason:  mcsv1beta1.ServiceExportReasonPortConflict,
			Field:   fmt.Sprintf("port %q", p.Name),
			Winner:  owner[p.Name],
			Value:   formatPort(p),
			Losers:  losers,
			Missing: missing,
			Of:      len(ordered),
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
