package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/echoserver"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/kindconfig"
)

const (
	// echoImage is test/cmd/echoserver: the local clusterset's pods run it
	// as a process (test/podimage), kind's from kind-config/Dockerfile.
	echoImage = "mcs-kube-proxy/echoserver:dev"
	// caseLabel marks the namespaces the suite creates, for clean-up;
	// its value is the top-level test that made them (caseOf).
	caseLabel = "e2e.mcs-kube-proxy.io/case"
)

// space is one case's Kubernetes namespace, created in every cluster (the
// controller writes an import only where its namespace exists).
type space struct {
	s    *suite
	t    *testing.T
	name string
}

func (s *suite) space(t *testing.T, name string) *space {
	t.Helper()
	for _, m := range s.p.members() {
		createCaseNamespace(t, m, name)
	}
	return &space{s: s, t: t, name: name}
}

// createCaseNamespace creates namespace name in m, labelled with t's
// case. Where a namespace of that name is still going (an earlier run's,
// which deleteEarlierRuns deleted), it waits until it is gone: its
// exports and imports would otherwise meet the case's. Only that name is
// waited for: other namespaces of an earlier run hold nothing the case
// reads. One that exists and is not going is this run's, and is kept.
func createCaseNamespace(t *testing.T, m *member, name string) {
	t.Helper()
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{caseLabel: caseOf(t)}}}
	eventually(t, 180*time.Second, m.Name+": namespace "+name+" of an earlier run to go", func() (bool, string) {
		_, err := m.Client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{})
		if err == nil {
			return true, ""
		}
		if !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		old, err := m.Client.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			// Gone meanwhile: create it on the next try.
			return false, err.Error()
		}
		return old.DeletionTimestamp == nil, "terminating since " + old.DeletionTimestamp.String()
	})
	// Pods are admitted only once the namespace has its default
	// ServiceAccount, which kube-controller-manager writes: on a node
	// busy tearing an earlier suite down that took over 30 s once.
	// Upstream's e2e framework waits for it the same way, up to 2 min.
	eventually(t, 120*time.Second, m.Name+": the default ServiceAccount of namespace "+name, func() (bool, string) {
		_, err := m.Client.CoreV1().ServiceAccounts(name).Get(t.Context(), "default", metav1.GetOptions{})
		return err == nil, errString(err)
	})
}

// service creates a Service selecting app=name.
func (sp *space) service(m *member, name string, mutate func(*v1.ServiceSpec)) *v1.Service {
	sp.t.Helper()
	spec := v1.ServiceSpec{
		Selector: map[string]string{"app": name},
		Ports:    []v1.ServicePort{{Name: "tcp", Port: 80, TargetPort: intstr.FromInt(8080)}},
	}
	if mutate != nil {
		mutate(&spec)
	}
	svc, err := m.Client.CoreV1().Services(sp.name).Create(sp.t.Context(), &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		sp.t.Fatal(err)
	}
	return svc
}

// acceptNativeNames sets, as the owner of Service name in m would, the
// annotation that lets an import's native names join it (value "true"),
// or takes it off (accept false).
func (sp *space) acceptNativeNames(m *member, name string, accept bool) {
	sp.t.Helper()
	eventually(sp.t, 10*time.Second, "Service "+name+" in "+m.Name+" to accept native names: "+fmt.Sprint(accept), func() (bool, string) {
		svc, err := m.Client.CoreV1().Services(sp.name).Get(sp.t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if accept {
			if svc.Annotations == nil {
				svc.Annotations = map[string]string{}
			}
			svc.Annotations[mcsproxy.AnnotationAcceptNativeNames] = "true"
		} else {
			delete(svc.Annotations, mcsproxy.AnnotationAcceptNativeNames)
		}
		_, err = m.Client.CoreV1().Services(sp.name).Update(sp.t.Context(), svc, metav1.UpdateOptions{})
		return err == nil, errString(err)
	})
}

// echoPod is a pod of app that answers its own name on TCP and UDP 8080.
// clientIPAffinity gives a Service ClientIP session affinity with timeout
// seconds.
func clientIPAffinity(timeout int32) func(*v1.ServiceSpec) {
	return func(spec *v1.ServiceSpec) {
		spec.SessionAffinity = v1.ServiceAffinityClientIP
		spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &timeout}}
	}
}

func echoPod(name, app string) *v1.Pod {
	p := clientPod(name)
	p.Labels = map[string]string{"app": app}
	p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(8080)}}, PeriodSeconds: 1}
	return p
}

// clientPod runs the same image, unselected: the suite runs the image's
// client inside it (on kind through its runPort).
func clientPod(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "echo", Image: echoImage, ImagePullPolicy: v1.PullIfNotPresent, Args: []string{"--port=8080", fmt.Sprintf("--run-port=%d", runPort)},
		}}},
	}
}

// runPort is where the suite's pods run ask and dig for a request through
// the apiserver's pod proxy (echoserver.RunPath).
const runPort = 8090

func (sp *space) createPod(m *member, pod *v1.Pod) {
	sp.t.Helper()
	eventually(sp.t, 30*time.Second, "creating pod "+pod.Name, func() (bool, string) {
		_, err := m.Client.CoreV1().Pods(sp.name).Create(sp.t.Context(), pod, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), errString(err)
	})
}

// echoPods creates echo pods of app and returns their IPs once ready.
func (sp *space) echoPods(m *member, app string, names ...string) map[string]string {
	sp.t.Helper()
	for _, n := range names {
		sp.createPod(m, echoPod(n, app))
	}
	return sp.waitReady(m, names...)
}

// client creates a pod in m that the suite sends requests and DNS
// questions from, on the node whose rules the suite reads.
func (sp *space) client(m *member, name string) *pod {
	sp.t.Helper()
	sp.createPod(m, onNode(clientPod(name), m.Node))
	sp.waitReady(m, name)
	return &pod{p: sp.s.p, m: m, ns: sp.name, name: name}
}

// webInBoth exports a Service web from A and B, with one echo pod in each
// (web-a-1, web-b-1) and a client in B, and waits until both pods answer
// the clusterset IP from the client. It returns the pods' IPs by name.
func (sp *space) webInBoth() (ips map[string]string, client *pod, vip string) {
	sp.t.Helper()
	s := sp.s
	sp.service(s.a, "web", nil)
	sp.service(s.b, "web", nil)
	ips = sp.echoPods(s.a, "web", "web-a-1")
	maps.Copy(ips, sp.echoPods(s.b, "web", "web-b-1"))
	client = sp.client(s.b, "client")
	sp.export(s.a, "web")
	sp.export(s.b, "web")
	vip = sp.vip(s.b, "web")
	waitAnswers(sp.t, client, "tcp", hostPort(vip, 80), 30, []string{"web-a-1", "web-b-1"})
	return ips, client, vip
}

func (sp *space) waitReady(m *member, names ...string) map[string]string {
	sp.t.Helper()
	ips, err := clusterset.WaitPodsReady(sp.t.Context(), m.Client, m.Name, 120*time.Second, sp.name, names...)
	if err != nil {
		sp.t.Fatal(err)
	}
	return ips
}

func (sp *space) export(m *member, name string) {
	sp.t.Helper()
	sp.exportWith(m, name, mcsv1beta1.ServiceExportSpec{})
}

// exportWith exports name with spec (exportedLabels, exportedAnnotations).
func (sp *space) exportWith(m *member, name string, spec mcsv1beta1.ServiceExportSpec) {
	sp.t.Helper()
	_, err := m.MCS.MulticlusterV1beta1().ServiceExports(sp.name).Create(sp.t.Context(), &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		sp.t.Fatal(err)
	}
}

func (sp *space) unexport(m *member, name string) {
	sp.t.Helper()
	if err := m.MCS.MulticlusterV1beta1().ServiceExports(sp.name).Delete(sp.t.Context(), name, metav1.DeleteOptions{}); err != nil {
		sp.t.Fatal(err)
	}
}

// waitImport waits until m has the ServiceImport and cond holds for it.
func (sp *space) waitImport(m *member, name string, what string, cond func(*mcsv1beta1.ServiceImport) bool) *mcsv1beta1.ServiceImport {
	sp.t.Helper()
	var si *mcsv1beta1.ServiceImport
	eventually(sp.t, 60*time.Second, m.Name+" ServiceImport "+name+" "+what, func() (bool, string) {
		got, err := m.MCS.MulticlusterV1beta1().ServiceImports(sp.name).Get(sp.t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		si = got
		return cond(got), fmt.Sprintf("%+v", got.Spec)
	})
	return si
}

// waitNoImport waits until the ServiceImport has left m.
func (sp *space) waitNoImport(m *member, name string) {
	sp.t.Helper()
	eventually(sp.t, 30*time.Second, "import "+name+" to leave "+m.Name, func() (bool, string) {
		_, err := m.MCS.MulticlusterV1beta1().ServiceImports(sp.name).Get(sp.t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), errString(err)
	})
}

// vip waits for the import's clusterset IP in m.
func (sp *space) vip(m *member, name string) string {
	sp.t.Helper()
	si := sp.waitImport(m, name, "with an IP", func(si *mcsv1beta1.ServiceImport) bool { return len(si.Spec.IPs) > 0 })
	return si.Spec.IPs[0]
}

// exportConditions renders an export's conditions as
// "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts".
func (sp *space) exportConditions(m *member, name string) string {
	se, err := m.MCS.MulticlusterV1beta1().ServiceExports(sp.name).Get(sp.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, typ := range []string{"Valid", "Ready", "Conflict"} {
		for _, cond := range se.Status.Conditions {
			if cond.Type == typ {
				parts = append(parts, fmt.Sprintf("%s=%s/%s", cond.Type, cond.Status, cond.Reason))
			}
		}
	}
	return strings.Join(parts, " ")
}

// pod is a client pod: requests and DNS questions leave from inside it.
type pod struct {
	p    provider
	m    *member
	ns   string
	name string
}

func (c *pod) String() string { return c.m.Name + "/" + c.ns + "/" + c.name }

// askEach sends n requests (TCP connections, or UDP datagrams), one after
// the other, and returns who answered each, "" where nobody did; flags go
// to echoserver's ask.
func (c *pod) askEach(network, addr string, n int, flags ...string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n)*2*time.Second+20*time.Second)
	defer cancel()
	args := append([]string{"ask", "--network=" + network, fmt.Sprintf("--count=%d", n)}, flags...)
	out, err := c.p.client(ctx, c.m, c.ns, c.name, append(args, addr)...)
	got := make([]string, n)
	if err != nil {
		return got
	}
	for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if i < n && line != "-" {
			got[i] = line
		}
	}
	return got
}

// ask sends one request and returns who answered, or "".
func (c *pod) ask(network, addr string) string { return c.askEach(network, addr, 1)[0] }

// answers sends n requests and returns the sorted set of pods that
// answered.
func (c *pod) answers(network, addr string, n int) []string {
	seen := map[string]bool{}
	for _, name := range c.askEach(network, addr, n) {
		if name != "" {
			seen[name] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// heldConn is a TCP connection a client pod holds to an address while a
// case changes the node's rules (echoserver's hold).
type heldConn struct {
	addr string
	done chan struct{}
	out  []byte
	err  error
}

// hold makes one TCP connection to addr and asks on it, again and again,
// until untilSilent stops answering new connections and once after that.
func (c *pod) hold(addr, untilSilent string) *heldConn {
	h := &heldConn{addr: addr, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		h.out, h.err = c.p.client(ctx, c.m, c.ns, c.name, "hold", "--until-silent="+untilSilent, "--for=150s", addr)
	}()
	return h
}

// check waits for the hold to end and fails t unless the one connection
// was answered every time, by the one endpoint it was made to, including
// after the silence it waited for.
func (h *heldConn) check(t *testing.T) {
	t.Helper()
	<-h.done
	if h.err != nil {
		t.Fatalf("holding a connection to %s: %v %s", h.addr, h.err, h.out)
	}
	lines := strings.Split(strings.TrimSpace(string(h.out)), "\n")
	var names []string
	silent := false
	for _, l := range lines {
		_, what, _ := strings.Cut(l, " ")
		switch {
		case what == "silent":
			silent = true
		case strings.HasPrefix(what, "-"):
			t.Fatalf("the connection held to %s went unanswered (reset or dropped): %q", h.addr, lines)
		case !slices.Contains(names, what):
			names = append(names, what)
		}
	}
	// One name and the silence make at least two lines.
	if len(names) != 1 || !silent || !strings.HasSuffix(lines[len(lines)-1], " "+names[0]) || !strings.HasSuffix(lines[len(lines)-2], " silent") {
		t.Fatalf("the connection held to %s: %q; want one endpoint answering it throughout, and after the silence", h.addr, lines)
	}
	t.Logf("one connection to %s, made before and asked %d times until after the change: answered by %s every time", h.addr, len(lines)-1, names[0])
}

// countAnswers sends n TCP requests and counts the answers per pod. Every
// one is expected to be answered, as a client waits for it: 3 s to
// connect (a SYN lost on a loaded node is sent again after 1 s; one sent
// where nothing answers, or refused, still fails) and 3 s for the answer.
// On kind, two cores run three control planes, and an answer sometimes
// takes over a second.
func (c *pod) countAnswers(addr string, n int) map[string]int {
	got := map[string]int{}
	for _, name := range c.askEach("tcp", addr, n, "--dial-timeout=3s", "--timeout=3s") {
		got[name]++
	}
	return got
}

// query asks server one question, as `dig @server name type` would.
func (c *pod) query(server, name string, typ dnsmessage.Type) (echoserver.Answer, error) {
	var answer echoserver.Answer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := c.p.client(ctx, c.m, c.ns, c.name, "dig", "--server="+server, name, strings.TrimPrefix(typ.String(), "Type"))
	if err != nil {
		return answer, err
	}
	err = json.Unmarshal(out, &answer)
	return answer, err
}

func podNames(ips map[string]string) []string { return slices.Sorted(maps.Keys(ips)) }

// ruleset is `nft list ruleset` on m's node.
func (s *suite) ruleset(ctx context.Context, m *member) (string, error) {
	out, err := s.p.nodeExec(ctx, m, m.Node, "nft", "list", "ruleset")
	return string(out), err
}

// hasIP reports whether text mentions ip as a whole address.
func hasIP(text, ip string) bool {
	return regexp.MustCompile(`(^|[^0-9.])` + regexp.QuoteMeta(ip) + `([^0-9.]|\.[^0-9]|$)`).MatchString(text)
}

// waitRules waits until the ruleset of m's node mentions every ip of
// present and none of absent.
func (s *suite) waitRules(t *testing.T, m *member, timeout time.Duration, present, absent []string) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("ruleset of %s/%s to have %v and not %v", m.Name, m.Node, present, absent), func() (bool, string) {
		rs, err := s.ruleset(t.Context(), m)
		if err != nil {
			return false, err.Error()
		}
		var wrong []string
		for _, ip := range present {
			if !hasIP(rs, ip) {
				wrong = append(wrong, "missing "+ip)
			}
		}
		for _, ip := range absent {
			if hasIP(rs, ip) {
				wrong = append(wrong, "stale "+ip)
			}
		}
		return len(wrong) == 0, strings.Join(wrong, ", ")
	})
}

func waitAnswers(t *testing.T, client *pod, network, addr string, n int, want []string) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("%s %s from %s to answer %v", network, addr, client, want), func() (bool, string) {
		got := client.answers(network, addr, n)
		return slices.Equal(got, want), strings.Join(got, ",")
	})
}

func hostPort(ip string, port int) string { return net.JoinHostPort(ip, fmt.Sprint(port)) }

// eventually polls cond until it holds or timeout passes: after 200ms
// first, then half as long again each time, up to a second. Most
// conditions run a command in a pod or on a node (on kind an exec through
// the kubelet and the container runtime, the suite's largest cost on a
// busy machine); a long wait (an endpoint TTL, a restart) need not ask
// five times a second.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	pause := 200 * time.Millisecond
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last state: %s", timeout, what, state)
		}
		time.Sleep(pause)
		pause = min(pause*3/2, time.Second)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// output runs cmd and returns its standard output; a failure carries its
// standard error.
func output(cmd *exec.Cmd) ([]byte, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// caseOf is the top-level test t belongs to: the value of caseLabel on
// the namespaces it makes.
func caseOf(t *testing.T) string { return strings.SplitN(t.Name(), "/", 2)[0] }

// applyManifest applies the objects of the manifest at path (its
// placeholders filled from values) to the cluster of cfg, server-side, as
// hack/kind-e2e.sh does; those skip says are left out.
func applyManifest(t *testing.T, cfg *rest.Config, path string, values map[string]string, skip func(*unstructured.Unstructured) bool) {
	t.Helper()
	objs, err := kindconfig.Objects(path, values)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kubernetes.NewForConfigOrDie(cfg).Discovery()))
	for _, obj := range objs {
		if skip != nil && skip(obj) {
			continue
		}
		if err := kindconfig.Apply(t.Context(), dyn, mapper, obj, false); err != nil {
			t.Fatalf("%s: %s %s: %v", path, obj.GetKind(), obj.GetName(), err)
		}
	}
}
