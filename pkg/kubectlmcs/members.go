package kubectlmcs

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	"k8s.io/multiclusterservices/crdgate"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
)

// member is one context of the kubeconfig, with its clients.
type member struct {
	Context   string
	ClusterID string
	// Err is why the member's API did not answer; nil when it did.
	Err     error
	Version string
	Config  *rest.Config
	Kube    kubernetes.Interface
	MCS     mcsclientset.Interface
	Dynamic dynamic.Interface
}

// memberContexts lists the contexts to read: --contexts, else --context,
// else every context of the kubeconfig.
func memberContexts(flags *genericclioptions.ConfigFlags, contexts []string) ([]string, error) {
	if len(contexts) > 0 {
		return contexts, nil
	}
	if flags.Context != nil && *flags.Context != "" {
		return []string{*flags.Context}, nil
	}
	raw, err := flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, err
	}
	var out []string
	for name := range raw.Contexts {
		out = append(out, name)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("the kubeconfig has no context")
	}
	return out, nil
}

// connect builds the clients of every context and asks each for its
// version and cluster ID, all at once; a member that does not answer
// within timeout keeps the reason in Err.
func connect(ctx context.Context, flags *genericclioptions.ConfigFlags, contexts []string, timeout time.Duration) ([]*member, error) {
	if err := credentialsForOne(flags, contexts); err != nil {
		return nil, err
	}
	raw, err := flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, err
	}
	members := make([]*member, len(contexts))
	done := make(chan struct{}, len(contexts))
	for i, name := range contexts {
		m := &member{Context: name}
		members[i] = m
		if _, ok := raw.Contexts[name]; !ok {
			m.Err = fmt.Errorf("no context %q in the kubeconfig", name)
			done <- struct{}{}
			continue
		}
		config, err := clientcmd.NewNonInteractiveClientConfig(raw, name, memberOverrides(flags, name), nil).ClientConfig()
		if err != nil {
			m.Err = err
			done <- struct{}{}
			continue
		}
		// --request-timeout, when given, else --member-timeout.
		if config.Timeout == 0 {
			config.Timeout = timeout
		}
		config.QPS, config.Burst = 50, 100
		config.UserAgent = "kubectl-mcs"
		m.Config = config
		go func() {
			defer func() { done <- struct{}{} }()
			m.Err = m.dial(ctx)
		}()
	}
	for range contexts {
		<-done
	}
	return members, nil
}

func (m *member) dial(ctx context.Context) error {
	var err error
	if m.Kube, err = kubernetes.NewForConfig(m.Config); err != nil {
		return err
	}
	if m.MCS, err = mcsclientset.NewForConfig(m.Config); err != nil {
		return err
	}
	if m.Dynamic, err = dynamic.NewForConfig(m.Config); err != nil {
		return err
	}
	v, err := m.Kube.Discovery().ServerVersion()
	if err != nil {
		return shortError(err)
	}
	m.Version = v.GitVersion
	// A server that cannot say which version it serves is read at
	// v1alpha1, as before discovery: the Get then says what is wrong.
	properties, _ := crdgate.Resource(m.Kube.Discovery(), aboutv1alpha1.Resource, aboutv1alpha1.Versions)
	cp, err := m.Dynamic.Resource(properties).Get(ctx, aboutv1alpha1.ClusterIDProperty, metav1.GetOptions{})
	if err == nil {
		m.ClusterID, _, _ = unstructured.NestedString(cp.Object, "spec", "value")
	}
	return nil
}

// credentialsForOne refuses kubectl's credential flags (--token,
// --username, --password, --client-certificate, --client-key) when
// several members are read: a credential given on the command line is one
// cluster's, and it would go to every member's apiserver, whose
// administrators could then use it against that cluster. Each member's
// credentials belong in its own kubeconfig context; --context (or
// --contexts with one) reads one member with them.
func credentialsForOne(f *genericclioptions.ConfigFlags, contexts []string) error {
	if len(contexts) < 2 {
		return nil
	}
	for _, c := range []struct {
		flag  string
		value *string
	}{{"--token", f.BearerToken}, {"--username", f.Username}, {"--password", f.Password},
		{"--client-certificate", f.CertFile}, {"--client-key", f.KeyFile}} {
		if c.value != nil && *c.value != "" {
			return fmt.Errorf("%s would be sent to the apiserver of every member read (%s): give each member's credentials in its kubeconfig context, or read one member with --context", c.flag, strings.Join(contexts, ", "))
		}
	}
	return nil
}

// shortError keeps the last, most specific part of a chain of errors
// ("Get ...: dial tcp ...: connect: connection refused"): what fits a line.
func shortError(err error) error {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && strings.HasPrefix(s, "Get ") {
		return fmt.Errorf("%s", s[i+2:])
	}
	return err
}

func reachable(members []*member) []*member {
	var out []*member
	for _, m := range members {
		if m.Err == nil {
			out = append(out, m)
		}
	}
	return out
}

func (m *member) name() string {
	if m.ClusterID != "" {
		return m.ClusterID
	}
	return "?"
}

// memberOverrides applies kubectl's flags to the member of context, as
// kubectl applies them to its one context: credentials (--token,
// --client-certificate, --client-key, --username, --password), impersonation
// (--as, --as-uid, --as-group, --as-user-extra), the cluster's connection
// (--server, --tls-server-name, --certificate-authority,
// --insecure-skip-tls-verify, --disable-compression, --proxy-url),
// --cluster, --user, and --request-timeout. A flag not given changes
// nothing.
func memberOverrides(f *genericclioptions.ConfigFlags, context string) *clientcmd.ConfigOverrides {
	o := &clientcmd.ConfigOverrides{CurrentContext: context}
	set := func(dst *string, src *string) {
		if src != nil {
			*dst = *src
		}
	}
	set(&o.AuthInfo.ClientCertificate, f.CertFile)
	set(&o.AuthInfo.ClientKey, f.KeyFile)
	set(&o.AuthInfo.Token, f.BearerToken)
	set(&o.AuthInfo.Impersonate, f.Impersonate)
	set(&o.AuthInfo.ImpersonateUID, f.ImpersonateUID)
	set(&o.AuthInfo.Username, f.Username)
	set(&o.AuthInfo.Password, f.Password)
	if f.ImpersonateGroup != nil {
		o.AuthInfo.ImpersonateGroups = *f.ImpersonateGroup
	}
	if f.ImpersonateUserExtra != nil && len(*f.ImpersonateUserExtra) > 0 {
		o.AuthInfo.ImpersonateUserExtra = map[string][]string{}
		for _, extra := range *f.ImpersonateUserExtra {
			if key, value, ok := strings.Cut(extra, "="); ok {
				o.AuthInfo.ImpersonateUserExtra[key] = append(o.AuthInfo.ImpersonateUserExtra[key], value)
			}
		}
	}
	set(&o.ClusterInfo.Server, f.APIServer)
	set(&o.ClusterInfo.TLSServerName, f.TLSServerName)
	set(&o.ClusterInfo.CertificateAuthority, f.CAFile)
	set(&o.ClusterInfo.ProxyURL, f.ProxyURL)
	if f.Insecure != nil {
		o.ClusterInfo.InsecureSkipTLSVerify = *f.Insecure
	}
	if f.DisableCompression != nil {
		o.ClusterInfo.DisableCompression = *f.DisableCompression
	}
	set(&o.Context.Cluster, f.ClusterName)
	set(&o.Context.AuthInfo, f.AuthInfoName)
	set(&o.Timeout, f.Timeout)
	return o
}
