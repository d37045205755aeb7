// Command runc-capfilter is an OCI runtime for dockerd on hosts whose
// capability bounding set lacks CAP_SYS_RESOURCE (some VMs): there runc
// refuses every privileged container ("unable to apply caps: operation not
// permitted"), because dockerd asks for every capability it knows rather
// than those the host can grant. It removes CAP_SYS_RESOURCE from the
// container's process (the bundle's config.json, or the --process file of
// an exec) and then runs the real runc with the same arguments, so kind's
// privileged node containers start. hack/kind-docker.sh installs it as
// dockerd's default runtime only when a privileged test container fails
// that way.
//
// The first argument names the real runtime (dockerd passes it through
// the runtime's runtimeArgs): --runtime=/usr/sbin/runc.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

const dropped = "CAP_SYS_RESOURCE"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "runc-capfilter: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	runtime, ok := strings.CutPrefix(firstOr(args, ""), "--runtime=")
	if !ok || runtime == "" {
		return fmt.Errorf("the first argument must be --runtime=PATH of the real runc")
	}
	args = args[1:]
	if file := specFile(args); file != "" {
		if err := filterFile(file); err != nil {
			return err
		}
	}
	return syscall.Exec(runtime, append([]string{runtime}, args...), os.Environ())
}

func firstOr(args []string, def string) string {
	if len(args) == 0 {
		return def
	}
	return args[0]
}

// specFile is the file holding the process the command starts: the
// bundle's config.json for create and run (the bundle defaults to the
// working directory), the --process file for exec; "" for any other
// command, which starts no process.
func specFile(args []string) string {
	command, rest := commandOf(args)
	switch command {
	case "create", "run":
		bundle := optionValue(rest, "bundle", "b")
		if bundle == "" {
			bundle = "."
		}
		return filepath.Join(bundle, "config.json")
	case "exec":
		return optionValue(rest, "process", "p")
	}
	return ""
}

// globalsWithValue are runc's global options that take a separate value.
var globalsWithValue = map[string]bool{"--root": true, "--log": true, "--log-format": true, "--criu": true, "--rootless": true}

// commandOf skips runc's global options: the command, then its arguments.
func commandOf(args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return a, args[i+1:]
		}
		if globalsWithValue[a] {
			i++
		}
	}
	return "", nil
}

// optionValue reads --long VALUE, --long=VALUE, -short VALUE.
func optionValue(args []string, long, short string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+long+"="); ok {
			return v
		}
		if (a == "--"+long || a == "-"+short) && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// filterFile removes the capability from every set of the process in
// file, leaving every other byte's meaning alone (numbers stay exact).
func filterFile(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	// config.json holds the process under "process"; an exec's file is
	// the process itself.
	process := doc
	if p, ok := doc["process"].(map[string]any); ok {
		process = p
	}
	caps, ok := process["capabilities"].(map[string]any)
	if !ok || !removeCapability(caps) {
		return nil
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	info, err := os.Stat(file)
	if err != nil {
		return err
	}
	return os.WriteFile(file, out, info.Mode().Perm())
}

// removeCapability drops it from each set; whether any held it.
func removeCapability(caps map[string]any) bool {
	changed := false
	for set, v := range caps {
		list, ok := v.([]any)
		if !ok {
			continue
		}
		kept := list[:0:0]
		for _, c := range list {
			if c == dropped {
				changed = true
				continue
			}
			kept = append(kept, c)
		}
		caps[set] = kept
	}
	return changed
}
