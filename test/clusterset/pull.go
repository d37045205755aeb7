package clusterset

import (
	"context"
	"fmt"
	"path/filepath"
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
// "Pull mode"): a hub (here the first cluster, a member doubling as hub,
// as on kind), the planner in it, and one member agent per cluster.
type PullMode struct {
	Hub     *Cluster
	Planner *process.Process
	Agents  map[string]*process.Process

	cs          *ClusterSet
	plannerArgs []string
	agentArgs   map[string][]string
}

// StartPullMode lays out pull mode's hub in the first cluster as its
// operator does (the hub CRDs, deploy/hub-pull, each member's part as
// kubectl mcs hub member prints it), then starts the planner with its
// hub identity (the members' pod ranges stated as the operator states
// them, plannerArgs added) and each cluster's agent with its own
// cluster's controller identity and its hub identity (agentArgs added).
func (cs *ClusterSet) StartPullMode(ctx context.Context, plannerArgs, agentArgs []string) (*PullMode, error) {
	hub := cs.Clusters[0]
	hubCRDs, err := crds.Hub()
	if err != nil {
		return nil, err
	}
	if err := crds.Install(ctx, apiextensionsclient.NewForConfigOrDie(hub.API.RESTConfig()), hubCRDs...); err != nil {
		return nil, fmt.Errorf("the hub's CRDs: %w", err)
	}
	path, err := repoFile("deploy", "hub-pull", "hub.yaml")
	if err != nil {
		return nil, err
	}
	objs, err := kindconfig.Objects(path, nil)
	if err != nil {
		return nil, err
	}
	for _, c := range cs.Clusters {
		part, err := pull.MemberObjects(c.Name, pull.DefaultMemberLimits)
		if err != nil {
			return nil, err
		}
		for _, o := range part {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
			if err != nil {
				return nil, err
			}
			objs = append(objs, &unstructured.Unstructured{Object: u})
		}
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(hub.API.Client().Discovery()))
	dyn, err := dynamic.NewForConfig(hub.API.RESTConfig())
	if err != nil {
		return nil, err
	}
	for _, obj := range objs {
		if err := kindconfig.Apply(ctx, dyn, mapper, obj, false); err != nil {
			return nil, fmt.Errorf("the hub: %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	cs.progress.done(hub.Name, "pull mode's hub laid out: deploy/hub-pull and every member's part")

	pm := &PullMode{Hub: hub, Agents: map[string]*process.Process{}, cs: cs, agentArgs: map[string][]string{}}
	plannerKubeconfig, err := hub.API.ImpersonatingKubeconfig("system:serviceaccount:mcs-system:mcs-planner", []string{"system:serviceaccounts", "system:serviceaccounts:mcs-system"})
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
		hubKubeconfig, err := hub.API.ImpersonatingKubeconfig(fmt.Sprintf("system:serviceaccount:%s:%s", c.Name, pull.AgentServiceAccount), []string{"system:serviceaccounts", "system:serviceaccounts:" + c.Name})
		if err != nil {
			return nil, err
		}
		memberKubeconfig, err := c.API.ImpersonatingKubeconfig(ControllerUser, []string{"system:authenticated"})
		if err != nil {
			return nil, err
		}
		pm.agentArgs[c.Name] = append([]string{"member-agent", "--kubeconfig=" + memberKubeconfig, "--hub-kubeconfig=" + hubKubeconfig, "--leader-elect=false"}, agentArgs...)
		if err := pm.StartAgent(c.Name); err != nil {
			return nil, err
		}
	}
	return pm, nil
}

// StartPlanner starts the planner (again).
func (pm *PullMode) StartPlanner() error {
	p, err := pm.start("mcs-planner", pm.plannerArgs)
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

// Stop stops the planner and every agent.
func (pm *PullMode) Stop() {
	for _, p := range pm.Agents {
		p.Stop(5 * time.Second)
	}
	if pm.Planner != nil {
		pm.Planner.Stop(5 * time.Second)
	}
}
