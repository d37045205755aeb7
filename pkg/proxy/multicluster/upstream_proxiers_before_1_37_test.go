//go:build kube1.34 || kube1.35 || kube1.36

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

// Upstream's proxiers in Kubernetes 1.34 to 1.36, whose constructors take
// the configuration's fields one by one, as those releases' start-up
// passes them (upstream_proxiers_test.go has 1.37's).

func newDualStackProxier(ctx context.Context, cfg *kubeproxyconfig.KubeProxyConfiguration, detectors map[v1.IPFamily]proxyutil.LocalTrafficDetector, nodeName string, nodeIPs map[v1.IPFamily]net.IP, recorder events.EventRecorder) (proxy.Provider, error) {
	if cfg.Mode == kubeproxyconfig.ProxyModeNFTables {
		return nftables.NewDualStackProxier(ctx, cfg.SyncPeriod.Duration, cfg.MinSyncPeriod.Duration, cfg.Linux.MasqueradeAll,
			int(*cfg.NFTables.MasqueradeBit), detectors, nodeName, nodeIPs, recorder, nil, cfg.NodePortAddresses, false)
	}
	return iptables.NewDualStackProxier(ctx, utiliptables.NewBestEffort(), utilsysctl.New(), cfg.SyncPeriod.Duration, cfg.MinSyncPeriod.Duration,
		cfg.Linux.MasqueradeAll, *cfg.IPTables.LocalhostNodePorts, int(*cfg.IPTables.MasqueradeBit), detectors, nodeName, nodeIPs, recorder, nil, cfg.NodePortAddresses, false)
}

func newIPv4Proxier(ctx context.Context, cfg *kubeproxyconfig.KubeProxyConfiguration, nodeName string, nodeIP net.IP, recorder events.EventRecorder) (proxy.Provider, error) {
	if cfg.Mode == kubeproxyconfig.ProxyModeNFTables {
		return nftables.NewProxier(ctx, v1.IPv4Protocol, cfg.SyncPeriod.Duration, cfg.MinSyncPeriod.Duration, cfg.Linux.MasqueradeAll,
			int(*cfg.NFTables.MasqueradeBit), proxyutil.NewNoOpLocalDetector(), nodeName, nodeIP, recorder, nil, cfg.NodePortAddresses, false)
	}
	return iptables.NewProxier(ctx, v1.IPv4Protocol, utiliptables.New(utiliptables.ProtocolIPv4), utilsysctl.New(), cfg.SyncPeriod.Duration, cfg.MinSyncPeriod.Duration,
		cfg.Linux.MasqueradeAll, *cfg.IPTables.LocalhostNodePorts, int(*cfg.IPTables.MasqueradeBit), proxyutil.NewNoOpLocalDetector(), nodeName, nodeIP, recorder, nil, cfg.NodePortAddresses, false)
}
