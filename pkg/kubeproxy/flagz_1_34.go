//go:build kube1.34

package kubeproxy

import "k8s.io/component-base/zpages/flagz"

// flagzReader is the type of kube-proxy's flagz handle in Kubernetes 1.34,
// where it lived in k8s.io/component-base (flagz.go has the rest).
type flagzReader = flagz.Reader
