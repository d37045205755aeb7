package clusterset

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Leftovers lists the network namespaces whose name starts with prefix
// and a dash: what a clusterset with that prefix has (or left behind).
func Leftovers(prefix string) ([]string, error) {
	entries, err := os.ReadDir("/var/run/netns")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// CleanLeftovers removes what a crashed clusterset with prefix left: it
// kills the processes still in its network namespaces (normally none:
// they die with the harness), deletes the namespaces (which takes their
// veth pairs, bridge and nftables tables with them), the pods'
// /etc/netns entries and the host's unreachable routes.
func CleanLeftovers(prefix string) error {
	names, err := Leftovers(prefix)
	if err != nil {
		return err
	}
	var errs []error
	if err := cleanHostRoutes(prefix); err != nil {
		errs = append(errs, err)
	}
	for _, name := range names {
		if out, err := output("ip", "netns", "pids", name); err == nil {
			for _, field := range strings.Fields(out) {
				if pid, err := strconv.Atoi(field); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if out, err := output("ip", "netns", "del", name); err != nil {
			errs = append(errs, errors.New(strings.TrimSpace(out)))
		}
	}
	etc, _ := filepath.Glob(filepath.Join("/etc/netns", prefix+"-*"))
	for _, dir := range etc {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	// The fake kubelet created /etc/netns if it was missing; removing it
	// fails harmlessly while anything else uses it.
	_ = os.Remove("/etc/netns")
	return errors.Join(errs...)
}
