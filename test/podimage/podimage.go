// Package podimage is the fake kubelet's stand-in for container images:
// with no container runtime, a pod's container runs as a re-execution of
// the harness binary itself, inside the pod's network namespace, and this
// package decides from the image name and arguments what that process does.
//
// Images it understands (matched by substring of the image name):
//
//   - "agnhost" (registry.k8s.io/e2e-test-images/agnhost), with the
//     subcommand as the first argument:
//     netexec [--http-port=8080] [--udp-port=N]
//     HTTP: /hostname (the pod name), /echo?msg=, /clientip, /healthz,
//     /exit?code=N, / (the time); UDP: "hostname", "echo <msg>".
//     serve-hostname [--port=9376] [--http=true] [--tcp] [--udp]
//     answers every HTTP request, TCP connection or UDP datagram with the
//     pod name.
//     pause, or any other subcommand: idle.
//   - "echoserver" (this project's test/echoserver), args [--port=8080]:
//     writes the pod name to every TCP connection and answers every UDP
//     datagram with it.
//   - anything else with a command or args (busybox, debian, a debug
//     image): the command, run with the host's binaries, as `kubectl exec`
//     runs commands in any pod (so `sh -c "..."` pods and Jobs work). A
//     command at an absolute path the host lacks is the image's own file
//     (/kubectl-mcs of the mcs-controller's image): its base name on the
//     PATH, where the fake kubelet puts the build's binaries first.
//   - anything else without one, including "pause": an idle process, so
//     that the pod still becomes Running with an IP (a client pod to run
//     commands in).
//
// Answers carry the pod name (from POD_NAME), as agnhost's do in a real
// pod, where the hostname is the pod name.
//
// A binary becomes able to serve as a pod process simply by importing this
// package: its init function takes over when the environment variable
// ImageEnv is set, runs the image until SIGTERM and exits.
package podimage

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

const (
	// ImageEnv carries the image name; its presence makes the process a
	// pod process.
	ImageEnv = "MCS_FAKEKUBELET_IMAGE"
	// ArgsEnv carries the container's command followed by its args, as a
	// JSON list.
	ArgsEnv = "MCS_FAKEKUBELET_ARGS"
	// PodNameEnv is the pod's name, the answer of the servers.
	PodNameEnv = "POD_NAME"
)

func init() {
	image, ok := os.LookupEnv(ImageEnv)
	if !ok {
		return
	}
	var args []string
	if raw := os.Getenv(ArgsEnv); raw != "" {
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			fmt.Fprintf(os.Stderr, "podimage: bad %s: %v\n", ArgsEnv, err)
			os.Exit(2)
		}
	}
	if raw := os.Getenv(MountsEnv); raw != "" {
		if err := mountVolumes(raw); err != nil {
			fmt.Fprintf(os.Stderr, "podimage: %v\n", err)
			os.Exit(2)
		}
	}
	if !emulated(image) && len(args) > 0 {
		execHost(args)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := Run(ctx, image, args, os.Getenv(PodNameEnv))
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "podimage %s: %v\n", image, err)
		if code, ok := err.(exitError); ok {
			os.Exit(int(code))
		}
		os.Exit(1)
	}
	os.Exit(0)
}

// exitError is returned by a server asked to exit with a given code.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit code %d requested", int(e)) }

// Env returns the environment that makes a re-executed harness binary run
// image with args (the container's command followed by its args).
func Env(image string, args []string) ([]string, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	return []string{ImageEnv + "=" + image, ArgsEnv + "=" + string(raw)}, nil
}

// emulated reports whether this package plays image itself.
func emulated(image string) bool {
	return strings.Contains(image, "agnhost") || strings.Contains(image, "echoserver")
}

// execHost replaces this process with the container's command, found on
// the host's PATH, in an environment without this package's variables. A
// command that cannot run exits 127, as a shell's does.
func execHost(argv []string) {
	path, err := exec.LookPath(argv[0])
	if _, statErr := os.Stat(argv[0]); filepath.IsAbs(argv[0]) && statErr != nil {
		path, err = exec.LookPath(filepath.Base(argv[0]))
	}
	if err == nil {
		env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, ImageEnv+"=") || strings.HasPrefix(kv, ArgsEnv+"=") || strings.HasPrefix(kv, MountsEnv+"=")
		})
		err = syscall.Exec(path, argv, env)
	}
	fmt.Fprintf(os.Stderr, "podimage: %v\n", err)
	os.Exit(127)
}

// Run runs image with args until ctx is done. name is the pod name the
// servers answer with.
func Run(ctx context.Context, image string, args []string, name string) error {
	fmt.Printf("podimage: pod %s runs %s %s\n", name, image, strings.Join(args, " "))
	switch {
	case strings.Contains(image, "agnhost"):
		return runAgnhost(ctx, args, name)
	case strings.Contains(image, "echoserver"):
		return runEcho(ctx, args, name)
	default:
		return idle(ctx)
	}
}

// idle waits like the pause container.
func idle(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
