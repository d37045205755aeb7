package clusterset

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/multiclusterservices/crds"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/kindconfig"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/process"
)

// PullMode is the clusterset run in pull mode (docs/architecture.md,
// "Pull mode"): a hub (here the last cluster, a member doubling as hub,
// as on kind; the first is the exporter whose apiserver the outage case
// stops), the planner in it, and one member agent per cluster.
type PullMode struct {
	Hub     *Cluster
	Planner *process.Process
	Agents  map[string]*process.Process

	cs          *ClusterSet
	plannerArgs []string
	agentArgs   map[string][]string
}

// StartPullMode lays out pull mode's hub in the last cluster as its
// operator does (the hub CRDs, deploy/hub-pull, each member's part as
// kubectl mcs hub member prints it), then starts the planner with its
// hub identity (the members' pod ranges stated as the operator states
// them, plannerArgs added) and each cluster's agent with its own
// cluster's controller identity and its hub identity (agentArgs added, and
// agentArgsOf[cluster name]: a derived member's --derived).
func (cs *ClusterSet) StartPullMode(ctx context.Context, plannerArgs, agentArgs []string, agentArgsOf map[string][]string) (*PullMode, error) {
	hub := cs.Clusters[len(cs.Clusters)-1]
	var ids []string
	for _, c := range cs.Clusters {
		ids = append(ids, c.Name)
	}
	if err := LayOutPullHub(ctx, hub.API, ids); err != nil {
		return nil, err
	}
	cs.progress.done(hub.Name, "pull mode's hub laid out: deploy/hub-pull and every member's part")

	pm := &PullMode{Hub: hub, Agents: map[string]*process.Process{}, cs: cs, agentArgs: map[string][]string{}}
	plannerKubeconfig, err := hub.API.ImpersonatingKubeconfig(PlannerIdentity())
	if err != nil {
		return nil, err
	}
	var cidrs []string
	for _, c := range cs.Clusters {
		cidrs = append(cidrs, c.Name+"="+strings.Join(c.PodCIDRs, ","))
	}
	pm.plannerArgs = append([]string{"planner", "--kubeconfig=" + plannerKubeconfig, "--leader-elect=false", "--member-pod-cidrs=" + strings.Join(cidrs, ";"),
		"--metrics-bind-address=0", "--healthz-bind-address=0", "--secure-port=0"}, plannerArgs...)
	if err := pm.StartPlanner(); err != nil {
		return nil, err
	}
	for _, c := range cs.Clusters {
		hubKubeconfig, err := hub.API.ImpersonatingKubeconfig(AgentIdentity(c.Name))
		if err != nil {
			return nil, err
		}
		memberKubeconfig, err := c.API.ImpersonatingKubeconfig(ControllerUser, []string{"system:authenticated"})
		if err != nil {
			return nil, err
		}
		pm.agentArgs[c.Name] = append([]string{"member-agent", "--kubeconfig=" + memberKubeconfig, "--hub-kubeconfig=" + hubKubeconfig, "--leader-elect=false",
			"--metrics-bind-address=0", "--healthz-bind-address=0", "--secure-port=0"}, agentArgs...)
		pm.agentArgs[c.Name] = append(pm.agentArgs[c.Name], agentArgsOf[c.Name]...)
		if err := pm.StartAgent(c.Name); err != nil {
			return nil, err
		}
	}
	return pm, nil
}

// StartPlanner starts the planner (again), with extra flags beside
// StartPullMode's, as an operator changing its configuration would.
func (pm *PullMode) StartPlanner(extra ...string) error {
	p, err := pm.start("mcs-planner", append(slices.Clone(pm.plannerArgs), extra...))
	if err == nil {
		pm.Planner = p
	}
	return err
}

// StartAgent starts cluster id's agent (again).
func (pm *PullMode) StartAgent(id string) error {
	p, err := pm.start("mcs-member-agent-"+id, pm.agentArgs[id])
	if err == nil {
		pm.Agents[id] = p
	}
	return err
}

func (pm *PullMode) start(name string, args []string) (*process.Process, error) {
	binary, err := framework.Binary("mcs-controller")
	if err != nil {
		return nil, err
	}
	return process.Start(process.Options{
		Name: name,
		Argv: append([]string{binary, args[0], "--v=2"}, args[1:]...),
		Log:  filepath.Join(pm.cs.Dir(), name+".log"),
	})
}

// StopPlanner stops the planner.
func (pm *PullMode) StopPlanner() {
	if pm.Planner != nil {
		pm.Planner.Stop(5 * time.Second)
		pm.Planner = nil
	}
}

// Stop stops the planner and every agent.
func (pm *PullMode) Stop() {
	for _, p := range pm.Agents {
		p.Stop(5 * time.Second)
	}
	if pm.Planner != nil {
		pm.Planner.Stop(5 * time.Second)
	}
}

// LayOutPullHub lays out pull mode's hub in hub as its operator does: the
// hub CRDs, deploy/hub-pull, and each member's part as kubectl mcs hub
// member prints it.
func LayOutPullHub(ctx context.Context, hub *framework.Cluster, members []string) error {
	hubCRDs, err := crds.Hub()
	if err != nil {
		return err
	}
	if err := crds.Install(ctx, apiextensionsclient.NewForConfigOrDie(hub.RESTConfig()), hubCRDs...); err != nil {
		return fmt.Errorf("the hub's CRDs: %w", err)
	}
	path, err := repoFile("deploy", "hub-pull", "hub.yaml")
	if err != nil {
		return err
	}
	objs, err := kindconfig.Objects(path, nil)
	if err != nil {
		return err
	}
	for _, id := range members {
		part, err := pull.MemberObjects(id, pull.DefaultMemberLimits)
		if err != nil {
			return err
		}
		for _, o := range part {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
			if err != nil {
				return err
			}
			objs = append(objs, &unstructured.Unstructured{Object: u})
		}
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(hub.Client().Discovery()))
	dyn, err := dynamic.NewForConfig(hub.RESTConfig())
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := kindconfig.Apply(ctx, dyn, mapper, obj, false); err != nil {
			return fmt.Errorf("the hub: %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// PlannerIdentity is the hub user deploy/hub-pull gives the planner (its
// ServiceAccount) and that user's groups.
func PlannerIdentity() (string, []string) {
	return "system:serviceaccount:mcs-system:mcs-planner", []string{"system:serviceaccounts", "system:serviceaccounts:mcs-system"}
}

// AgentIdentity is the hub user a member's part gives member id's agent
// (a ServiceAccount of its namespace) and that user's groups.
func AgentIdentity(id string) (string, []string) {
	return fmt.Sprintf("system:serviceaccount:%s:%s", id, pull.AgentServiceAccount), []string{"system:serviceaccounts", "system:serviceaccounts:" + id}
}
