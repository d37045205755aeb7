// Package framework starts real Kubernetes control planes (etcd,
// kube-apiserver and optionally kube-controller-manager) as child processes,
// for integration tests and for the local clusterset harness.
//
// The binaries come from hack/build-tools.sh, which builds the versions pinned
// in hack/tools/go.mod into _output/bin. One etcd can serve many clusters:
// every cluster stores its objects under its own etcd prefix (/<name>).
//
// Every process writes its output to <dir>/<component>.log, is killed with
// SIGKILL if the process that started it dies, and is stopped (and waited
// for) by Stop. The context passed to the Start functions bounds start-up
// only; it does not stop a running process.
package framework
