package clusterset

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/process"
)

// Machine is a host outside every cluster on the clusterset's network (a
// VM or bare-metal server a service catalog binds): a network namespace
// on the fabric with an address of its own and routes to the pods of the
// clusters whose pods are not private, as a flat network gives them.
type Machine struct {
	Name  string
	Netns string
	// IP is its address on the fabric (the clusterset's primary family).
	IP string
	cs *ClusterSet
}

// maxMachines is how many machines a clusterset can have.
const maxMachines = 250

// AddMachine adds machine number k (1..250) to the fabric, at 172.30.250.k
// (fd00:172:30::fa:k), until Down.
func (cs *ClusterSet) AddMachine(name string, k int) (*Machine, error) {
	if k < 1 || k > maxMachines {
		return nil, fmt.Errorf("machine %d: want 1..%d", k, maxMachines)
	}
	m := &Machine{Name: name, Netns: cs.opts.Prefix + "-vm-" + name, cs: cs}
	if err := cs.addNetns(m.Netns); err != nil {
		return nil, err
	}
	fabricSide := fmt.Sprintf("veth-vm-%d", k)
	steps := [][]string{
		{"ip", "link", "add", fabricSide, "netns", cs.fabricNetns(), "type", "veth", "peer", "name", "eth0", "netns", m.Netns},
		{"ip", "-n", cs.fabricNetns(), "link", "set", fabricSide, "master", "br0", "up"},
	}
	for idx, fam := range cs.opts.IPFamily.families() {
		p := plans[fam]
		ip := p.machineIP(k)
		if idx == 0 {
			m.IP = ip
		}
		steps = append(steps, append([]string{"ip", "-n", m.Netns, "addr", "add", fmt.Sprintf("%s/%d", ip, p.fabricPrefixLen), "dev", "eth0"}, nodad(fam)...))
	}
	steps = append(steps, []string{"ip", "-n", m.Netns, "link", "set", "eth0", "up"})
	for _, c := range cs.Clusters {
		if c.PrivatePods {
			continue
		}
		for _, n := range c.Nodes {
			for i := range n.PodCIDRs {
				steps = append(steps, []string{"ip", "-n", m.Netns, "route", "add", n.PodCIDRs[i], "via", n.IPs[i], "dev", "eth0"})
			}
		}
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return nil, fmt.Errorf("machine %s: %w", name, err)
		}
	}
	return m, nil
}

// Start runs argv in the machine until Down (or the caller stops it),
// logging to machine-<name>.log in the clusterset's directory.
func (m *Machine) Start(argv ...string) (*process.Process, error) {
	p, err := process.Start(process.Options{
		Name:  "on machine " + m.Name + ": " + strings.Join(argv, " "),
		Argv:  argv,
		Netns: m.Netns,
		Log:   filepath.Join(m.cs.Dir(), "machine-"+m.Name+".log"),
	})
	if err != nil {
		return nil, err
	}
	m.cs.onDown(levelNode, func() { p.Stop(0) })
	return p, nil
}
