package inventory

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
)

// The operator's plugin for access provider "token": hands out the token
// the test members accept. A shell one-liner stands in for a real plugin
// here; test/integration builds one that expires its tokens.
const testProviders = `{"providers": [{"name": "token", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "sh",
  "args": ["-c", "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"member-token\"}}'"]}}]}`

func profile(name string, m *member, mutate func(*inventoryv1alpha1.ClusterProfile)) *unstructured.Unstructured {
	cp := &inventoryv1alpha1.ClusterProfile{
		TypeMeta:   metav1.TypeMeta{APIVersion: inventoryv1alpha1.SchemeGroupVersion.String(), Kind: "ClusterProfile"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fleet", Labels: map[string]string{inventoryv1alpha1.LabelClusterManager: "ocm"}},
		Spec:       inventoryv1alpha1.ClusterProfileSpec{ClusterManager: inventoryv1alpha1.ClusterManager{Name: "ocm"}},
		Status: inventoryv1alpha1.ClusterProfileStatus{
			Conditions: []metav1.Condition{
				{Type: inventoryv1alpha1.ConditionJoined, Status: metav1.ConditionTrue, Reason: "Joined", LastTransitionTime: metav1.Now()},
				{Type: inventoryv1alpha1.ConditionControlPlaneHealthy, Status: metav1.ConditionTrue, Reason: "Healthy", LastTransitionTime: metav1.Now()},
			},
			AccessProviders: []inventoryv1alpha1.AccessProvider{{Name: "token", Cluster: inventoryv1alpha1.Cluster{Server: m.url, CertificateAuthorityData: m.ca}}},
		},
	}
	if mutate != nil {
		mutate(cp)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cp)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

func setCondition(t string, s metav1.ConditionStatus) func(*inventoryv1alpha1.ClusterProfile) {
	return func(cp *inventoryv1alpha1.ClusterProfile) {
		meta.SetStatusCondition(&cp.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: "Test"})
	}
}

// Profiles created, refused, marked unhealthy, relabelled and deleted
// drive joins and leaves through the same path as Secrets, and each
// refusal says why on the profile.
func TestInventoryFollowsProfiles(t *testing.T) {
	ctx := t.Context()
	b, dup, y := newMemberAPI(t, "cluster-b"), newMemberAPI(t, "cluster-b"), newMemberAPI(t, "cluster-y")
	providers, err := ParseAccessProviders([]byte(testProviders))
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	hub := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{inventoryv1alpha1.Resource: "ClusterProfileList"})
	events := kubefake.NewSimpleClientset()
	sel, _ := labels.Parse(inventoryv1alpha1.LabelClusterManager + "=ocm")
	inv := New(Config{Hub: events, Profiles: hub, ProfileNamespace: "fleet", ProfileSelector: sel, AccessProviders: providers,
		ClusterIDTimeout: time.Second, SyncTimeout: time.Second, LeaveTimeout: time.Second, RecheckPeriod: time.Hour}, nil)
	r := &recorder{}
	go inv.Run(ctx, r)
	profiles := hub.Resource(inventoryv1alpha1.Resource).Namespace("fleet")
	create := func(u *unstructured.Unstructured) {
		t.Helper()
		if _, err := profiles.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update := func(u *unstructured.Unstructured) { t.Helper(); updateProfile(t, profiles, u) }

	create(profile("b", b, nil))
	r.waitFor(t, "join cluster-b as profile/fleet/b")

	// Attacks: an ID already taken; a profile naming one cluster and
	// pointing at another's server; TLS not checked; a plugin the
	// operator did not configure.
	create(profile("dup", dup, nil))
	create(profile("liar", y, func(cp *inventoryv1alpha1.ClusterProfile) {
		cp.Status.Properties = []inventoryv1alpha1.Property{{Name: clusterIDProperty, Value: "cluster-x"}}
	}))
	create(profile("insecure", y, func(cp *inventoryv1alpha1.ClusterProfile) {
		cp.Status.AccessProviders[0].Cluster.InsecureSkipTLSVerify = true
	}))
	create(profile("unknown-plugin", y, func(cp *inventoryv1alpha1.ClusterProfile) {
		cp.Status.AccessProviders[0].Name = "google"
	}))
	// Another cluster manager's profile: not a candidate.
	other := profile("other-manager", y, nil)
	other.SetLabels(map[string]string{inventoryv1alpha1.LabelClusterManager: "karmada"})
	create(other)
	waitState(t, inv, map[string]State{"profile/fleet/b": Joined, "profile/fleet/dup": Refused, "profile/fleet/liar": Refused,
		"profile/fleet/insecure": Refused, "profile/fleet/unknown-plugin": Refused})
	for name, want := range map[string]string{
		"dup": "already the ID of member profile/fleet/b", "liar": `says cluster "cluster-x", but its server's ClusterProperty cluster.clusterset.k8s.io holds "cluster-y"`,
		"insecure": "insecure-skip-tls-verify", "unknown-plugin": "no credential plugin for its access providers google",
		"b": "cluster cluster-b is a member",
	} {
		waitMemberCondition(t, profiles, name, want)
	}

	// Unhealthy: leaves; healthy again: joins. While it is away, its ID
	// stays its own: dup, naming the same cluster, does not take it.
	update(profile("b", b, setCondition(inventoryv1alpha1.ConditionControlPlaneHealthy, metav1.ConditionFalse)))
	r.waitFor(t, "join cluster-b as profile/fleet/b", "leave cluster-b")
	waitMemberCondition(t, profiles, "b", "ControlPlaneHealthy=False")
	waitState(t, inv, map[string]State{"profile/fleet/b": Pending, "profile/fleet/dup": Refused, "profile/fleet/liar": Refused,
		"profile/fleet/insecure": Refused, "profile/fleet/unknown-plugin": Refused})
	if err := profiles.Delete(ctx, "dup", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	update(profile("b", b, nil))
	r.waitFor(t, "join cluster-b as profile/fleet/b", "leave cluster-b", "join cluster-b as profile/fleet/b")
	// The controller's condition is written before the next change: the
	// fake client's status write replaces the whole object, labels too.
	waitMemberCondition(t, profiles, "b", "cluster cluster-b is a member")

	// Relabelled out of the selector: no longer a candidate, leaves.
	relabelled := profile("b", b, nil)
	relabelled.SetLabels(map[string]string{inventoryv1alpha1.LabelClusterManager: "karmada"})
	update(relabelled)
	r.waitFor(t, "join cluster-b as profile/fleet/b", "leave cluster-b", "join cluster-b as profile/fleet/b", "leave cluster-b")

	evs, _ := events.EventsV1().Events("fleet").List(ctx, metav1.ListOptions{})
	var reasons []string
	for _, e := range evs.Items {
		reasons = append(reasons, e.Regarding.Kind+"/"+e.Regarding.Name+"/"+e.Reason)
	}
	for _, want := range []string{"ClusterProfile/b/MemberJoined", "ClusterProfile/b/MemberLeft", "ClusterProfile/liar/MemberRefused", "ClusterProfile/dup/MemberRefused"} {
		if !strings.Contains(strings.Join(reasons, " "), want) {
			t.Errorf("no event %s in %v", want, reasons)
		}
	}
}

// updateProfile writes u over the profile of its name, as the cluster
// manager would.
func updateProfile(t *testing.T, profiles dynamic.ResourceInterface, u *unstructured.Unstructured) {
	t.Helper()
	cur, err := profiles.Get(t.Context(), u.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetResourceVersion(cur.GetResourceVersion())
	if _, err := profiles.Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitMemberCondition(t *testing.T, profiles interface {
	Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
}, name, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		u, err := profiles.Get(context.Background(), name, metav1.GetOptions{})
		var msg string
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if m := c.(map[string]any); m["type"] == ConditionMember {
					msg, _ = m["message"].(string)
				}
			}
		}
		if strings.Contains(msg, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("profile %s: member condition says %q, want %q", name, msg, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The attack: a member's administrator claims, in its own
// ClusterProperty, a region its cluster manager says it is not in, to draw
// the traffic selection sends by region. The profile's word wins; the
// member adds only names its profile does not give.
func TestMergeProperties(t *testing.T) {
	got := MergeProperties([]inventoryv1alpha1.Property{{Name: "region", Value: "us"}, {Name: "provider", Value: "aws"}},
		map[string]string{"region": "eu", "zone": "a"})
	want := map[string]string{"region": "us", "provider": "aws", "zone": "a"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q (the profile's word wins)", k, got[k], v)
		}
	}
}

func TestParseAccessProviders(t *testing.T) {
	for in, wantErr := range map[string]string{
		testProviders:       "",
		`{"providers": []}`: "names no provider",
		`{"providers": [{"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1"}}]}`: "no execConfig.command",
		`{"providers": [{"name": "a", "execConfig": {"apiVersion": "v1", "command": "x"}}]}`:              "apiVersion",
		`{"providers": [{"name": "a", "execConfg": {}}]}`:                                                 "unknown field",
		`{"providers": [{"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x"}}, {"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "y"}}]}`: "twice",
	} {
		_, err := ParseAccessProviders([]byte(in))
		if wantErr == "" && err != nil || wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)) {
			t.Errorf("%s: got %v, want %q", in, err, wantErr)
		}
	}
}

// Upstream's provider file (cluster-inventory-api's pkg/access), as its
// examples write it: nulls for absent lists, the profile-sourced
// policies.
const upstreamProviders = `{
  "providers": [
    {
      "name": "secretreader",
      "execConfig": {
        "apiVersion": "client.authentication.k8s.io/v1",
        "args": null,
        "command": "./bin/secretreader-plugin",
        "env": null,
        "provideClusterInfo": true
      }
    },
    {
      "name": "kubelogin",
      "execConfig": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "kubelogin", "args": ["get-token"], "env": [{"name": "AZURE_ENV", "value": "public"}]},
      "profileSourcedCLIArgsPolicy": "Append",
      "profileSourcedEnvVarsPolicy": "AppendIfNotExists",
      "profileSourcedArgFlags": ["--tenant-id"],
      "profileSourcedEnvVarNames": ["AZURE_ENV", "TENANT"]
    }
  ]
}`

func TestParseUpstreamAccessProviders(t *testing.T) {
	providers, err := ParseAccessProviders([]byte(upstreamProviders))
	if err != nil {
		t.Fatal(err)
	}
	if len(providers) != 2 || providers[0].Name != "secretreader" || !providers[0].Exec.ProvideClusterInfo || providers[0].CLIArgsPolicy != PolicyIgnore ||
		providers[1].CLIArgsPolicy != PolicyAppend || providers[1].EnvVarsPolicy != PolicyAppendIfNotExists ||
		!slices.Equal(providers[1].ArgFlags, []string{"--tenant-id"}) || !slices.Equal(providers[1].EnvVarNames, []string{"AZURE_ENV", "TENANT"}) {
		t.Errorf("parsed %+v", providers)
	}
	const exec = `"execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x"}`
	for in, wantErr := range map[string]string{
		`{"providers": [{"name": "a", ` + exec + `, "profileSourcedCLIArgsPolicy": "Prepend"}]}`: "profileSourcedCLIArgsPolicy",
		`{"providers": [{"name": "a", ` + exec + `, "profileSourcedEnvVarsPolicy": "Append"}]}`:  "profileSourcedEnvVarsPolicy",
		// A policy that takes whatever a profile adds: the operator names
		// what it may add.
		`{"providers": [{"name": "a", ` + exec + `, "profileSourcedCLIArgsPolicy": "Append"}]}`:         "name them",
		`{"providers": [{"name": "a", ` + exec + `, "profileSourcedEnvVarsPolicy": "Replace"}]}`:        "name them",
		`{"providers": [{"name": "a", ` + exec + `, "profileSourcedEnvVarNames": ["PATH=/tmp:/bin"]}]}`: "not a variable name",
		`{"providers": [{"name": "a", ` + exec + `, "profileSourcedEnvVarNames": ["BASH_ENV"]}]}`:       "chooses code",
		`{"providers": [{"name": "a", ` + exec + `, "profileSourcedEnvVarNames": ["LD_PRELOAD"]}]}`:     "chooses code",
		`{"providers": [{"name": "a", ` + exec + `, "profileSourcedArgFlags": ["--a b"]}]}`:             "not a flag",
	} {
		if _, err := ParseAccessProviders([]byte(in)); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: got %v, want %q", in, err, wantErr)
		}
	}
}

// The operator's file decides which plugin runs, in its order; an
// accessProviders entry overrides a credentialProviders one of its name.
func TestProfileAccessFollowsTheOperatorsOrder(t *testing.T) {
	providers, err := ParseAccessProviders([]byte(upstreamProviders))
	if err != nil {
		t.Fatal(err)
	}
	cp := &inventoryv1alpha1.ClusterProfile{Status: inventoryv1alpha1.ClusterProfileStatus{
		CredentialProviders: []inventoryv1alpha1.AccessProvider{{Name: "secretreader", Cluster: inventoryv1alpha1.Cluster{Server: "https://old.example"}}},
		AccessProviders: []inventoryv1alpha1.AccessProvider{
			{Name: "kubelogin", Cluster: inventoryv1alpha1.Cluster{Server: "https://kubelogin.example"}},
			{Name: "secretreader", Cluster: inventoryv1alpha1.Cluster{Server: "https://new.example"}},
		},
	}}
	ap, p, err := ProfileAccess(cp, providers)
	if err != nil || p.Name != "secretreader" || ap.Cluster.Server != "https://new.example" {
		t.Errorf("chose %+v (%v), want secretreader, the operator's first, at the accessProviders entry's server", ap, err)
	}
}

// What a profile's reserved exec extensions may add to the operator's
// plugin, by the operator's policies; and what they never may.
func TestProfileSourcedExtensions(t *testing.T) {
	ext := func(name, raw string) inventoryv1alpha1.NamedExtension {
		return inventoryv1alpha1.NamedExtension{Name: name, Extension: runtime.RawExtension{Raw: []byte(raw)}}
	}
	args := ext(ExtensionAdditionalArgs, `["--cluster=east"]`)
	envs := ext(ExtensionAdditionalEnvs, `{"AZURE_ENV": "china", "TENANT": "t1"}`)
	base := func() *clientcmdapi.ExecConfig {
		return &clientcmdapi.ExecConfig{Command: "kubelogin", Args: []string{"get-token"}, Env: []clientcmdapi.ExecEnvVar{{Name: "AZURE_ENV", Value: "public"}}}
	}
	for _, tc := range []struct {
		name               string
		cli, env           string
		exts               []inventoryv1alpha1.NamedExtension
		wantArgs, wantEnvs string
		wantErr            string
	}{
		{name: "ignored by default", cli: PolicyIgnore, env: PolicyIgnore, exts: []inventoryv1alpha1.NamedExtension{args, envs},
			wantArgs: "get-token", wantEnvs: "AZURE_ENV=public"},
		{name: "appended", cli: PolicyAppend, env: PolicyAppendIfNotExists, exts: []inventoryv1alpha1.NamedExtension{args, envs},
			wantArgs: "get-token --cluster=east", wantEnvs: "AZURE_ENV=public TENANT=t1"},
		{name: "replaced", cli: PolicyIgnore, env: PolicyReplace, exts: []inventoryv1alpha1.NamedExtension{envs},
			wantArgs: "get-token", wantEnvs: "AZURE_ENV=china TENANT=t1"},
		{name: "attack: LD_PRELOAD from a profile", cli: PolicyIgnore, env: PolicyReplace,
			exts: []inventoryv1alpha1.NamedExtension{ext(ExtensionAdditionalEnvs, `{"LD_PRELOAD": "/tmp/evil.so"}`)}, wantErr: "LD_PRELOAD"},
		{name: "attack: PATH from a profile", cli: PolicyIgnore, env: PolicyAppendIfNotExists,
			exts: []inventoryv1alpha1.NamedExtension{ext(ExtensionAdditionalEnvs, `{"PATH": "/tmp"}`)}, wantErr: "PATH"},
		// The plugin runner (pluginruns.go) runs the command its variable
		// names, with the controller's identity.
		{name: "attack: the plugin runner's command from a profile", cli: PolicyIgnore, env: PolicyReplace,
			exts: []inventoryv1alpha1.NamedExtension{ext(ExtensionAdditionalEnvs, `{"MCS_CONTROLLER_CREDENTIAL_PLUGIN": "/tmp/evil"}`)}, wantErr: "MCS_CONTROLLER_CREDENTIAL_PLUGIN"},
		{name: "attack: the plugin runner's report socket from a profile", cli: PolicyIgnore, env: PolicyAppendIfNotExists,
			exts: []inventoryv1alpha1.NamedExtension{ext(ExtensionAdditionalEnvs, `{"MCS_CONTROLLER_CREDENTIAL_PLUGIN_REPORT": "@elsewhere"}`)}, wantErr: "MCS_CONTROLLER_CREDENTIAL_PLUGIN_REPORT"},
		// Whatever the operator did not name, a profile does not add.
		{name: "attack: BASH_ENV from a profile", cli: PolicyIgnore, env: PolicyAppendIfNotExists,
			exts: []inventoryv1alpha1.NamedExtension{ext(ExtensionAdditionalEnvs, `{"BASH_ENV": "/tmp/evil.sh"}`)}, wantErr: "BASH_ENV"},
		// A name with "=" passes a comparison of exact names and still
		// sets PATH.
		{name: "attack: PATH through a name holding =", cli: PolicyIgnore, env: PolicyReplace,
			exts: []inventoryv1alpha1.NamedExtension{ext(ExtensionAdditionalEnvs, `{"PATH=/tmp/evil:/usr/bin": "x"}`)}, wantErr: "PATH=/tmp/evil"},
		{name: "attack: a proxy overriding the controller's own", cli: PolicyIgnore, env: PolicyReplace,
			exts: []inventoryv1alpha1.NamedExtension{ext(ExtensionAdditionalEnvs, `{"HTTPS_PROXY": "http://evil.example:3128"}`)}, wantErr: "HTTPS_PROXY"},
		{name: "attack: a cloud SDK's endpoint sending the plugin's credentials elsewhere", cli: PolicyIgnore, env: PolicyAppendIfNotExists,
			exts: []inventoryv1alpha1.NamedExtension{ext(ExtensionAdditionalEnvs, `{"AWS_ENDPOINT_URL_STS": "https://evil.example"}`)}, wantErr: "AWS_ENDPOINT_URL_STS"},
		{name: "attack: a flag the operator did not name", cli: PolicyAppend, env: PolicyIgnore,
			exts: []inventoryv1alpha1.NamedExtension{ext(ExtensionAdditionalArgs, `["--exec-command=/tmp/evil"]`)}, wantErr: "--exec-command"},
		{name: "attack: a named flag's value as a separate argument", cli: PolicyAppend, env: PolicyIgnore,
			exts: []inventoryv1alpha1.NamedExtension{ext(ExtensionAdditionalArgs, `["--cluster", "--exec-command=/tmp/evil"]`)}, wantErr: `"--cluster"`},
		{name: "malformed arguments", cli: PolicyAppend, env: PolicyIgnore,
			exts: []inventoryv1alpha1.NamedExtension{ext(ExtensionAdditionalArgs, `{"not": "a list"}`)}, wantErr: "list of strings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exec := base()
			// The operator names two flags and the variables of the first
			// rows; the attack rows' names are not among them.
			err := profileSourced(exec, &AccessProvider{Name: "kubelogin", CLIArgsPolicy: tc.cli, EnvVarsPolicy: tc.env,
				ArgFlags: []string{"--cluster", "--tenant"}, EnvVarNames: []string{"AZURE_ENV", "TENANT"}}, tc.exts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var envs []string
			for _, e := range exec.Env {
				envs = append(envs, e.Name+"="+e.Value)
			}
			if got := strings.Join(exec.Args, " "); got != tc.wantArgs {
				t.Errorf("args %q, want %q", got, tc.wantArgs)
			}
			if got := strings.Join(envs, " "); got != tc.wantEnvs {
				t.Errorf("env %q, want %q", got, tc.wantEnvs)
			}
		})
	}
}

// Upstream defines one condition, ControlPlaneHealthy, and consumers gate
// on it alone: a cluster whose manager never writes Joined still joins,
// unless the operator asks for both.
func TestProfileSaysServe(t *testing.T) {
	healthyOnly := &inventoryv1alpha1.ClusterProfile{Status: inventoryv1alpha1.ClusterProfileStatus{Conditions: []metav1.Condition{
		{Type: inventoryv1alpha1.ConditionControlPlaneHealthy, Status: metav1.ConditionTrue, Reason: "Healthy"}}}}
	if ok, why := ProfileSaysServe(healthyOnly, false); !ok {
		t.Errorf("healthy, no Joined: not served (%s)", why)
	}
	if ok, why := ProfileSaysServe(healthyOnly, true); ok || !strings.Contains(why, inventoryv1alpha1.ConditionJoined) {
		t.Errorf("healthy, no Joined, Joined required: %v %q", ok, why)
	}
	unhealthy := &inventoryv1alpha1.ClusterProfile{Status: inventoryv1alpha1.ClusterProfileStatus{Conditions: []metav1.Condition{
		{Type: inventoryv1alpha1.ConditionControlPlaneHealthy, Status: metav1.ConditionFalse, Reason: "Down"}}}}
	if ok, why := ProfileSaysServe(unhealthy, false); ok || !strings.Contains(why, "ControlPlaneHealthy=False") {
		t.Errorf("unhealthy: %v %q", ok, why)
	}
}

// A profile's properties are the member's as much as its own
// ClusterProperties: the controller is told once the member has joined
// (its properties were read before the inventory knew it) and whenever
// the profile's properties change, and not for changes that leave them.
func TestProfilePropertiesChangeIsTold(t *testing.T) {
	ctx := t.Context()
	b := newMemberAPI(t, "cluster-b")
	providers, err := ParseAccessProviders([]byte(testProviders))
	if err != nil {
		t.Fatal(err)
	}
	hub := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{inventoryv1alpha1.Resource: "ClusterProfileList"})
	sel, _ := labels.Parse(inventoryv1alpha1.LabelClusterManager + "=ocm")
	inv := New(Config{Hub: kubefake.NewSimpleClientset(), Profiles: hub, ProfileNamespace: "fleet", ProfileSelector: sel, AccessProviders: providers,
		ClusterIDTimeout: time.Second, SyncTimeout: time.Second, LeaveTimeout: time.Second, RecheckPeriod: time.Hour}, nil)
	r := &recorder{}
	go inv.Run(ctx, r)
	profiles := hub.Resource(inventoryv1alpha1.Resource).Namespace("fleet")
	region := func(v string) func(*inventoryv1alpha1.ClusterProfile) {
		return func(cp *inventoryv1alpha1.ClusterProfile) {
			cp.Status.Properties = []inventoryv1alpha1.Property{{Name: "region", Value: v}}
		}
	}
	if _, err := profiles.Create(ctx, profile("b", b, region("eu")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "join cluster-b as profile/fleet/b")
	waitTold := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for len(r.propsTold()) < n {
			if time.Now().After(deadline) {
				t.Fatalf("told %v, want %d times", r.propsTold(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitTold(1)
	// The controller writes its condition on the profile after the join,
	// from the object it read; a change made before that write would be
	// replaced by it here (the fake client keeps no resourceVersion).
	waitMemberCondition(t, profiles, "b", "cluster cluster-b is a member")
	update := func(u *unstructured.Unstructured) { t.Helper(); updateProfile(t, profiles, u) }
	update(profile("b", b, region("us")))
	waitTold(2)
	// A label change that leaves the properties: nothing to tell.
	same := profile("b", b, region("us"))
	same.SetLabels(map[string]string{inventoryv1alpha1.LabelClusterManager: "ocm", "team": "x"})
	update(same)
	time.Sleep(300 * time.Millisecond)
	if got := r.propsTold(); !slices.Equal(got, []string{"cluster-b", "cluster-b"}) {
		t.Errorf("told %v, want cluster-b twice (the join, the region)", got)
	}
	r.waitFor(t, "join cluster-b as profile/fleet/b")
}

// TestCheckClusterSet: a profile whose cluster is in another clusterset
// than the controller serves is refused, whether the profile's property
// or its namespace's label says so; nothing is refused where nobody
// names a clusterset.
func TestCheckClusterSet(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		property, namespace, served string
		refused                     bool
	}{
		{name: "nobody names one"},
		// Said by no one to be in it (the namespace's label missing, or
		// unreadable): an operator who names a clusterset admits only
		// profiles said to be in it.
		{name: "attack: the operator names one, the profile and its namespace none", served: "prod", refused: true},
		{name: "the profile's property is the operator's", property: "prod", served: "prod"},
		{name: "the profile's property is another", property: "staging", served: "prod", refused: true},
		{name: "the namespace's is the operator's", namespace: "prod", served: "prod"},
		{name: "the namespace's is another", namespace: "staging", served: "prod", refused: true},
		{name: "no operator's: the namespace's is served, the property agrees", property: "prod", namespace: "prod"},
		{name: "no operator's: the property disagrees with its namespace", property: "staging", namespace: "prod", refused: true},
		{name: "the property wins over its namespace's", property: "prod", namespace: "staging", served: "prod"},
		{name: "a property and no one else's", property: "staging"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkClusterSet(tc.property, tc.namespace, tc.served)
			if got := err != nil; got != tc.refused {
				t.Fatalf("refused = %v (%v), want %v", got, err, tc.refused)
			}
			if err != nil && !errors.Is(err, ErrOtherClusterSet) {
				t.Errorf("error %v is not ErrOtherClusterSet", err)
			}
		})
	}
}
