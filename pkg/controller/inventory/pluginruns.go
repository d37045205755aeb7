package inventory

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
)

// client-go runs a credential plugin itself (KEP-541) and reports each run
// through process-wide hooks that do not say which plugin ran (see
// pluginmetrics.go). KEP-5339 asks for counts and latency per plugin, so
// each access provider's plugin is run through this binary: client-go
// runs the controller's own executable with the plugin's arguments and
// environment, and that process (RunCredentialPlugin) runs the plugin
// with stdin, stdout and stderr passed through, then reports the access
// provider, how the run went and how long it took over a socket the
// controller listens on (PluginRuns). client-go's caching, refresh and
// errors are unchanged; the plugin sees the arguments, environment and
// KUBERNETES_EXEC_INFO client-go gives it, without the variables below.
const (
	// envPluginCommand is the plugin's own command; its presence makes
	// the executable run as the plugin's runner (cmd/mcs-controller).
	envPluginCommand = "MCS_CONTROLLER_CREDENTIAL_PLUGIN"
	// envPluginProvider names the access provider the plugin serves.
	envPluginProvider = "MCS_CONTROLLER_CREDENTIAL_PLUGIN_PROVIDER"
	// envPluginReport is the abstract Unix socket the run is reported on.
	envPluginReport = "MCS_CONTROLLER_CREDENTIAL_PLUGIN_REPORT"
)

// isRunnerVariable says whether name is one of the runner's variables: a
// profile may never set one (it would choose the command the controller
// runs).
func isRunnerVariable(name string) bool {
	return strings.HasPrefix(name, envPluginCommand)
}

// The results of a plugin run, as the runner reports them.
const (
	runSucceeded = "success"
	// runFailed: the plugin ran and exited with a non-zero code.
	runFailed = "failed"
	// runNotFound: the plugin's command does not exist.
	runNotFound = "not_found"
	// runNotStarted: the command exists but could not be started.
	runNotStarted = "start_error"
)

var (
	providerRuns = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "mcs_controller_access_provider_plugin_runs_total",
		Help: "Runs of the credential plugin of each access provider of --inventory-access-providers (KEP-5339), " +
			"by result: success, failed (a non-zero exit), not_found, start_error.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider", "result"})
	providerDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Name:           "mcs_controller_access_provider_plugin_duration_seconds",
		Help:           "How long the credential plugin of each access provider ran, from its start to its exit, failed runs included.",
		Buckets:        []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider"})
)

// pluginReport is what the runner sends once the plugin has exited.
type pluginReport struct {
	Provider string  `json:"provider"`
	Result   string  `json:"result"`
	ExitCode int     `json:"exitCode"`
	Seconds  float64 `json:"seconds"`
}

// PluginRuns counts the runs of the access providers' plugins, each run
// through the controller's executable.
type PluginRuns struct {
	self      string
	address   string
	listener  net.Listener
	providers []string
}

// ListenPluginRuns listens for the reports of the plugin runs of
// providers, run through self (the controller's executable), until ctx
// ends. The socket is abstract (no file: the controller's root file
// system may be read-only), named at random and reachable only from the
// controller's network namespace; a report naming a provider that is not
// one of providers is dropped.
func ListenPluginRuns(ctx context.Context, self string, providers AccessProviders) (*PluginRuns, error) {
	random := make([]byte, 8)
	if _, err := rand.Read(random); err != nil {
		return nil, err
	}
	address := fmt.Sprintf("@mcs-controller-plugin-runs-%d-%s", os.Getpid(), hex.EncodeToString(random))
	ln, err := net.Listen("unix", address)
	if err != nil {
		return nil, fmt.Errorf("listening for credential plugin runs on %s: %w", address, err)
	}
	r := &PluginRuns{self: self, address: address, listener: ln}
	for _, p := range providers {
		r.providers = append(r.providers, p.Name)
		// Every provider's series exist from the start, at zero.
		providerRuns.WithLabelValues(p.Name, runSucceeded)
		providerRuns.WithLabelValues(p.Name, runFailed)
	}
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	go r.serve()
	return r, nil
}

func (r *PluginRuns) serve() {
	for {
		conn, err := r.listener.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				klog.ErrorS(err, "Credential plugin runs: accepting a report")
			}
			return
		}
		go r.read(conn)
	}
}

func (r *PluginRuns) read(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		klog.V(2).InfoS("Credential plugin runs: an unreadable report", "err", err)
		return
	}
	var rep pluginReport
	switch err := json.Unmarshal(line, &rep); {
	case err != nil:
		klog.V(2).InfoS("Credential plugin runs: an unreadable report", "err", err)
	case !slices.Contains(r.providers, rep.Provider):
		klog.V(2).InfoS("Credential plugin runs: a report for no configured access provider, dropped", "provider", rep.Provider)
	case !slices.Contains([]string{runSucceeded, runFailed, runNotFound, runNotStarted}, rep.Result):
		klog.V(2).InfoS("Credential plugin runs: a report of an unknown result, dropped", "result", rep.Result)
	default:
		providerRuns.WithLabelValues(rep.Provider, rep.Result).Inc()
		if rep.Result == runSucceeded || rep.Result == runFailed {
			providerDuration.WithLabelValues(rep.Provider).Observe(rep.Seconds)
		}
	}
}

// Through returns providers with each plugin run through the controller's
// executable, reporting to r.
func (r *PluginRuns) Through(providers AccessProviders) AccessProviders {
	out := make(AccessProviders, 0, len(providers))
	for _, p := range providers {
		exec := p.Exec.DeepCopy()
		exec.Command = r.self
		exec.Env = append(slices.DeleteFunc(slices.Clone(p.Exec.Env), func(e clientcmdapi.ExecEnvVar) bool { return isRunnerVariable(e.Name) }),
			clientcmdapi.ExecEnvVar{Name: envPluginCommand, Value: p.Exec.Command},
			clientcmdapi.ExecEnvVar{Name: envPluginProvider, Value: p.Name},
			clientcmdapi.ExecEnvVar{Name: envPluginReport, Value: r.address})
		p.Exec = exec
		out = append(out, p)
	}
	return out
}

// RunsCredentialPlugin says whether this process was started by client-go
// to run an access provider's credential plugin (see PluginRuns).
func RunsCredentialPlugin() bool {
	return os.Getenv(envPluginCommand) != ""
}

// RunCredentialPlugin runs the plugin named by the runner's variables with
// this process's arguments, standard streams and environment (less those
// variables), reports the run, and returns the exit code to leave with:
// the plugin's own, 127 for a command that does not exist, 126 for one
// that cannot be started, as a shell does.
func RunCredentialPlugin() int {
	command, provider, report := os.Getenv(envPluginCommand), os.Getenv(envPluginProvider), os.Getenv(envPluginReport)
	cmd := exec.Command(command, os.Args[1:]...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return isRunnerVariable(name)
	})
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	err := cmd.Run()
	rep := pluginReport{Provider: provider, Seconds: time.Since(start).Seconds()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		rep.Result = runSucceeded
	case errors.As(err, &exitErr):
		rep.Result, rep.ExitCode = runFailed, exitErr.ExitCode()
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist):
		rep.Result, rep.ExitCode = runNotFound, 127
		fmt.Fprintf(os.Stderr, "credential plugin of access provider %q: %v\n", provider, err)
	default:
		rep.Result, rep.ExitCode = runNotStarted, 126
		fmt.Fprintf(os.Stderr, "credential plugin of access provider %q: %v\n", provider, err)
	}
	if err := send(report, rep); err != nil {
		// The credentials matter more than the count.
		fmt.Fprintf(os.Stderr, "credential plugin of access provider %q: the run was not counted: %v\n", provider, err)
	}
	return rep.ExitCode
}

func send(address string, rep pluginReport) error {
	conn, err := net.DialTimeout("unix", address, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
	line, _ := json.Marshal(rep)
	_, err = conn.Write(append(line, '\n'))
	return err
}
