package integration

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
)

// kubectl runs the built kubectl against cluster c of the clusterset, in
// the test namespace, as a user would with the clusterset's kubeconfig.
type kubectl struct {
	binary, kubeconfig, context string
}

func newKubectl(t *testing.T, cs *clusterset.ClusterSet, c *clusterset.Cluster) kubectl {
	t.Helper()
	framework.SkipUnlessBuilt(t, "kubectl")
	binary, err := framework.Binary("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	return kubectl{binary: binary, kubeconfig: cs.Kubeconfig(), context: c.Name}
}

func (k kubectl) command(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, k.binary, append([]string{"--kubeconfig=" + k.kubeconfig, "--context=" + k.context, "--namespace=" + csNamespace}, args...)...)
}

// run runs kubectl to its end and returns its output; a non-zero exit is
// an *exec.ExitError.
func (k kubectl) run(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := k.command(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (k kubectl) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := k.run(t, "", args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// stream starts kubectl and returns a reader of its standard output, for
// commands that do not end by themselves (logs -f, attach, port-forward).
func (k kubectl) stream(t *testing.T, args ...string) *bufio.Reader {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cmd := k.command(ctx, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	return bufio.NewReader(out)
}

// readLines reads n lines within timeout.
func readLines(t *testing.T, r *bufio.Reader, n int, timeout time.Duration) []string {
	t.Helper()
	lines := make(chan string)
	errs := make(chan error, 1)
	go func() {
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				errs <- err
				return
			}
			lines <- strings.TrimRight(line, "\n")
		}
	}()
	var got []string
	deadline := time.After(timeout)
	for len(got) < n {
		select {
		case l := <-lines:
			got = append(got, l)
		case err := <-errs:
			t.Fatalf("after %d of %d lines (%q): %v", len(got), n, got, err)
		case <-deadline:
			t.Fatalf("only %d of %d lines after %v: %q", len(got), n, timeout, got)
		}
	}
	return got
}

// csKubeletAPI checks what a user does with kubectl against a pod of the
// local clusterset, all of it served by the fake kubelet's API through the
// apiserver's egress: exec (stdin, a TTY, exit codes, the pod's network and
// DNS), logs (tail, timestamps, follow, previous), attach and port-forward.
func csKubeletAPI(t *testing.T, cs *clusterset.ClusterSet, c *clusterset.Cluster) {
	k := newKubectl(t, cs, c)
	logger := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "logger"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "busybox",
			Command: []string{"sh", "-c", `i=0; while true; do echo "line $i"; i=$((i+1)); sleep 0.2; done`}}}},
	}
	crasher := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "crasher"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "busybox",
			Command: []string{"sh", "-c", `echo "started at $(date +%s%N)"; sleep 1; exit 1`}}}},
	}
	csCreatePod(t, c, logger)
	csCreatePod(t, c, crasher)
	csWaitPodsReady(t, c, "logger")

	t.Run("exec runs in the pod's network with its DNS", func(t *testing.T) {
		out := k.mustRun(t, "exec", "client", "--", "cat", "/etc/resolv.conf")
		if !strings.Contains(out, "nameserver "+c.DNSIP) || !strings.Contains(out, "search "+csNamespace+".svc.cluster.local") {
			t.Errorf("resolv.conf in the pod:\n%s", out)
		}
		// By the Service's short name, through the pod's resolver and
		// kube-proxy, to the Service's pods.
		out = k.mustRun(t, "exec", "client", "--", "nc", "-w", "3", "echo", "80")
		if !strings.HasPrefix(out, "echo-") {
			t.Errorf("nc echo 80 from the pod: %q", out)
		}
		out = k.mustRun(t, "exec", "client", "--", "dig", "+short", "+search", "echo")
		svc, err := c.API.Client().CoreV1().Services(csNamespace).Get(t.Context(), "echo", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) != svc.Spec.ClusterIP {
			t.Errorf("dig echo in the pod: %q, want %s", out, svc.Spec.ClusterIP)
		}
		ips := strings.Fields(k.mustRun(t, "exec", "client", "--", "sh", "-c", "ip -4 -o addr show dev eth0 | awk '{print $4}'"))
		pod, err := c.API.Client().CoreV1().Pods(csNamespace).Get(t.Context(), "client", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ips) != 1 || ips[0] != pod.Status.PodIP+"/32" {
			t.Errorf("eth0 in the pod has %v, want the pod IP %s", ips, pod.Status.PodIP)
		}
	})

	t.Run("exec passes stdin, a TTY and the exit code", func(t *testing.T) {
		out, err := k.run(t, "hello from stdin\n", "exec", "-i", "client", "--", "cat")
		if err != nil || out != "hello from stdin\n" {
			t.Errorf("exec -i cat: %q %v", out, err)
		}
		out, err = k.run(t, "", "exec", "client", "--", "sh", "-c", "echo bye; exit 3")
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 3 || !strings.Contains(out, "bye") {
			t.Errorf("exec exit 3: kubectl said %q and %v, want exit code 3", out, err)
		}
		// -t needs a terminal on kubectl's side too.
		cmd := k.command(t.Context(), "exec", "-it", "client", "--", "sh", "-c", "tty; stty size")
		terminal, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 42, Cols: 137})
		if err != nil {
			t.Fatal(err)
		}
		defer terminal.Close()
		got, _ := io.ReadAll(terminal) // EIO once kubectl exits
		if err := cmd.Wait(); err != nil {
			t.Errorf("exec -it: %v\n%s", err, got)
		}
		if !regexp.MustCompile(`/dev/pts/\d+`).Match(got) || !strings.Contains(string(got), "42 137") {
			t.Errorf("exec -it tty; stty size: %q, want a pseudo-terminal of 42 rows and 137 columns", got)
		}
	})

	t.Run("logs tail, timestamps and follow", func(t *testing.T) {
		lines := strings.Split(strings.TrimSpace(k.mustRun(t, "logs", "logger", "--tail=2")), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "line ") {
			t.Errorf("logs --tail=2: %q", lines)
		}
		stamped := strings.TrimSpace(k.mustRun(t, "logs", "logger", "--tail=1", "--timestamps"))
		if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z line \d+$`).MatchString(stamped) {
			t.Errorf("logs --timestamps: %q", stamped)
		}
		follow := k.stream(t, "logs", "-f", "--tail=1", "logger")
		got := readLines(t, follow, 4, 20*time.Second)
		var first, last int
		fmt.Sscanf(got[0], "line %d", &first)
		fmt.Sscanf(got[3], "line %d", &last)
		if last != first+3 {
			t.Errorf("logs -f: %q, want consecutive lines as they are written", got)
		}
	})

	t.Run("logs of the previous container", func(t *testing.T) {
		eventually(t, 60*time.Second, "crasher to restart", func() (bool, string) {
			p, err := c.API.Client().CoreV1().Pods(csNamespace).Get(t.Context(), "crasher", metav1.GetOptions{})
			if err != nil || len(p.Status.ContainerStatuses) == 0 {
				return false, errString(err)
			}
			return p.Status.ContainerStatuses[0].RestartCount >= 1, fmt.Sprint(p.Status.ContainerStatuses[0].RestartCount)
		})
		previous := k.mustRun(t, "logs", "crasher", "--previous")
		current := k.mustRun(t, "logs", "crasher")
		if !strings.HasPrefix(previous, "started at ") || previous == current {
			t.Errorf("logs --previous %q, logs %q: want the earlier run's line", previous, current)
		}
		out, err := k.run(t, "", "logs", "logger", "--previous")
		if err == nil || !strings.Contains(out, "previous terminated container") {
			t.Errorf("logs --previous of a container that never restarted: %q %v", out, err)
		}
	})

	t.Run("attach streams the output", func(t *testing.T) {
		got := readLines(t, k.stream(t, "attach", "logger"), 3, 20*time.Second)
		for _, line := range got {
			if !strings.HasPrefix(line, "line ") && !strings.Contains(line, "If you don't see a command prompt") {
				t.Errorf("attach: %q", got)
			}
		}
	})

	t.Run("port-forward reaches the pod's port", func(t *testing.T) {
		out := k.stream(t, "port-forward", "pod/echo-a-1", ":8080")
		line := readLines(t, out, 1, 30*time.Second)[0]
		m := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 8080`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("port-forward said %q", line)
		}
		for range 2 { // one tunnel, several connections
			conn, err := net.DialTimeout("tcp", "127.0.0.1:"+m[1], 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(conn)
			conn.Close()
			if strings.TrimSpace(string(got)) != "echo-a-1" {
				t.Errorf("through port-forward: %q %v, want echo-a-1", got, err)
			}
		}
	})

	t.Run("the kubelet API lets in only whom the apiserver authorizes", func(t *testing.T) {
		pod, err := c.API.Client().CoreV1().Pods(csNamespace).Get(t.Context(), "logger", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := c.Nodes[0]
		for _, node := range c.Nodes {
			if node.Name == pod.Spec.NodeName {
				n = node
			}
		}
		get := func(cert *tls.Certificate) (int, error) {
			config := &tls.Config{RootCAs: c.API.KubeletClientCAs(), ServerName: n.IP}
			if cert != nil {
				config.Certificates = []tls.Certificate{*cert}
			}
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig: config,
				DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
					return netns.Dial(n.Netns, network, addr, 2*time.Second)
				},
			}}
			resp, err := client.Get("https://" + net.JoinHostPort(n.IP, "10250") + "/containerLogs/" + csNamespace + "/logger/main?tailLines=1")
			if err != nil {
				return 0, err
			}
			resp.Body.Close()
			return resp.StatusCode, nil
		}
		if _, err := get(nil); err == nil {
			t.Errorf("a client without a certificate got an answer")
		}
		nobody, err := c.API.IssueKubeletClientCert("nobody")
		if err != nil {
			t.Fatal(err)
		}
		if code, err := get(&nobody); code != http.StatusForbidden {
			t.Errorf("a certificate of the kubelet CA for a user without nodes/proxy: %d %v, want 403", code, err)
		}
		apiserver, err := c.API.IssueKubeletClientCert(framework.KubeletClientUser, "system:masters")
		if err != nil {
			t.Fatal(err)
		}
		if code, err := get(&apiserver); code != http.StatusOK {
			t.Errorf("the apiserver's identity: %d %v, want 200", code, err)
		}
	})
}

// csWorkloads checks the workload controllers the harness runs: a
// StatefulSet rolls out (kubectl rollout status) with the per-pod DNS names
// and host names of a headless Service, and a Job runs to completion.
func csWorkloads(t *testing.T, cs *clusterset.ClusterSet, c *clusterset.Cluster) {
	k := newKubectl(t, cs, c)
	ctx := t.Context()
	_, err := c.API.Client().CoreV1().Services(csNamespace).Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, Selector: map[string]string{"app": "web"},
			Ports: []v1.ServicePort{{Name: "tcp", Port: 8080}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := csEchoPod("")
	_, err = c.API.Client().AppsV1().StatefulSets(csNamespace).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: "web",
			Replicas:    ptr.To[int32](2),
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       pod.Spec,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a StatefulSet rolls out", func(t *testing.T) {
		k.mustRun(t, "rollout", "status", "statefulset/web", "--timeout=120s")
	})

	t.Run("StatefulSet pods have per-pod DNS names and host names", func(t *testing.T) {
		ips := csWaitPodsReady(t, c, "web-0", "web-1")
		client := csPodNetns(t, cs, c, "client")
		for _, name := range []string{"web-0", "web-1"} {
			fqdn := name + ".web." + csNamespace + ".svc.cluster.local"
			eventually(t, 30*time.Second, fqdn+" to resolve to "+ips[name], func() (bool, string) {
				got, err := csLookup(client, c.DNSIP, fqdn)
				return err == nil && len(got) == 1 && got[0] == ips[name], fmt.Sprintf("%v %v", got, err)
			})
			if out := strings.TrimSpace(k.mustRun(t, "exec", name, "--", "sh", "-c", "echo $HOSTNAME")); out != name {
				t.Errorf("HOSTNAME in %s: %q", name, out)
			}
			if out := k.mustRun(t, "exec", name, "--", "cat", "/etc/hosts"); !strings.Contains(out, ips[name]+"\t"+fqdn+"\t"+name) {
				t.Errorf("/etc/hosts of %s:\n%s", name, out)
			}
		}
		// The EndpointSlice controller names the endpoints after the pods.
		slices, err := c.API.Client().DiscoveryV1().EndpointSlices(csNamespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			t.Fatal(err)
		}
		hostnames := map[string]bool{}
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.Hostname != nil {
					hostnames[*e.Hostname] = true
				}
			}
		}
		if !hostnames["web-0"] || !hostnames["web-1"] {
			t.Errorf("endpoint host names %v, want web-0 and web-1", hostnames)
		}
	})

	t.Run("a Job runs to completion", func(t *testing.T) {
		k.mustRun(t, "create", "job", "hello", "--image=busybox", "--", "sh", "-c", "echo hello from a job")
		k.mustRun(t, "wait", "--for=condition=complete", "job/hello", "--timeout=90s")
		if out := k.mustRun(t, "logs", "job/hello"); out != "hello from a job\n" {
			t.Errorf("logs of the job: %q", out)
		}
	})
}

// csKubernetesService checks that pods reach their own cluster's apiserver
// through the `kubernetes` Service with the credentials a kubelet gives
// them, as in-cluster clients (a controller or operator run as a pod) do.
func csKubernetesService(t *testing.T, cs *clusterset.ClusterSet, c *clusterset.Cluster) {
	k := newKubectl(t, cs, c)
	eventually(t, 30*time.Second, "the kubernetes Service's endpoint", func() (bool, string) {
		s, err := c.API.Client().DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Get(t.Context(), "kubernetes", metav1.GetOptions{})
		if err != nil || len(s.Endpoints) == 0 {
			return false, errString(err)
		}
		return s.Endpoints[0].Addresses[0] == c.APIServerIP, s.Endpoints[0].Addresses[0]
	})
	// What rest.InClusterConfig reads: the Service's address from the
	// environment, the token, the CA and the namespace from the service
	// account volume; the apiserver's certificate checked against the CA.
	// (An IPv6 address goes in brackets, as net.JoinHostPort puts it.)
	inCluster := `cd /var/run/secrets/kubernetes.io/serviceaccount && host=$KUBERNETES_SERVICE_HOST && ` +
		`case $host in *:*) host="[$host]";; esac && ` +
		`curl -sS -m 10 --cacert ca.crt -H "Authorization: Bearer $(cat token)" ` +
		`https://$host:$KUBERNETES_SERVICE_PORT/api/v1/namespaces/$(cat namespace)/pods`
	out := k.mustRun(t, "exec", "client", "--", "sh", "-c", inCluster)
	// The default service account may do nothing: the answer names it.
	if !strings.Contains(out, `"code": 403`) || !strings.Contains(out, "system:serviceaccount:"+csNamespace+":default") {
		t.Fatalf("in-cluster request as the pod's service account: %s", out)
	}
	k.mustRun(t, "create", "role", "pod-reader", "--verb=list", "--resource=pods")
	k.mustRun(t, "create", "rolebinding", "pod-reader", "--role=pod-reader", "--serviceaccount="+csNamespace+":default")
	eventually(t, 30*time.Second, "the pod's service account to list pods once granted", func() (bool, string) {
		out, err := k.run(t, "", "exec", "client", "--", "sh", "-c", inCluster)
		return err == nil && strings.Contains(out, `"kind": "PodList"`) && strings.Contains(out, `"name": "client"`), out
	})
}

// csHostRefusesClustersetRanges checks that, while the clusterset is up,
// the host has no way to send a packet to any of its addresses: each is
// unreachable (refused at once, never sent to the default route).
func csHostRefusesClustersetRanges(t *testing.T, cs *clusterset.ClusterSet, c *clusterset.Cluster) {
	pod, err := c.API.Client().CoreV1().Pods(csNamespace).Get(t.Context(), "client", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := c.API.Client().CoreV1().Services(csNamespace).Get(t.Context(), "echo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for what, addr := range map[string]string{
		"node":            c.Nodes[0].IP,
		"pod":             pod.Status.PodIP,
		"Service":         svc.Spec.ClusterIP,
		"apiserver":       c.APIServerIP,
		"clusterset IP":   "10.250.1.2",
		"clusterset IPv6": "fd00:10:250::2",
	} {
		out, _ := exec.Command("ip", "route", "get", addr).CombinedOutput()
		if !strings.HasPrefix(string(out), "unreachable") && !strings.Contains(string(out), "No route to host") {
			t.Errorf("host route to the %s address %s: %q, want unreachable", what, addr, out)
		}
		// The kubelet port too: the apiserver reaches kubelets only
		// through its egress proxy.
		_, err := net.DialTimeout("tcp", net.JoinHostPort(addr, "10250"), 2*time.Second)
		if !errors.Is(err, syscall.EHOSTUNREACH) && !errors.Is(err, syscall.ENETUNREACH) {
			t.Errorf("dialing the %s address %s from the host: %v, want no route to host", what, addr, err)
		}
	}
}
