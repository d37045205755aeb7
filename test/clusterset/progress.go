package clusterset

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progress prints what is starting and how long it took, each line stamped
// with the time since start-up began, so a person can see where the
// seconds go.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func newProgress(w io.Writer) *progress { return &progress{w: w, start: time.Now()} }

func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "[%5.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

// done reports that what (of component) became ready.
func (p *progress) done(component, what string) {
	p.printf("%-10s %s", component, what)
}

// timed reports that what became ready, since started.
func (p *progress) timed(component, what string, started time.Time) {
	p.printf("%-10s %s (%.1fs)", component, what, time.Since(started).Seconds())
}
