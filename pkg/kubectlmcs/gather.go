package kubectlmcs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// gatherService reads what diagnose needs about ns/name from every member.
func gatherService(ctx context.Context, members []*member, ns, name string, importers []string, o *options) ServiceState {
	s := ServiceState{Namespace: ns, Name: name, Importers: importers, Now: time.Now()}
	for _, m := range members {
		st := MemberState{Context: m.Context, ClusterID: m.ClusterID}
		if m.Err != nil {
			st.Unreachable = m.Err.Error()
			s.Members = append(s.Members, st)
			continue
		}
		if svc, err := m.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			st.Service = svc
		}
		if se, err := m.MCS.MulticlusterV1beta1().ServiceExports(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			st.Export = se
		}
		if st.Service != nil && st.Export != nil {
			st.ServiceSlices, st.ServiceWarning = serviceEndpoints(ctx, m, ns, name)
		}
		isImporter := false
		for _, c := range importers {
			isImporter = isImporter || c == m.Context
		}
		if isImporter {
			gatherImportSide(ctx, m, &st, ns, name, o)
		}
		s.Members = append(s.Members, st)
	}
	return s
}

// serviceEndpoints reads a Service's own EndpointSlices and its latest
// Warning event.
func serviceEndpoints(ctx context.Context, m *member, ns, name string) ([]discoveryv1.EndpointSlice, string) {
	var slices []discoveryv1.EndpointSlice
	if list, err := m.Kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name}); err == nil {
		slices = list.Items
	}
	var latest *v1.Event
	if events, err := m.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Service,involvedObject.name=" + name + ",type=" + v1.EventTypeWarning}); err == nil {
		for i := range events.Items {
			if e := &events.Items[i]; latest == nil || eventTime(e).After(eventTime(latest)) {
				latest = e
			}
		}
	}
	if latest == nil {
		return slices, ""
	}
	return slices, latest.Reason + ": " + latest.Message
}

func gatherImportSide(ctx context.Context, m *member, st *MemberState, ns, name string, o *options) {
	si, err := m.MCS.MulticlusterV1beta1().ServiceImports(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	st.Import = si
	st.Selection = selectionOf(si, importOverlay(ctx, m, ns, name))
	if derived := si.Annotations[mcsproxy.AnnotationDerivedService]; derived != "" {
		if svc, err := m.Kube.CoreV1().Services(ns).Get(ctx, derived, metav1.GetOptions{}); err == nil {
			st.DerivedService = svc
		}
	}
	trust := o.trust.proxyOptions()
	if _, err := mcsproxy.ServiceForImport(si, trust); err != nil {
		st.ImportIgnored = err.Error()
	}
	slices, err := m.Kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=" + name})
	if err == nil {
		st.Slices, st.Ignored = trustedSlices(slices.Items, trust)
	}
	if leases, err := m.Kube.CoordinationV1().Leases(o.leaseNamespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, l := range leases.Items {
			if strings.HasPrefix(l.Name, SourceLeasePrefix) {
				st.Leases = append(st.Leases, l)
			}
		}
	}
	if si.Spec.Type != mcsv1beta1.Headless {
		st.Nodes = nodeReports(ctx, m, ns, name, o)
	}
	st.DNS = askDNS(ctx, m, ns, name, questionType(si), o)
}

// importOverlay reads the import again as served, for the cluster
// selection fields mcs-api's client drops; nil when it cannot.
func importOverlay(ctx context.Context, m *member, ns, name string) *csv1beta1.ServiceImport {
	body, err := m.MCS.MulticlusterV1beta1().RESTClient().Get().Namespace(ns).
		Resource(mcsv1beta1.ServiceImportPluralName).Name(name).DoRaw(ctx)
	if err != nil {
		return nil
	}
	overlay := &csv1beta1.ServiceImport{}
	if err := json.Unmarshal(body, overlay); err != nil {
		return nil
	}
	return overlay
}

// questionType is the DNS question for an import: AAAA when its primary
// family is IPv6, else A.
func questionType(si *mcsv1beta1.ServiceImport) string {
	if len(si.Spec.IPFamilies) > 0 && si.Spec.IPFamilies[0] == v1.IPv6Protocol {
		return "AAAA"
	}
	if len(si.Spec.IPs) > 0 && strings.Contains(si.Spec.IPs[0], ":") {
		return "AAAA"
	}
	return "A"
}

// nodeReports reads, per node, kube-proxy's gate (its metrics, through the
// apiserver's node proxy, else its announcement on the Node) and its
// latest event on the import (the node is the event's related object).
func nodeReports(ctx context.Context, m *member, ns, name string, o *options) []NodeReport {
	nodes, err := m.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	latest := map[string]*v1.Event{}
	events, err := m.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=" + mcsv1beta1.ServiceImportKindName + ",involvedObject.name=" + name})
	if err == nil {
		for i := range events.Items {
			e := &events.Items[i]
			if e.ReportingController != "kube-proxy" || e.Related == nil || e.Related.Kind != "Node" {
				continue
			}
			if prev := latest[e.Related.Name]; prev == nil || eventTime(e).After(eventTime(prev)) {
				latest[e.Related.Name] = e
			}
		}
	}
	serving := nodesServingImports(ctx, m)
	var out []NodeReport
	for _, n := range nodes.Items {
		r := NodeReport{Name: n.Name, Gate: gateOf(ctx, m, n.Name, o.kubeProxyMetricsPort)}
		if r.Gate == "" && serving[n.Name] {
			r.Gate = "on"
		}
		if e := latest[n.Name]; e != nil {
			r.Last = &NodeEvent{Type: e.Type, Reason: e.Reason, Note: e.Message}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func eventTime(e *v1.Event) time.Time {
	t := e.EventTime.Time
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	if e.LastTimestamp.After(t) {
		t = e.LastTimestamp.Time
	}
	return t
}

// gateOf reads kube-proxy's kubernetes_feature_enabled metric for the
// MultiClusterServices gate through the node proxy subresource: "on",
// "off", or "" when it cannot be read (metrics bound to loopback, no
// nodes/proxy permission).
func gateOf(ctx context.Context, m *member, node string, port int) string {
	if port == 0 {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	body, err := m.Kube.CoreV1().RESTClient().Get().AbsPath(fmt.Sprintf("/api/v1/nodes/%s:%d/proxy/metrics", node, port)).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return gateFromMetrics(body)
}

// gateFromMetrics finds the gate in a Prometheus text exposition.
func gateFromMetrics(body []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "kubernetes_feature_enabled{") || !strings.Contains(line, `name="MultiClusterServices"`) {
			continue
		}
		if strings.HasSuffix(line, " 1") {
			return "on"
		}
		return "off"
	}
	return ""
}

// askDNS asks the member's DNS for the clusterset name from --dns-pod
// (dig, by pod exec) when that pod exists in the member.
func askDNS(ctx context.Context, m *member, ns, name, qtype string, o *options) DNSResult {
	if o.dnsPod == "" {
		return DNSResult{}
	}
	podNS, pod, _ := strings.Cut(o.dnsPod, "/")
	if _, err := m.Kube.CoreV1().Pods(podNS).Get(ctx, pod, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return DNSResult{}
		}
		return DNSResult{Queried: true, From: "pod " + o.dnsPod, Err: err.Error()}
	}
	fqdn := name + "." + ns + ".svc.clusterset.local"
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := podExec(ctx, m, podNS, pod, "dig", "+short", "+time=2", "+tries=2", fqdn, qtype)
	r := DNSResult{Queried: true, From: "pod " + o.dnsPod}
	for _, line := range strings.Split(string(out), "\n") {
		if ip, perr := netip.ParseAddr(strings.TrimSpace(line)); perr == nil {
			r.Answer = append(r.Answer, ip.String())
		}
	}
	switch {
	case err != nil:
		r.Err = err.Error()
	case len(r.Answer) == 0:
		r.Err = strings.TrimSpace(firstLine(string(out)))
		if r.Err == "" {
			r.Err = "empty answer"
		}
	}
	return r
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// podExec runs argv in pod ns/name as kubectl exec does (WebSocket, SPDY
// when the server cannot upgrade).
func podExec(ctx context.Context, m *member, ns, name string, argv ...string) ([]byte, error) {
	req := m.Kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(name).SubResource("exec").
		VersionedParams(&v1.PodExecOptions{Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	config := *m.Config
	config.Timeout = 0
	websocket, err := remotecommand.NewWebSocketExecutor(&config, "GET", req.URL().String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(&config, "POST", req.URL())
	if err != nil {
		return nil, err
	}
	executor, err := remotecommand.NewFallbackExecutor(websocket, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	if err := executor.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		if msg := firstLine(stdout.String() + "\n" + stderr.String()); msg != "" {
			return stdout.Bytes(), fmt.Errorf("%s", msg)
		}
		return stdout.Bytes(), err
	}
	return stdout.Bytes(), nil
}

// staleLeases names the source Leases of a member that were not renewed
// within their duration.
func staleLeases(leases []coordinationv1.Lease, now time.Time) []string {
	var out []string
	for _, l := range leases {
		if !strings.HasPrefix(l.Name, SourceLeasePrefix) {
			continue
		}
		if fresh, _ := leaseFreshness(l, now); !fresh {
			out = append(out, strings.TrimPrefix(l.Name, SourceLeasePrefix))
		}
	}
	sort.Strings(out)
	return out
}

// proxyOptions are the trust of the members' kube-proxy, as diagnose's
// flags repeat it (their defaults are kube-proxy's). Ranges that do not
// parse admit nothing: every import is then said to be ignored, naming
// the range.
func (t trustOptions) proxyOptions() *mcsproxy.Options {
	cidrs, _ := mcsproxy.ParseCIDRs(t.cidrs)
	return &mcsproxy.Options{TrustedManagers: t.managers, ClusterSetIPCIDRs: cidrs}
}

// trustedSlices splits an import's slices into those kube-proxy programs
// and those it drops, by kube-proxy's own rule
// (mcsproxy.EndpointSliceForImport): diagnose checks and probes only what
// the proxies would serve, so that a slice anyone else wrote can neither
// pass a check nor send the probe to its addresses.
func trustedSlices(all []discoveryv1.EndpointSlice, trust *mcsproxy.Options) (kept []discoveryv1.EndpointSlice, ignored []IgnoredSlice) {
	for i := range all {
		if _, err := mcsproxy.EndpointSliceForImport(&all[i], trust); err != nil {
			ignored = append(ignored, IgnoredSlice{Name: all[i].Name, Reason: err.Error()})
			continue
		}
		kept = append(kept, all[i])
	}
	return kept, ignored
}
