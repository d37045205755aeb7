package echoserver

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Answer is what a DNS server said to one question, rendered like dig so
// that a failure message shows the exact exchange.
type Answer struct {
	RCode dnsmessage.RCode `json:"rcode"`
	A     []string         `json:"a,omitempty"`   // sorted addresses
	SRV   []string         `json:"srv,omitempty"` // sorted "priority weight port target"
	PTR   []string         `json:"ptr,omitempty"` // sorted names
}

func (a Answer) String() string {
	parts := []string{"status: " + strings.TrimPrefix(a.RCode.String(), "RCode")}
	for _, ip := range a.A {
		parts = append(parts, "A "+ip)
	}
	for _, s := range a.SRV {
		parts = append(parts, "SRV "+s)
	}
	for _, s := range a.PTR {
		parts = append(parts, "PTR "+s)
	}
	if len(a.A)+len(a.SRV)+len(a.PTR) == 0 {
		parts = append(parts, "no answer records")
	}
	return strings.Join(parts, "; ")
}

// ReverseName is the PTR question name of an address, as dig -x forms it.
func ReverseName(addr string) (string, error) {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return "", err
	}
	if ip.Is4() {
		b := ip.As4()
		return fmt.Sprintf("%d.%d.%d.%d.in-addr.arpa.", b[3], b[2], b[1], b[0]), nil
	}
	b := ip.As16()
	var labels []string
	for i := len(b) - 1; i >= 0; i-- {
		labels = append(labels, fmt.Sprintf("%x", b[i]&0xf), fmt.Sprintf("%x", b[i]>>4))
	}
	return strings.Join(labels, ".") + ".ip6.arpa.", nil
}

// QueryTypes are the question types Query is used with, by the names dig
// gives them.
var QueryTypes = map[string]dnsmessage.Type{"A": dnsmessage.TypeA, "AAAA": dnsmessage.TypeAAAA, "SRV": dnsmessage.TypeSRV, "PTR": dnsmessage.TypePTR}

// Query asks one question over c (a UDP connection to a DNS server, dialled
// wherever the question must come from), as `dig @server name type` would,
// and closes c.
func Query(c net.Conn, name string, typ dnsmessage.Type) (Answer, error) {
	defer c.Close()
	var out Answer
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	qname, err := dnsmessage.NewName(name)
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
		case *dnsmessage.AAAAResource:
			out.A = append(out.A, net.IP(body.AAAA[:]).String())
		case *dnsmessage.SRVResource:
			out.SRV = append(out.SRV, fmt.Sprintf("%d %d %d %s", body.Priority, body.Weight, body.Port, body.Target.String()))
		case *dnsmessage.PTRResource:
			out.PTR = append(out.PTR, body.PTR.String())
		}
	}
	sort.Strings(out.A)
	sort.Strings(out.SRV)
	sort.Strings(out.PTR)
	return out, nil
}
