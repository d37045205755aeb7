package multicluster

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/klog/v2"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// BenchmarkClaimContention measures N imports that all claim one clusterset
// IP (someone creating imports with a victim's IP, or a botched restore):
// adding them, a resync that delivers each again unchanged, and deleting
// the winner, so that the next one takes the IP. The proxier lock is held
// for every step, so this is time in which kube-proxy handles no other
// Service or EndpointSlice event. For comparison, "services" adds N local
// Services to the same wrapper.
//
//	go test -run '^$' -bench ClaimContention -benchtime 1x ./pkg/proxy/multicluster
func BenchmarkClaimContention(b *testing.B) {
	for _, n := range []int{500, 1000, 10000} {
		imports := make([]*mcsv1beta1.ServiceImport, n)
		for i := range imports {
			si := serviceImport("ns", fmt.Sprintf("contender-%05d", i), time.Duration(n-i)*time.Second, "10.250.0.10")
			si.ResourceVersion = "1"
			imports[i] = si
		}
		b.Run(fmt.Sprintf("imports=%d", n), func(b *testing.B) {
			for b.Loop() {
				p := NewProxier(klog.Background(), newRecordingProvider(), benchOptions(), nil)
				start := time.Now()
				for _, si := range imports {
					p.OnServiceImportUpsert(si)
				}
				add := time.Since(start)
				start = time.Now()
				for _, si := range imports {
					p.OnServiceImportUpsert(si)
				}
				resync := time.Since(start)
				start = time.Now()
				p.OnServiceImportDelete(imports[0])
				handover := time.Since(start)
				b.ReportMetric(add.Seconds(), "add-s")
				b.ReportMetric(resync.Seconds(), "resync-s")
				b.ReportMetric(handover.Seconds()*1e3, "handover-ms")
			}
		})
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			for b.Loop() {
				p := NewProxier(klog.Background(), newRecordingProvider(), benchOptions(), nil)
				start := time.Now()
				for i := range n {
					p.OnServiceAdd(localService("ns", fmt.Sprintf("svc-%05d", i), fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)))
				}
				b.ReportMetric(time.Since(start).Seconds(), "add-s")
			}
		})
	}
}

func benchOptions() *mcsproxy.Options {
	opts, _ := mcsproxy.ParseCIDRs([]string{"10.250.0.0/16"})
	return &mcsproxy.Options{ClusterSetIPCIDRs: opts, TrustedManagers: []string{mcsproxy.DefaultManagedBy}}
}
