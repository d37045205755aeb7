package clusterselection

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
)

// Cluster is a cluster of the clusterset as selection sees it.
type Cluster interface {
	// GetID returns the cluster ID (the value of the
	// cluster.clusterset.k8s.io ClusterProperty).
	GetID() string
	// GetProperties returns the cluster's ClusterProperty key/values.
	GetProperties() map[string]string
}

// Properties is the plain Cluster: an ID and its properties.
type Properties struct {
	ID         string
	Properties map[string]string
}

// GetID implements Cluster.
func (p Properties) GetID() string { return p.ID }

// GetProperties implements Cluster.
func (p Properties) GetProperties() map[string]string { return p.Properties }

// PreparedSelector is a ClusterSelector bound to one importing cluster's
// properties.
type PreparedSelector[T Cluster] interface {
	// SelectClusters returns the candidates that match, in their order.
	SelectClusters(candidates []T) ([]T, error)
}

// requirement is one resolved term: a key with its operator and, for In
// and NotIn, the values with every placeholder replaced.
type requirement struct {
	key    string
	op     csv1beta1.PropertySelectorOperator
	values sets.Set[string]
}

type prepared[T Cluster] struct {
	// none is set when a placeholder names a property the importer does
	// not have: the selector then matches no cluster.
	none bool
	reqs []requirement
}

// PrepareSelector validates selector and binds it to importer: every
// @SameAsImporter@ becomes the importer's value of that key. Prepare again
// when the importer's properties change.
func PrepareSelector[T Cluster](selector csv1beta1.ClusterSelector, importer T) (PreparedSelector[T], error) {
	if errs := validateSelector(selector, field.NewPath("clusterSelector")); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	own := importer.GetProperties()
	p := &prepared[T]{}
	ps := selector.PropertySelector
	resolve := func(key string, values []string) (sets.Set[string], bool) {
		out := sets.New[string]()
		for _, v := range values {
			if v == csv1beta1.SameAsImporter {
				mine, ok := own[key]
				if !ok {
					return nil, false
				}
				v = mine
			}
			out.Insert(v)
		}
		return out, true
	}
	keys := make([]string, 0, len(ps.MatchProperties))
	for k := range ps.MatchProperties {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		values, ok := resolve(k, []string{ps.MatchProperties[k]})
		if !ok {
			return &prepared[T]{none: true}, nil
		}
		p.reqs = append(p.reqs, requirement{key: k, op: csv1beta1.PropertySelectorOpIn, values: values})
	}
	for _, r := range ps.MatchExpressions {
		values, ok := resolve(r.Key, r.Values)
		if !ok {
			return &prepared[T]{none: true}, nil
		}
		p.reqs = append(p.reqs, requirement{key: r.Key, op: r.Operator, values: values})
	}
	return p, nil
}

func (p *prepared[T]) SelectClusters(candidates []T) ([]T, error) {
	if p.none {
		return nil, nil
	}
	var out []T
	for _, c := range candidates {
		if p.matches(c.GetProperties()) {
			out = append(out, c)
		}
	}
	return out, nil
}

// matches has the semantics of a LabelSelector's requirements.
func (p *prepared[T]) matches(props map[string]string) bool {
	for _, r := range p.reqs {
		v, has := props[r.key]
		var ok bool
		switch r.op {
		case csv1beta1.PropertySelectorOpIn:
			ok = has && r.values.Has(v)
		case csv1beta1.PropertySelectorOpNotIn:
			ok = !has || !r.values.Has(v)
		case csv1beta1.PropertySelectorOpExists:
			ok = has
		case csv1beta1.PropertySelectorOpDoesNotExist:
			ok = !has
		}
		if !ok {
			return false
		}
	}
	return true
}

// ErrInvalid marks every error Validate and Resolve return for a selector
// list that cannot be evaluated: the ServiceExport's Valid=False reason
// InvalidClusterSelector.
var ErrInvalid = errors.New("invalid cluster selector")

// Validate checks a clusterSelectors list as the KEP says: at most 16
// entries, each with a non-empty propertySelector whose keys are valid
// ClusterProperty names and whose requirements follow a LabelSelector's
// rules; values are not restricted to label-value syntax.
func Validate(selectors []csv1beta1.ClusterSelector) error {
	path := field.NewPath("spec", "clusterSelectors")
	var errs field.ErrorList
	if len(selectors) > csv1beta1.MaxClusterSelectors {
		errs = append(errs, field.TooMany(path, len(selectors), csv1beta1.MaxClusterSelectors))
	}
	for i, s := range selectors {
		errs = append(errs, validateSelector(s, path.Index(i))...)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalid, errs.ToAggregate())
}

func validateSelector(s csv1beta1.ClusterSelector, path *field.Path) field.ErrorList {
	ps := s.PropertySelector
	path = path.Child("propertySelector")
	if ps == nil {
		return field.ErrorList{field.Required(path, "the only selection criterion today")}
	}
	if len(ps.MatchProperties) == 0 && len(ps.MatchExpressions) == 0 {
		return field.ErrorList{field.Invalid(path, "{}", "an empty propertySelector is invalid")}
	}
	var errs field.ErrorList
	key := func(p *field.Path, k string) {
		for _, msg := range validation.IsDNS1123Subdomain(k) {
			errs = append(errs, field.Invalid(p, k, "not a ClusterProperty name: "+msg))
		}
	}
	for k := range ps.MatchProperties {
		key(path.Child("matchProperties").Key(k), k)
	}
	for i, r := range ps.MatchExpressions {
		p := path.Child("matchExpressions").Index(i)
		key(p.Child("key"), r.Key)
		switch r.Operator {
		case csv1beta1.PropertySelectorOpIn, csv1beta1.PropertySelectorOpNotIn:
			if len(r.Values) == 0 {
				errs = append(errs, field.Required(p.Child("values"), "must be non-empty when operator is In or NotIn"))
			}
		case csv1beta1.PropertySelectorOpExists, csv1beta1.PropertySelectorOpDoesNotExist:
			if len(r.Values) > 0 {
				errs = append(errs, field.Forbidden(p.Child("values"), "must be empty when operator is Exists or DoesNotExist"))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("operator"), r.Operator, []csv1beta1.PropertySelectorOperator{
				csv1beta1.PropertySelectorOpIn, csv1beta1.PropertySelectorOpNotIn, csv1beta1.PropertySelectorOpExists, csv1beta1.PropertySelectorOpDoesNotExist}))
		}
	}
	return errs
}

// Resolve evaluates every selector for importer over the source clusters
// and returns one result per selector, in selector order, each listing
// the matching cluster IDs sorted. It is all or nothing: on an error the
// caller keeps its previous results whole, as the KEP requires.
func Resolve[T Cluster](selectors []csv1beta1.ClusterSelector, importer T, sources []T) ([]csv1beta1.ClusterSelectorResult, error) {
	if err := Validate(selectors); err != nil {
		return nil, err
	}
	out := make([]csv1beta1.ClusterSelectorResult, 0, len(selectors))
	for _, s := range selectors {
		p, err := PrepareSelector(s, importer)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		matched, err := p.SelectClusters(sources)
		if err != nil {
			return nil, err
		}
		var ids []string
		for _, c := range matched {
			ids = append(ids, c.GetID())
		}
		slices.Sort(ids)
		out = append(out, csv1beta1.ClusterSelectorResult{Clusters: slices.Compact(ids)})
	}
	return out, nil
}
