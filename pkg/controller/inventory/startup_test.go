package inventory

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
)

// A profile present at start-up is a member the controller starts with
// (Initial), not one joining later. If the hub then stops answering, its
// cache, never read, says nothing: the member stays, even when its key is
// worked; once the hub answers, a profile deleted is a member leaving.
func TestProfilesAtStartUp(t *testing.T) {
	ctx := t.Context()
	b := newMemberAPI(t, "cluster-b")
	providers, err := ParseAccessProviders([]byte(testProviders))
	if err != nil {
		t.Fatal(err)
	}
	hub := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{inventoryv1alpha1.Resource: "ClusterProfileList"})
	profiles := hub.Resource(inventoryv1alpha1.Resource).Namespace("fleet")
	if _, err := profiles.Create(ctx, profile("b", b, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	inv := New(Config{Hub: kubefake.NewSimpleClientset(), Profiles: hub, ProfileNamespace: "fleet", ProfileSelector: labels.Everything(), AccessProviders: providers,
		ClusterIDTimeout: time.Second, SyncTimeout: time.Second, LeaveTimeout: time.Second, RecheckPeriod: time.Hour}, nil)
	members := inv.Initial(ctx)
	if len(members) != 1 || members[0].ClusterID != "cluster-b" || members[0].Context != ProfileKey("fleet", "b") {
		t.Fatalf("members at start-up: %+v, want cluster-b as profile/fleet/b", members)
	}

	var down atomic.Bool
	down.Store(true)
	unreachable := errors.New("the hub does not answer")
	// The hub's informer already lists through the fake, which reads its
	// reactors under its lock; PrependReactor takes none.
	hub.Lock()
	hub.PrependReactor("list", "clusterprofiles", func(clienttesting.Action) (bool, runtime.Object, error) {
		return down.Load(), nil, unreachable
	})
	hub.Unlock()
	// The fake's watch replays nothing: a profile deleted before the
	// informer watches again would never be seen. watching closes once
	// the informer watches the answering hub.
	watching := make(chan struct{})
	var watched sync.Once
	hub.PrependWatchReactor("clusterprofiles", func(a clienttesting.Action) (bool, watch.Interface, error) {
		if down.Load() {
			return true, nil, unreachable
		}
		w, err := hub.Tracker().Watch(inventoryv1alpha1.Resource, a.GetNamespace())
		if err == nil {
			watched.Do(func() { close(watching) })
		}
		return true, w, err
	})
	r := &recorder{}
	go inv.Run(ctx, r)
	// Worked while the hub is away (as a listing refused is when another
	// member leaves): retried, not drained.
	key := ProfileKey("fleet", "b")
	inv.queue.Add(key)
	waitFor(t, "the profile's key to be worked", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return inv.queue.NumRequeues(key) > 0 || len(r.calls) > 0
	})
	r.waitFor(t)
	if got := inv.States()[key]; got != Joined {
		t.Errorf("profile/fleet/b is %q while the hub is away, want joined", got)
	}

	down.Store(false)
	waitFor(t, "the profiles read", inv.profileInformer.HasSynced)
	select {
	case <-watching:
	case <-time.After(10 * time.Second):
		t.Fatal("the informer never watched the profiles again")
	}
	if err := profiles.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "leave cluster-b")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStatedIDsAtStartUp: a statement reserves a cluster ID only for a
// listing shown to be that cluster, and two listings shown to be one are
// settled by age. Two cluster managers' profiles of cluster-b that both
// state its ID: the older serves it, the other is refused (they once
// refused each other at every start, so the cluster was served by
// neither). A profile whose server never answers, stating cluster-c's ID
// and older than cluster-c's own profile, does not keep cluster-c out.
func TestStatedIDsAtStartUp(t *testing.T) {
	ctx := t.Context()
	b, c := newMemberAPI(t, "cluster-b"), newMemberAPI(t, "cluster-c")
	down := newMemberAPI(t, "nobody")
	down.url = "https://127.0.0.1:1" // nothing answers there
	providers, err := ParseAccessProviders([]byte(testProviders))
	if err != nil {
		t.Fatal(err)
	}
	states := func(id string, created time.Time) func(*inventoryv1alpha1.ClusterProfile) {
		return func(cp *inventoryv1alpha1.ClusterProfile) {
			cp.CreationTimestamp = metav1.NewTime(created)
			cp.Status.Properties = append(cp.Status.Properties, inventoryv1alpha1.Property{Name: clusterIDProperty, Value: id})
		}
	}
	t0 := time.Now().Add(-time.Hour)
	hub := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{inventoryv1alpha1.Resource: "ClusterProfileList"})
	profiles := hub.Resource(inventoryv1alpha1.Resource).Namespace("fleet")
	for _, p := range []*unstructured.Unstructured{
		// Listed in name order; the older of b's is the second.
		profile("a-manager-b", b, states("cluster-b", t0.Add(time.Minute))),
		profile("b-manager-b", b, states("cluster-b", t0)),
		profile("ghost", down, states("cluster-c", t0)),
		profile("real-c", c, states("cluster-c", t0.Add(time.Minute))),
	} {
		if _, err := profiles.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	inv := New(Config{Hub: kubefake.NewSimpleClientset(), Profiles: hub, ProfileNamespace: "fleet", ProfileSelector: labels.Everything(), AccessProviders: providers,
		ClusterIDTimeout: time.Second, SyncTimeout: time.Second, LeaveTimeout: time.Second, RecheckPeriod: time.Hour}, nil)
	var got []string
	for _, m := range inv.Initial(ctx) {
		got = append(got, m.Context+"="+m.ClusterID)
	}
	slices.Sort(got)
	want := []string{ProfileKey("fleet", "b-manager-b") + "=cluster-b", ProfileKey("fleet", "real-c") + "=cluster-c"}
	if !slices.Equal(got, want) {
		t.Errorf("members at start-up %v, want %v", got, want)
	}
	s := inv.States()
	if s[ProfileKey("fleet", "a-manager-b")] != Refused || s[ProfileKey("fleet", "ghost")] != Pending {
		t.Errorf("states %v: want the younger profile of cluster-b refused, the ghost pending", s)
	}
}
