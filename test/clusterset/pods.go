package clusterset

import (
	"context"
	"strings"

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
