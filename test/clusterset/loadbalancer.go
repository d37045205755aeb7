package clusterset

import (
	"context"
	"log"
	"os"
	"path/filepath"
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

// startLoadBalancer runs the cluster's stand-in for a cloud load balancer:
// every LoadBalancer Service gets an address of the cluster's
// load-balancer range (plan.lbIP), one per IP family of the Service, in
// its status, and every node of every other cluster routes that address
// to the cluster's first node, whose kube-proxy takes it from there as it
// takes a load-balancer address a cloud forwards. The address is the
// Service's for as long as it exists; nothing health-checks the node.
// maxLoadBalancers is how many addresses a cluster's load-balancer range
// holds.
const maxLoadBalancers = 250

func (cs *ClusterSet) startLoadBalancer(c *Cluster) error {
	logFile, err := os.Create(filepath.Join(c.dir, "loadbalancer.log"))
	if err != nil {
		return err
	}
	logger := log.New(logFile, "", log.LstdFlags|log.Lmicroseconds)
	client, err := kubernetes.NewForConfig(c.API.RESTConfig())
	if err != nil {
		logFile.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(client, 0)
	var mu sync.Mutex
	assigned := map[string][]string{} // namespace/name -> addresses
	next := 0
	target := c.Nodes[0]
	assign := func(obj any) {
		svc, ok := obj.(*v1.Service)
		if !ok || svc.Spec.Type != v1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass != nil {
			return
		}
		key := svc.Namespace + "/" + svc.Name
		mu.Lock()
		addrs, ok := assigned[key]
		if !ok {
			if next == maxLoadBalancers {
				mu.Unlock()
				logger.Printf("%s: no load-balancer address left (%d given)", key, maxLoadBalancers)
				return
			}
			next++
			for k, fam := range c.family.families() {
				if !slices.Contains(svc.Spec.IPFamilies, fam) {
					continue
				}
				ip := plans[fam].lbIP(c.Index, next)
				addrs = append(addrs, ip)
				for _, other := range cs.Clusters {
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
			assigned[key] = addrs
		}
		mu.Unlock()
		var want []v1.LoadBalancerIngress
		for _, ip := range addrs {
			want = append(want, v1.LoadBalancerIngress{IP: ip, IPMode: ptr.To(v1.LoadBalancerIPModeVIP)})
		}
		if len(svc.Status.LoadBalancer.Ingress) == len(want) && slices.EqualFunc(svc.Status.LoadBalancer.Ingress, want, func(a, b v1.LoadBalancerIngress) bool { return a.IP == b.IP }) {
			return
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Status.LoadBalancer.Ingress = want
			_, err = client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			logger.Printf("setting the load-balancer address of %s: %v", key, err)
			return
		}
		logger.Printf("%s: load-balancer address %v via %s", key, addrs, target.Name)
	}
	if _, err := factory.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    assign,
		UpdateFunc: func(_, obj any) { assign(obj) },
	}); err != nil {
		cancel()
		logFile.Close()
		return err
	}
	factory.Start(ctx.Done())
	cs.onDown(levelNode, func() {
		cancel()
		factory.Shutdown()
		logFile.Close()
	})
	return nil
}
