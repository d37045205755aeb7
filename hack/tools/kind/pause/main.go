// Command pause is the sandbox process of the kind node image's pods: it
// holds a pod's namespaces open and does nothing else until it is told to
// stop. The node image tags it as the pause image kubeadm and containerd
// name, since no registry can provide theirs here. As PID 1 of its
// sandbox it also reaps the zombies of processes that share its PID
// namespace (shareProcessNamespace).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// -v answers without blocking: hack/kind-docker.sh runs it to learn
	// whether a privileged container starts at all.
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (mcs-kube-proxy kind node image)")
		return
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
