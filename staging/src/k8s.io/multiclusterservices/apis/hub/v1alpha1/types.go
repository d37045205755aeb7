package v1alpha1

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

const (
	// LabelServiceNamespace and LabelServiceName, on a MemberExport and
	// on the EndpointSlices published with it, name the exported Service
	// in the member (label values hold at most 63 characters, so one
	// label cannot hold both).
	LabelServiceNamespace = "hub.multiclusterservices.k8s.io/service-namespace"
	LabelServiceName      = "hub.multiclusterservices.k8s.io/service-name"
	// AnnotationSourceSlice, on a published EndpointSlice, names the
	// member's EndpointSlice it was published from.
	AnnotationSourceSlice = "hub.multiclusterservices.k8s.io/source-slice"
	// LabelSourceCluster, on an EndpointSlice of the plan, names the
	// cluster whose endpoints it holds; the slice carries no label of
	// KEP-1645's, so that neither a kube-proxy nor CoreDNS of a hub that
	// is a member too takes the plan for an import of its own.
	LabelSourceCluster = "hub.multiclusterservices.k8s.io/source-cluster"
	// AnnotationImportedSlice, on an EndpointSlice of the plan, is the
	// name the slice has in the members (the plan's name may be hashed).
	AnnotationImportedSlice = "hub.multiclusterservices.k8s.io/imported-slice"
	// LabelEntryPoints, "true" on an EndpointSlice of the plan, says it
	// holds its source cluster's entry points (its ingress's addresses
	// and ports), which the members that cannot reach that cluster's
	// pods import instead of its pods' slices (PlannedIngress).
	LabelEntryPoints = "hub.multiclusterservices.k8s.io/entry-points"
	// LabelGlobalService, on a ServicePlan of the service catalog and on
	// its EndpointSlices, is a digest of the global service it places
	// (PlannedImport's GlobalService): one local name may hold different
	// global services in different members, each its own plan.
	LabelGlobalService = "hub.multiclusterservices.k8s.io/global-service"
)

// MemberExport is what one member cluster exports of one Service: its
// ServiceExport's spec and creation time, and the Service's spec. Its
// agent publishes it in the member's hub namespace (the cluster ID),
// named "<namespace>.<name>"; the endpoints are EndpointSlices in the
// same namespace, owned by it and labelled LabelServiceNamespace and
// LabelServiceName. The conditions the planner gives the member's
// ServiceExport are in the name's ServicePlan (ExportConditions), with
// every other member's: one write per name, not one per member and name.
//
// +kubebuilder:object:root=true
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, experimental: pull mode of k8s.io/multiclusterservices"
// +kubebuilder:resource:shortName=mex,categories=multicluster
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.service.namespace`
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.spec.service.name`
// +kubebuilder:printcolumn:name="Exported",type=date,JSONPath=`.spec.exportCreated`
type MemberExport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec MemberExportSpec `json:"spec"`
}

// ServiceName is a Service's namespace and name in a member.
type ServiceName struct {
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
}

// MemberExportSpec is what the planner reads of one member's export.
type MemberExportSpec struct {
	// Service is the exported Service's namespace and name in the member.
	Service ServiceName `json:"service"`
	// ExportCreated is the creation time of the member's ServiceExport:
	// the oldest export's fields win a conflict (KEP-1645); for a Service
	// published only because the catalog binds it (CatalogOnly), the
	// Service's creation time.
	ExportCreated metav1.Time `json:"exportCreated"`
	// CatalogOnly says the member has no ServiceExport of the Service:
	// it is published because the hub's service catalog binds it
	// (MemberCluster's status.boundServices), and the export model does
	// not read it.
	// +optional
	CatalogOnly bool `json:"catalogOnly,omitempty"`
	// NamespaceCreated is the creation time of the Service's namespace in
	// the member: an export is never taken to be older than it.
	// +optional
	NamespaceCreated *metav1.Time `json:"namespaceCreated,omitempty"`
	// ExportedLabels and ExportedAnnotations are the ServiceExport's.
	// +optional
	ExportedLabels map[string]string `json:"exportedLabels,omitempty"`
	// +optional
	ExportedAnnotations map[string]string `json:"exportedAnnotations,omitempty"`
	// ClusterSelectors are the ServiceExport's (KEP-5939).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ClusterSelectors []csv1beta1.ClusterSelector `json:"clusterSelectors,omitempty"`
	// ServiceSpec is the exported Service's spec; none while the member
	// has no Service of the name (or it is being deleted): the export is
	// then invalid, as KEP-1645 says.
	// +optional
	ServiceSpec *v1.ServiceSpec `json:"serviceSpec,omitempty"`
	// Ingress is the Service through which clusters that cannot reach
	// the member's pods reach the export, as the member holds it: the
	// exported Service itself when it is a NodePort or LoadBalancer
	// Service, else the Service of the export's ingress name
	// (ingress-<hash>), which the agent creates when the plan asks for
	// one; none when there is neither.
	// +optional
	Ingress *MemberIngress `json:"ingress,omitempty"`
}

// MemberIngress is what the planner reads of a member's ingress Service:
// with the member's entry points (MemberCluster), the addresses and
// ports other clusters enter it at.
type MemberIngress struct {
	// Name is the Service's name.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Labels are the Service's labels that say who made it and for which
	// export (multiclusterservices.k8s.io/managed-by and ingress-for): a
	// Service of the ingress name that the agent did not create is not
	// used.
	// +optional
	// +kubebuilder:validation:MaxProperties=2
	Labels map[string]string `json:"labels,omitempty"`
	// Type is the Service's type.
	Type v1.ServiceType `json:"type"`
	// Ports are the Service's ports, their node ports allocated.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Ports []v1.ServicePort `json:"ports,omitempty"`
	// LoadBalancerIPs are the IP addresses of a LoadBalancer Service's
	// load balancer (status.loadBalancer.ingress).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	LoadBalancerIPs []string `json:"loadBalancerIPs,omitempty"`
}

// MemberExportList is a list of MemberExports.
//
// +kubebuilder:object:root=true
type MemberExportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemberExport `json:"items"`
}

// MemberClusterName is the name of the one MemberCluster in a member's
// hub namespace.
const MemberClusterName = "member"

// MemberCluster is what one member cluster publishes of itself, beside
// its exports: the namespaces it has, which decide where a name is
// imported (KEP-1645: only in the clusters with the name's namespace),
// and its cluster properties, which cluster selection matches. Its agent writes it, named MemberClusterName, in the member's hub
// namespace; until it exists the planner knows nothing of the member
// (not synced), as push mode of a member whose caches have not synced.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, experimental: pull mode of k8s.io/multiclusterservices"
// +kubebuilder:resource:shortName=mcm,categories=multicluster
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'member'",message="a member's hub namespace holds one MemberCluster, named member"
type MemberCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec MemberClusterSpec `json:"spec"`
	// +optional
	Status MemberClusterStatus `json:"status,omitempty"`
}

// MemberClusterStatus is the planner's word to a member beside the plan.
type MemberClusterStatus struct {
	// BoundServices are the member's Services that the hub's service
	// catalog binds (ServiceBindings naming this cluster), sorted: its
	// agent publishes each as a MemberExport (CatalogOnly where it has
	// no ServiceExport of it).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	BoundServices []ServiceName `json:"boundServices,omitempty"`
}

// MemberClusterSpec is what the planner reads of a member beside its
// exports.
type MemberClusterSpec struct {
	// Namespaces are the member's namespaces that are not being deleted,
	// sorted by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=20000
	Namespaces []MemberNamespace `json:"namespaces,omitempty"`
	// Properties are the member's own ClusterProperties (KEP-2149), by
	// name, which cluster selection (KEP-5939) matches. The planner takes
	// the cluster ID from the namespace, whatever they say of it.
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	Properties map[string]string `json:"properties,omitempty"`
	// EntryPoints are the addresses at which the member's nodes serve
	// node ports to other clusters (each Ready node's InternalIP, its
	// ExternalIP where it has none), sorted: where clusters that cannot
	// reach its pods enter its NodePort ingress Services. The planner
	// takes only global unicast addresses that are not special-purpose.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10000
	EntryPoints []string `json:"entryPoints,omitempty"`
	// ServiceCIDRs are the member's Service ranges (its ServiceCIDRs):
	// the service catalog binds no address there.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	ServiceCIDRs []string `json:"serviceCIDRs,omitempty"`
	// Derived says the member's agent serves it in derived mode: its
	// imports carry clusterset IPs of their own (derived Services').
	// +optional
	Derived bool `json:"derived,omitempty"`
	// CatalogImports are the ServiceImports the agent wrote where the
	// service catalog places a global service, sorted: the catalog's
	// GlobalServiceImports are Ready once their member holds them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	CatalogImports []MemberCatalogImport `json:"catalogImports,omitempty"`
}

// MemberCatalogImport is a ServiceImport a member holds of a global
// service of the catalog.
type MemberCatalogImport struct {
	// Service is the import's namespace and name in the member.
	Service ServiceName `json:"service"`
	// GlobalService is the global service it holds (namespace/name in
	// the hub).
	// +kubebuilder:validation:MaxLength=127
	GlobalService string `json:"globalService"`
	// IPs are the import's clusterset IPs.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=2
	IPs []string `json:"ips,omitempty"`
}

// MemberNamespace is one namespace of a member.
type MemberNamespace struct {
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Created is the namespace's creation time in the member.
	Created metav1.Time `json:"created"`
}

// MemberClusterList is a list of MemberClusters.
//
// +kubebuilder:object:root=true
type MemberClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemberCluster `json:"items"`
}

// ServicePlan is what the planner decided of one exported name for every
// member: the import each member that has the name's namespace holds,
// which members those are, and the clusters serving it. The planner
// alone writes it, in the plan namespace, named "<namespace>.<name>";
// the endpoints to import are EndpointSlices in the same namespace,
// labelled LabelServiceNamespace, LabelServiceName and
// LabelSourceCluster. Every member's agent reads it and writes the import
// and its slices into its own cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, experimental: pull mode of k8s.io/multiclusterservices"
// +kubebuilder:resource:shortName=msp,categories=multicluster
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.service.namespace`
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.spec.service.name`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.import.spec.type`
// +kubebuilder:printcolumn:name="IPs",type=string,JSONPath=`.spec.import.spec.ips`
type ServicePlan struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ServicePlanSpec `json:"spec"`
}

// ServicePlanSpec is the plan of one name.
type ServicePlanSpec struct {
	// Service is the name's namespace and name in the members.
	Service ServiceName `json:"service"`
	// GlobalService, in the service catalog, is the global service the
	// plan places under the name (namespace/name in the hub), in the
	// members ImportedIn only: other members may hold another global
	// service under the same name, each its own plan.
	// +optional
	// +kubebuilder:validation:MaxLength=127
	GlobalService string `json:"globalService,omitempty"`
	// Import is what every member in ImportedIn holds; none when no
	// member is to hold an import of the name.
	// +optional
	Import *PlannedImport `json:"import,omitempty"`
	// ImportedIn are the members that hold the import (synced, with the
	// namespace), sorted.
	// +optional
	// +listType=atomic
	ImportedIn []string `json:"importedIn,omitempty"`
	// Retain says that no known cluster exports the name but one whose
	// state is unknown may: members leave what they hold of it as it is.
	// +optional
	Retain bool `json:"retain,omitempty"`
	// Stale are the source clusters whose endpoints are kept although
	// their leases expired, because no source of the name is alive.
	// +optional
	// +listType=atomic
	Stale []string `json:"stale,omitempty"`
	// Ingress, when some member cannot reach some source's pods, says
	// which members are reached only through their ingress and which
	// sources create an ingress Service for the name.
	// +optional
	Ingress *PlannedIngress `json:"ingress,omitempty"`
	// ExportConditions are the conditions of every member's export of
	// the name (Valid, Ready, Conflict, ...), as push mode's controller
	// sets them, one entry per outcome with the members that get it:
	// each member's agent sets its own on its ServiceExport, keeping the
	// transition times there.
	// +optional
	// +listType=atomic
	ExportConditions []PlannedExportConditions `json:"exportConditions,omitempty"`
}

// PlannedExportConditions are the conditions of the exports of
// Clusters.
type PlannedExportConditions struct {
	// Clusters are the members whose exports get Conditions, sorted.
	// +listType=atomic
	Clusters []string `json:"clusters"`
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Conditions []PlannedCondition `json:"conditions"`
}

// PlannedCondition is a condition of an export, its transition time
// and observed generation being the member's.
type PlannedCondition struct {
	// +kubebuilder:validation:MaxLength=316
	Type string `json:"type"`
	// +kubebuilder:validation:Enum=True;False;Unknown
	Status metav1.ConditionStatus `json:"status"`
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason"`
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Message string `json:"message,omitempty"`
}

// PlannedIngress is how a name is reached where pod networks do not
// reach each other (the planner's --ingress-members).
type PlannedIngress struct {
	// Members are the members whose pods no other member reaches, nor
	// they the others' (those of the planner's --ingress-members that
	// are members), sorted. A member reaches a source cluster's pods
	// unless either is one of them (or they are the same cluster); for a
	// source it does not reach, it imports the source's entry-point
	// slices (LabelEntryPoints) instead of its pods' slices.
	// +optional
	// +listType=atomic
	Members []string `json:"members,omitempty"`
	// ServiceIn are the source clusters that create an ingress Service
	// (ingress-<hash>) for their export of the name, of ServiceType.
	// +optional
	// +listType=atomic
	ServiceIn []string `json:"serviceIn,omitempty"`
	// ServiceType is the type of those Services: NodePort or
	// LoadBalancer.
	// +optional
	ServiceType v1.ServiceType `json:"serviceType,omitempty"`
}
// PlannedImport is the ServiceImport members hold of a name.
type PlannedImport struct {
	// Labels and Annotations are the import's (the exports' merged
	// exported labels and annotations, and the planner's manager label).
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// Spec is the import's spec, its clusterset IPs allocated.
	Spec mcsv1beta1.ServiceImportSpec `json:"spec"`
	// Clusters are the import's status.clusters.
	// +optional
	// +listType=atomic
	Clusters []string `json:"clusters,omitempty"`
	// IPError says why the import has no clusterset IPs, when it has
	// none and should.
	// +optional
	IPError string `json:"ipError,omitempty"`
	// ClusterSelectors are the exports' resolved clusterSelectors
	// (KEP-5939).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ClusterSelectors []csv1beta1.ClusterSelector `json:"clusterSelectors,omitempty"`
	// SelectorResults are what ClusterSelectors give each member as the
	// importing cluster: the members that get the same outcome share one
	// entry (results depend on the importer only through the properties
	// the selectors name, such as its region), so that a plan grows with
	// members plus outcomes, not members × sources. A member in no entry
	// was not planned as an importer.
	// +optional
	// +listType=atomic
	SelectorResults []PlannedSelectorOutcome `json:"selectorResults,omitempty"`
}

// PlannedSelectorOutcome is what an import's clusterSelectors give the
// importing members Importers: their status.clusterSelectorResults, or
// why those cannot be evaluated now (KEP-5939: the import's previous
// results then stay whole).
type PlannedSelectorOutcome struct {
	// Importers are the members this outcome is for, sorted.
	// +listType=atomic
	Importers []string `json:"importers"`
	// Results are one per selector, in selector order.
	// +optional
	// +listType=atomic
	Results []csv1beta1.ClusterSelectorResult `json:"results,omitempty"`
	// Failed says why the selectors cannot be evaluated for Importers
	// now; Results are then empty.
	// +optional
	Failed string `json:"failed,omitempty"`
}

// ServicePlanList is a list of ServicePlans.
//
// +kubebuilder:object:root=true
type ServicePlanList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServicePlan `json:"items"`
}
