package framework

import (
	"net"
	"strings"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
// The port is released before the child binds it, so another process may
// take it in between; start functions retry when the child then reports
// isAddrInUse.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startAttempts bounds the retries for a port that was taken between
// FreePort and the child binding it.
const startAttempts = 3

// isAddrInUse reports whether a failed start was caused by a port taken in
// the meantime, judging from the error that carries the child's log tail.
func isAddrInUse(err error) bool {
	return err != nil && strings.Contains(err.Error(), "address already in use")
}
