package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultControllers are the kube-controller-manager controllers a cluster
// without kubelets needs for Services to get EndpointSlices, for namespaces
// and owned objects to be deleted, and for namespaces to get their default
// ServiceAccount (which Pod admission requires).
var DefaultControllers = []string{
	"endpointslice",
	"endpointslicemirroring",
	"garbagecollector",
	"namespace",
	"serviceaccount",
}

// ControllerManagerOptions configures StartControllerManager.
type ControllerManagerOptions struct {
	// Controllers is --controllers (default DefaultControllers).
	Controllers []string
	// ExtraArgs are appended to kube-controller-manager's flags.
	ExtraArgs []string
	// StartTimeout bounds start-up (default 2m).
	StartTimeout time.Duration
}

// ControllerManager is a running kube-controller-manager.
type ControllerManager struct {
	proc *childProcess
}

// StartControllerManager runs kube-controller-manager against c as
// production runs it (ControllerManagerUser, each controller with its own
// service account), without leader election or a serving port, logging to
// <c.Dir()>/kube-controller-manager.log.
//
// With the serviceaccount controller it returns once the "default"
// ServiceAccount of the "default" namespace exists, which shows that the
// controllers run; otherwise once the process has stayed up for a second.
func StartControllerManager(ctx context.Context, c *Cluster, opts ControllerManagerOptions) (*ControllerManager, error) {
	binary, err := Binary("kube-controller-manager")
	if err != nil {
		return nil, err
	}
	if len(opts.Controllers) == 0 {
		opts.Controllers = DefaultControllers
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = defaultStartTimeout
	}
	kubeconfig, err := c.KubeconfigFor(ControllerManagerUser)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--use-service-account-credentials=true",
		"--controllers=" + strings.Join(opts.Controllers, ","),
		"--leader-elect=false",
		// No kubelet or kubectl talks to it; a port would only be one
		// more thing to allocate.
		"--secure-port=0",
		// Used by the serviceaccount-token controller if it is enabled.
		"--service-account-private-key-file=" + c.ServiceAccountKeyFile(),
	}
	args = append(args, opts.ExtraArgs...)
	proc, err := startProcess("kube-controller-manager", binary, args, filepath.Join(c.Dir(), "kube-controller-manager.log"))
	if err != nil {
		return nil, err
	}

	started := time.Now()
	probe := func(ctx context.Context) error {
		if !slices.Contains(opts.Controllers, "serviceaccount") {
			if time.Since(started) < time.Second {
				return fmt.Errorf("running for %v only", time.Since(started))
			}
			return nil
		}
		_, err := c.Client().CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	}
	if err := proc.waitReady(ctx, opts.StartTimeout, probe); err != nil {
		proc.Stop()
		return nil, fmt.Errorf("cluster %s: %w", c.Name(), err)
	}
	return &ControllerManager{proc: proc}, nil
}

// LogFile returns the path of kube-controller-manager's log.
func (m *ControllerManager) LogFile() string { return m.proc.logPath }

// Stop terminates kube-controller-manager and waits for it to exit. It is
// safe to call more than once.
func (m *ControllerManager) Stop() { m.proc.Stop() }
