package proxy

import "strings"

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

// AnnotationDerivedService, on a ServiceImport, names the derived Service
// that represents the import in this cluster (derived mode, the mcs-api
// reference controller's annotation): the import's IPs are that Service's
// cluster IPs, and a proxy serves them through the Service, not the import.
const AnnotationDerivedService = "multicluster.kubernetes.io/derived-service"
