package demo

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/echoserver"
)

// Ask sends count requests to target and writes one line per request: the
// answer (a pod name, from agnhost's /hostname or an echoserver) or
// "error: ...". target is an http:// URL or a host:port speaking
// test/echoserver's protocol. Run inside a pod's network namespace
// (`clusterset exec ... -- clusterset ask ...`), names resolve through the
// pod's cluster DNS.
func Ask(w io.Writer, target string, count int, timeout time.Duration) {
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	for range count {
		answer, err := askOnce(client, target, timeout)
		if err != nil {
			fmt.Fprintf(w, "error: %v\n", err)
			continue
		}
		fmt.Fprintln(w, answer)
	}
}

func askOnce(client *http.Client, target string, timeout time.Duration) (string, error) {
	if !strings.HasPrefix(target, "http://") {
		return echoserver.Ask("tcp", target, timeout)
	}
	resp, err := client.Get(target)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s", resp.Status)
	}
	return strings.TrimSpace(string(body)), nil
}
