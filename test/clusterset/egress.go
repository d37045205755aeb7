package clusterset

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
)

// maxSocketPath is what a Unix socket path may hold (sun_path, with its
// terminating NUL).
const maxSocketPath = 107

// startEgress serves the cluster apiserver's "cluster" egress (its
// connections to kubelets, pods, Services and webhooks) as an HTTP CONNECT
// proxy on a Unix socket, the way konnectivity serves a control plane that
// has no route to its nodes: each connection is opened from inside a node
// namespace of the cluster (the node named, or whose address is named, by
// the request; any node for pod and Service addresses), so the apiserver on
// the host never dials the clusterset's addresses itself. It returns the
// socket's path.
func (cs *ClusterSet) startEgress(c *Cluster) (string, error) {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(c.dir, "egress.sock")
	if len(path) > maxSocketPath {
		dir, err := os.MkdirTemp("", "egress-")
		if err != nil {
			return "", err
		}
		cs.onDown(levelEtcd, func() { _ = os.RemoveAll(dir) })
		path = filepath.Join(dir, c.Name+".sock")
	}
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return "", fmt.Errorf("cluster %s: egress proxy: %w", c.Name, err)
	}
	p := &egressProxy{cluster: c, conns: map[net.Conn]struct{}{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.serve(l)
	}()
	cs.onDown(levelAPIServer, func() {
		l.Close()
		p.closeAll()
		<-done
	})
	return path, nil
}

type egressProxy struct {
	cluster *Cluster

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (p *egressProxy) serve(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go p.handle(conn)
	}
}

// handle answers one CONNECT and then copies both ways.
func (p *egressProxy) handle(client net.Conn) {
	if !p.track(client) {
		client.Close()
		return
	}
	defer p.untrack(client)
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(client)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_ = client.SetReadDeadline(time.Time{})
	if req.Method != http.MethodConnect {
		fmt.Fprintf(client, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	target, err := p.dial(req.Host)
	if err != nil {
		fmt.Fprintf(client, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\n\r\n%v", err)
		return
	}
	if !p.track(target) {
		target.Close()
		return
	}
	defer p.untrack(target)
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	// Anything the client sent after its request goes first.
	if n := br.Buffered(); n > 0 {
		buffered, _ := br.Peek(n)
		if _, err := target.Write(buffered); err != nil {
			return
		}
	}
	netns.Splice(client, target)
}

// dial opens hostport from a node of the cluster.
func (p *egressProxy) dial(hostport string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, err
	}
	from := p.cluster.Nodes[0]
	for _, n := range p.cluster.Nodes {
		if n.Name == host {
			from, host = n, n.IP
		}
		for _, ip := range n.IPs {
			if ip == host {
				from = n
			}
		}
	}
	if net.ParseIP(host) == nil {
		return nil, fmt.Errorf("%s is no node of %s and not an address", host, p.cluster.Name)
	}
	return netns.Dial(from.Netns, "tcp", net.JoinHostPort(host, port), 10*time.Second)
}

func (p *egressProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *egressProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// closeAll ends every tunnel (the apiserver is gone) and refuses new ones.
func (p *egressProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
