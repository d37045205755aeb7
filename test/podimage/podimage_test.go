package podimage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/echoserver"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start runs image in the background; the channel is closed when it
// returns, and *result holds what it returned.
func start(t *testing.T, image string, args ...string) (context.CancelFunc, <-chan struct{}, *error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var result error
	go func() { result = Run(ctx, image, args, "pod-1"); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return cancel, done, &result
}

func get(t *testing.T, url string) string {
	t.Helper()
	var last error
	for range 50 {
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return string(body)
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("GET %s: %v", url, last)
	return ""
}

func TestAgnhostNetexecAnswersWithThePodName(t *testing.T) {
	port := freePort(t)
	_, done, result := start(t, "registry.k8s.io/e2e-test-images/agnhost:2.53", "netexec", fmt.Sprintf("--http-port=%d", port))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	if got := get(t, base+"/hostname"); got != "pod-1" {
		t.Errorf("/hostname = %q", got)
	}
	if got := get(t, base+"/echo?msg=hi"); got != "hi" {
		t.Errorf("/echo = %q", got)
	}
	get(t, base+"/exit?code=3")
	select {
	case <-done:
		var code exitError
		if !errors.As(*result, &code) || code != 3 {
			t.Errorf("exit: %v, want exit code 3", *result)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("netexec did not exit on /exit")
	}
}

func TestAgnhostServeHostnameWithTheBinaryInTheCommand(t *testing.T) {
	port := freePort(t)
	_, _, _ = start(t, "agnhost", "/agnhost", "serve-hostname", fmt.Sprintf("--port=%d", port))
	if got := get(t, fmt.Sprintf("http://127.0.0.1:%d/anything", port)); got != "pod-1" {
		t.Errorf("got %q", got)
	}
}

func TestEchoserverImage(t *testing.T) {
	port := freePort(t)
	_, _, _ = start(t, "mcs-kube-proxy/echoserver:latest", fmt.Sprintf("--port=%d", port))
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var got string
	var err error
	for range 50 {
		if got, err = echoserver.Ask("tcp", addr, time.Second); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got != "pod-1" {
		t.Errorf("TCP answer %q (%v)", got, err)
	}
	if got, err := echoserver.Ask("udp", addr, time.Second); got != "pod-1" {
		t.Errorf("UDP answer %q (%v)", got, err)
	}
}

func TestUnknownImagesIdleUntilStopped(t *testing.T) {
	for _, image := range []string{"registry.k8s.io/pause:3.10", "busybox", "agnhost"} {
		cancel, done, result := start(t, image)
		select {
		case <-done:
			t.Fatalf("%s exited: %v", image, *result)
		case <-time.After(100 * time.Millisecond):
		}
		cancel()
		<-done
		if *result != nil {
			t.Errorf("%s: %v", image, *result)
		}
	}
}

func TestEnvCarriesImageAndArgs(t *testing.T) {
	env, err := Env("agnhost", []string{"netexec", "--http-port=8080"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ImageEnv + "=agnhost", ArgsEnv + `=["netexec","--http-port=8080"]`}
	if fmt.Sprint(env) != fmt.Sprint(want) {
		t.Errorf("Env = %q, want %q", env, want)
	}
}
