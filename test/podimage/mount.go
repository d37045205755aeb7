package podimage

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// MountsEnv carries the container's volume mounts, as a JSON list of Mount.
const MountsEnv = "MCS_FAKEKUBELET_MOUNTS"

// Mount is a volume of the pod (a directory the fake kubelet wrote) seen
// by the container at Target.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// MountEnv is the environment entry that makes a pod process mount mounts.
func MountEnv(mounts []Mount) (string, error) {
	raw, err := json.Marshal(mounts)
	return MountsEnv + "=" + string(raw), err
}

// mountVolumes bind-mounts each volume at its target. A pod process runs in
// a mount namespace of its own (`ip netns exec` makes one, with the host's
// mounts as slaves), so nothing here reaches the host. A target the host
// does not have is made on a tmpfs mounted over its deepest existing
// ancestor (the container's own /run, say, for
// /var/run/secrets/kubernetes.io/serviceaccount), never in the host's file
// system; a target whose only existing ancestor is / is refused.
func mountVolumes(raw string) error {
	var mounts []Mount
	if err := json.Unmarshal([]byte(raw), &mounts); err != nil {
		return fmt.Errorf("bad %s: %w", MountsEnv, err)
	}
	var scratch []string // tmpfs mounts made here
	onScratch := func(dir string) bool {
		for _, s := range scratch {
			if dir == s || strings.HasPrefix(dir, s+"/") {
				return true
			}
		}
		return false
	}
	for _, m := range mounts {
		target, err := resolve(m.Target)
		if err != nil {
			return err
		}
		if _, err := os.Stat(target); os.IsNotExist(err) {
			ancestor := filepath.Dir(target)
			for {
				if _, err := os.Stat(ancestor); err == nil {
					break
				}
				ancestor = filepath.Dir(ancestor)
			}
			if !onScratch(ancestor) {
				if ancestor == "/" {
					return fmt.Errorf("volume mount %s: the host has no such directory and none above it but /", m.Target)
				}
				if err := unix.Mount("tmpfs", ancestor, "tmpfs", 0, "mode=0755"); err != nil {
					return fmt.Errorf("volume mount %s: a tmpfs on %s: %w", m.Target, ancestor, err)
				}
				scratch = append(scratch, ancestor)
			}
			if err := os.MkdirAll(target, 0o755); err != nil {
				return fmt.Errorf("volume mount %s: %w", m.Target, err)
			}
		}
		if err := unix.Mount(m.Source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("volume mount %s: %w", m.Target, err)
		}
		if m.ReadOnly {
			if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				return fmt.Errorf("volume mount %s read-only: %w", m.Target, err)
			}
		}
	}
	return nil
}

// resolve follows the symbolic links of the existing part of path
// (/var/run is /run on most hosts), so that mounts land where lookups go.
func resolve(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("volume mount %q: not an absolute path", path)
	}
	existing, rest := filepath.Clean(path), ""
	for {
		if resolved, err := filepath.EvalSymlinks(existing); err == nil {
			return filepath.Join(resolved, rest), nil
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = filepath.Dir(existing)
	}
}
