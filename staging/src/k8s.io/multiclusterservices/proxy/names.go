package proxy

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// ServiceNameSuffix is appended to an import's name to name its synthetic
// Service. Real Service names are DNS-1035 labels and cannot contain a dot.
const ServiceNameSuffix = ".clusterset"

// ServiceName returns the name of the synthetic Service for an import.
func ServiceName(importName string) string {
	return importName + ServiceNameSuffix
}

// ImportName returns the import name of a synthetic Service name, and false
// for the name of a real Service.
func ImportName(serviceName string) (string, bool) {
	return strings.CutSuffix(serviceName, ServiceNameSuffix)
}

// IsServiceOfImport tells whether serviceName (a kubernetes.io/service-name
// value) is the synthetic Service of import importName: the one place that
// decides whether an MCS slice's two service-name labels agree, for a
// proxy (SharesImportService, KindOf) and for the controller that writes
// them.
func IsServiceOfImport(serviceName, importName string) bool {
	imported, synthetic := ImportName(serviceName)
	return synthetic && imported == importName
}

// derivedHashLen is how many characters of the hash a derived name keeps.
const derivedHashLen = 10

// DerivedServiceName is the name of the derived Service of import
// namespace/name: "derived-" and the first ten characters of the
// lower-case, unpadded base32hex encoding of the SHA-256 of
// "namespace/name". A DNS-1035 label, whatever the import's name.
func DerivedServiceName(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	encoded := base32.HexEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:])
	return "derived-" + strings.ToLower(encoded[:derivedHashLen])
}

// AnnotationDerivedService, on a ServiceImport, names the derived Service
// that represents the import in this cluster (derived mode, the mcs-api
// reference controller's annotation): the import's IPs are that Service's
// cluster IPs, and a proxy serves them through the Service, not the import.
const AnnotationDerivedService = "multicluster.kubernetes.io/derived-service"

// AnnotationClusterSetIPs, on a derived ServiceImport (one that names its
// derived Service), holds the import's clusterset IPs, comma-separated,
// while its member is switched from derived to native mode: a proxy that
// programs imports programs them before the import names them in ips,
// where DNS answers them at once, so that no client is sent to an IP no
// proxy serves yet. Written by the mcs-controller only, as the import.
const AnnotationClusterSetIPs = "multiclusterservices.k8s.io/clusterset-ips"

// importIPs returns the clusterset IPs a proxy programs for si: ips, or,
// on a derived import being switched to native mode, the clusterset IPs
// AnnotationClusterSetIPs holds.
func importIPs(si *mcsv1beta1.ServiceImport) []string {
	if si.Annotations[AnnotationDerivedService] == "" {
		return si.Spec.IPs
	}
	v, ok := si.Annotations[AnnotationClusterSetIPs]
	if !ok {
		return si.Spec.IPs
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// invalidServiceName returns why name is not a DNS-1035 label, as a
// Service name must be, or "" when it is. Checked without validation's
// regular expression first: it runs for every import and MCS slice a proxy
// is handed, and the expression was a tenth of that cost.
func invalidServiceName(name string) string {
	if isDNS1035Label(name) {
		return ""
	}
	if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
		return errs[0]
	}
	return ""
}

// invalidPortName is invalidServiceName for a port name, a DNS-1123 label.
func invalidPortName(name string) string {
	if isDNS1123Label(name) {
		return ""
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return errs[0]
	}
	return ""
}

// isDNS1035Label is validation.IsDNS1035Label's rule: [a-z]([-a-z0-9]*[a-z0-9])?,
// at most 63 characters.
func isDNS1035Label(s string) bool {
	return len(s) > 0 && s[0] >= 'a' && s[0] <= 'z' && isDNS1123Label(s)
}

// isDNS1123Label is validation.IsDNS1123Label's rule: [a-z0-9]([-a-z0-9]*[a-z0-9])?,
// at most 63 characters.
func isDNS1123Label(s string) bool {
	if len(s) == 0 || len(s) > validation.DNS1123LabelMaxLength || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
