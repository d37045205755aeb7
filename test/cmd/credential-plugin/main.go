// Command credential-plugin is an exec credential plugin (KEP-541) for the
// local clusterset's Cluster Inventory (KEP-5339): given the cluster it is
// asked for (KUBERNETES_EXEC_INFO's spec.cluster.server, with
// provideClusterInfo), it hands out the token its operator's file gives for
// that server, with an expiry when CREDENTIAL_PLUGIN_TTL is set, so that
// client-go runs it again. The file (CREDENTIAL_PLUGIN_TOKENS) is a JSON
// object of server URL to token.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "credential-plugin:", err)
		os.Exit(1)
	}
}

func run() error {
	var info struct {
		Spec struct {
			Cluster struct {
				Server string `json:"server"`
			} `json:"cluster"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(os.Getenv("KUBERNETES_EXEC_INFO")), &info); err != nil || info.Spec.Cluster.Server == "" {
		return fmt.Errorf("no cluster in KUBERNETES_EXEC_INFO (set provideClusterInfo): %v", err)
	}
	data, err := os.ReadFile(os.Getenv("CREDENTIAL_PLUGIN_TOKENS"))
	if err != nil {
		return err
	}
	var tokens map[string]string
	if err := json.Unmarshal(data, &tokens); err != nil {
		return fmt.Errorf("%s: %w", os.Getenv("CREDENTIAL_PLUGIN_TOKENS"), err)
	}
	token, ok := tokens[info.Spec.Cluster.Server]
	if !ok {
		return fmt.Errorf("no token for %s", info.Spec.Cluster.Server)
	}
	status := map[string]any{"token": token}
	if ttl := os.Getenv("CREDENTIAL_PLUGIN_TTL"); ttl != "" {
		d, err := time.ParseDuration(ttl)
		if err != nil {
			return fmt.Errorf("CREDENTIAL_PLUGIN_TTL: %w", err)
		}
		status["expirationTimestamp"] = time.Now().Add(d).UTC().Format(time.RFC3339)
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status,
	})
}
