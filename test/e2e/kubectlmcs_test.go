package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/kubectlmcs"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of TestKubectlMCS")

// TestKubectlMCS runs every command of kubectl-mcs against one local
// clusterset (the real mcs-controller, kube-proxy and CoreDNS) and
// compares its output with testdata/kubectlmcs/*.golden (ages and
// addresses that change between runs masked), with each failure diagnose
// explains provoked for real: no export, an invalid export, a port
// conflict, an import kube-proxy refuses, DNS not answering, a member
// unreachable with its source lease gone stale.
func TestKubectlMCS(t *testing.T) {
	runBeside(t)
	// IPv6: the clusterset's addresses stay clear of IPv4 networks a
	// machine running kind beside it may have (172.30.0.0/16).
	l := upLocalOpts(t, clusterset.Options{Clusters: 2, Prefix: "e2ekmcs", IPFamily: clusterset.IPv6}, false)
	ms := l.members()
	s := &suite{p: l, a: ms[0], b: ms[1], top: t}
	sp := s.space(t, "kmcs")
	kubeconfig := l.cs.Kubeconfig()
	// run runs kubectl mcs ARGS, compares its output with golden, and
	// returns what it wrote on stderr. Exit codes as cmd/kubectl-mcs
	// gives them: 1 for a failed check, 2 for status --wait timed out.
	run := func(t *testing.T, golden string, wantExit int, args ...string) string {
		t.Helper()
		got, errOut, err := runKubectlMCS(t, append([]string{"--kubeconfig=" + kubeconfig, "--contexts=cluster-a,cluster-b"}, args...)...)
		exit := 0
		if errors.Is(err, kubectlmcs.ErrChecksFailed) {
			exit = 1
		} else if errors.Is(err, kubectlmcs.ErrNotConverged) {
			exit = 2
		} else if err != nil {
			t.Fatalf("kubectl mcs %v: %v\n%s", args, err, errOut)
		}
		t.Logf("kubectl mcs %s (exit %d):\n%s%s", strings.Join(args, " "), exit, got, errOut)
		if exit != wantExit {
			t.Errorf("kubectl mcs %v: exit %d, want %d", args, exit, wantExit)
		}
		structured := strings.Contains(strings.Join(args, " "), "-o json")
		for i, line := range strings.Split(got, "\n") {
			if len(line) > 100 && !structured {
				t.Errorf("line %d is %d columns wide: %q", i+1, len(line), line)
			}
		}
		compareGolden(t, golden, maskVolatile(got))
		return errOut
	}

	// web: exported from a (one pod), imported by b, where the client
	// asks DNS from.
	sp.service(s.a, "web", nil)
	sp.echoPods(s.a, "web", "web-a-1")
	sp.client(s.b, "client")
	sp.export(s.a, "web")
	sp.vip(s.b, "web")
	waitImportedSlices(t, s.b, sp.name, "web")
	waitImportedSlices(t, s.a, sp.name, "web")
	waitServingImports(t, s.b)
	waitServingImports(t, s.a)
	dnsPod := "--dns-pod=" + sp.name + "/client"

	t.Run("status", func(t *testing.T) { run(t, "status", 0, "status") })
	t.Run("status --wait on a converged clusterset", func(t *testing.T) {
		run(t, "status", 0, "status", "--wait", "--wait-timeout=60s")
	})
	t.Run("get exports", func(t *testing.T) { run(t, "get-exports", 0, "get", "exports", "-A") })
	t.Run("get imports", func(t *testing.T) { run(t, "get-imports", 0, "get", "imports", "-n", sp.name, "-o", "wide") })
	t.Run("get with kubectl's printers", func(t *testing.T) {
		run(t, "get-exports-name", 0, "get", "exports", "-A", "-o", "name")
		run(t, "get-exports-no-headers", 0, "get", "exports", "-A", "--no-headers")
		run(t, "get-imports-columns", 0, "get", "imports", "-n", sp.name, "-o",
			`custom-columns=CONTEXT:.metadata.annotations.multiclusterservices\.k8s\.io/context,NAME:.metadata.name,TYPE:.spec.type,SOURCES:.status.clusters[*].cluster`)
		run(t, "get-exports-none", 0, "get", "exports", "-A", "-l", "no-such-label")
	})
	t.Run("get --watch prints what changes in any member", func(t *testing.T) {
		sw := s.space(t, "kmcs-watch")
		sw.service(s.a, "first", nil)
		sw.export(s.a, "first")
		sw.vip(s.b, "first")
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		var out, errOut lockedBuffer
		cmd := kubectlmcs.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		cmd.SetArgs([]string{"--kubeconfig=" + kubeconfig, "--contexts=cluster-a,cluster-b", "get", "imports", "-n", sw.name, "--watch"})
		done := make(chan error, 1)
		go func() { done <- cmd.ExecuteContext(ctx) }()
		row := func(cluster, name string) bool {
			for _, line := range strings.Split(out.String(), "\n") {
				if f := strings.Fields(line); len(f) > 1 && f[0] == cluster && f[1] == name {
					return true
				}
			}
			return false
		}
		eventually(t, 10*time.Second, "the listing", func() (bool, string) { return row("cluster-a", "first") && row("cluster-b", "first"), out.String() })
		// A name exported after the listing: a row per member as its
		// import is written and given its clusterset IP.
		sw.service(s.b, "second", nil)
		sw.export(s.b, "second")
		eventually(t, 30*time.Second, "rows of the new import from both members", func() (bool, string) {
			return row("cluster-a", "second") && row("cluster-b", "second"), out.String()
		})
		cancel()
		if err := <-done; err != nil {
			t.Errorf("get --watch ended with %v\n%s", err, errOut.String())
		}
		if n := strings.Count(out.String(), "CLUSTER"); n != 1 {
			t.Errorf("the header printed %d times, want once:\n%s", n, out.String())
		}
		if errOut.String() != "" {
			t.Errorf("get --watch, ended by the user, warned:\n%s", errOut.String())
		}
		t.Logf("get imports --watch:\n%s%s", out.String(), errOut.String())
		// Gone again, so that the cases below count what they did.
		for _, m := range []*member{s.a, s.b} {
			sw.unexport(m, map[*member]string{s.a: "first", s.b: "second"}[m])
		}
		for _, m := range []*member{s.a, s.b} {
			sw.waitNoImport(m, "first")
			sw.waitNoImport(m, "second")
		}
	})
	t.Run("diagnose passes", func(t *testing.T) {
		run(t, "diagnose-ok", 0, "diagnose", "service", sp.name+"/web", "--from=cluster-b", dnsPod)
	})
	t.Run("diagnose without a pod checks the objects DNS serves", func(t *testing.T) {
		run(t, "diagnose-objects", 0, "diagnose", "service", sp.name+"/web")
	})

	t.Run("no export", func(t *testing.T) {
		sp.service(s.a, "lonely", nil)
		run(t, "diagnose-no-export", 1, "diagnose", "service", sp.name+"/lonely", "--from=cluster-b")
		run(t, "diagnose-no-export-json", 1, "diagnose", "service", sp.name+"/lonely", "--from=cluster-b", "-o", "json")
	})

	t.Run("invalid export", func(t *testing.T) {
		sp.service(s.a, "ext", func(spec *v1.ServiceSpec) {
			*spec = v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "example.invalid"}
		})
		sp.export(s.a, "ext")
		eventually(t, 30*time.Second, "ext's export to be invalid", func() (bool, string) {
			got := sp.exportConditions(s.a, "ext")
			return strings.Contains(got, "Valid=False"), got
		})
		run(t, "diagnose-invalid-export", 1, "diagnose", "service", sp.name+"/ext", "--from=cluster-b")
	})

	t.Run("port conflict", func(t *testing.T) {
		sp.service(s.a, "pc", nil)
		sp.echoPods(s.a, "pc", "pc-a-1")
		sp.export(s.a, "pc")
		sp.vip(s.b, "pc")
		sp.service(s.b, "pc", func(spec *v1.ServiceSpec) { spec.Ports[0].Port = 81 })
		sp.export(s.b, "pc")
		waitImportedSlices(t, s.b, sp.name, "pc")
		waitServiceSlices(t, s.b, sp.name, "pc")
		eventually(t, 30*time.Second, "pc's exports to conflict", func() (bool, string) {
			got := sp.exportConditions(s.b, "pc")
			return strings.Contains(got, "Conflict=True/PortConflict"), got
		})
		run(t, "diagnose-port-conflict", 1, "diagnose", "service", sp.name+"/pc", "--from=cluster-b")
		run(t, "get-exports-conflict", 0, "get", "exports", "-n", sp.name, "-o", "wide")
	})

	t.Run("import refused by kube-proxy", func(t *testing.T) {
		// An import nobody trusted wrote (the admission policy that keeps
		// everyone but the controller from writing imports unbound for it):
		// kube-proxy refuses it on b's node and says why.
		bindings := s.b.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
		b, err := bindings.Get(t.Context(), importPolicyBinding, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := bindings.Delete(t.Context(), importPolicyBinding, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			restored := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: b.Name, Labels: b.Labels}, Spec: b.Spec}
			if _, err := bindings.Create(t.Context(), restored, metav1.CreateOptions{}); err != nil {
				t.Error(err)
			}
		}()
		rogue := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "rogue"},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"fd00:10:250::c8c8"}, IPFamilies: []v1.IPFamily{v1.IPv6Protocol},
				Ports: []mcsv1beta1.ServicePort{{Name: "tcp", Protocol: v1.ProtocolTCP, Port: 80}}}}
		eventually(t, 30*time.Second, "the rogue import to be written", func() (bool, string) {
			_, err := s.b.MCS.MulticlusterV1beta1().ServiceImports(sp.name).Create(t.Context(), rogue, metav1.CreateOptions{})
			return err == nil, errString(err)
		})
		defer func() {
			_ = s.b.MCS.MulticlusterV1beta1().ServiceImports(sp.name).Delete(t.Context(), "rogue", metav1.DeleteOptions{})
		}()
		waitKubeProxyEvent(t, s.b, sp.name, "rogue", "UntrustedManager")
		run(t, "diagnose-refused", 1, "diagnose", "service", sp.name+"/rogue", "--from=cluster-b")
	})

	t.Run("DNS not answering", func(t *testing.T) {
		pid := coreDNSPid(t, filepath.Join(l.cs.Dir(), "cluster-b", "Corefile"))
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = syscall.Kill(pid, syscall.SIGCONT) }()
		run(t, "diagnose-dns", 1, "diagnose", "service", sp.name+"/web", "--from=cluster-b", dnsPod)
	})

	t.Run("member unreachable and stale leases", func(t *testing.T) {
		start := l.stopAPIServer(t, s.a)
		defer start(t)
		eventually(t, 60*time.Second, "cluster-a's source lease in cluster-b to go stale", func() (bool, string) {
			lease, err := s.b.Client.CoordinationV1().Leases("kube-system").Get(t.Context(), kubectlmcs.SourceLeasePrefix+s.a.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return leaseStale(lease), "fresh"
		})
		run(t, "status-unreachable", 0, "status")
		// --wait gives up after its timeout, exit 2, and says what it
		// waited for.
		if errOut := run(t, "status-unreachable", 2, "status", "--wait", "--wait-timeout=3s"); !strings.Contains(errOut, "cluster-a: unreachable") ||
			!strings.Contains(errOut, "cluster-b: stale source leases: cluster-a") {
			t.Errorf("status --wait did not say it waited for cluster-a and its lease:\n%s", errOut)
		}
		run(t, "diagnose-unreachable", 1, "diagnose", "service", sp.name+"/web", "--from=cluster-b")
	})
}

func leaseStale(l *coordinationv1.Lease) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return time.Since(l.Spec.RenewTime.Time) > time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second+time.Second
}

// waitImportedSlices waits until m holds MCS EndpointSlices of import ns/name.
func waitImportedSlices(t *testing.T, m *member, ns, name string) {
	t.Helper()
	eventually(t, 60*time.Second, "the EndpointSlices of "+ns+"/"+name+" in "+m.Name, func() (bool, string) {
		slices, err := m.Client.DiscoveryV1().EndpointSlices(ns).List(t.Context(), metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=" + name})
		if err != nil {
			return false, err.Error()
		}
		return len(slices.Items) > 0, ""
	})
}

// waitServiceSlices waits until Service ns/name of m has an EndpointSlice
// (with no endpoint, when it selects no pod).
func waitServiceSlices(t *testing.T, m *member, ns, name string) {
	t.Helper()
	eventually(t, 60*time.Second, "the EndpointSlices of Service "+ns+"/"+name+" in "+m.Name, func() (bool, string) {
		slices, err := m.Client.DiscoveryV1().EndpointSlices(ns).List(t.Context(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
		if err != nil {
			return false, err.Error()
		}
		return len(slices.Items) > 0, ""
	})
}

// waitKubeProxyEvent waits for kube-proxy's event of reason on import
// ns/name in m.
func waitKubeProxyEvent(t *testing.T, m *member, ns, name, reason string) {
	t.Helper()
	eventually(t, 60*time.Second, "kube-proxy's "+reason+" event on "+ns+"/"+name+" in "+m.Name, func() (bool, string) {
		events, err := m.Client.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range events.Items {
			if e.ReportingController == "kube-proxy" && e.Reason == reason {
				return true, ""
			}
			seen = append(seen, e.ReportingController+"/"+e.Reason)
		}
		return false, strings.Join(seen, ",")
	})
}

// waitServingImports waits for the announcement of every node's
// kube-proxy that it programs imports (on its Node, in the default
// namespace), which status and diagnose read when kube-proxy's metrics
// cannot be.
func waitServingImports(t *testing.T, m *member) {
	t.Helper()
	nodes, err := m.Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		waitKubeProxyEvent(t, m, metav1.NamespaceDefault, n.Name, kubectlmcs.ReasonServingImports)
	}
}

// coreDNSPid finds the CoreDNS process the harness runs with corefile.
func coreDNSPid(t *testing.T, corefile string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 2 && filepath.Base(args[0]) == "coredns" && args[1] == "-conf" && args[2] == corefile {
			return pid
		}
	}
	t.Fatalf("no CoreDNS process runs with %s", corefile)
	return 0
}

var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:PORT"},
	{regexp.MustCompile(`leader \S+ \(`), "leader HOLDER ("},
	{regexp.MustCompile(`\bfd00:[0-9a-f:]*[0-9a-f]\b`), "IPV6"},
	{regexp.MustCompile(`\b\d+[smhd]\b`), "AGE"},
	{regexp.MustCompile(`\b10\.2[0-9][0-9]\.\d+\.\d+\b`), "IP"},
	{regexp.MustCompile(`\b10\.9[0-9]\.\d+\.\d+\b`), "SVCIP"},
}

// maskVolatile replaces what changes between runs; table columns are
// compared with the runs of spaces between them collapsed, so that a wider
// age does not move them (indentation is kept).
func maskVolatile(s string) string {
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return regexp.MustCompile(`(\S) {2,}`).ReplaceAllString(s, "$1  ")
}

func compareGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "kubectlmcs", name+".golden")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// lockedBuffer is a bytes.Buffer one goroutine writes while another reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
