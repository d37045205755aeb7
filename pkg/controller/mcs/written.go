package mcs

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
	"unique"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// writtenSlice is how the controller caches an EndpointSlice carrying its
// managed-by label in a member: a slice it wrote (or one someone else
// labelled as such, which it deletes). Every member holds one per source
// cluster of every name, so at ten members these are most of what the
// controller holds; only what it reads of them is kept. Their content
// (labels, owner, ports, endpoints) is a digest that sameSlice compares
// with what it would write, and the labels it routes by are shared by the
// same slice in every member.
type writtenSlice struct {
	name      string
	namespace unique.Handle[string]
	// resourceVersion is the precondition of every update and delete:
	// a slice changed or replaced meanwhile is looked at again.
	resourceVersion string
	// generation is what the member's apiserver counts of the slice's
	// content changes: a cached copy older than the controller's own
	// last write of it has a lower one (memberState.cacheBehind).
	generation int64
	labels     unique.Handle[writtenLabels]
	// digest identifies what the controller writes of the slice
	// (contentDigest).
	digest [sha256.Size / 2]byte
	// writers are the field managers other than this controller that
	// wrote the slice (managedFields); nil for the controller's own.
	writers []string
	// kept are the annotations and finalizers others set on the slice,
	// which an update leaves as they are; nil for the controller's own.
	kept *keptMeta
}

// writtenLabels are the labels the controller routes its slices by.
type writtenLabels struct {
	// importName is multicluster.kubernetes.io/service-name.
	importName string
	// sourceCluster is multicluster.kubernetes.io/source-cluster.
	sourceCluster string
	// service is kubernetes.io/service-name: the import's synthetic
	// Service on MCS slices, the derived Service on a derived Service's,
	// and, in derived members, a local Service (native names).
	service    string
	hasService bool
}

type keptMeta struct {
	annotations map[string]string
	finalizers  []string
}

// GetObjectMeta makes a writtenSlice an object the informer can key.
func (s *writtenSlice) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: s.name, Namespace: s.Namespace(), ResourceVersion: s.resourceVersion}
}

func (s *writtenSlice) Namespace() string { return s.namespace.Value() }

func (s *writtenSlice) importName() string    { return s.labels.Value().importName }
func (s *writtenSlice) sourceCluster() string { return s.labels.Value().sourceCluster }

// service is the slice's kubernetes.io/service-name, if it has one.
func (s *writtenSlice) service() (string, bool) {
	l := s.labels.Value()
	return l.service, l.hasService
}

// toWrittenSlice is the informer transform of the slices with the
// controller's managed-by label.
func toWrittenSlice(obj any) (any, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	return newWrittenSlice(s), nil
}

func newWrittenSlice(s *discoveryv1.EndpointSlice) *writtenSlice {
	service, hasService := s.Labels[discoveryv1.LabelServiceName]
	w := &writtenSlice{
		name:            s.Name,
		namespace:       unique.Make(s.Namespace),
		resourceVersion: s.ResourceVersion,
		generation:      s.Generation,
		labels: unique.Make(writtenLabels{
			importName:    s.Labels[mcsv1beta1.LabelServiceName],
			sourceCluster: s.Labels[mcsv1beta1.LabelSourceCluster],
			service:       service,
			hasService:    hasService,
		}),
		digest: contentDigest(s),
	}
	for _, f := range s.ManagedFields {
		if f.Manager != fieldManager && !slices.Contains(w.writers, f.Manager) {
			w.writers = append(w.writers, f.Manager)
		}
	}
	slices.Sort(w.writers)
	if len(s.Annotations) > 0 || len(s.Finalizers) > 0 {
		w.kept = &keptMeta{annotations: s.Annotations, finalizers: s.Finalizers}
	}
	return w
}

// contentDigest identifies what the controller writes of a slice: its
// labels, owner references, address type, ports and endpoints. Empty and
// absent lists are the same (the apiserver returns either).
func contentDigest(s *discoveryv1.EndpointSlice) [sha256.Size / 2]byte {
	content := struct {
		Labels          map[string]string          `json:"l,omitempty"`
		OwnerReferences []metav1.OwnerReference    `json:"o,omitempty"`
		AddressType     discoveryv1.AddressType    `json:"a"`
		Ports           []discoveryv1.EndpointPort `json:"p,omitempty"`
		Endpoints       []discoveryv1.Endpoint     `json:"e,omitempty"`
	}{s.Labels, s.OwnerReferences, s.AddressType, s.Ports, s.Endpoints}
	data, err := json.Marshal(content)
	if err != nil {
		// Not reached for these types; a digest that matches nothing
		// makes the slice be written again.
		return [sha256.Size / 2]byte{0xff}
	}
	sum := sha256.Sum256(data)
	return [sha256.Size / 2]byte(sum[:sha256.Size/2])
}

// sameSlice says whether the cached slice have already is want, which is
// to be written.
func sameSlice(have *writtenSlice, want *discoveryv1.EndpointSlice) bool {
	return have.digest == contentDigest(want)
}

// update is the slice to send to make have want: want's content on have's
// identity, keeping what others set that the controller does not write.
func (have *writtenSlice) update(want *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	update := want.DeepCopy()
	update.Name, update.Namespace, update.ResourceVersion = have.name, have.Namespace(), have.resourceVersion
	if have.kept != nil {
		update.Annotations, update.Finalizers = have.kept.annotations, have.kept.finalizers
	}
	return update
}

// byImportIndex indexes written slices by namespace/import name.
func byImportIndex(obj any) ([]string, error) {
	if s, ok := obj.(*writtenSlice); ok {
		if name := s.importName(); name != "" {
			return []string{s.Namespace() + "/" + name}, nil
		}
	}
	return nil, nil
}

// writtenIn returns m's written slices of import ns/name.
func writtenIn(m *member, ns, name string) []*writtenSlice {
	return indexed[*writtenSlice](m.importedSlices, byImport, ns+"/"+name)
}
