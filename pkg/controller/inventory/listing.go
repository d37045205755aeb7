package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
	"k8s.io/multiclusterservices/export"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
)

// What a member's source says of it: its key, whether it is listed, its
// client configuration and the cluster ID it states, and why a member
// that cannot be served is refused or pending.

// Keys of listed members start with where they are listed.
const (
	contextPrefix = "context/"
	secretPrefix  = "secret/"
	profilePrefix = "profile/"
)

// ProfileKey is the key of a member given as a ClusterProfile.
func ProfileKey(namespace, name string) string { return profilePrefix + namespace + "/" + name }

// ContextKey is the key of a member given as a kubeconfig context.
func ContextKey(name string) string { return contextPrefix + name }

// SecretKey is the key of a member given as a Secret.
func SecretKey(namespace, name string) string { return secretPrefix + namespace + "/" + name }

// listing is what the source of a listed member says of it now.
type listing struct {
	// gone: the member is no longer listed.
	gone bool
	obj  runtime.Object
	// hash identifies the credentials and server, to tell a change.
	hash string
	// config builds the member's client configuration.
	config func() (*rest.Config, error)
	// notNow, when set, says why the source does not want the member
	// served now (a profile's cluster not joined, or not healthy).
	notNow string
	// wantID is the cluster ID the source states (the operator's word),
	// or "": a server that answers with another ID is refused.
	wantID string
	// boundAtJoin: wantID is not stated but the ID the member joined
	// with first; a listing that states none is bound to that.
	boundAtJoin bool
	// props identifies the cluster properties the listing adds (a
	// profile's status.properties); "" for none.
	props string
	// memberID is a profile's inventory member ID (its label
	// multicluster.x-k8s.io/inventory-member-id): profiles with the same
	// one are the same cluster, written by two cluster managers.
	memberID string
}

// errNotRead is a source in the hub not read yet (the hub has not
// answered since start-up): its members are neither joined nor left on
// what an empty cache says.
var errNotRead = errors.New("the hub has not been read yet")

// listingOf reads what the source of key says now; an error is a
// source that cannot be read (retried).
func (inv *Inventory) listingOf(key string) (listing, error) {
	switch {
	case strings.HasPrefix(key, contextPrefix):
		name, _ := contextOf(key)
		return listing{hash: hashOf(nil), wantID: inv.cfg.ContextClusterIDs[name], config: func() (*rest.Config, error) { return rest.CopyConfig(inv.cfg.Contexts[name]), nil }}, nil
	case strings.HasPrefix(key, secretPrefix):
		if inv.informer == nil || !inv.informer.HasSynced() {
			return listing{}, errNotRead
		}
		ns, name, _ := cache.SplitMetaNamespaceKey(strings.TrimPrefix(key, secretPrefix))
		s, err := inv.secrets.Secrets(ns).Get(name)
		if apierrors.IsNotFound(err) || err == nil && s.DeletionTimestamp != nil {
			return listing{gone: true}, nil
		}
		if err != nil {
			return listing{}, err
		}
		return inv.secretListing(s), nil
	case strings.HasPrefix(key, profilePrefix):
		informer, profiles := inv.profileCaches()
		if informer == nil || !informer.HasSynced() {
			return listing{}, errNotRead
		}
		ns, name, _ := cache.SplitMetaNamespaceKey(strings.TrimPrefix(key, profilePrefix))
		obj, err := profiles.ByNamespace(ns).Get(name)
		if apierrors.IsNotFound(err) {
			return listing{gone: true}, nil
		}
		if err != nil {
			return listing{}, err
		}
		u, ok := obj.(*unstructured.Unstructured)
		// The informer lists by the selector already; a profile
		// relabelled out of it is, to the cache, deleted. Checked
		// here too, so that no cache's view decides alone.
		if !ok || u.GetDeletionTimestamp() != nil || !inv.cfg.ProfileSelector.Matches(labels.Set(u.GetLabels())) {
			return listing{gone: true}, nil
		}
		return inv.profileListing(u), nil
	}
	return listing{gone: true}, nil
}

func (inv *Inventory) secretListing(s *v1.Secret) listing {
	data := s.Data[KubeconfigKey]
	return listing{obj: s, hash: hashOf(data), wantID: s.Annotations[export.AnnotationMemberClusterID], config: func() (*rest.Config, error) {
		cfg, err := ConfigFromKubeconfig(data, inv.cfg.AllowProxy)
		if err == nil && inv.cfg.Configure != nil {
			inv.cfg.Configure(cfg)
		}
		return cfg, err
	}}
}

func (inv *Inventory) profileListing(u *unstructured.Unstructured) listing {
	l := listing{obj: u}
	cp := &inventoryv1alpha1.ClusterProfile{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cp); err != nil {
		l.config = func() (*rest.Config, error) { return nil, fmt.Errorf("%w: %v", ErrInvalidProfile, err) }
		return l
	}
	if ok, why := ProfileSaysServe(cp, inv.cfg.RequireJoined); !ok {
		l.notNow = why
	}
	l.wantID = ProfileClusterID(cp)
	l.memberID = u.GetLabels()[inventoryv1alpha1.LabelInventoryMemberID]
	inv.mu.Lock()
	nsClusterSet := inv.nsClusterSet
	inv.mu.Unlock()
	if err := checkClusterSet(ProfileClusterSet(cp), nsClusterSet, inv.cfg.ClusterSet); err != nil {
		l.config = func() (*rest.Config, error) { return nil, err }
		return l
	}
	if len(cp.Status.Properties) > 0 {
		raw, _ := json.Marshal(cp.Status.Properties)
		l.props = hashOf(raw)
	}
	cfg, hash, err := ConfigFromProfile(cp, inv.cfg.AccessProviders, inv.cfg.AllowProxy)
	l.hash = hash
	l.config = func() (*rest.Config, error) {
		if err == nil && inv.cfg.Configure != nil {
			inv.cfg.Configure(cfg)
		}
		return cfg, err
	}
	return l
}

// resolve builds the client configuration of a listed member and reads its
// cluster ID.
func (inv *Inventory) resolve(ctx context.Context, key string, l listing) (*topology.Member, error) {
	cfg, err := l.config()
	if err != nil {
		return nil, err
	}
	member := key
	if name, ok := contextOf(key); ok {
		member = name
	}
	id, err := topology.ClusterID(ctx, cfg, inv.cfg.ClusterIDTimeout)
	if err != nil {
		// The server's own words, a reply's body among them, go to the
		// log only, at a verbosity an operator chooses, and truncated.
		inv.logger.V(4).Info("Reading a member's cluster ID failed", "member", key, "err", truncate(err.Error(), maxLoggedReply))
		return nil, &readError{err: err}
	}
	if err := checkID(key, l, id, inv.cfg.NamedIDs); err != nil {
		// The member is returned too: the refusal is told to it, on its
		// own ClusterProperty.
		return &topology.Member{Context: member, ClusterID: id, Config: cfg}, err
	}
	return &topology.Member{Context: member, ClusterID: id, Config: cfg}, nil
}

// ErrIDMismatch is why a listing whose server answers for another cluster
// than the one it names is refused.
var ErrIDMismatch = errors.New("the server is another cluster's")

// checkID refuses the member of listing l (key) whose server holds
// cluster ID id, when l states (or is bound to) another: serving it would
// put the other cluster's endpoints under this listing's name, take the
// ID it names from its owner, or let a confined member escape its
// confinement by renaming itself. Refused, never rejoined under the ID it
// chose. A listing that states none is refused an ID the operator's
// configuration names (named, NamedIDs): that binding must outlive the
// process, and only a statement does.
func checkID(key string, l listing, id string, named map[string]string) error {
	if l.wantID == "" {
		if flag, ok := named[id]; ok {
			return fmt.Errorf("%w: its server's ClusterProperty %s holds %q, which the operator's %s names, and its listing states no ID: a member joins as an ID the operator's configuration names only where its listing states it (%s)", ErrIDMismatch, clusterIDProperty, id, flag, howToState(key))
		}
		return nil
	}
	if id == l.wantID {
		return nil
	}
	return fmt.Errorf("%w: %s, but its server's ClusterProperty %s holds %q; a member never joins under an ID of its own choosing", ErrIDMismatch, statedBy(key, l), clusterIDProperty, id)
}

// statedBy says where l's cluster ID comes from, for people.
func statedBy(key string, l listing) string {
	switch {
	case l.boundAtJoin:
		return fmt.Sprintf("it joined as cluster %q (state its ID: %s)", l.wantID, howToState(key))
	case strings.HasPrefix(key, contextPrefix):
		return fmt.Sprintf("the operator states cluster %q for it (--member-cluster-ids)", l.wantID)
	case strings.HasPrefix(key, secretPrefix):
		return fmt.Sprintf("its Secret states cluster %q (annotation %s)", l.wantID, export.AnnotationMemberClusterID)
	}
	return fmt.Sprintf("its ClusterProfile's property %s says cluster %q", clusterIDProperty, l.wantID)
}

// howToState says how the operator states the ID of the member key.
func howToState(key string) string {
	switch {
	case strings.HasPrefix(key, contextPrefix):
		return "--member-cluster-ids CONTEXT=ID"
	case strings.HasPrefix(key, secretPrefix):
		return "annotation " + export.AnnotationMemberClusterID + " on its Secret"
	}
	return "property " + clusterIDProperty + " in its ClusterProfile's status"
}

// readError is why a listed member's cluster ID could not be read, said
// (Error) in words that carry nothing its server chose: whoever writes a
// member Secret picks the server, and the member's state is told in the
// Secret's events. Echoing a reply (client-go puts up to 2 KiB of a body
// that is not a Status in its error, and a Status's message is the
// server's) would let them read, through the controller, any https
// service the controller reaches; how a connection failed (refused,
// timed out, a certificate) would map the controller's network. Unwrap
// gives the error itself, for stateOf and the log.
type readError struct{ err error }

func (e *readError) Unwrap() error { return e.err }

func (e *readError) Error() string {
	var status apierrors.APIStatus
	var down *topology.UnreachableError
	switch {
	case errors.Is(e.err, topology.ErrNoClusterID):
		// The controller's own words (the ClusterProperty is missing,
		// or its value is not a cluster ID).
		return e.err.Error()
	case errors.As(e.err, &status):
		code := int(status.Status().Code)
		msg := fmt.Sprintf("the member's server answered HTTP %d %s to reading ClusterProperty %s", code, http.StatusText(code), aboutv1alpha1.ClusterIDProperty)
		if code == http.StatusUnauthorized || code == http.StatusForbidden {
			msg += " (are the kubeconfig's credentials valid, and allowed to read it? see kind-config/mcs-controller-rbac.yaml)"
		}
		return msg
	case errors.As(e.err, &down):
		return fmt.Sprintf("the member's server did not answer within %s (the controller logs why at verbosity 4)", down.Timeout)
	default:
		return "the member's cluster ID could not be read (the controller logs why at verbosity 4)"
	}
}

// maxLoggedReply bounds what of a member server's words is logged.
const maxLoggedReply = 512

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func contextOf(key string) (string, bool) {
	return strings.CutPrefix(key, contextPrefix)
}

// stateOf tells a member that is not there yet from one refused.
func stateOf(err error) State {
	var down *topology.UnreachableError
	if errors.As(err, &down) || errors.Is(err, context.DeadlineExceeded) {
		return Pending
	}
	return Refused
}
