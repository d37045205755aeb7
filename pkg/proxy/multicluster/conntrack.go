package multicluster

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// A clusterset IP that a node did not program (the gate off, stock
// kube-proxy, an import not yet seen) is no address of the node's: a
// client's SYN to it follows the node's routes, and the kernel keeps the
// connection's conntrack entry, unanswered and without DNAT, for
// nf_conntrack_tcp_timeout_syn_sent (120 s by default) after its last
// packet. NAT is decided on a connection's first packet only, so once the
// rules hold the IP, a new connection that happens to reuse that entry's
// source port matches it, skips the DNAT and meets the rules' reject for
// the clusterset IP itself: "connection refused" for up to two minutes
// after the gate is turned on, a few times a minute per busy client.
// Upstream reconciles UDP entries of Services at every sync (it covers
// an import's UDP ports, which are a Service's to it); TCP entries it
// leaves, since a ClusterIP of the service range is dropped before any
// entry is kept. So, after the Proxier hands over a clusterset IP, the
// entries that can only be such leftovers are deleted: TCP, to that IP,
// not DNATed (the reply would come from the IP itself) and still in
// SYN_SENT. Deleting one loses nothing: its next packet is decided by the
// rules again.

// tcpConntrackSynSent is the kernel's TCP_CONNTRACK_SYN_SENT: a SYN seen,
// nothing answered.
const tcpConntrackSynSent = 1

// sweepWindow is how long after an IP is handed over its leftovers are
// looked for: long enough for the proxier's sync to have put it in the
// kernel (seconds, on large nodes tens of seconds), no longer than an
// unanswered SYN's entry lives.
const sweepWindow = 2 * time.Minute

// leftoverSYN matches the conntrack entries a client's connection
// attempts to one of ips left before a rule held them.
type leftoverSYN map[netip.Addr]bool

func (f leftoverSYN) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	if flow.Forward.Protocol != unix.IPPROTO_TCP {
		return false
	}
	dst, ok := netip.AddrFromSlice(flow.Forward.DstIP)
	if !ok || !f[dst.Unmap()] {
		return false
	}
	// DNATed, the reply comes from an endpoint: a connection the rules
	// made, held ones included.
	if !flow.Reverse.SrcIP.Equal(flow.Forward.DstIP) || flow.Reverse.SrcPort != flow.Forward.DstPort {
		return false
	}
	tcp, ok := flow.ProtoInfo.(*netlink.ProtoInfoTCP)
	return ok && tcp.State == tcpConntrackSynSent
}

// conntrackSweeper deletes, for a while after each clusterset IP is
// handed over, the conntrack entries leftoverSYN matches: at 1, 2, 4 …
// seconds after the last IP handed over, until sweepWindow has passed
// for every one. Each sweep is one dump of the table per address family,
// as upstream's UDP reconciliation makes at every sync.
type conntrackSweeper struct {
	logger klog.Logger
	// deleteFlows deletes the entries of one family that filter matches
	// (netlink.ConntrackDeleteFilters on the node's table).
	deleteFlows func(family netlink.InetFamily, filter netlink.CustomConntrackFilter) (uint, error)

	mu sync.Mutex
	// until is, per IP handed over, when its leftovers stop being looked
	// for.
	until map[netip.Addr]time.Time
	kick  chan struct{}
}

func newConntrackSweeper(logger klog.Logger) *conntrackSweeper {
	return &conntrackSweeper{
		logger: logger,
		deleteFlows: func(family netlink.InetFamily, filter netlink.CustomConntrackFilter) (uint, error) {
			return netlink.ConntrackDeleteFilters(netlink.ConntrackTable, family, filter)
		},
		until: map[netip.Addr]time.Time{},
		kick:  make(chan struct{}, 1),
	}
}

// handedOver says that ips have just been handed to the wrapped Provider.
// It does not block: the Proxier calls it with its lock held.
func (s *conntrackSweeper) handedOver(ips []netip.Addr) {
	if len(ips) == 0 {
		return
	}
	until := time.Now().Add(sweepWindow)
	s.mu.Lock()
	for _, ip := range ips {
		s.until[ip] = until
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// run sweeps until ctx is done.
func (s *conntrackSweeper) run(ctx context.Context) {
	const first = time.Second
	var timer <-chan time.Time
	delay := first
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
			delay = first
			timer = time.After(delay)
		case <-timer:
			if s.sweep(time.Now()) {
				delay *= 2
				timer = time.After(delay)
			} else {
				timer = nil
			}
		}
	}
}

// sweep deletes the leftovers of the IPs still in their window and says
// whether any is.
func (s *conntrackSweeper) sweep(now time.Time) bool {
	v4, v6 := leftoverSYN{}, leftoverSYN{}
	s.mu.Lock()
	for ip, until := range s.until {
		switch {
		case now.After(until):
			delete(s.until, ip)
		case ip.Is4():
			v4[ip] = true
		default:
			v6[ip] = true
		}
	}
	s.mu.Unlock()
	for family, filter := range map[netlink.InetFamily]leftoverSYN{netlink.FAMILY_V4: v4, netlink.FAMILY_V6: v6} {
		if len(filter) == 0 {
			continue
		}
		n, err := s.deleteFlows(family, filter)
		if err != nil {
			// The next sweep tries again.
			s.logger.Error(err, "Failed to delete conntrack entries of connection attempts made before clusterset IPs were programmed", "family", family)
		}
		if n > 0 {
			s.logger.V(2).Info("Deleted conntrack entries of connection attempts made before clusterset IPs were programmed", "family", family, "entries", n)
			staleConntrackEntriesDeleted.Add(float64(n))
		}
	}
	return len(v4)+len(v6) > 0
}

// SweepConntrack deletes, from now until ctx is done, what connection
// attempts to a clusterset IP left in the node's conntrack table before
// the IP was programmed (conntrack.go). kube-proxy with the gate on calls
// it before any import is delivered, so that every IP handed over is
// swept; without it nothing is.
func (p *Proxier) SweepConntrack(ctx context.Context) {
	s := newConntrackSweeper(p.logger)
	p.mu.Lock()
	p.im.sweeper = s
	p.mu.Unlock()
	go s.run(ctx)
}
