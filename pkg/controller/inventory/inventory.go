// Package inventory keeps the member set of a running mcs-controller in
// step with where members are listed: kubeconfig contexts given at
// start-up, kubeconfig Secrets in the hub cluster labelled as members, and
// the ClusterProfiles of a Cluster Inventory (KEP-4322) in the hub, reached
// with the operator's credential plugins (KEP-5339). A listing added is a
// member joining, a listing deleted (or a profile that says its cluster is
// not joined or not healthy) a member leaving, changed credentials new
// clients for the same member, and a cluster whose ID changes leaves and
// joins again under its new ID (KEP-2149). The three sources share one
// path (sync): one place decides join, leave and refuse.
package inventory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
	"k8s.io/multiclusterservices/export"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/eventrecorder"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
)

// DefaultSelector selects the member Secrets: those with the label
// export.LabelMember.
const DefaultSelector = export.LabelMember

// Membership is what the inventory drives: the controller.
type Membership interface {
	Join(ctx context.Context, m topology.Member) error
	// Leave is told why the member leaves, in words fit for its
	// exports' conditions.
	Leave(ctx context.Context, clusterID, why string) error
	// PropertiesChanged says that what the inventory adds to a joined
	// member's cluster properties (its ClusterProfile's status.properties)
	// may have changed: once it has joined, and at every change.
	PropertiesChanged(clusterID string)
}

// State is where a listed member stands.
type State string

const (
	// Joined members are served.
	Joined State = "joined"
	// Pending members are listed but not served yet: their API does not
	// answer, or their caches did not sync. They are retried.
	Pending State = "pending"
	// Refused members are listed but cannot be served as they are: an
	// invalid kubeconfig, no cluster ID, the ID of another member, Service
	// ranges overlapping the clusterset's. They are tried again when
	// their Secret changes, and every recheck period.
	Refused State = "refused"
)

// Config configures an Inventory.
type Config struct {
	// Hub holds the member Secrets; nil lists members by context only.
	Hub kubernetes.Interface
	// Namespace of the member Secrets in the hub.
	Namespace string
	// Selector selects the member Secrets.
	Selector labels.Selector
	// Contexts are the members given as kubeconfig contexts, by name.
	Contexts map[string]*rest.Config
	// ContextClusterIDs are the cluster IDs the operator states for
	// contexts, by context name (--member-cluster-ids).
	ContextClusterIDs map[string]string
	// NamedIDs are the cluster IDs the operator's configuration names
	// (--export-namespaces, --member-pod-cidrs), each with the flag that
	// names it. What a member may do there depends on its ID, so a
	// listing joins as one of them only where it states it: a member
	// listed without a statement that answers with a named ID (renamed
	// while its namesake is away, or before a restart that forgets what
	// it first joined as) is refused, never given the namesake's place.
	NamedIDs map[string]string
	// Configure adjusts every member's client configuration (rate
	// limits, user agent).
	Configure func(*rest.Config)
	// ClusterIDTimeout bounds one reading of a member's cluster ID.
	ClusterIDTimeout time.Duration
	// SyncTimeout bounds a member's first sync when it joins.
	SyncTimeout time.Duration
	// LeaveTimeout bounds the cleaning of a member that leaves.
	LeaveTimeout time.Duration
	// RecheckPeriod is how often every member's cluster ID is read
	// again, and a pending or refused member tried again.
	RecheckPeriod time.Duration
	// AllowProxy accepts a proxy-url in member Secrets' kubeconfigs
	// (ConfigFromKubeconfig) and profiles' access providers.
	AllowProxy bool

	// Profiles reaches the hub's ClusterProfiles; nil lists no profiles.
	Profiles dynamic.Interface
	// ProfileDiscovery tells which ClusterProfile version the hub serves
	// (inventoryv1alpha1.Versions, the newest is read); nil reads
	// v1alpha1.
	ProfileDiscovery discovery.DiscoveryInterface
	// ProfileNamespace is the inventory: the hub namespace of the
	// ClusterProfiles.
	ProfileNamespace string
	// ProfileSelector selects the ClusterProfiles that are member
	// candidates (e.g. by x-k8s.io/cluster-manager).
	ProfileSelector labels.Selector
	// AccessProviders are the operator's credential plugins for profiles.
	AccessProviders AccessProviders
	// RequireJoined serves a profile's cluster only while the profile
	// also says Joined, beside ControlPlaneHealthy.
	RequireJoined bool
	// ClusterSet is the clusterset the controller serves (--clusterset):
	// profiles of another are refused (checkClusterSet). "" takes the
	// inventory namespace's label multicluster.x-k8s.io/clusterset, if
	// any.
	ClusterSet string
}

// entry is one listed member.
type entry struct {
	key string // "context/<name>", "secret/<namespace>/<name>" or "profile/<namespace>/<name>"
	// obj is the listing's object (Secret, ClusterProfile), which events
	// are about; nil for a context.
	obj  runtime.Object
	hash string
	// config reaches the member, once joined.
	config *rest.Config
	// reach is the configuration its server last answered through,
	// joined or not: where its own events go (memberEvent).
	reach *rest.Config
	// id is the cluster ID it is a member as; "" when not joined.
	id string
	// stated is the cluster ID its listing states ("" when none): it is
	// reserved to this listing, joined or not, so that no other listing
	// takes it while this member is away.
	stated string
	// bound is the cluster ID it first joined as. A listing that states
	// no ID is bound to that one for as long as it is listed: a member
	// that renames itself is refused, never rejoined under the new ID.
	bound string
	// verified is the ID it states when its server last answered with
	// that ID: a statement reserves an ID for a listing only once the
	// listing is shown to be that cluster (contexts aside: their
	// statements are the operator's own), so that a listing whose server
	// never answers cannot keep the real cluster out by naming it.
	verified string
	// claimed is the cluster ID it answered with at start-up when
	// another context answered with the same and the operator stated it
	// for neither (Refusal.Claimed): held from every other listing, as
	// the other claimant's is from it, until it answers with another.
	claimed string
	// props identifies the properties its listing adds (a profile's
	// status.properties), to tell a change.
	props string
	// memberID is its profile's inventory member ID, or "".
	memberID string
	state    State
	message  string
}

// Inventory reconciles listed members with the controller's member set.
type Inventory struct {
	cfg      Config
	secrets  corelisters.SecretLister
	informer cache.SharedIndexInformer
	queue    workqueue.TypedRateLimitingInterface[string]
	recorder events.EventRecorder
	// stopEvents shuts the recorder's broadcaster down when Run ends.
	stopEvents func()

	// The ClusterProfile caches, in the version the hub serves: nil
	// until the hub has said which (profileCaches), guarded by mu.
	profileResource schema.GroupVersionResource
	profiles        cache.GenericLister
	profileInformer cache.SharedIndexInformer
	// nsClusterSet is the inventory namespace's clusterset label, read
	// with the version; guarded by mu.
	nsClusterSet string

	mu      sync.Mutex
	entries map[string]*entry
	logger  klog.Logger
}

// New builds an inventory. joined are the members the controller starts
// with, by key (ContextKey or SecretKey).
func New(cfg Config, joined map[string]string) *Inventory {
	inv := &Inventory{
		cfg:     cfg,
		entries: map[string]*entry{},
		logger:  klog.Background().WithName("inventory"),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, cfg.RecheckPeriod),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "inventory"}),
	}
	for key, id := range joined {
		name, _ := contextOf(key)
		inv.entries[key] = &entry{key: key, id: id, bound: id, stated: cfg.ContextClusterIDs[name], reach: cfg.Contexts[name], state: Joined, hash: hashOf(nil)}
	}
	if cfg.Hub != nil && cfg.Namespace != "" {
		f := informers.NewSharedInformerFactoryWithOptions(cfg.Hub, 0, informers.WithNamespace(cfg.Namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = cfg.Selector.String() }))
		inv.informer = f.Core().V1().Secrets().Informer()
		inv.secrets = f.Core().V1().Secrets().Lister()
	}
	if cfg.Profiles != nil && cfg.ProfileDiscovery == nil {
		inv.setProfileResource(inventoryv1alpha1.Resource)
	}
	if cfg.Hub != nil {
		// Events go to the namespace of the object they are about
		// (the Secret's, the profile's).
		inv.recorder, inv.stopEvents = eventrecorder.New(cfg.Hub)
	}
	return inv
}

// Initial lists the member Secrets and ClusterProfiles once and resolves
// their cluster IDs, so that the controller starts with every member that
// answers, as it starts with its contexts: their caches synced before it
// is ready, and no name merged without an exporter that is merely late to
// join (its endpoints would leave the other members and come back). A
// listing that cannot be used is recorded and retried by Run; a hub that
// does not answer within ClusterIDTimeout is left to Run too. Nothing
// here stops the start.
func (inv *Inventory) Initial(ctx context.Context) []topology.Member {
	inv.logger = klog.FromContext(ctx).WithName("inventory")
	type result struct {
		e   *entry
		l   listing
		m   *topology.Member
		err error
	}
	var results []*result
	lctx, cancel := context.WithTimeout(ctx, inv.cfg.ClusterIDTimeout)
	if inv.cfg.Hub != nil && inv.cfg.Namespace != "" {
		list, err := inv.cfg.Hub.CoreV1().Secrets(inv.cfg.Namespace).List(lctx, metav1.ListOptions{LabelSelector: inv.cfg.Selector.String()})
		if err != nil {
			inv.logger.Error(err, "Cannot list the member Secrets; they join once the hub answers", "namespace", inv.cfg.Namespace)
		} else {
			for i := range list.Items {
				s := &list.Items[i]
				results = append(results, &result{e: &entry{key: SecretKey(s.Namespace, s.Name), obj: s}, l: inv.secretListing(s)})
			}
		}
	}
	if inv.cfg.Profiles != nil {
		var list *unstructured.UnstructuredList
		resource, err := inv.discoverProfiles()
		if err == nil {
			list, err = inv.cfg.Profiles.Resource(resource).Namespace(inv.cfg.ProfileNamespace).List(lctx, metav1.ListOptions{LabelSelector: inv.cfg.ProfileSelector.String()})
		}
		if err != nil {
			inv.logger.Error(err, "Cannot list the ClusterProfiles; their clusters join once the hub answers", "namespace", inv.cfg.ProfileNamespace)
		} else {
			for i := range list.Items {
				u := &list.Items[i]
				if u.GetDeletionTimestamp() != nil {
					continue
				}
				results = append(results, &result{e: &entry{key: ProfileKey(u.GetNamespace(), u.GetName()), obj: u}, l: inv.profileListing(u)})
			}
		}
	}
	cancel()
	var wg sync.WaitGroup
	for _, r := range results {
		if r.l.notNow != "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.m, r.err = inv.resolve(ctx, r.e.key, r.l)
			if r.m != nil {
				r.e.reach = r.m.Config
			}
		}()
	}
	wg.Wait()
	// Two listings of one ID are settled by age, the older first, as
	// every replica would: never by refusing each other.
	slices.SortStableFunc(results, func(x, y *result) int { return compareListings(x.e, y.e) })
	var members []topology.Member
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for _, r := range results {
		r.e.stated, r.e.memberID = r.l.wantID, r.l.memberID
		inv.entries[r.e.key] = r.e
	}
	for _, r := range results {
		switch {
		case r.l.notNow != "":
			// Recorded so that Run writes its condition; it joins when
			// its profile says so.
			inv.setLocked(r.e, Pending, r.l.notNow)
			continue
		case r.err != nil:
			inv.setLocked(r.e, stateOf(r.err), r.err.Error())
			continue
		}
		o := others{holder: inv.holderLocked(r.m.ClusterID, r.e.key)}
		o.twin, o.twinID = inv.twinLocked(r.l.memberID, r.e.key)
		// Shown to be the cluster it states only now, in age order:
		// the younger of two listings of one ID finds the older holding it.
		if r.l.wantID == r.m.ClusterID {
			r.e.verified = r.m.ClusterID
		}
		if d := decideAnswer(known{}, r.l, r.m.ClusterID, nil, o); !d.join {
			inv.setLocked(r.e, d.state, d.message)
			continue
		}
		r.e.id, r.e.bound, r.e.config, r.e.hash = r.m.ClusterID, r.m.ClusterID, r.m.Config, r.l.hash
		inv.setLocked(r.e, Joined, fmt.Sprintf("cluster %s is a member of the clusterset", r.m.ClusterID))
		members = append(members, *r.m)
	}
	return members
}

// compareListings orders two listings by the age of their objects (a
// Secret's, a profile's), then by key.
func compareListings(x, y *entry) int {
	return export.CompareAge(listingCreated(x), x.key, listingCreated(y), y.key)
}

func listingCreated(e *entry) time.Time {
	if e.obj == nil {
		return time.Time{}
	}
	if m, err := meta.Accessor(e.obj); err == nil {
		return m.GetCreationTimestamp().Time
	}
	return time.Time{}
}

// Pending records members given as contexts that did not answer at
// start-up: Run joins them once they do.
func (inv *Inventory) Pending(contexts []string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for _, name := range contexts {
		key := ContextKey(name)
		inv.entries[key] = &entry{key: key, stated: inv.cfg.ContextClusterIDs[name], state: Pending, message: "unreachable at start-up"}
	}
}

// Refusal is why a member given as a context is not served from
// start-up.
type Refusal struct {
	// Why is said in its state, event and log.
	Why string
	// Claimed is the cluster ID it answered with when that ID is
	// disputed: another context answered with it too, and the operator
	// states it for neither. Neither takes the ID from the other until
	// the operator states it for one, or one answers with another.
	Claimed string
}

// CheckContextIDs decides, of the members given as contexts, which
// start as members: members answered with their cluster IDs, failed
// answered with none they may be served as (topology.Resolve). What one
// member says of itself decides only its own membership, never whether
// the controller starts nor another member's:
//
//   - a member with no usable cluster ID is refused;
//   - a member whose ID is not the one the operator states for its
//     context (stated, by context name) is refused, and so is one
//     answering with an ID the operator states for another context,
//     reachable or not;
//   - an ID that several contexts answer with, stated for none of them,
//     is disputed: every claimant is refused, since nothing a member can
//     write tells the cluster that served the ID from one that took it
//     while the controller was down;
//   - a context without a statement is admitted, bound to the ID it
//     answers now.
//
// The refused are returned by context name: Refuse records them, and Run
// joins each once its answer is one it may be served as.
func CheckContextIDs(stated, named map[string]string, members []topology.Member, failed map[string]error) (admitted []topology.Member, refused map[string]Refusal) {
	refused = map[string]Refusal{}
	for name, err := range failed {
		refused[name] = Refusal{Why: (&readError{err: err}).Error()}
	}
	statedFor := map[string]string{}
	for name, id := range stated {
		statedFor[id] = name
	}
	// A context already refused for what it answers (checkID) claims
	// nothing: counting it would dispute an ID that only one admissible
	// context answers with.
	var candidates []topology.Member
	claimants := map[string][]string{}
	for _, m := range members {
		if err := checkID(ContextKey(m.Context), listing{wantID: stated[m.Context]}, m.ClusterID, named); err != nil {
			refused[m.Context] = Refusal{Why: err.Error()}
			continue
		}
		if owner, isStated := statedFor[m.ClusterID]; isStated && owner != m.Context {
			refused[m.Context] = Refusal{Why: takenMessage(m.ClusterID, ContextKey(owner))}
			continue
		}
		candidates = append(candidates, m)
		claimants[m.ClusterID] = append(claimants[m.ClusterID], m.Context)
	}
	for _, m := range candidates {
		if _, isStated := statedFor[m.ClusterID]; !isStated && len(claimants[m.ClusterID]) > 1 {
			refused[m.Context] = Refusal{Claimed: m.ClusterID, Why: fmt.Sprintf(
				"contexts %s all answer with cluster ID %q and the operator states it for none: none is served as %q until the operator states which it is (--member-cluster-ids CONTEXT=ID) or the others answer with their own",
				strings.Join(claimants[m.ClusterID], ", "), m.ClusterID, m.ClusterID)}
			continue
		}
		admitted = append(admitted, m)
	}
	return admitted, refused
}

// Refuse records members given as contexts that were refused at start-up
// (CheckContextIDs), with why.
func (inv *Inventory) Refuse(contexts map[string]Refusal) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for name, r := range contexts {
		key := ContextKey(name)
		e := &entry{key: key, stated: inv.cfg.ContextClusterIDs[name], claimed: r.Claimed, reach: inv.cfg.Contexts[name]}
		inv.entries[key] = e
		inv.setLocked(e, Refused, r.Why)
	}
}

// Run watches the member Secrets and ClusterProfiles and rechecks every
// member until ctx ends. It drives m, which must be running. Members given
// as contexts are worked at once; those of a source in the hub once that
// source has been read (a hub that does not answer delays only them).
func (inv *Inventory) Run(ctx context.Context, m Membership) {
	defer inv.queue.ShutDown()
	if inv.stopEvents != nil {
		defer inv.stopEvents()
	}
	inv.mu.Lock()
	inv.logger = klog.FromContext(ctx).WithName("inventory")
	inv.mu.Unlock()
	// enqueueSynced queues the listed members of a source once its
	// informer has read the hub: those no longer listed leave then.
	enqueueSynced := func(prefix string, informer cache.SharedIndexInformer) {
		go informer.Run(ctx.Done())
		go func() {
			if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
				return
			}
			inv.mu.Lock()
			defer inv.mu.Unlock()
			for key := range inv.entries {
				if strings.HasPrefix(key, prefix) {
					inv.queue.Add(key)
				}
			}
		}()
	}
	if inv.informer != nil {
		enqueue := func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				inv.queue.Add(secretPrefix + key)
			}
		}
		_, _ = inv.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, cur any) { enqueue(cur) },
			DeleteFunc: enqueue,
		})
		enqueueSynced(secretPrefix, inv.informer)
	}
	if inv.cfg.Profiles != nil {
		go inv.watchProfiles(ctx, enqueueSynced)
	}
	inv.mu.Lock()
	for key := range inv.entries {
		if strings.HasPrefix(key, contextPrefix) {
			inv.queue.Add(key)
		}
	}
	inv.mu.Unlock()
	go func() {
		<-ctx.Done()
		inv.queue.ShutDown()
	}()
	// One worker: membership changes are rare, and one at a time keeps
	// cluster IDs from being taken twice.
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		for inv.process(ctx, m) {
		}
	}, time.Second)
}

func (inv *Inventory) process(ctx context.Context, m Membership) bool {
	key, quit := inv.queue.Get()
	if quit {
		return false
	}
	defer inv.queue.Done(key)
	retry := inv.sync(ctx, m, key)
	switch {
	case retry:
		inv.queue.AddRateLimited(key)
	default:
		inv.queue.Forget(key)
		if inv.listed(key) {
			inv.queue.AddAfter(key, inv.cfg.RecheckPeriod)
		}
	}
	return true
}

func (inv *Inventory) listed(key string) bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	_, ok := inv.entries[key]
	return ok
}
