package kubectlmcs

import (
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// kubectl's flags reach every member's client, each member keeping what
// the flags do not say: its own server, CA and credentials.
func TestMemberOverrides(t *testing.T) {
	raw := clientcmdapi.NewConfig()
	for _, name := range []string{"cluster-a", "cluster-b"} {
		raw.Clusters[name] = &clientcmdapi.Cluster{Server: "https://" + name + ":6443", CertificateAuthorityData: []byte("ca of " + name)}
		raw.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "token of " + name}
		raw.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	config := func(f *genericclioptions.ConfigFlags, context string) (server, token string, insecure bool, groups []string, timeout time.Duration) {
		t.Helper()
		c, err := clientcmd.NewNonInteractiveClientConfig(*raw, context, memberOverrides(f, context), nil).ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		return c.Host, c.BearerToken, c.Insecure, c.Impersonate.Groups, c.Timeout
	}

	// No flag: each member as its context says.
	none := genericclioptions.NewConfigFlags(true)
	for _, name := range []string{"cluster-a", "cluster-b"} {
		if server, token, insecure, groups, timeout := config(none, name); server != "https://"+name+":6443" || token != "token of "+name || insecure || groups != nil || timeout != 0 {
			t.Errorf("%s without flags: %s %q insecure=%v groups=%v timeout=%v", name, server, token, insecure, groups, timeout)
		}
	}

	// --as-group, --insecure-skip-tls-verify and --request-timeout reach
	// both members; their servers stay theirs. (A credential flag reaches
	// one member only: TestCredentialFlagsReachOneMember.)
	f := genericclioptions.NewConfigFlags(true)
	*f.BearerToken, *f.ImpersonateGroup, *f.Insecure, *f.Timeout = "operator-token", []string{"ops"}, true, "7s"
	*f.Impersonate = "auditor"
	for _, name := range []string{"cluster-a", "cluster-b"} {
		server, token, insecure, groups, timeout := config(f, name)
		if server != "https://"+name+":6443" || token != "operator-token" || !insecure || len(groups) != 1 || groups[0] != "ops" || timeout != 7*time.Second {
			t.Errorf("%s with flags: %s %q insecure=%v groups=%v timeout=%v", name, server, token, insecure, groups, timeout)
		}
	}

	// --server takes every member to that server, as it takes kubectl's
	// one context there.
	s := genericclioptions.NewConfigFlags(true)
	*s.APIServer = "https://other:6443"
	if server, _, _, _, _ := config(s, "cluster-b"); server != "https://other:6443" {
		t.Errorf("--server: %s", server)
	}
}

// A credential on the command line is one cluster's: with several
// members read it would go to every member's apiserver, so it is refused
// then, naming the flag; for one member it is used as kubectl uses it.
func TestCredentialFlagsReachOneMember(t *testing.T) {
	for _, set := range []func(*genericclioptions.ConfigFlags){
		func(f *genericclioptions.ConfigFlags) { f.BearerToken = ptr.To("operator-token") },
		func(f *genericclioptions.ConfigFlags) { f.Username, f.Password = ptr.To("admin"), ptr.To("secret") },
		func(f *genericclioptions.ConfigFlags) {
			f.CertFile, f.KeyFile = ptr.To("/tmp/admin.crt"), ptr.To("/tmp/admin.key")
		},
	} {
		f := genericclioptions.NewConfigFlags(true)
		set(f)
		err := credentialsForOne(f, []string{"cluster-a", "cluster-b"})
		if err == nil || !strings.Contains(err.Error(), "every member") {
			t.Errorf("a credential flag with two members: %v, want refused", err)
		}
		if err := credentialsForOne(f, []string{"cluster-a"}); err != nil {
			t.Errorf("a credential flag with one member: %v", err)
		}
	}
	if err := credentialsForOne(genericclioptions.NewConfigFlags(true), []string{"cluster-a", "cluster-b"}); err != nil {
		t.Errorf("no credential flag: %v", err)
	}
}
