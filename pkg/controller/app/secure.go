package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/server"
	apiserveroptions "k8s.io/apiserver/pkg/server/options"
	compmetrics "k8s.io/component-base/metrics"
	controllermanager "k8s.io/controller-manager/app"
	"k8s.io/klog/v2"
)

// The controller's endpoints as Kubernetes components serve them: one
// secure port (--secure-port, HTTPS with a self-signed certificate unless
// --tls-cert-file says otherwise) where /metrics and, with --profiling,
// /debug/pprof/ need a caller the cluster the controller runs in
// authenticates (TokenReview) and authorizes (SubjectAccessReview: get on
// the non-resource URL), and /healthz, /livez and /readyz answer anyone
// (--authorization-always-allow-paths), as kubelet probes need. The
// delegation goes through --authentication-kubeconfig and
// --authorization-kubeconfig, or the in-cluster configuration; without
// either, only the always-allowed paths answer. The plain-HTTP
// --metrics-bind-address and --healthz-bind-address stay on loopback for
// a process on the same host (kube-proxy's own metrics are served so too).

// DefaultSecurePort is --secure-port's default, beside the loopback ports
// of the plain endpoints (10371, 10372).
const DefaultSecurePort = 10370

// ServingOptions are what a component serves (the controller, the
// planner, the member agent alike): /metrics, /debug/pprof with
// --profiling, /healthz, /livez and /readyz, on plain loopback addresses
// and on the secure port with delegated authentication and
// authorization.
type ServingOptions struct {
	MetricsBindAddress string
	HealthzBindAddress string
	SecureServing      *apiserveroptions.SecureServingOptions
	Authentication     *apiserveroptions.DelegatingAuthenticationOptions
	Authorization      *apiserveroptions.DelegatingAuthorizationOptions
	// Profiling serves /debug/pprof beside /metrics.
	Profiling bool
}

// NewServingOptions returns the defaults: the plain endpoints on loopback,
// the secure port on DefaultSecurePort with kube-controller-manager's
// defaults (an in-memory self-signed certificate, and delegation optional
// outside a cluster).
func NewServingOptions() ServingOptions {
	serving := apiserveroptions.NewSecureServingOptions()
	serving.ServerCert.CertDirectory = ""
	serving.ServerCert.PairName = "mcs-controller"
	serving.BindPort = DefaultSecurePort
	authn := apiserveroptions.NewDelegatingAuthenticationOptions()
	authn.RemoteKubeConfigFileOptional = true
	authz := apiserveroptions.NewDelegatingAuthorizationOptions()
	authz.RemoteKubeConfigFileOptional = true
	return ServingOptions{MetricsBindAddress: "127.0.0.1:10371", HealthzBindAddress: "127.0.0.1:10372",
		SecureServing: serving, Authentication: authn, Authorization: authz}
}

// AddFlags adds the serving flags to fs.
func (o *ServingOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of a plain-HTTP /metrics endpoint without authentication, for a process on the same host (keep it on loopback); 0 disables it. --secure-port serves /metrics to authorized callers.")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "Serve Go's profiles at /debug/pprof/ on --secure-port (authorized callers) and --metrics-bind-address.")
	fs.StringVar(&o.HealthzBindAddress, "healthz-bind-address", o.HealthzBindAddress, "Address of plain-HTTP /healthz, /livez and /readyz (keep it on loopback); 0 disables it. --secure-port serves them to anyone.")
	o.SecureServing.AddFlags(fs)
	o.Authentication.AddFlags(fs)
	o.Authorization.AddFlags(fs)
}

// Validate checks the secure port's options.
func (o *ServingOptions) Validate() []error {
	return append(append(o.SecureServing.Validate(), o.Authentication.Validate()...), o.Authorization.Validate()...)
}

// endpointsMux serves every endpoint of the controller: /metrics (and
// /debug/pprof/ with --profiling), /healthz, /livez, /readyz.
func endpointsMux(o *ServingOptions, reg compmetrics.KubeRegistry, h *health) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", compmetrics.HandlerFor(reg, compmetrics.HandlerOpts{}))
	if o.Profiling {
		// As Kubernetes components serve it with --profiling.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("/healthz", h.healthz)
	mux.HandleFunc("/livez", h.healthz)
	mux.HandleFunc("/readyz", h.readyz)
	return mux
}

// serveSecure serves the endpoints on the secure port until ctx ends; a
// port of 0 serves nothing.
func serveSecure(ctx context.Context, o *ServingOptions, handler http.Handler) error {
	if o.SecureServing == nil || o.SecureServing.BindPort == 0 && o.SecureServing.Listener == nil {
		return nil
	}
	if err := o.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		return fmt.Errorf("secure serving: %w", err)
	}
	var serving *server.SecureServingInfo
	if err := o.SecureServing.ApplyTo(&serving); err != nil {
		return fmt.Errorf("secure serving: %w", err)
	}
	var authn server.AuthenticationInfo
	if err := o.Authentication.ApplyTo(&authn, serving, nil); err != nil {
		return fmt.Errorf("delegated authentication: %w", err)
	}
	var authz server.AuthorizationInfo
	if err := o.Authorization.ApplyTo(&authz); err != nil {
		return fmt.Errorf("delegated authorization: %w", err)
	}
	if _, _, err := serving.Serve(controllermanager.BuildHandlerChain(handler, &authz, &authn), 0, ctx.Done()); err != nil {
		return fmt.Errorf("secure serving: %w", err)
	}
	klog.FromContext(ctx).Info("Serving securely", "address", serving.Listener.Addr().String(), "alwaysAllowed", o.Authorization.AlwaysAllowPaths)
	return nil
}
