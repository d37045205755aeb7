// Package measure reads what the benchmarks report of the processes they
// run: CPU time, peak and current RSS, and the writes an apiserver served.
package measure

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Settle waits until the processes are idle (under a tenth of a core for
// half a second; at most 20 s), so that a phase does not start while
// they still digest the writes or deletes before it.
func Settle(pids []int) {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		before := CPUSeconds(pids...)
		time.Sleep(500 * time.Millisecond)
		if CPUSeconds(pids...)-before < 0.05 {
			return
		}
	}
}

// CPUSeconds returns the user and system CPU time the processes used.
func CPUSeconds(pids ...int) float64 {
	ticks := 0.0
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command (which may hold spaces): utime is the
		// 14th field of the line, stime the 15th.
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
		var u, s float64
		fmt.Sscan(fields[11], &u)
		fmt.Sscan(fields[12], &s)
		ticks += u + s
	}
	return ticks / 100 // USER_HZ
}

// StatusKB returns a /proc/PID/status field in kB (VmHWM, VmRSS), 0 when
// the process is gone.
func StatusKB(pid int, field string) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		var kb int
		if _, err := fmt.Sscanf(line, field+": %d kB", &kb); err == nil {
			return kb
		}
	}
	return 0
}

// PeakRSS samples a process's high-water RSS (VmHWM) until stopped, so
// that the peak survives the process's exit.
type PeakRSS struct {
	Pid int
	mu  sync.Mutex
	kb  int
}

// Watch samples until stop is closed.
func (p *PeakRSS) Watch(stop <-chan struct{}) {
	for {
		p.sample()
		select {
		case <-stop:
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (p *PeakRSS) sample() {
	kb := StatusKB(p.Pid, "VmHWM")
	p.mu.Lock()
	if kb > p.kb {
		p.kb = kb
	}
	p.mu.Unlock()
}

// Get returns the peak in kB.
func (p *PeakRSS) Get() int {
	p.sample()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kb
}

// WriteRequestsBy returns how many create, update, patch and delete
// requests an apiserver has served (apiserver_request_total), and the
// requests of every verb (reads too) by verb and resource.
func WriteRequestsBy(ctx context.Context, kube kubernetes.Interface) (int, map[string]int, error) {
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, nil, err
	}
	by := map[string]int{}
	label := func(labels, name string) string {
		_, rest, ok := strings.Cut(labels, name+`="`)
		if !ok {
			return ""
		}
		v, _, _ := strings.Cut(rest, `"`)
		return v
	}
	total := 0
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels, value, _ := strings.Cut(line, "} ")
		write := strings.Contains(labels, `verb="POST"`) || strings.Contains(labels, `verb="PUT"`) ||
			strings.Contains(labels, `verb="PATCH"`) || strings.Contains(labels, `verb="DELETE"`)
		var n float64
		if _, err := fmt.Sscan(value, &n); err == nil {
			if write {
				total += int(n)
			}
			key := label(labels, "verb") + " " + label(labels, "resource")
			if sub := label(labels, "subresource"); sub != "" {
				key += "/" + sub
			}
			by[key] += int(n)
		}
	}
	return total, by, nil
}
