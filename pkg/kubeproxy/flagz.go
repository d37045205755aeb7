//go:build !kube1.34

package kubeproxy

import "k8s.io/apiserver/pkg/server/flagz"

// flagzReader is the type of kube-proxy's flagz handle, which its start-up
// passes to newProxyServer: k8s.io/apiserver's from Kubernetes 1.35 on.
// The build of each release selects its file by tag (minors/, built with
// -tags kube1.MINOR); a build with the wrong one does not compile.
type flagzReader = flagz.Reader
