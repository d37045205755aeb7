package kubectlmcs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// DefaultProbeImage is the image probe pods run by default: the
// mcs-controller's, which carries kubectl-mcs as /kubectl-mcs, so a
// clusterset that runs the controller already has it.
const DefaultProbeImage = "mcs-controller:dev"

// probeBinary is kubectl-mcs's path in that image.
const probeBinary = "/kubectl-mcs"

// LabelProbe marks probe pods (value: the diagnosed NAMESPACE.NAME), so
// that one left by a killed diagnose can be found and deleted.
const LabelProbe = "multiclusterservices.k8s.io/probe"

// maxProbedEndpoints bounds the endpoints probed per source cluster and
// port: enough to tell a source that answers from one that does not,
// without a connection to every pod of a large Service.
const maxProbedEndpoints = 8

// ProbeOutcome is a probe pod's run in one importing member.
type ProbeOutcome struct {
	// Pod is the probe pod's name and Node where it ran.
	Pod, Node string
	Spec      ProbeSpec
	Result    *ProbeResult
	// Err says why there is no result (the pod could not start, its
	// image could not be pulled, it ran past its deadline).
	Err string
}

// probeSpecFor is what a probe pod in member m tries for the import ref:
// the clusterset name, every clusterset IP on every port, and the ready
// endpoints of each source cluster on the ports the slices give the
// import's ports.
func probeSpecFor(m MemberState, ref string, timeout time.Duration) ProbeSpec {
	ns, name, _ := strings.Cut(ref, "/")
	si := m.Import
	spec := ProbeSpec{Name: name + "." + ns + ".svc.clusterset.local", Family: "ip4", TimeoutMillis: int(timeout.Milliseconds())}
	want := si.Spec.IPs
	if si.Spec.Type == mcsv1beta1.Headless {
		want = readyAddresses(m.Slices)
	}
	if len(want) > 0 && strings.Contains(want[0], ":") {
		spec.Family = "ip6"
	}
	if si.Spec.Type != mcsv1beta1.Headless {
		for _, ip := range si.Spec.IPs {
			for _, p := range si.Spec.Ports {
				spec.Targets = append(spec.Targets, ProbeTarget{Address: net.JoinHostPort(ip, strconv.Itoa(int(p.Port))), Protocol: protocol(p.Protocol)})
			}
		}
	}
	probed := map[string]int{}
	for _, s := range m.Slices {
		cluster := s.Labels[mcsv1beta1.LabelSourceCluster]
		for _, p := range si.Spec.Ports {
			port, ok := slicePort(s, p)
			if !ok {
				continue
			}
			key := cluster + "/" + p.Name + "/" + string(protocol(p.Protocol))
			for _, ep := range s.Endpoints {
				if (ep.Conditions.Ready != nil && !*ep.Conditions.Ready) || len(ep.Addresses) == 0 || probed[key] >= maxProbedEndpoints {
					continue
				}
				probed[key]++
				spec.Targets = append(spec.Targets, ProbeTarget{Cluster: cluster,
					Address: net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(port))), Protocol: protocol(p.Protocol)})
			}
		}
	}
	// Four connections per source (at least 8, at most 32), so that each
	// is met behind the clusterset IP: with two sources spread evenly, the
	// chance that one is never met is 2 in 65,536.
	spec.Attempts = min(max(8, 4*len(importSources(si))), 32)
	return spec
}

// slicePort is the port slice s gives the import's port p: the one of
// the same name and protocol.
func slicePort(s discoveryv1.EndpointSlice, p mcsv1beta1.ServicePort) (int32, bool) {
	for _, sp := range s.Ports {
		if sp.Port != nil && ptr.Deref(sp.Name, "") == p.Name && protocol(ptr.Deref(sp.Protocol, v1.ProtocolTCP)) == protocol(p.Protocol) {
			return *sp.Port, true
		}
	}
	return 0, false
}

// probePod is the pod that runs spec: a kubectl-mcs probe that needs no
// API access, no privilege and no writable file, so that it is admitted
// under the restricted Pod Security Standard, and that ends by itself.
func probePod(ns, ref, image string, spec ProbeSpec, deadline time.Duration) (*v1.Pod, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "mcs-probe-",
			Namespace:    ns,
			Labels: map[string]string{
				LabelProbe:                     strings.ReplaceAll(ref, "/", "."),
				"app.kubernetes.io/name":       "kubectl-mcs-probe",
				"app.kubernetes.io/managed-by": "kubectl-mcs",
			},
		},
		Spec: v1.PodSpec{
			RestartPolicy:                 v1.RestartPolicyNever,
			ActiveDeadlineSeconds:         ptr.To(int64(deadline.Seconds())),
			TerminationGracePeriodSeconds: ptr.To(int64(1)),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			SecurityContext: &v1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To(int64(65532)),
				SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []v1.Container{{
				Name:            "probe",
				Image:           image,
				ImagePullPolicy: v1.PullIfNotPresent,
				Command:         []string{probeBinary, "probe", "--spec", string(raw)},
				SecurityContext: &v1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &v1.Capabilities{Drop: []v1.Capability{"ALL"}},
				},
			}},
		},
	}, nil
}

// runProbe runs a probe pod for ref in m and reads its result from the
// pod's log. The pod is deleted before it returns, also when ctx is
// cancelled (the user's interrupt): the deletion has a context of its own.
func runProbe(ctx context.Context, m *member, ns, ref, image string, spec ProbeSpec, deadline time.Duration) ProbeOutcome {
	out := ProbeOutcome{Spec: spec}
	pod, err := probePod(ns, ref, image, spec, deadline)
	if err != nil {
		out.Err = err.Error()
		return out
	}
	pods := m.Kube.CoreV1().Pods(ns)
	// The creation is not cancelled by an interrupt: one cancelled after
	// the apiserver stored the pod, before its answer came back, would
	// leave a pod whose name diagnose never learnt. The interrupt is
	// heeded as soon as the answer is in, and the pod deleted.
	cctx, cancelCreate := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	created, err := pods.Create(cctx, pod, metav1.CreateOptions{})
	cancelCreate()
	if err != nil {
		out.Err = "creating the probe pod in namespace " + ns + ": " + err.Error()
		return out
	}
	out.Pod = created.Name
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		_ = pods.Delete(dctx, created.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	}()
	wctx, cancel := context.WithTimeout(ctx, deadline+30*time.Second)
	defer cancel()
	for {
		p, err := pods.Get(wctx, created.Name, metav1.GetOptions{})
		if err != nil {
			out.Err = "waiting for the probe pod: " + err.Error()
			return out
		}
		out.Node = p.Spec.NodeName
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			break
		}
		if why := podStuck(p); why != "" {
			out.Err = "the probe pod cannot start: " + why
			return out
		}
		select {
		case <-wctx.Done():
			out.Err = fmt.Sprintf("the probe pod did not finish in %v (phase %s)", deadline+30*time.Second, p.Status.Phase)
			if err := ctx.Err(); err != nil {
				// Interrupted, not timed out: both end wctx.
				out.Err = "waiting for the probe pod: " + err.Error()
			}
			return out
		case <-time.After(500 * time.Millisecond):
		}
	}
	log, err := pods.GetLogs(created.Name, &v1.PodLogOptions{Container: "probe"}).DoRaw(wctx)
	if err != nil {
		out.Err = "reading the probe pod's log: " + err.Error()
		return out
	}
	out.Result, err = parseProbeLog(log)
	if err != nil {
		out.Err = err.Error()
	}
	return out
}

// podStuck says why a pending pod will not run: an image that cannot be
// pulled or a container that cannot be created.
func podStuck(p *v1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "CreateContainerError", "CreateContainerConfigError":
				return w.Reason + ": " + w.Message
			}
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
			return "unschedulable: " + c.Message
		}
	}
	return ""
}

// parseProbeLog finds the result in the pod's log: its last JSON line.
func parseProbeLog(log []byte) (*ProbeResult, error) {
	lines := bytes.Split(bytes.TrimSpace(log), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if !bytes.HasPrefix(lines[i], []byte("{")) {
			continue
		}
		r := &ProbeResult{}
		if err := json.Unmarshal(lines[i], r); err == nil {
			return r, nil
		}
	}
	return nil, fmt.Errorf("the probe pod printed no result: %q", firstLine(string(log)))
}

// runProbes runs a probe pod in every importing member that holds the
// import, at once, and records each outcome; a member whose DNS was not
// asked from --dns-pod gets the probe's answer as its DNS result.
func (o *options) runProbes(ctx context.Context, members []*member, s *ServiceState) {
	ref := s.Namespace + "/" + s.Name
	ns := o.probe.namespace
	if ns == "" {
		ns = s.Namespace
	}
	var wg sync.WaitGroup
	for _, ctxName := range s.Importers {
		st := s.member(ctxName)
		var m *member
		for _, c := range members {
			if c.Context == ctxName {
				m = c
			}
		}
		if st == nil || m == nil || st.Unreachable != "" || st.Import == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			spec := probeSpecFor(*st, ref, probeConnectTimeout)
			outcome := runProbe(ctx, m, ns, ref, o.probe.image, spec, o.probe.timeout)
			st.Probe = &outcome
			if outcome.Result != nil && !st.DNS.Queried {
				st.DNS = probeDNS(outcome)
			}
		}()
	}
	wg.Wait()
}

// probeConnectTimeout bounds each of the probe's connections.
const probeConnectTimeout = 2 * time.Second
