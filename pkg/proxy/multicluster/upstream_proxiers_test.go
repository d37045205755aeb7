//go:build !kube1.34 && !kube1.35 && !kube1.36

package multicluster_test

import (
	"context"
	"net"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
	"k8s.io/kubernetes/pkg/proxy"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/iptables"
	"k8s.io/kubernetes/pkg/proxy/nftables"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
)

// Upstream's proxiers, built as upstream's start-up builds them from a
// KubeProxyConfiguration. Their constructors take the configuration from
// Kubernetes 1.37 on, its fields one by one before
// (upstream_proxiers_before_1_37_test.go, built with -tags kube1.MINOR).

// newDualStackProxier returns upstream's dual-stack proxier of cfg.Mode.
func newDualStackProxier(ctx context.Context, cfg *kubeproxyconfig.KubeProxyConfiguration, detectors map[v1.IPFamily]proxyutil.LocalTrafficDetector, nodeName string, nodeIPs map[v1.IPFamily]net.IP, recorder events.EventRecorder) (proxy.Provider, error) {
	if cfg.Mode == kubeproxyconfig.ProxyModeNFTables {
		return nftables.NewDualStackProxier(ctx, cfg, detectors, nodeName, nodeIPs, recorder, nil, false)
	}
	return iptables.NewDualStackProxier(ctx, cfg, utiliptables.NewBestEffort(), utilsysctl.New(), detectors, nodeName, nodeIPs, recorder, nil, false)
}

// newIPv4Proxier returns upstream's IPv4 proxier of cfg.Mode.
func newIPv4Proxier(ctx context.Context, cfg *kubeproxyconfig.KubeProxyConfiguration, nodeName string, nodeIP net.IP, recorder events.EventRecorder) (proxy.Provider, error) {
	if cfg.Mode == kubeproxyconfig.ProxyModeNFTables {
		return nftables.NewProxier(ctx, cfg, v1.IPv4Protocol, proxyutil.NewNoOpLocalDetector(), nodeName, nodeIP, recorder, nil, false)
	}
	return iptables.NewProxier(ctx, cfg, v1.IPv4Protocol, utiliptables.New(utiliptables.ProtocolIPv4), utilsysctl.New(), proxyutil.NewNoOpLocalDetector(), nodeName, nodeIP, recorder, nil, false)
}
