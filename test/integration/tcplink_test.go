package integration

import (
	"io"
	"net"
	"sync"
	"testing"
)

// tcpLink forwards TCP connections to an apiserver and can be cut, which
// to the controller looks like the member's network going away.
type tcpLink struct {
	target string
	l      net.Listener

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
}

func newTCPLink(t *testing.T, target string) *tcpLink {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k := &tcpLink{target: target, l: l, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { l.Close(); k.cut() })
	go k.serve()
	return k
}

func (k *tcpLink) addr() string { return k.l.Addr().String() }

func (k *tcpLink) serve() {
	for {
		in, err := k.l.Accept()
		if err != nil {
			return
		}
		k.mu.Lock()
		down := k.down
		if !down {
			k.conns[in] = true
		}
		k.mu.Unlock()
		if down {
			in.Close()
			continue
		}
		go func() {
			out, err := net.Dial("tcp", k.target)
			if err != nil {
				in.Close()
				return
			}
			k.mu.Lock()
			k.conns[out] = true
			k.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			_, _ = io.Copy(in, out)
			in.Close()
		}()
	}
}

// cut closes every connection and refuses new ones until restore.
func (k *tcpLink) cut() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.down = true
	for c := range k.conns {
		c.Close()
	}
	k.conns = map[net.Conn]bool{}
}

func (k *tcpLink) restore() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.down = false
}
