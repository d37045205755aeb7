package v1alpha1

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationMemberNamespaces, on a team's namespace in the hub, lists the
// namespaces of the member clusters the team owns, comma separated: a
// namespace name (in every member), "cluster/namespace" (in that member
// only), or "*" (every namespace). Only the hub's administrator writes it: a team binds
// Services and imports only in these namespaces, so that it can neither
// publish endpoints under another team's Services nor take another
// team's names in any cluster. A namespace without it owns none.
const AnnotationMemberNamespaces = "catalog.multiclusterservices.k8s.io/member-namespaces"

// ImportPolicy says where a GlobalService is imported.
// +kubebuilder:validation:Enum=All;Selected
type ImportPolicy string

const (
	// ImportAll imports the service into every member, under its
	// DefaultName, except where a GlobalServiceImport names it otherwise.
	ImportAll ImportPolicy = "All"
	// ImportSelected imports the service only where a GlobalServiceImport asks
	// for it: the other members get no object and no rule.
	ImportSelected ImportPolicy = "Selected"
)

// LocalName is a namespace and name in a member cluster.
type LocalName struct {
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
}

// GlobalService is a service of the clusterset, named in the catalog
// independently of the namespaces and names it has in any cluster.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, experimental: the service catalog of k8s.io/multiclusterservices"
// +kubebuilder:resource:shortName=gsvc;gsvcs,categories=catalog
// +kubebuilder:printcolumn:name="IPs",type=string,JSONPath=`.status.ips`
// +kubebuilder:printcolumn:name="Import",type=string,JSONPath=`.spec.importPolicy`
// +kubebuilder:printcolumn:name="Clusters",type=string,JSONPath=`.status.clusters[*].cluster`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GlobalService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GlobalServiceSpec   `json:"spec,omitempty"`
	Status GlobalServiceStatus `json:"status,omitempty"`
}

// GlobalServiceSpec is what a team declares of a global service.
type GlobalServiceSpec struct {
	// ImportPolicy says where the service is imported: into every member
	// (All) or only where a GlobalServiceImport asks for it (Selected, the
	// default).
	// +kubebuilder:default=Selected
	// +optional
	ImportPolicy ImportPolicy `json:"importPolicy,omitempty"`
	// DefaultName is the local namespace and name under which ImportAll
	// imports the service, in every member where the team owns that
	// namespace.
	// +optional
	DefaultName *LocalName `json:"defaultName,omitempty"`
	// Consumers are the hub namespaces (teams) besides this one whose
	// GlobalServiceImports may import the service: a team shares a service with
	// another by naming it here.
	// +listType=set
	// +optional
	Consumers []string `json:"consumers,omitempty"`
}

// GlobalServiceStatus is what the controller made of a global service.
type GlobalServiceStatus struct {
	// IPs are the service's clusterset IPs, the same in every member that
	// imports it.
	// +optional
	IPs []string `json:"ips,omitempty"`
	// Clusters are the backend clusters: those with a valid binding.
	// +listType=map
	// +listMapKey=cluster
	// +optional
	Clusters []BackendCluster `json:"clusters,omitempty"`
	// Conditions: Ready (the service has a backend and clusterset IPs).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// BackendCluster is a cluster that provides a global service.
type BackendCluster struct {
	Cluster string `json:"cluster"`
	// Bindings are the names of the ServiceBindings through which it
	// provides the service.
	// +optional
	Bindings []string `json:"bindings,omitempty"`
}

// +kubebuilder:object:root=true

// GlobalServiceList is a list of GlobalServices.
type GlobalServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GlobalService `json:"items"`
}

// ServiceBinding says that a cluster provides a global service of the
// same namespace: from one of its Services, or from addresses outside
// Kubernetes (VMs, bare metal).
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, experimental: the service catalog of k8s.io/multiclusterservices"
// +kubebuilder:resource:shortName=sbinding,categories=catalog
// +kubebuilder:printcolumn:name="Global-Service",type=string,JSONPath=`.spec.globalService`
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.spec.service.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ServiceBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ServiceBindingSpec   `json:"spec"`
	Status ServiceBindingStatus `json:"status,omitempty"`
}

// ServiceBindingSpec binds a cluster's endpoints to a global service.
//
// +kubebuilder:validation:XValidation:rule="has(self.service) != has(self.endpoints)",message="exactly one of service and endpoints"
// +kubebuilder:validation:XValidation:rule="!has(self.endpoints) || has(self.ports)",message="endpoints need ports"
type ServiceBindingSpec struct {
	// GlobalService is the name of the GlobalService, in this namespace,
	// that the binding provides.
	GlobalService string `json:"globalService"`
	// Cluster is the cluster ID of the member that provides it: where
	// Service is, or whose network the Endpoints are reached from.
	// +kubebuilder:validation:MaxLength=63
	Cluster string `json:"cluster"`
	// Service is the cluster's Service whose endpoints serve the global
	// service, in a namespace the team owns.
	// +optional
	Service *LocalName `json:"service,omitempty"`
	// Endpoints are addresses outside Kubernetes that serve the global
	// service on Ports.
	// +kubebuilder:validation:MaxItems=1000
	// +listType=atomic
	// +optional
	Endpoints []BoundEndpoint `json:"endpoints,omitempty"`
	// Ports are the ports of Endpoints, named as the global service's
	// ports (the names match them across bindings).
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +optional
	Ports []BoundPort `json:"ports,omitempty"`
	// HealthCheck makes the controller probe Endpoints over TCP: an
	// endpoint that fails it is not ready. The controller probes a
	// limited number of addresses per team and in all; an address over
	// the limits is not probed, and not ready.
	// +optional
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`
}

// BoundEndpoint is one address outside Kubernetes.
type BoundEndpoint struct {
	// Address is an IPv4 or IPv6 address.
	Address string `json:"address"`
	// Ready says whether the endpoint takes traffic (default true); with
	// a health check, both must say so.
	// +optional
	Ready *bool `json:"ready,omitempty"`
	// Hostname names the endpoint in DNS, for headless services.
	// +optional
	Hostname string `json:"hostname,omitempty"`
}

// BoundPort is a port of the global service and where bound endpoints
// serve it.
type BoundPort struct {
	// Name is the port's name, which matches it with the same port of the
	// global service's other bindings.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Name string `json:"name,omitempty"`
	// Port is the global service's port: the port clients call at its
	// clusterset IP.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// TargetPort is the port the endpoints listen on; default Port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	TargetPort int32 `json:"targetPort,omitempty"`
	// +kubebuilder:default=TCP
	// +kubebuilder:validation:Enum=TCP;UDP;SCTP
	// +optional
	Protocol v1.Protocol `json:"protocol,omitempty"`
	// +optional
	AppProtocol *string `json:"appProtocol,omitempty"`
}

// HealthCheck is a TCP probe of bound endpoints.
type HealthCheck struct {
	// Port is the name of the port (Ports) probed; default the first.
	// +optional
	Port string `json:"port,omitempty"`
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +optional
	PeriodSeconds int32 `json:"periodSeconds,omitempty"`
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
	// FailureThreshold is how many failed probes in a row make an
	// endpoint not ready (one success makes it ready again).
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +optional
	FailureThreshold int32 `json:"failureThreshold,omitempty"`
}

// ServiceBindingStatus is what the controller made of a binding.
type ServiceBindingStatus struct {
	// Conditions: Valid (the binding may provide the service), Ready
	// (it serves at least one ready endpoint), and with a health check
	// HealthChecked (every address is probed, or ProbeLimitReached).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Endpoints are the health of Endpoints, where a health check runs.
	// +listType=map
	// +listMapKey=address
	// +optional
	Endpoints []EndpointHealth `json:"endpoints,omitempty"`
}

// EndpointHealth is the verdict of an endpoint's health check.
type EndpointHealth struct {
	Address string `json:"address"`
	Healthy bool   `json:"healthy"`
	// LastTransitionTime is when the verdict last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// Message says whether the port answered, or why the address is not
	// probed; never how a connection failed (that is in the controller's
	// log).
	// +optional
	Message string `json:"message,omitempty"`
}

// +kubebuilder:object:root=true

// ServiceBindingList is a list of ServiceBindings.
type ServiceBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServiceBinding `json:"items"`
}

// GlobalServiceImport says that a cluster consumes a global service under
// a local namespace and name of its own choosing: the catalog's import of
// a GlobalService. For it the controller writes the KEP-1645
// ServiceImport (group multicluster.x-k8s.io) into that cluster; the
// catalog's kind has a name of its own so that neither a reader nor
// `kubectl get serviceimports` takes one for the other.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, experimental: the service catalog of k8s.io/multiclusterservices"
// +kubebuilder:resource:shortName=gsvcimport,categories=catalog
// +kubebuilder:printcolumn:name="Global-Service",type=string,JSONPath=`.spec.globalService.name`
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.localName.namespace`
// +kubebuilder:printcolumn:name="Name",type=string,JSONPath=`.spec.localName.name`
// +kubebuilder:printcolumn:name="IPs",type=string,JSONPath=`.status.ips`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GlobalServiceImport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GlobalServiceImportSpec   `json:"spec"`
	Status GlobalServiceImportStatus `json:"status,omitempty"`
}

// GlobalServiceRef names a GlobalService.
type GlobalServiceRef struct {
	// Namespace is the hub namespace (team) of the global service;
	// default the import's own.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// GlobalServiceImportSpec imports a global service into one cluster.
type GlobalServiceImportSpec struct {
	GlobalService GlobalServiceRef `json:"globalService"`
	// Cluster is the cluster ID of the consuming member.
	// +kubebuilder:validation:MaxLength=63
	Cluster string `json:"cluster"`
	// LocalName is where the service is imported in that cluster:
	// name.namespace.svc.clusterset.local answers with its clusterset IP.
	// Its namespace must be one the importing team owns.
	LocalName LocalName `json:"localName"`
}

// GlobalServiceImportStatus is what the controller made of an import.
type GlobalServiceImportStatus struct {
	// IPs are the clusterset IPs the import has in its cluster.
	// +optional
	IPs []string `json:"ips,omitempty"`
	// Conditions: Ready (the import is written into its cluster), and
	// why not.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true

// GlobalServiceImportList is a list of GlobalServiceImports.
type GlobalServiceImportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GlobalServiceImport `json:"items"`
}
