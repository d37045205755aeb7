package inventory

import (
	"errors"
	"fmt"

	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
)

// What sync does with one listed member is decided here, by pure
// functions of what the inventory knows of the member, what its listing
// says and, once asked, what its server answered; sync reads those and
// applies the decision (leave, record a state, join). TestDecide has a
// row per branch.

// known is what the inventory knows of a listed member when it decides.
type known struct {
	// id is the cluster ID it is a member as; "" when not joined.
	id string
	// hash identifies the credentials and server it joined with.
	hash string
	// props identifies the properties its listing added last.
	props string
	state State
}

// decision is what sync does for one listed member, in this order.
type decision struct {
	// leave, when set, is why the member leaves the clusterset.
	leave string
	// forget drops the listing's entry: it is no longer listed.
	forget bool
	// state, when set, is recorded with message.
	state   State
	message string
	// stays: the server did not answer (message says why), the member
	// stays as it is (its own probe and the endpoint TTL deal with an
	// outage).
	stays bool
	// propertiesChanged plans cluster selection again with the member's
	// properties, its listing's included.
	propertiesChanged bool
	// join joins the member as the cluster its server answered for.
	join bool
	// retry tries the listing again soon rather than at the next change.
	retry bool
}

// decideListing decides what the listing of key settles by itself,
// before the member's server is asked: a member delisted leaves and is
// forgotten, a context not listed at start-up is none of the inventory's,
// and a listing that says "not now" parks the member. settled is false
// when the server must be asked (decideAnswer).
func decideListing(key string, k *known, l listing, context bool) (d decision, settled bool) {
	switch {
	case l.gone:
		if k == nil {
			return decision{}, true
		}
		d.forget = true
		if k.id != "" {
			d.leave = "its " + sourceOf(key) + " was deleted"
		}
		return d, true
	case k == nil && context:
		return decision{}, true
	case l.notNow != "":
		// Served no more, and tried again when its listing changes.
		d = decision{state: Pending, message: l.notNow}
		if k != nil && k.id != "" {
			d.leave = l.notNow
		}
		return d, true
	}
	return decision{}, false
}

// others is what other listings hold that a member's answer is weighed
// against.
type others struct {
	// holder is the listing that already holds the ID the member
	// answered with (joined, bound or stated), if any.
	holder string
	// twin is the listing whose profile has the same inventory member
	// ID (the same cluster, by its cluster managers' word), if any, and
	// twinID the cluster ID it is.
	twin, twinID string
}

// decideAnswer decides from the member's server's answer: the cluster ID
// id it is a member as, or err why it has none it may be one as; o says
// what other listings hold.
func decideAnswer(k known, l listing, id string, err error, o others) decision {
	switch {
	case err == nil:
	case k.id != "" && (errors.Is(err, topology.ErrNoClusterID) || errors.Is(err, ErrIDMismatch)):
		// A cluster without a (valid) ID cannot be a member (KEP-2149),
		// nor one that is not the cluster its listing names.
		return decision{leave: err.Error(), state: Refused, message: err.Error()}
	case k.id != "" && k.hash == l.hash:
		// Unreachable, or forbidden for a moment: membership does not
		// change.
		return decision{stays: true, message: err.Error()}
	default:
		// New credentials that do not work leave the member they replace
		// as it was.
		s := stateOf(err)
		return decision{state: s, message: err.Error(), retry: s == Pending}
	}
	if k.id == id && k.hash == l.hash && k.state == Joined {
		// The profile's properties move cluster selection as the
		// member's own do.
		return decision{propertiesChanged: k.props != l.props}
	}
	var d decision
	if k.id != "" && k.id != id {
		// Only the operator's word changes a listing's ID (resolve
		// refuses the member's): the listing now names another cluster.
		d.leave = fmt.Sprintf("the operator states cluster ID %q for it now", id)
	}
	switch {
	case o.twin != "" && o.twinID != "" && o.twinID != id:
		// Two profiles that say they are the same cluster reach two:
		// one of them names the wrong server.
		d.state, d.message = Refused, fmt.Sprintf("%s carries the same %s=%s but is cluster %q, and this listing's server answers for cluster %q: the two profiles say they are one cluster",
			o.twin, inventoryv1alpha1.LabelInventoryMemberID, l.memberID, o.twinID, id)
		return d
	case o.holder != "" && o.holder == o.twin:
		// Two cluster managers' profiles of one cluster: it is served
		// once, through the first; this one waits to take over.
		d.state, d.message = Pending, fmt.Sprintf("cluster %s is served through %s, the profile with the same %s=%s; this one takes over if that one goes",
			id, o.holder, inventoryv1alpha1.LabelInventoryMemberID, l.memberID)
		return d
	case o.holder != "":
		d.state, d.message = Refused, takenMessage(id, o.holder)
		return d
	}
	d.join = true
	return d
}

// decideJoined decides from the outcome of joining as id: err is the
// controller's refusal, timedOut that its caches did not sync in time
// (retried; a refusal, such as overlapping Service ranges, waits for a
// change).
func decideJoined(id string, err error, timedOut bool) decision {
	if err == nil {
		// Its properties were read while it joined, before the inventory
		// knew it as a member: read them again, its profile's included.
		return decision{state: Joined, message: fmt.Sprintf("cluster %s is a member of the clusterset", id), propertiesChanged: true}
	}
	if timedOut {
		return decision{state: Pending, message: err.Error(), retry: true}
	}
	return decision{state: Refused, message: err.Error()}
}
