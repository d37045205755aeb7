package kubectlmcs

// The traffic probe: what diagnose --probe runs in a short-lived pod of an
// importing member, as `kubectl-mcs probe`, so that the path is checked
// from where the import's clients are (their DNS, their node's rules,
// their route to the other clusters' pods), not from the operator's
// machine.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
)

// ProbeSpec is what a probe pod is told to try, passed as JSON in its
// arguments.
type ProbeSpec struct {
	// Name is the clusterset name to resolve
	// (NAME.NAMESPACE.svc.clusterset.local).
	Name string `json:"name"`
	// Family is the family asked of DNS ("ip4" or "ip6"): the primary
	// family of what the name should resolve to, as diagnose's own
	// question.
	Family string `json:"family"`
	// Targets are the clusterset IPs' ports (Cluster empty) and the
	// source clusters' endpoints.
	Targets []ProbeTarget `json:"targets"`
	// Attempts is how many connections each clusterset IP and port gets,
	// enough to meet several source clusters behind it.
	Attempts int `json:"attempts"`
	// TimeoutMillis bounds each connection, and each answer awaited.
	TimeoutMillis int `json:"timeoutMillis"`
}

// ProbeTarget is one address to connect to.
type ProbeTarget struct {
	// Cluster is the source cluster of an endpoint; empty for a
	// clusterset IP.
	Cluster  string      `json:"cluster,omitempty"`
	Address  string      `json:"address"`
	Protocol v1.Protocol `json:"protocol"`
}

// ProbeResult is what a probe pod found, printed as one JSON line.
type ProbeResult struct {
	DNS  ProbeDNS   `json:"dns"`
	Hops []ProbeHop `json:"hops"`
}

// ProbeDNS is the answer to the clusterset name.
type ProbeDNS struct {
	Answer []string `json:"answer,omitempty"`
	Err    string   `json:"error,omitempty"`
}

// ProbeHop is what one target did.
type ProbeHop struct {
	ProbeTarget
	Attempts int `json:"attempts"`
	// Reached counts the attempts that connected (TCP) or were answered
	// (UDP).
	Reached int `json:"reached"`
	// Answers counts what the server sent first (its first line, as
	// echo servers and agnhost's serve-hostname send their pod's name),
	// by answer; "" counts connections on which it sent nothing.
	Answers map[string]int `json:"answers,omitempty"`
	// Err is the last failure.
	Err string `json:"error,omitempty"`
}

// probeQuestion is what a UDP target is sent: any datagram makes an echo
// server answer, and agnhost netexec answers this one with its pod name.
const probeQuestion = "hostname"

// Probe tries spec from where it runs: the DNS question, then every
// target, a few at a time. lookup resolves a name in a family.
func Probe(ctx context.Context, spec ProbeSpec, lookup func(ctx context.Context, family, name string) ([]net.IP, error)) ProbeResult {
	timeout := time.Duration(spec.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	var r ProbeResult
	dctx, cancel := context.WithTimeout(ctx, 2*timeout)
	ips, err := lookup(dctx, spec.Family, spec.Name)
	cancel()
	if err != nil {
		r.DNS.Err = err.Error()
	}
	for _, ip := range ips {
		r.DNS.Answer = append(r.DNS.Answer, ip.String())
	}
	r.Hops = make([]ProbeHop, len(spec.Targets))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, t := range spec.Targets {
		attempts := 1
		if t.Cluster == "" {
			attempts = max(spec.Attempts, 1)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r.Hops[i] = probeTarget(ctx, t, attempts, timeout)
		}()
	}
	wg.Wait()
	return r
}

// probeTarget connects to t attempts times, each a new connection (a new
// source port: kube-proxy chooses again).
func probeTarget(ctx context.Context, t ProbeTarget, attempts int, timeout time.Duration) ProbeHop {
	h := ProbeHop{ProbeTarget: t, Attempts: attempts}
	for range attempts {
		answer, err := ask(ctx, t, timeout)
		if err != nil {
			h.Err = err.Error()
			continue
		}
		h.Reached++
		if h.Answers == nil {
			h.Answers = map[string]int{}
		}
		h.Answers[answer]++
	}
	return h
}

// ask makes one connection to t and returns the first line the server
// sent. A TCP server that sends nothing within the timeout was still
// reached; a UDP server was reached only if it answered.
func ask(ctx context.Context, t ProbeTarget, timeout time.Duration) (string, error) {
	network := "tcp"
	switch t.Protocol {
	case v1.ProtocolUDP:
		network = "udp"
	case v1.ProtocolSCTP:
		return "", errors.New("SCTP is not probed")
	}
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, network, t.Address)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if network == "udp" {
		if _, err := conn.Write([]byte(probeQuestion)); err != nil {
			return "", err
		}
	}
	buf := make([]byte, 256)
	n, err := conn.Read(buf)
	if n > 0 || network == "tcp" && (err == io.EOF || isTimeout(err)) {
		return firstAnswerLine(buf[:n]), nil
	}
	if isTimeout(err) {
		return "", fmt.Errorf("no answer within %v", timeout)
	}
	return "", err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// firstAnswerLine is what identifies the server: its first line, at most
// 64 characters.
func firstAnswerLine(b []byte) string {
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSpace(line)
	if len(line) > 64 {
		line = line[:64]
	}
	return line
}

// probeCommand is what the probe pod runs: the spec from --spec, the
// result on stdout as one JSON line, which diagnose reads from the pod's
// log.
func (o *options) probeCommand() *cobra.Command {
	var raw string
	cmd := &cobra.Command{
		Use:   "probe --spec JSON",
		Short: "Run inside the pod diagnose --probe starts: resolve the clusterset name, connect to its IPs and to each source cluster's endpoints, print what answered as JSON",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var spec ProbeSpec
			if err := json.Unmarshal([]byte(raw), &spec); err != nil {
				return fmt.Errorf("--spec: %w", err)
			}
			r := Probe(cmd.Context(), spec, net.DefaultResolver.LookupIP)
			out, err := json.Marshal(r)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(o.streams.Out, "%s\n", out)
			return err
		},
	}
	cmd.Flags().StringVar(&raw, "spec", "", "What to probe (written by diagnose --probe)")
	_ = cmd.MarkFlagRequired("spec")
	return cmd
}
