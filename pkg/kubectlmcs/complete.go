package kubectlmcs

import (
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// CompletionCommandName is the name under which kubectl (1.26 and later)
// runs a plugin to complete `kubectl mcs <TAB>`: an executable
// kubectl_complete-mcs on the PATH, given the words typed after `mcs`.
// kubectl-mcs installed (or linked) under that name answers with cobra's
// completion protocol, as `kubectl-mcs __complete` does.
const CompletionCommandName = "kubectl_complete-mcs"

// Args are the arguments the root command runs with when the executable
// was started as argv0 with args: the completion request when it runs as
// CompletionCommandName.
func Args(argv0 string, args []string) []string {
	if strings.TrimSuffix(filepath.Base(argv0), ".exe") == CompletionCommandName {
		return append([]string{cobra.ShellCompRequestCmd}, args...)
	}
	return args
}
