package mcs

import (
	"context"
	"errors"
	"fmt"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
)

// ErrNotRunning is returned by Join before Run has started its workers.
var ErrNotRunning = errors.New("the controller is not running")

// DuplicateClusterIDError refuses a member whose cluster ID another member
// already has: its endpoints would be mislabelled clusterset-wide.
type DuplicateClusterIDError struct {
	ClusterID, Member, Other string
}

func (e *DuplicateClusterIDError) Error() string {
	return fmt.Sprintf("cluster ID %q is already the ID of member %s; each cluster of a clusterset needs its own ID (ClusterProperty cluster.clusterset.k8s.io)", e.ClusterID, e.Other)
}

// Join makes tm a member of the running clusterset: its caches are synced
// (until ctx ends), its Service ranges checked against the clusterset's,
// and only then is it served, so that the other members never see it half
// known. Joining causes no writes into the other members beyond what the
// new member exports. A member of the same cluster ID and context is
// replaced (new credentials); any other holder of the ID refuses the join.
func (c *Controller) Join(ctx context.Context, tm topology.Member) error {
	m, err := newMember(tm, c.cfg.ManagedBy, newRecorder)
	if err != nil {
		return err
	}
	return c.join(ctx, m)
}

func (c *Controller) join(ctx context.Context, m *member) error {
	runCtx, old := c.members.serving(m.id)
	if runCtx == nil {
		return ErrNotRunning
	}
	if old != nil && old.Context != m.Context {
		return &DuplicateClusterIDError{ClusterID: m.id, Member: m.Context, Other: old.Context}
	}
	if old != nil {
		// The same cluster through new credentials: what it was told
		// stays told.
		m.state = old.state
	}
	c.startInformers(runCtx, m)
	if !cache.WaitForCacheSync(ctx.Done(), m.hasSynced) {
		c.abandon(m)
		return fmt.Errorf("the caches of cluster %s did not sync (are the MCS CRDs installed and the controller authorized?)", m.id)
	}
	if err := c.reservations.checkServiceCIDRs(m); err != nil {
		c.abandon(m)
		return err
	}
	if cur, ok := c.members.replace(old, m); !ok {
		c.abandon(m)
		other := "another member"
		if cur != nil {
			other = cur.Context
		}
		return &DuplicateClusterIDError{ClusterID: m.id, Member: m.Context, Other: other}
	}
	if old != nil {
		// The same cluster through new credentials: the old clients go,
		// nothing is written anywhere for it.
		old.stop()
		klog.FromContext(ctx).Info("Member replaced", "cluster", m.id, "member", m.Context)
	}
	// Before it is served: the first plan that counts it knows the
	// sources whose Leases it holds.
	c.leases.learn(ctx, m)
	c.leases.joined(m.id)
	c.reservations.reserveForeignOf(m)
	c.serve(m)
	c.reservations.restoreClusterSetIPs()
	c.enqueueAll()
	klog.FromContext(ctx).Info("Member joined the clusterset", "cluster", m.id, "member", m.Context)
	return nil
}

// rejoinTimeout bounds the listing of a member that is back: one that
// does not sync in that time is served from its old watches.
const rejoinTimeout = 2 * time.Minute

// rejoin serves old, which answers again after being unreachable, through
// new watches: its old ones were failing, backing off up to 30 s between
// tries, and (its apiserver restarted, or etcd compacted the revisions
// they had reached, as after an hour away) must list it again anyway.
// Until they had, every write into it would be made from what it held
// before it went away and be refused as a conflict, then retried, for
// every name; and a write planned while it was away (its endpoints
// withdrawn) would undo itself moments later. Joined again, it is listed
// at once and written into from the new caches and the current plan only:
// what changed while it was away. Nothing is written from the old ones
// (member.stale).
func (c *Controller) rejoin(old *member) {
	defer old.rejoining.Store(false)
	runCtx, cur := c.members.serving(old.id)
	if runCtx == nil || cur != old {
		// Gone, or replaced since (new credentials): the new one is
		// served from its own watches.
		return
	}
	logger := klog.FromContext(runCtx)
	ctx, cancel := context.WithTimeout(runCtx, rejoinTimeout)
	defer cancel()
	m, err := newMember(old.Member, c.cfg.ManagedBy, newRecorder)
	if err == nil {
		err = c.join(ctx, m)
	}
	if err == nil {
		return
	}
	logger.Error(err, "Listing a member that is back failed; writing into it from its old watches", "cluster", old.id)
	old.stale.Store(false)
	c.writeAgain(old)
}

// abandon stops a member that did not join, and drops the clusterset IPs
// its foreign imports were reserving.
func (c *Controller) abandon(m *member) {
	m.stop()
	c.reservations.forgetForeign(m)
}

// Leave removes member id from the clusterset: it is served no more, its
// endpoints leave every other member at once (no TTL: nobody expects it
// back), its source Lease is deleted everywhere, and what the controller
// wrote into it (imports, EndpointSlices, Services, Leases) is removed,
// its exports saying that they are not served, and why (the inventory's
// words: deleted from the inventory, refused for claiming another ID).
// Cleaning the member is retried until ctx ends; a member that cannot be
// reached keeps what it had, and the error says so.
func (c *Controller) Leave(ctx context.Context, id, why string) error {
	m := c.members.remove(id)
	if m == nil {
		return nil
	}

	// Its exports as last seen, for their status.
	exports, _ := m.exports.List(labels.Everything())
	m.stop()
	c.reservations.forgetForeign(m)
	errs := []error{c.leases.forget(ctx, id)}
	c.enqueueAll()
	c.metrics.forgetMember(id)
	klog.FromContext(ctx).Info("Member left the clusterset; withdrawing its endpoints and cleaning it", "cluster", id, "member", m.Context)

	err := retry(ctx, func(ctx context.Context) error { return c.clean(ctx, m, exports, why) })
	if err != nil {
		errs = append(errs, fmt.Errorf("cleaning cluster %s: %w", id, err))
	}
	return errors.Join(errs...)
}

// retry retries f with backoff until it succeeds or ctx ends.
func retry(ctx context.Context, f func(context.Context) error) error {
	delay := 200 * time.Millisecond
	for {
		err := f(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

// clean removes from a member that left what the controller wrote into
// it, and marks the exports it knew not ready.
func (c *Controller) clean(ctx context.Context, m *member, exports []*mcsv1beta1.ServiceExport, why string) error {
	var errs []error
	ours := metav1.ListOptions{LabelSelector: labels.Set{managedLabel: c.cfg.ManagedBy}.String()}
	// Imports first: their owner references collect the rest too, should
	// anything below fail.
	imports, err := m.mcs.MulticlusterV1beta1().ServiceImports("").List(ctx, ours)
	if err != nil {
		return err
	}
	for _, si := range imports.Items {
		err := m.mcs.MulticlusterV1beta1().ServiceImports(si.Namespace).Delete(ctx, si.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(si.UID)}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, err)
		}
	}
	eps, err := m.kube.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{LabelSelector: labels.Set{discoveryv1.LabelManagedBy: c.cfg.ManagedBy}.String()})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, s := range eps.Items {
		err := m.kube.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(s.UID)}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, err)
		}
	}
	services, err := m.kube.CoreV1().Services("").List(ctx, ours)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for i := range services.Items {
		errs = append(errs, deleteOwnService(ctx, m, &services.Items[i]))
	}
	leases, err := m.kube.CoordinationV1().Leases(c.cfg.LeaseNamespace).List(ctx, metav1.ListOptions{LabelSelector: mcsv1beta1.LabelSourceCluster})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, l := range leases.Items {
		err := m.kube.CoordinationV1().Leases(l.Namespace).Delete(ctx, l.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	for _, se := range exports {
		errs = append(errs, notServed(ctx, m, se, why))
	}
	return errors.Join(errs...)
}

// notServed sets Ready=False on an export of a member that left, saying
// why it left.
func notServed(ctx context.Context, m *member, se *mcsv1beta1.ServiceExport, why string) error {
	message := fmt.Sprintf("cluster %s is no longer a member of the clusterset: this export is not served", m.id)
	if why != "" {
		message = fmt.Sprintf("cluster %s is no longer a member of the clusterset (%s): this export is not served", m.id, why)
	}
	api := m.mcs.MulticlusterV1beta1().ServiceExports(se.Namespace)
	for attempt := 0; ; attempt++ {
		if se.DeletionTimestamp != nil {
			return nil
		}
		update := se.DeepCopy()
		meta.SetStatusCondition(&update.Status.Conditions, metav1.Condition{
			Type:               string(mcsv1beta1.ServiceExportConditionReady),
			Status:             metav1.ConditionFalse,
			Reason:             string(mcsv1beta1.ServiceExportReasonFailed),
			Message:            message,
			ObservedGeneration: se.Generation,
		})
		_, err := api.UpdateStatus(ctx, update, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) || attempt > 0 {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		// Changed since the cache saw it: once more on what is there now.
		if se, err = api.Get(ctx, se.Name, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
	}
}

// PropertiesChanged refreshes the merged cluster properties of member id
// (its own ClusterProperties and what its ClusterProfile adds) and plans
// again what they select, as a change of its own ClusterProperties does.
// The inventory calls it once a member has joined and whenever its
// profile's properties change.
func (c *Controller) PropertiesChanged(id string) {
	if m := c.members.get(id); m != nil && m.sel != nil {
		c.propertiesChanged(m)
	}
}
