package framework

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// etcdStartTimeout bounds how long StartEtcd waits for a healthy member.
const etcdStartTimeout = time.Minute

// Etcd is a single-member etcd listening on loopback.
type Etcd struct {
	proc     *childProcess
	endpoint string
}

// StartEtcd runs _output/bin/etcd with its data in dir/data and its output
// in dir/etcd.log, on free loopback ports, and waits until it is healthy.
func StartEtcd(ctx context.Context, dir string) (*Etcd, error) {
	binary, err := Binary("etcd")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		e, err := startEtcd(ctx, binary, dir)
		if err == nil || attempt == startAttempts || !isAddrInUse(err) {
			return e, err
		}
	}
}

func startEtcd(ctx context.Context, binary, dir string) (*Etcd, error) {
	clientPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	peerPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	args := []string{
		"--name=default",
		"--data-dir=" + filepath.Join(dir, "data"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		// Test data is thrown away; fsync per write only makes every
		// apiserver write slow on a shared disk.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}
	proc, err := startProcess("etcd", binary, args, filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, err
	}
	e := &Etcd{proc: proc, endpoint: clientURL}
	if err := proc.waitReady(ctx, etcdStartTimeout, e.healthy); err != nil {
		proc.Stop()
		return nil, err
	}
	return e, nil
}

// healthy asks etcd's /health endpoint, which answers 200 only once the
// member has a leader and serves requests.
func (e *Etcd) healthy(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.endpoint+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/health: %s", resp.Status)
	}
	return nil
}

// Endpoint returns the client URL, e.g. http://127.0.0.1:23790.
func (e *Etcd) Endpoint() string { return e.endpoint }

// LogFile returns the path of etcd's log.
func (e *Etcd) LogFile() string { return e.proc.logPath }

// Stop terminates etcd and waits for it to exit. Stop the clusters that use
// it first. It is safe to call more than once.
func (e *Etcd) Stop() { e.proc.Stop() }

// Pid is etcd's process ID.
func (e *Etcd) Pid() int { return e.proc.Pid() }
