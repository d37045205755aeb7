package clusterset

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/fakekubelet"
)

// podNetnsPrefix starts the network namespace names of a cluster's pods:
// short, since a pod name follows.
func podNetnsPrefix(prefix, cluster string) string {
	return prefix + "-" + strings.TrimPrefix(cluster, "cluster-") + "-"
}

// PodNetns returns the network namespace that pod namespace/name of the
// named cluster runs in, for running commands "in the pod" (ip netns exec)
// or dialling from it (test/netns). It works from any process, given the
// clusterset's prefix and a client of the cluster.
func PodNetns(ctx context.Context, client kubernetes.Interface, prefix, cluster, namespace, name string) (string, error) {
	pod, err := client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return fakekubelet.PodNetnsName(podNetnsPrefix(prefix, cluster), pod), nil
}

// PodNetns returns the network namespace of a pod of cluster c.
func (cs *ClusterSet) PodNetns(ctx context.Context, c *Cluster, namespace, name string) (string, error) {
	return PodNetns(ctx, c.API.Client(), cs.opts.Prefix, c.Name, namespace, name)
}

// WaitPodsReady waits until the named pods of namespace are Ready with an
// IP and returns their IPs by name; on timeout its error names the pods
// still waiting and their phases.
func (c *Cluster) WaitPodsReady(ctx context.Context, timeout time.Duration, namespace string, names ...string) (map[string]string, error) {
	return WaitPodsReady(ctx, c.API.Client(), c.Name, timeout, namespace, names...)
}

// WaitPodsReady is Cluster.WaitPodsReady for any cluster's client; cluster
// names it in the error.
func WaitPodsReady(ctx context.Context, client kubernetes.Interface, cluster string, timeout time.Duration, namespace string, names ...string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ips := map[string]string{}
		var waiting []string
		for _, name := range names {
			p, err := client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				waiting = append(waiting, name+"("+err.Error()+")")
				continue
			}
			if !podReady(p) || p.Status.PodIP == "" {
				waiting = append(waiting, name+"("+string(p.Status.Phase)+")")
				continue
			}
			ips[name] = p.Status.PodIP
		}
		if len(waiting) == 0 {
			return ips, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: pods not ready after %v: %s", cluster, timeout, strings.Join(waiting, ", "))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func podReady(p *v1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == v1.PodReady {
			return cond.Status == v1.ConditionTrue
		}
	}
	return false
}
