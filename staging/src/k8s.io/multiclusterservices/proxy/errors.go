package proxy

import "fmt"

// Reason says, in one CamelCase word, why an object was not programmed. It
// is used as the reason of Kubernetes events and as a metric label, so the
// set of values is small and fixed.
type Reason string

const (
	ReasonInvalidName             Reason = "InvalidName"
	ReasonInvalidType             Reason = "InvalidType"
	ReasonNoIPs                   Reason = "NoIPs"
	ReasonInvalidIP               Reason = "InvalidIP"
	ReasonIPOutsideClusterSetCIDR Reason = "IPOutsideClusterSetCIDR"
	ReasonIPFamilyMismatch        Reason = "IPFamilyMismatch"
	ReasonNoPorts                 Reason = "NoPorts"
	ReasonTooManyPorts            Reason = "TooManyPorts"
	ReasonInvalidPort             Reason = "InvalidPort"
	ReasonUnsupportedProtocol     Reason = "UnsupportedProtocol"
	ReasonDuplicatePort           Reason = "DuplicatePort"
	ReasonInvalidSessionAffinity  Reason = "InvalidSessionAffinity"
	ReasonInvalidTrafficPolicy    Reason = "InvalidInternalTrafficPolicy"

	// Reasons an import is valid on its own but loses a conflict.
	ReasonIPInUseByService Reason = "ClusterSetIPInUseByService"
	ReasonIPInUseByImport  Reason = "ClusterSetIPInUseByImport"

	// Reasons an MCS EndpointSlice is not programmed.
	ReasonUntrustedManager       Reason = "UntrustedManager"
	ReasonUnsupportedAddressType Reason = "UnsupportedAddressType"
	ReasonInvalidEndpoint        Reason = "InvalidEndpoint"
	ReasonNoServiceImport        Reason = "NoServiceImport"
	// An import whose native-names annotations cannot be read.
	ReasonInvalidNativeNames Reason = "InvalidNativeNames"
	// An import that asks for native names of a system Service (in
	// kube-system, kube-public, kube-node-lease, or default/kubernetes).
	ReasonSystemService Reason = "SystemService"

	// A plain EndpointSlice that names an import's synthetic Service.
	ReasonReservedServiceName Reason = "ReservedServiceName"

	// An import that asks for native names of a local Service whose
	// owner has not accepted them (AnnotationAcceptNativeNames).
	ReasonNativeNamesNotAccepted Reason = "NativeNamesNotAccepted"

	// An MCS EndpointSlice that names a local Service
	// (LocalServiceClaimingSlice).
	ReasonLocalServiceName Reason = "LocalServiceName"

	// A local Service's externalIP or load-balancer IP inside the
	// clusterset ranges, which are reserved for imports.
	ReasonReservedIP Reason = "ClusterSetIPReserved"
)

// RejectionError is returned for input that must not be programmed.
type RejectionError struct {
	Reason  Reason
	Message string
}

func (e *RejectionError) Error() string {
	return fmt.Sprintf("%s: %s", e.Reason, e.Message)
}

func reject(reason Reason, format string, args ...any) *RejectionError {
	return &RejectionError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}
