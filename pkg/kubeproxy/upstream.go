package kubeproxy

import (
	"context"
	"fmt"
	"reflect"
	"unsafe"

	"k8s.io/kubernetes/cmd/kube-proxy/app"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/util/filesystem"
)

// Upstream kube-proxy exposes ProxyServer and its Run, but builds the
// server (client, node manager, proxier for the configured mode) in
// unexported functions. Linking to them keeps every step of the start-up
// upstream's own; the only change is the Provider the server runs with.
// TestLinkedSignatures and TestUpstreamSeam fail if these ever stop matching
// upstream (a linkname with a stale signature would link and corrupt memory).

//go:linkname newProxyServer k8s.io/kubernetes/cmd/kube-proxy/app.newProxyServer
func newProxyServer(ctx context.Context, config *kubeproxyconfig.KubeProxyConfiguration, master string, initOnly bool, flagzReader flagzReader) (*app.ProxyServer, error)

//go:linkname platformCleanup k8s.io/kubernetes/cmd/kube-proxy/app.platformCleanup
func platformCleanup(ctx context.Context, mode kubeproxyconfig.ProxyMode, cleanupAndExit bool) error

// optionsView reads the unexported state that app.Options resolves from
// flags and the config file.
type optionsView struct {
	config  *kubeproxyconfig.KubeProxyConfiguration
	master  string
	flagz   flagzReader
	watcher filesystem.FSWatcher
	errCh   chan error
}

func viewOptions(o *app.Options) (*optionsView, error) {
	v := &optionsView{}
	var err error
	if v.config, err = optionsField[*kubeproxyconfig.KubeProxyConfiguration](o, "config"); err != nil {
		return nil, err
	}
	if v.master, err = optionsField[string](o, "master"); err != nil {
		return nil, err
	}
	if v.flagz, err = optionsField[flagzReader](o, "flagz"); err != nil {
		return nil, err
	}
	if v.watcher, err = optionsField[filesystem.FSWatcher](o, "watcher"); err != nil {
		return nil, err
	}
	if v.errCh, err = optionsField[chan error](o, "errCh"); err != nil {
		return nil, err
	}
	return v, nil
}

func optionsField[T any](o *app.Options, name string) (T, error) {
	var zero T
	f := reflect.ValueOf(o).Elem().FieldByName(name)
	if !f.IsValid() {
		return zero, fmt.Errorf("kube-proxy Options has no field %q; this build does not match its kube-proxy version", name)
	}
	if f.Type() != reflect.TypeFor[T]() {
		return zero, fmt.Errorf("kube-proxy Options field %q is a %s, not a %s; this build does not match its kube-proxy version", name, f.Type(), reflect.TypeFor[T]())
	}
	return *(*T)(unsafe.Pointer(f.UnsafeAddr())), nil
}

// runWatcher starts upstream's config file watcher, whose Run takes the
// context from Kubernetes 1.36 on and nothing before: the one method of
// the seam whose shape differs between the supported releases without a
// type of its own to tell them apart at compile time.
func runWatcher(ctx context.Context, w any) error {
	switch w := w.(type) {
	case interface{ Run(context.Context) }:
		w.Run(ctx)
	case interface{ Run() }:
		w.Run()
	default:
		return fmt.Errorf("kube-proxy's config file watcher is a %T, with no Run method this build knows; this build does not match its kube-proxy version", w)
	}
	return nil
}
