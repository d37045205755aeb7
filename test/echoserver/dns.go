package echoserver

import (
	"fmt"
	"net"
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
}

func (a Answer) String() string {
	parts := []string{"status: " + strings.TrimPrefix(a.RCode.String(), "RCode")}
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

// QueryTypes are the question types Query is used with, by the names dig
// gives them.
var QueryTypes = map[string]dnsmessage.Type{"A": dnsmessage.TypeA, "AAAA": dnsmessage.TypeAAAA, "SRV": dnsmessage.TypeSRV}

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
		}
	}
	sort.Strings(out.A)
	sort.Strings(out.SRV)
	return out, nil
}
