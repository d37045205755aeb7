// Command coredns is CoreDNS of the version pinned in hack/tools/go.mod,
// built with the plugins a cluster DNS uses (those of kubeadm's and kind's
// Corefiles and of kind-config/coredns-Corefile) rather than all of them:
// the plugins are CoreDNS's own, unchanged, but the cloud providers' SDKs
// and the rest of the tree stay out of the build, which takes a fraction of
// the time. This is CoreDNS's documented way to choose plugins at compile
// time (its plugin.cfg and core/plugin do the same for the full set); a
// Corefile that names a plugin left out fails to start with "unknown
// directive".
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/rewrite"
	_ "github.com/coredns/coredns/plugin/template"
	_ "github.com/coredns/coredns/plugin/whoami"
)

func main() { coremain.Run() }
