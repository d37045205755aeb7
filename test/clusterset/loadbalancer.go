package clusterset

import (
	"context"
	"log"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// maxLoadBalancers is how many addresses a cluster's load-balancer range
// holds.
const maxLoadBalancers = 250

// startLoadBalancer runs the cluster's stand-in for a cloud load balancer:
// every LoadBalancer Service gets an address of the cluster's
// load-balancer range (plan.lbIP), one per IP family of the Service, in
// its status, and every node of every other cluster routes that address
// to the cluster's first node, whose kube-proxy takes it from there as it
// takes a load-balancer address a cloud forwards. The address is the
// Service's for as long as it exists; nothing health-checks the node.
func (cs *ClusterSet) startLoadBalancer(c *Cluster) error {
	services := func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Core().V1().Services().Informer()
	}
	return cs.runStandIn(c, "loadbalancer", services, nil, func(ctx context.Context, client kubernetes.Interface, logger *log.Logger) func(any) {
		lb := &loadBalancer{cs: cs, c: c, client: client, logger: logger, assigned: map[string][]string{}}
		return func(obj any) { lb.assign(ctx, obj) }
	})
}

// loadBalancer is the state of one cluster's load balancer.
type loadBalancer struct {
	cs     *ClusterSet
	c      *Cluster
	client kubernetes.Interface
	logger *log.Logger

	mu       sync.Mutex
	assigned map[string][]string // namespace/name -> addresses
	next     int
}

// assign gives Service obj, if it is a LoadBalancer Service, its address
// and routes it.
func (lb *loadBalancer) assign(ctx context.Context, obj any) {
	svc, ok := obj.(*v1.Service)
	if !ok || svc.Spec.Type != v1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass != nil {
		return
	}
	c, logger, target := lb.c, lb.logger, lb.c.Nodes[0]
	key := svc.Namespace + "/" + svc.Name
	lb.mu.Lock()
	addrs, ok := lb.assigned[key]
	if !ok {
		if lb.next == maxLoadBalancers {
			lb.mu.Unlock()
			logger.Printf("%s: no load-balancer address left (%d given)", key, maxLoadBalancers)
			return
		}
		lb.next++
		for k, fam := range c.family.families() {
			if !slices.Contains(svc.Spec.IPFamilies, fam) {
				continue
			}
			ip := plans[fam].lbIP(c.Index, lb.next)
			addrs = append(addrs, ip)
			for _, other := range lb.cs.Clusters {
				for _, n := range other.Nodes {
					if n == target {
						continue
					}
					if err := run("ip", "-n", n.Netns, "route", "replace", ip, "via", target.IPs[k], "dev", "eth0"); err != nil {
						logger.Printf("routing %s from %s: %v", ip, n.Name, err)
					}
				}
			}
		}
		lb.assigned[key] = addrs
	}
	lb.mu.Unlock()
	var want []v1.LoadBalancerIngress
	for _, ip := range addrs {
		want = append(want, v1.LoadBalancerIngress{IP: ip, IPMode: ptr.To(v1.LoadBalancerIPModeVIP)})
	}
	if slices.EqualFunc(svc.Status.LoadBalancer.Ingress, want, func(a, b v1.LoadBalancerIngress) bool { return a.IP == b.IP }) {
		return
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := lb.client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.LoadBalancer.Ingress = want
		_, err = lb.client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		logger.Printf("setting the load-balancer address of %s: %v", key, err)
		return
	}
	logger.Printf("%s: load-balancer address %v via %s", key, addrs, target.Name)
}
