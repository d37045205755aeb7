package multicluster_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/component-base/featuregate"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/proxy/multicluster"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/echoserver"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
)

// TestDataplaneVersionSwitchUnderTraffic: the ServiceImport CRD starts
// serving v1beta1 beside v1alpha1 (an mcs-api upgrade) while a client
// keeps connecting to a clusterset IP. kube-proxy moves its watch to
// v1beta1 without withdrawing the IP: no connection fails.
func TestDataplaneVersionSwitchUnderTraffic(t *testing.T) {
	if !netns.Isolate(t, "nft") {
		return
	}
	// mcs-api's generated fake predates streaming lists (see watcher_test).
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, featuregate.Feature(clientfeatures.WatchListClient), false)
	d := newDataplane(t, kubeproxyconfig.ProxyModeNFTables)
	d.endpoint("a1", "10.1.0.1", "tcp/8080")
	d.proxier.OnEndpointSliceAdd(slice("web", "cluster-a", httpPort, readyEP("10.1.0.1")))

	labels := map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy}
	port := []mcsv1beta1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}
	// The fake keeps each version apart; a real apiserver converts.
	mcs := mcsfake.NewSimpleClientset(
		&mcsv1alpha1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Labels: labels},
			Spec: mcsv1alpha1.ServiceImportSpec{Type: mcsv1alpha1.ClusterSetIP, IPs: []string{"10.250.0.10"},
				Ports: []mcsv1alpha1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}}},
		&mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Labels: labels},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.250.0.10"}, Ports: port}},
	)
	crd := func(served ...string) *apiextensionsv1.CustomResourceDefinition {
		c := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: multicluster.ServiceImportCRDName}}
		for _, v := range served {
			c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: true})
		}
		c.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
		return c
	}
	ext := apiextensionsfake.NewSimpleClientset(crd("v1alpha1"))
	w := &multicluster.Watcher{Proxier: d.proxier, MCSClient: mcs, CRDClient: ext}
	w.Start(d.ctx)

	deadline := time.Now().Add(30 * time.Second)
	for len(d.answers("tcp", "10.250.0.10:80", 1)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the v1alpha1 import never answered:\n%s", d.rules())
		}
		time.Sleep(50 * time.Millisecond)
	}

	var ok, retried, failed atomic.Int64
	ctx, stop := context.WithCancel(d.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			// A request not answered is asked once more at once, as TCP
			// retransmits a lost SYN: on a loaded machine the 300 ms the
			// client waits can pass with the rules in place. A withdrawn
			// IP is caught below whatever the client saw.
			_, err := echoserver.Ask("tcp", "10.250.0.10:80", 300*time.Millisecond)
			if err != nil {
				retried.Add(1)
				t.Logf("asked again after: %v", err)
				_, err = echoserver.Ask("tcp", "10.250.0.10:80", 300*time.Millisecond)
			}
			if err != nil {
				failed.Add(1)
			} else {
				ok.Add(1)
			}
			// Paced, so that source ports are not reused while their
			// conntrack entries live.
			time.Sleep(2 * time.Millisecond)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Update(d.ctx, crd("v1alpha1", "v1beta1"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The switch (halt, new informer, list, reconcile) takes well under
	// this; keep asking through it and after.
	time.Sleep(2 * time.Second)
	stop()
	<-done
	t.Logf("%d connections answered (%d asked again), %d failed", ok.Load(), retried.Load(), failed.Load())
	if failed.Load() > 0 || ok.Load() < 10 {
		t.Errorf("%d of %d connections to the clusterset IP failed across the version switch", failed.Load(), ok.Load()+failed.Load())
	}
	if n := d.withdrawn.Load(); n > 0 {
		t.Errorf("the switch took %d clusterset IPs back from the data plane", n)
	}
}
