package fakekubelet

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
)

// maxLogLine is where a line without a newline is cut into a partial
// record, as container runtimes do (the kubelet joins them again).
const maxLogLine = 16 * 1024

// containerLogPath is where the output of restart number restart of a
// container goes: the kubelet's /var/log/pods layout.
func containerLogPath(dir string, pod *v1.Pod, container string, restart int32) string {
	return filepath.Join(dir, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), container, fmt.Sprintf("%d.log", restart))
}

// containerLog is the output of one container process, written as a
// container runtime writes it for the kubelet: one CRI log record per line,
// "<RFC3339Nano time> <stdout|stderr> <F|P> <text>", so that `kubectl logs`
// (tail, since, timestamps, follow) is served by the kubelet's own log
// reader. Attached clients get a copy of the raw output.
type containerLog struct {
	path string

	mu       sync.Mutex
	f        *os.File
	attached map[*attachment]struct{}
}

// attachment is a client of `kubectl attach` reading the output.
type attachment struct{ stdout, stderr io.Writer }

func newContainerLog(path string) (*containerLog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &containerLog{path: path, f: f, attached: map[*attachment]struct{}{}}, nil
}

// stream returns the writer of one output stream ("stdout" or "stderr").
func (l *containerLog) stream(name string) *logStream { return &logStream{log: l, name: name} }

// attach copies the output to a client until detach is called.
func (l *containerLog) attach(a *attachment) (detach func()) {
	l.mu.Lock()
	l.attached[a] = struct{}{}
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		delete(l.attached, a)
		l.mu.Unlock()
	}
}

func (l *containerLog) record(stream string, partial bool, text []byte) {
	tag := "F"
	if partial {
		tag = "P"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return
	}
	fmt.Fprintf(l.f, "%s %s %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), stream, tag, text)
}

func (l *containerLog) copyToAttached(stream string, p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for a := range l.attached {
		w := a.stdout
		if stream == "stderr" {
			w = a.stderr
		}
		if w == nil {
			continue
		}
		if _, err := w.Write(p); err != nil {
			delete(l.attached, a)
		}
	}
}

// close ends the log once the process has exited and both streams are
// flushed.
func (l *containerLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// logStream cuts one stream into records.
type logStream struct {
	log  *containerLog
	name string
	buf  []byte
}

func (s *logStream) Write(p []byte) (int, error) {
	s.log.copyToAttached(s.name, p)
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			break
		}
		s.log.record(s.name, false, s.buf[:i])
		s.buf = s.buf[i+1:]
	}
	for len(s.buf) >= maxLogLine {
		s.log.record(s.name, true, s.buf[:maxLogLine])
		s.buf = s.buf[maxLogLine:]
	}
	s.buf = append([]byte(nil), s.buf...)
	return len(p), nil
}

// flush writes a last line that had no newline.
func (s *logStream) flush() {
	if len(s.buf) > 0 {
		s.log.record(s.name, false, s.buf)
		s.buf = nil
	}
}
