package fakekubelet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
)

const (
	// DefaultPort is the kubelet API's port (--port of a real kubelet).
	DefaultPort = 10250
	// The kubelet's defaults: --streaming-connection-idle-timeout and the
	// time a client has to open its streams.
	streamIdleTimeout     = 4 * time.Hour
	streamCreationTimeout = 30 * time.Second
)

// ServingConfig is how the kubelet API is served.
type ServingConfig struct {
	// Port is the kubelet port, published in the Node's daemon endpoints
	// (default DefaultPort).
	Port int
	// Cert is the serving certificate, for the node's IP and name.
	Cert tls.Certificate
	// ClientCAs verifies clients: only a certificate they issued gets in
	// (the apiserver's --kubelet-client-certificate), and what it may do is
	// then asked of the apiserver, as a kubelet with webhook authorization
	// does.
	ClientCAs *x509.CertPool
}

// serve serves the kubelet API at the node's IP, inside the node's
// namespace where the apiserver's egress reaches it, until ctx ends.
func (k *Kubelet) serve(ctx context.Context) (stop func(), err error) {
	s := k.cfg.Serving
	// The apiserver dials the first InternalIP.
	addr := net.JoinHostPort(k.cfg.NodeIPs[0], strconv.Itoa(s.Port))
	l, err := netns.Listen(k.cfg.NodeNetns, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("kubelet API at %s in %s: %w", addr, k.cfg.NodeNetns, err)
	}
	srv := &http.Server{
		Handler: k.authorize(k.routes()),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{s.Cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    s.ClientCAs,
			MinVersion:   tls.VersionTLS12,
		},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          k.log,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			k.log.Printf("kubelet API: %v", err)
		}
	}()
	k.log.Printf("kubelet API serving at https://%s", addr)
	return func() {
		// Streams (exec, logs -f, port-forward) end with their pods.
		_ = srv.Close()
		<-done
	}, nil
}

// routes are the kubelet API paths the apiserver proxies to for pods'
// exec, attach, portforward and log subresources.
func (k *Kubelet) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	for _, prefix := range []string{"/exec/{ns}/{pod}", "/exec/{ns}/{pod}/{uid}"} {
		mux.HandleFunc(prefix+"/{container}", k.serveExec)
	}
	for _, prefix := range []string{"/attach/{ns}/{pod}", "/attach/{ns}/{pod}/{uid}"} {
		mux.HandleFunc(prefix+"/{container}", k.serveAttach)
	}
	mux.HandleFunc("/portForward/{ns}/{pod}", k.servePortForward)
	mux.HandleFunc("/portForward/{ns}/{pod}/{uid}", k.servePortForward)
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", k.serveContainerLogs)
	return mux
}

// authorize lets a request through if the apiserver says its client may
// use this node's API (verb on nodes/proxy, as the kubelet asks for these
// paths): a certificate from the CA alone is not enough.
func (k *Kubelet) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		subject := r.TLS.VerifiedChains[0][0].Subject
		verb := map[string]string{http.MethodGet: "get", http.MethodPost: "create", http.MethodPut: "update",
			http.MethodPatch: "patch", http.MethodDelete: "delete"}[r.Method]
		if verb == "" {
			verb = strings.ToLower(r.Method)
		}
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   subject.CommonName,
			Groups: subject.Organization,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Resource: "nodes", Subresource: "proxy", Name: k.cfg.NodeName,
			},
		}}
		got, err := k.cfg.Client.AuthorizationV1().SubjectAccessReviews().Create(r.Context(), review, metav1.CreateOptions{})
		switch {
		case err != nil:
			k.log.Printf("kubelet API: authorizing %s %s for %s: %v", r.Method, r.URL.Path, subject.CommonName, err)
			http.Error(w, "authorization failed", http.StatusInternalServerError)
		case !got.Status.Allowed:
			http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource=proxy)", subject.CommonName, verb),
				http.StatusForbidden)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func (k *Kubelet) serveExec(w http.ResponseWriter, r *http.Request) {
	if t, opts, ok := k.remoteCommand(w, r); ok {
		remotecommand.ServeExec(w, r, t, t.pod, t.uid, t.container, r.URL.Query()["command"], opts,
			streamIdleTimeout, streamCreationTimeout, remotecommand.SupportedStreamingProtocols)
	}
}

func (k *Kubelet) serveAttach(w http.ResponseWriter, r *http.Request) {
	if t, opts, ok := k.remoteCommand(w, r); ok {
		remotecommand.ServeAttach(w, r, t, t.pod, t.uid, t.container, opts,
			streamIdleTimeout, streamCreationTimeout, remotecommand.SupportedStreamingProtocols)
	}
}

// remoteCommand resolves an exec or attach request's container and
// streams, answering the request itself when it cannot.
func (k *Kubelet) remoteCommand(w http.ResponseWriter, r *http.Request) (*target, *remotecommand.Options, bool) {
	t, ok := k.lookup(w, r)
	if !ok {
		return nil, nil, false
	}
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, nil, false
	}
	return t, opts, true
}

func (k *Kubelet) servePortForward(w http.ResponseWriter, r *http.Request) {
	target, ok := k.lookup(w, r)
	if !ok {
		return
	}
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	portforward.ServePortForward(w, r, target, target.pod, target.uid, opts,
		streamIdleTimeout, streamCreationTimeout, portforward.SupportedProtocols)
}
