package e2e

import (
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
)

// dnsAnswer is what a DNS server said to one question, rendered like dig
// so that a skip or failure message shows the exact exchange.
type dnsAnswer struct {
	RCode dnsmessage.RCode
	A     []string // sorted addresses
	SRV   []string // sorted "priority weight port target"
}

func (a dnsAnswer) String() string {
	var parts []string
	parts = append(parts, "status: "+strings.TrimPrefix(a.RCode.String(), "RCode"))
	for _, ip := range a.A {
		parts = append(parts, "A "+ip)
	}
	for _, s := range a.SRV {
		parts = append(parts, "SRV "+s)
	}
	if len(a.A)+len(a.SRV) == 0 {
		parts = append(parts, "no answer records")
	}
	return strings.Join(parts, "; ")
}

// query asks server (port 53) one question over UDP from inside a pod's
// network namespace, as `dig @server name type` would.
func query(podNetns, server, name string, typ dnsmessage.Type) (dnsAnswer, error) {
	var out dnsAnswer
	fqdn := name
	if !strings.HasSuffix(fqdn, ".") {
		fqdn += "."
	}
	qname, err := dnsmessage.NewName(fqdn)
	if err != nil {
		return out, err
	}
	msg := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: uint16(time.Now().UnixNano()), RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: qname, Type: typ, Class: dnsmessage.ClassINET}},
	}
	packet, err := msg.Pack()
	if err != nil {
		return out, err
	}
	c, err := netns.Dial(podNetns, "udp", net.JoinHostPort(server, "53"), 2*time.Second)
	if err != nil {
		return out, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write(packet); err != nil {
		return out, err
	}
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		return out, err
	}
	var reply dnsmessage.Message
	if err := reply.Unpack(buf[:n]); err != nil {
		return out, err
	}
	if reply.ID != msg.ID {
		return out, fmt.Errorf("reply id %d, want %d", reply.ID, msg.ID)
	}
	out.RCode = reply.RCode
	for _, rr := range reply.Answers {
		switch body := rr.Body.(type) {
		case *dnsmessage.AResource:
			out.A = append(out.A, net.IP(body.A[:]).String())
		case *dnsmessage.SRVResource:
			out.SRV = append(out.SRV, fmt.Sprintf("%d %d %d %s", body.Priority, body.Weight, body.Port, body.Target.String()))
		}
	}
	sort.Strings(out.A)
	sort.Strings(out.SRV)
	return out, nil
}
