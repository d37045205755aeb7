package fakekubelet

import (
	"context"
	"runtime"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// registerNode creates the Node, or takes over one left by an earlier run,
// and sets its status once: no node lifecycle controller runs in the
// harness, so nothing expects heartbeats.
func (k *Kubelet) registerNode(ctx context.Context) error {
	nodes := k.cfg.Client.CoreV1().Nodes()
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: k.cfg.NodeName,
			Labels: map[string]string{
				v1.LabelHostname: k.cfg.NodeName,
				v1.LabelOSStable: "linux",
			},
		},
		Spec: v1.NodeSpec{PodCIDR: k.cfg.PodCIDRs[0], PodCIDRs: k.cfg.PodCIDRs},
	}
	if _, err := nodes.Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	capacity := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("4"),
		v1.ResourceMemory: resource.MustParse("8Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := nodes.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		current.Status.Addresses = nil
		for _, ip := range k.cfg.NodeIPs {
			current.Status.Addresses = append(current.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
		}
		current.Status.Addresses = append(current.Status.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: k.cfg.NodeName})
		if k.cfg.Serving != nil {
			current.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(k.cfg.Serving.Port)
		}
		current.Status.Capacity = capacity
		current.Status.Allocatable = capacity
		current.Status.Phase = v1.NodeRunning
		current.Status.Conditions = []v1.NodeCondition{{
			Type:               v1.NodeReady,
			Status:             v1.ConditionTrue,
			Reason:             "KubeletReady",
			Message:            "fake kubelet of the local clusterset harness",
			LastHeartbeatTime:  now,
			LastTransitionTime: now,
		}}
		current.Status.NodeInfo = v1.NodeSystemInfo{
			KubeletVersion:          "fakekubelet",
			ContainerRuntimeVersion: "fakekubelet://processes-in-netns",
			OperatingSystem:         "linux",
			Architecture:            runtime.GOARCH,
		}
		_, err = nodes.UpdateStatus(ctx, current, metav1.UpdateOptions{})
		return err
	})
}
