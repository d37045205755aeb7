package e2e

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/echoserver"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
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
	for _, c := range s.cs.Clusters {
		_, err := c.API.Client().CoreV1().Namespaces().Create(t.Context(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return &space{s: s, t: t, name: name}
}

// service creates a Service selecting app=name.
func (sp *space) service(c *clusterset.Cluster, name string, mutate func(*v1.ServiceSpec)) *v1.Service {
	sp.t.Helper()
	spec := v1.ServiceSpec{
		Selector: map[string]string{"app": name},
		Ports:    []v1.ServicePort{{Name: "tcp", Port: 80, TargetPort: intstr.FromInt(8080)}},
	}
	if mutate != nil {
		mutate(&spec)
	}
	svc, err := c.API.Client().CoreV1().Services(sp.name).Create(sp.t.Context(), &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		sp.t.Fatal(err)
	}
	return svc
}

// echoPod is a pod of app that answers its own name on TCP and UDP 8080.
func echoPod(name, app string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "echo", Image: "mcs-kube-proxy/echoserver", Args: []string{"--port=8080"},
			ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(8080)}}, PeriodSeconds: 1},
		}}},
	}
}

func (sp *space) createPod(c *clusterset.Cluster, pod *v1.Pod) {
	sp.t.Helper()
	eventually(sp.t, 30*time.Second, "creating pod "+pod.Name, func() (bool, string) {
		_, err := c.API.Client().CoreV1().Pods(sp.name).Create(sp.t.Context(), pod, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), errString(err)
	})
}

// echoPods creates echo pods of app and returns their IPs once ready.
func (sp *space) echoPods(c *clusterset.Cluster, app string, names ...string) map[string]string {
	sp.t.Helper()
	for _, n := range names {
		sp.createPod(c, echoPod(n, app))
	}
	return sp.waitReady(c, names...)
}

// client creates an idle pod in c and returns its network namespace.
func (sp *space) client(c *clusterset.Cluster, name string) string {
	sp.t.Helper()
	sp.createPod(c, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}}},
	})
	sp.waitReady(c, name)
	ns, err := sp.s.cs.PodNetns(sp.t.Context(), c, sp.name, name)
	if err != nil {
		sp.t.Fatal(err)
	}
	return ns
}

func (sp *space) waitReady(c *clusterset.Cluster, names ...string) map[string]string {
	sp.t.Helper()
	ips, err := c.WaitPodsReady(sp.t.Context(), 60*time.Second, sp.name, names...)
	if err != nil {
		sp.t.Fatal(err)
	}
	return ips
}

func mcsClient(c *clusterset.Cluster) mcsclientset.Interface {
	return mcsclientset.NewForConfigOrDie(c.API.RESTConfig())
}

func (sp *space) export(c *clusterset.Cluster, name string) {
	sp.t.Helper()
	_, err := mcsClient(c).MulticlusterV1beta1().ServiceExports(sp.name).Create(sp.t.Context(), &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		sp.t.Fatal(err)
	}
}

func (sp *space) unexport(c *clusterset.Cluster, name string) {
	sp.t.Helper()
	if err := mcsClient(c).MulticlusterV1beta1().ServiceExports(sp.name).Delete(sp.t.Context(), name, metav1.DeleteOptions{}); err != nil {
		sp.t.Fatal(err)
	}
}

// waitImport waits until c has the ServiceImport and cond holds for it.
func (sp *space) waitImport(c *clusterset.Cluster, name string, what string, cond func(*mcsv1beta1.ServiceImport) bool) *mcsv1beta1.ServiceImport {
	sp.t.Helper()
	var si *mcsv1beta1.ServiceImport
	eventually(sp.t, 60*time.Second, c.Name+" ServiceImport "+name+" "+what, func() (bool, string) {
		got, err := mcsClient(c).MulticlusterV1beta1().ServiceImports(sp.name).Get(sp.t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		si = got
		return cond(got), fmt.Sprintf("%+v", got.Spec)
	})
	return si
}

// vip waits for the import's clusterset IP in c.
func (sp *space) vip(c *clusterset.Cluster, name string) string {
	sp.t.Helper()
	si := sp.waitImport(c, name, "with an IP", func(si *mcsv1beta1.ServiceImport) bool { return len(si.Spec.IPs) > 0 })
	return si.Spec.IPs[0]
}

// exportConditions renders an export's conditions as
// "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts".
func (sp *space) exportConditions(c *clusterset.Cluster, name string) string {
	se, err := mcsClient(c).MulticlusterV1beta1().ServiceExports(sp.name).Get(sp.t.Context(), name, metav1.GetOptions{})
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

// readyEndpoints lists the ready addresses of a Service's own slices.
func readyEndpoints(t *testing.T, c *clusterset.Cluster, ns, service string) []string {
	list, err := c.API.Client().DiscoveryV1().EndpointSlices(ns).List(t.Context(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		return nil
	}
	var got []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				got = append(got, e.Addresses...)
			}
		}
	}
	sort.Strings(got)
	return got
}

// answers sends n requests from inside a pod's namespace and returns the
// sorted set of pod names that answered.
func answers(ns, network, addr string, n int) []string {
	seen := map[string]bool{}
	for range n {
		if name := ask(ns, network, addr); name != "" {
			seen[name] = true
		}
	}
	return sortedKeys(seen)
}

// ask sends one request (a TCP connection, or a UDP datagram) and returns
// the pod name answered, or "".
func ask(ns, network, addr string) string {
	c, err := netns.Dial(ns, network, addr, 300*time.Millisecond)
	if err != nil {
		return ""
	}
	name, _ := echoserver.AskOn(c, network, time.Second)
	return name
}

// countAnswers sends n TCP requests and counts the answers per pod.
func countAnswers(ns, addr string, n int) map[string]int {
	got := map[string]int{}
	for range n {
		got[ask(ns, "tcp", addr)]++
	}
	return got
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func podNames(ips map[string]string) []string { return sortedKeys(ips) }

// ruleset is `nft list ruleset` in a network namespace.
func ruleset(ns string) (string, error) {
	return netns.Output("ip", "netns", "exec", ns, "nft", "list", "ruleset")
}

// hasIP reports whether text mentions ip as a whole address.
func hasIP(text, ip string) bool {
	return regexp.MustCompile(`(^|[^0-9.])` + regexp.QuoteMeta(ip) + `([^0-9.]|\.[^0-9]|$)`).MatchString(text)
}

// waitRules waits until the node's ruleset mentions every ip of present
// and none of absent.
func waitRules(t *testing.T, node string, timeout time.Duration, present, absent []string) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("ruleset of %s to have %v and not %v", node, present, absent), func() (bool, string) {
		rs, err := ruleset(node)
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

func waitAnswers(t *testing.T, ns, network, addr string, n int, want []string) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("%s %s from %s to answer %v", network, addr, ns, want), func() (bool, string) {
		got := answers(ns, network, addr, n)
		return slices.Equal(got, want), strings.Join(got, ",")
	})
}

func hostPort(ip string, port int) string { return net.JoinHostPort(ip, fmt.Sprint(port)) }

// eventually polls cond every 200ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last state: %s", timeout, what, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
