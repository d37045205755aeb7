// Package kubectlmcs is the kubectl plugin kubectl-mcs: one view of every
// member of a clusterset (status, get exports|imports) and a walk along
// the path from an export to a client (diagnose service), read through
// each member's API with client-go, as kubectl reads one cluster.
//
// Reading and deciding are apart: gather.go reads the members into plain
// structs, checks.go and status.go turn them into checklist lines and
// table rows without any client, so that every verdict is table-tested.
package kubectlmcs
