package demo

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
)

const (
	namespace = "demo"
	service   = "web"
	// agnhost is the image Kubernetes' own e2e tests use; the fake kubelet
	// runs its netexec subcommand natively (test/podimage).
	agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.53"
	pause   = "registry.k8s.io/pause:3.10"
	timeout = 90 * time.Second
)

// deploy creates the namespace, Service web, its ServiceExport and pods.
func deploy(ctx context.Context, c *clusterset.Cluster, pods []string) error {
	kube := c.API.Client()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: service, Namespace: namespace},
		Spec: v1.ServiceSpec{
			Selector: map[string]string{"app": service},
			Ports:    []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	if _, err := kube.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("%s: %w", c.Name, err)
	}
	mcs, err := mcsclientset.NewForConfig(c.API.RESTConfig())
	if err != nil {
		return err
	}
	export := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: service, Namespace: namespace}}
	if _, err := mcs.MulticlusterV1beta1().ServiceExports(namespace).Create(ctx, export, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("%s: ServiceExport: %w", c.Name, err)
	}
	for _, name := range pods {
		if err := createPod(ctx, c, webPod(name)); err != nil {
			return err
		}
	}
	return nil
}

func webPod(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": service}},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name:  "web",
			Image: agnhost,
			Args:  []string{"netexec", "--http-port=8080"},
			Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			ReadinessProbe: &v1.Probe{
				ProbeHandler:  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
				PeriodSeconds: 1,
			},
		}}},
	}
}

func clientPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: namespace},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "client", Image: pause}}},
	}
}

// createPod retries while the namespace's default ServiceAccount, which
// admission requires, is still being created.
func createPod(ctx context.Context, c *clusterset.Cluster, pod *v1.Pod) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = c.API.Client().CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		return last == nil || apierrors.IsAlreadyExists(last), nil
	})
	if err != nil {
		return fmt.Errorf("%s: creating pod %s: %v (%w)", c.Name, pod.Name, last, err)
	}
	return nil
}

// waitPodsReady waits until every pod of the namespace is Ready and
// returns their IPs by name.
func waitPodsReady(ctx context.Context, c *clusterset.Cluster) (map[string]string, error) {
	ips := map[string]string{}
	var state string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := c.API.Client().CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			state = err.Error()
			return false, nil
		}
		var waiting []string
		for _, p := range pods.Items {
			if !podReady(&p) {
				waiting = append(waiting, fmt.Sprintf("%s (%s)", p.Name, p.Status.Phase))
				continue
			}
			ips[p.Name] = p.Status.PodIP
		}
		state = "waiting for " + strings.Join(waiting, ", ")
		return len(waiting) == 0 && len(pods.Items) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: pods not ready: %s (%w); see %s/pods and kubelet-*.log", c.Name, state, err, c.API.Dir())
	}
	return ips, nil
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue && p.Status.PodIP != ""
		}
	}
	return false
}

// waitImport waits until cluster c has the ServiceImport with a clusterset
// IP and MCS EndpointSlices with ready endpoints from every source cluster.
func waitImport(ctx context.Context, c *clusterset.Cluster, sources []string) (string, error) {
	mcs, err := mcsclientset.NewForConfig(c.API.RESTConfig())
	if err != nil {
		return "", err
	}
	var vip, state string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		si, err := mcs.MulticlusterV1beta1().ServiceImports(namespace).Get(ctx, service, metav1.GetOptions{})
		if err != nil || len(si.Spec.IPs) == 0 {
			state = fmt.Sprintf("no ServiceImport with an IP yet (%v)", err)
			return false, nil
		}
		vip = si.Spec.IPs[0]
		slices, err := c.API.Client().DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{
			LabelSelector: "multicluster.kubernetes.io/service-name=" + service,
		})
		if err != nil {
			state = err.Error()
			return false, nil
		}
		have := map[string]bool{}
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					have[s.Labels["multicluster.kubernetes.io/source-cluster"]] = true
				}
			}
		}
		for _, src := range sources {
			if !have[src] {
				state = fmt.Sprintf("no ready endpoints from %s yet (have %v)", src, keys(have))
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("%s: import of %s/%s: %s (%w)", c.Name, namespace, service, state, err)
	}
	return vip, nil
}

// waitBothAnswer waits until requests from the client reach pods of both
// clusters: kube-proxy programs the import a moment after it appears.
func (d *demo) waitBothAnswer(ctx context.Context, netns, target string, clusters ...string) error {
	var last []string
	err := wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		answers, err := d.ask(ctx, netns, target, 6)
		if err != nil {
			return false, err
		}
		last = answers
		seen := map[string]bool{}
		for _, a := range answers {
			for _, c := range clusters {
				if strings.HasPrefix(d.pods[a], c+",") {
					seen[c] = true
				}
			}
		}
		return len(seen) == len(clusters), nil
	})
	if err != nil {
		return fmt.Errorf("the clusterset IP did not reach pods of %v; last answers %q: %w", clusters, last, err)
	}
	return nil
}

func (d *demo) requests(ctx context.Context, netns, target string) error {
	return d.requestsN(ctx, netns, target, d.opts.Requests)
}

// requestsN prints which pod answered each of n requests, and a tally per
// cluster.
func (d *demo) requestsN(ctx context.Context, netns, target string, n int) error {
	answers, err := d.ask(ctx, netns, target, n)
	if err != nil {
		return err
	}
	tally := map[string]int{}
	for i, a := range answers {
		where := d.pods[a]
		if where == "" {
			where = "?"
		}
		fmt.Fprintf(d.out, "  request %2d -> %-8s (%s)\n", i+1, a, where)
		tally[strings.SplitN(where, ",", 2)[0]]++
	}
	var parts []string
	for _, c := range keys(tally) {
		parts = append(parts, fmt.Sprintf("%s: %d", c, tally[c]))
	}
	fmt.Fprintf(d.out, "  answered by %s\n", strings.Join(parts, ", "))
	return nil
}

// ask runs AskCommand inside the pod's network namespace (so that the pod's
// resolv.conf applies) and returns one answer per request.
func (d *demo) ask(ctx context.Context, netns, target string, n int) ([]string, error) {
	args := append([]string{"netns", "exec", netns}, d.opts.AskCommand...)
	args = append(args, fmt.Sprintf("--count=%d", n), "--timeout=2s", target)
	cmd := exec.CommandContext(ctx, "ip", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n"), nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
