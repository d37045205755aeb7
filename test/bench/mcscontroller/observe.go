package main

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsinformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/bench/measure"
)

// measureLatency changes one endpoint of a random Service in a random
// member at a time and times until every member's imported slice shows it.
func measureLatency(ctx context.Context, members []*member) ([]time.Duration, error) {
	rng := rand.New(rand.NewSource(1))
	var out []time.Duration
	for g := 1; g <= *changes; g++ {
		m := members[rng.Intn(len(members))]
		i := rng.Intn(*exports)
		s := localSlice(m, i, g)
		want := s.Endpoints[0].Addresses[0]
		cur, err := m.kube.DiscoveryV1().EndpointSlices(namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		s.ResourceVersion, s.OwnerReferences = cur.ResourceVersion, cur.OwnerReferences
		if slices.ContainsFunc(cur.Endpoints, func(e discoveryv1.Endpoint) bool { return e.Addresses[0] == want }) {
			continue
		}
		start := time.Now()
		if _, err := m.kube.DiscoveryV1().EndpointSlices(namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for {
			all := true
			for _, target := range members {
				if seen[target.id] {
					continue
				}
				if !hasAddress(target, serviceName(i), m.id, want) {
					all = false
					continue
				}
				seen[target.id] = true
				target.latencies = append(target.latencies, time.Since(start))
			}
			if all {
				break
			}
			if time.Since(start) > time.Minute {
				return nil, fmt.Errorf("change %d (%s in %s) not propagated after a minute", g, serviceName(i), m.id)
			}
			time.Sleep(2 * time.Millisecond)
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

func hasAddress(m *member, service, source, addr string) bool {
	for _, o := range m.observer.slices.List() {
		s := o.(*discoveryv1.EndpointSlice)
		if s.Labels[mcsv1beta1.LabelServiceName] != service || s.Labels[mcsv1beta1.LabelSourceCluster] != source {
			continue
		}
		for _, e := range s.Endpoints {
			if slices.Contains(e.Addresses, addr) {
				return true
			}
		}
	}
	return false
}

// printSyncCounts prints how many syncs the controller ran and how many
// failed (a write lost to a stale cache is retried and counted here).
func printSyncCounts(url string) {
	resp, err := http.Get(url)
	if err != nil {
		fmt.Println("metrics:", err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "mcs_controller_export_sync_duration_seconds_count") || strings.HasPrefix(line, "mcs_controller_member_sync_duration_seconds_count") {
			fmt.Println("  ", line)
		}
	}
}

// writeRequests returns how many create, update, patch and delete requests
// m's apiserver has served (apiserver_request_total).
func writeRequests(ctx context.Context, m *member) (int, error) {
	total, _, err := writeRequestsBy(ctx, m)
	return total, err
}

// writeRequestsBy also returns the requests of every verb (reads too) by
// verb and resource.
func writeRequestsBy(ctx context.Context, m *member) (int, map[string]int, error) {
	return measure.WriteRequestsBy(ctx, m.kube)
}

// milestones are when a phase's watchers first saw a tenth, half and nine
// tenths of every object: whether a phase is slower throughout, at its
// start or at its end.
type milestones [3]time.Duration

func (ms *milestones) record(got, want int, at time.Duration) {
	for i, frac := range []float64{0.1, 0.5, 0.9} {
		if ms[i] == 0 && float64(got) >= frac*float64(want) {
			ms[i] = at
		}
	}
}

func (ms milestones) String() string {
	return fmt.Sprintf("10%% at %s, 50%% at %s, 90%% at %s", ms[0].Round(100*time.Millisecond), ms[1].Round(100*time.Millisecond), ms[2].Round(100*time.Millisecond))
}

// saveProfile saves what url serves into path.
func saveProfile(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	fmt.Printf("heap profile at convergence: %s\n", path)
	return err
}

// observer watches, in one member's namespace, the MCS EndpointSlices one
// manager wrote and the ServiceImports, as the benchmark sees them.
type observer struct {
	slices  cache.Indexer
	imports cache.Indexer
}

func observe(m *member, ns, managedBy string, stop <-chan struct{}) observer {
	f := informers.NewSharedInformerFactoryWithOptions(m.kube, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = discoveryv1.LabelManagedBy + "=" + managedBy
		}))
	inf := f.Discovery().V1().EndpointSlices().Informer()
	f.Start(stop)
	// Imports are watched too: listing them every poll would load the
	// apiservers the controller is measured against.
	mf := mcsinformers.NewSharedInformerFactoryWithOptions(m.mcs, 0, mcsinformers.WithNamespace(ns))
	imports := mf.Multicluster().V1beta1().ServiceImports().Informer()
	mf.Start(stop)
	cache.WaitForCacheSync(stop, inf.HasSynced, imports.HasSynced)
	return observer{slices: inf.GetIndexer(), imports: imports.GetIndexer()}
}

// counts returns the imports seen with their clusterset IPs and the
// slices seen with every endpoint.
func (o observer) counts() (imports, slices int) {
	for _, obj := range o.slices.List() {
		if len(obj.(*discoveryv1.EndpointSlice).Endpoints) == *perService {
			slices++
		}
	}
	for _, obj := range o.imports.List() {
		if len(obj.(*mcsv1beta1.ServiceImport).Spec.IPs) > 0 {
			imports++
		}
	}
	return imports, slices
}
