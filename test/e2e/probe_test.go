package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/kubectlmcs"
)

// testDiagnoseProbe runs kubectl mcs diagnose --probe as an operator
// would: a probe pod in the importing member (this project's image, on
// kind as loaded there, locally the build's kubectl-mcs) resolves the
// clusterset name, reaches both sources' pods and the clusterset IP, and
// names the sources that answered; a Service whose targetPort nothing
// listens on fails the endpoint and clusterset IP hops; the probe pods are
// gone afterwards, also when diagnose is interrupted.
func (s *suite) testDiagnoseProbe(t *testing.T) {
	sp := s.space(t, "e2e-probe")
	_, _, vip := sp.webInBoth()
	// Ready endpoints that refuse: the pods listen on 8080, not 8081.
	sp.service(s.a, "wrongport", func(spec *v1.ServiceSpec) {
		spec.Selector = map[string]string{"app": "web"}
		spec.Ports[0].TargetPort = intstr.FromInt(8081)
	})
	sp.export(s.a, "wrongport")
	wrongVIP := sp.vip(s.b, "wrongport")
	waitImportedSlices(t, s.b, sp.name, "wrongport")

	kubeconfig, contexts := s.p.kubeconfig()
	diagnose := func(ctx context.Context, name string) ([]kubectlmcs.Check, string, error) {
		var out, errOut bytes.Buffer
		cmd := kubectlmcs.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		cmd.SetArgs(append([]string{"--kubeconfig=" + kubeconfig, "--contexts=" + strings.Join(contexts, ","),
			"diagnose", "service", sp.name + "/" + name, "--from=" + contexts[1], "--probe", "-o", "json"}, s.p.diagnoseFlags()...))
		err := cmd.ExecuteContext(ctx)
		var checks []kubectlmcs.Check
		if out.Len() > 0 {
			if jerr := json.Unmarshal(out.Bytes(), &checks); jerr != nil {
				t.Fatalf("diagnose -o json: %v\n%s", jerr, out.String())
			}
		}
		t.Logf("diagnose --probe %s (%v):\n%s%s", name, err, out.String(), errOut.String())
		return checks, errOut.String(), err
	}
	find := func(checks []kubectlmcs.Check, subject string) kubectlmcs.Check {
		t.Helper()
		for _, c := range checks {
			if c.Subject == subject {
				return c
			}
		}
		t.Fatalf("no check %q", subject)
		return kubectlmcs.Check{}
	}
	noProbePods := func(why string) {
		t.Helper()
		eventually(t, 30*time.Second, "no probe pod left in "+s.b.Name+" "+why, func() (bool, string) {
			pods, err := s.b.Client.CoreV1().Pods(sp.name).List(t.Context(), metav1.ListOptions{LabelSelector: kubectlmcs.LabelProbe})
			if err != nil {
				return false, err.Error()
			}
			var names []string
			for _, p := range pods.Items {
				names = append(names, p.Name)
			}
			return len(names) == 0, strings.Join(names, ",")
		})
	}

	t.Run("every hop of a healthy import", func(t *testing.T) {
		checks, errOut, err := diagnose(t.Context(), "web")
		if err != nil {
			t.Fatalf("diagnose --probe failed: %v\n%s", err, errOut)
		}
		if c := find(checks, "probe: clusterset IP "+hostPort(vip, 80)+"/TCP"); !c.Passed ||
			!strings.Contains(c.Detail, s.a.Name+" (") || !strings.Contains(c.Detail, s.b.Name+" (") {
			t.Errorf("the clusterset IP's verdict does not name both sources: %+v", c)
		}
		for _, m := range []*member{s.a, s.b} {
			if c := find(checks, "probe: "+m.Name+"'s endpoints"); !c.Passed || !strings.HasPrefix(c.Detail, "1 of 1 reached from probe pod ") {
				t.Errorf("%s's endpoint from the probe pod: %+v", m.Name, c)
			}
		}
		if c := find(checks, "DNS web."+sp.name+".svc.clusterset.local"); !c.Passed || !strings.Contains(c.Detail, "asked from probe pod") {
			t.Errorf("DNS asked from the probe pod: %+v", c)
		}
		if len(s.p.diagnoseFlags()) > 0 {
			// Pull mode: each source's liveness is read in the hub.
			for _, m := range []*member{s.a, s.b} {
				if c := find(checks, "Lease "+m.Name+"/"+pull.AgentLeaseName); !c.Passed {
					t.Errorf("%s's agent Lease in the hub: %+v", m.Name, c)
				}
			}
		}
		noProbePods("after diagnose")
	})

	t.Run("endpoints that refuse fail their hops", func(t *testing.T) {
		checks, errOut, err := diagnose(t.Context(), "wrongport")
		if !errors.Is(err, kubectlmcs.ErrChecksFailed) {
			t.Fatalf("diagnose --probe of endpoints that refuse: %v, want a failed check\n%s", err, errOut)
		}
		if c := find(checks, "probe: "+s.a.Name+"'s endpoints"); c.Passed || !strings.Contains(c.Detail, "refused") || c.Fix == "" {
			t.Errorf("the endpoints' verdict: %+v", c)
		}
		if c := find(checks, "probe: clusterset IP "+hostPort(wrongVIP, 80)+"/TCP"); c.Passed {
			t.Errorf("the clusterset IP's verdict: %+v", c)
		}
		noProbePods("after a failed diagnose")
	})

	t.Run("an interrupted diagnose deletes its probe pod", func(t *testing.T) {
		// The interrupt comes as the pod is created, seen by a watch
		// started before: long before the pod can have run.
		w, err := s.b.Client.CoreV1().Pods(sp.name).Watch(t.Context(), metav1.ListOptions{LabelSelector: kubectlmcs.LabelProbe})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		type result struct {
			checks []kubectlmcs.Check
			err    error
		}
		done := make(chan result, 1)
		go func() {
			checks, _, err := diagnose(ctx, "web")
			done <- result{checks, err}
		}()
		select {
		case <-w.ResultChan():
		case <-time.After(30 * time.Second):
			t.Fatal("no probe pod created")
		}
		cancel()
		var r result
		select {
		case r = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("diagnose went on after its interrupt")
		}
		if !errors.Is(r.err, kubectlmcs.ErrChecksFailed) {
			t.Errorf("an interrupted diagnose ended with %v, want its checks failed", r.err)
		}
		if c := find(r.checks, "probe"); c.Passed || !strings.Contains(c.Detail, "context canceled") {
			t.Errorf("the interrupted probe's verdict: %+v", c)
		}
		noProbePods("after the interrupt")
	})
}
