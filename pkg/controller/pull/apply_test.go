package pull

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestWriteSlotsBoundEveryCaller: writes of several callers sharing slots
// run at once, never more than the slots, and each caller gets every
// error of its own writes while the others' go on.
func TestWriteSlotsBoundEveryCaller(t *testing.T) {
	slots := NewWriteSlots(3)
	var inFlight, most atomic.Int32
	write := func(fail bool) func() error {
		return func() error {
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(2 * time.Millisecond)
			inFlight.Add(-1)
			if fail {
				return errors.New("refused")
			}
			return nil
		}
	}
	errs := make(chan error, 4)
	for caller := range 4 {
		go func() {
			var writes []func() error
			for i := range 10 {
				writes = append(writes, write(caller == 0 && i%5 == 0))
			}
			errs <- slots.Do(writes)
		}()
	}
	var failed int
	for range 4 {
		if err := <-errs; err != nil {
			failed++
			if got := len(err.(interface{ Unwrap() []error }).Unwrap()); got != 2 {
				t.Errorf("the failing caller got %d errors, want 2: %v", got, err)
			}
		}
	}
	if failed != 1 {
		t.Errorf("%d callers failed, want 1", failed)
	}
	if m := most.Load(); m > 3 || m < 2 {
		t.Errorf("at most %d writes were in flight at once, want 2 or 3 (3 slots, 40 writes)", m)
	}
	// Without slots, one after the other, stopping at the first error.
	var ran int
	err := WriteSlots(nil).Do([]func() error{
		func() error { ran++; return nil },
		func() error { ran++; return errors.New("refused") },
		func() error { ran++; return nil },
	})
	if err == nil || ran != 2 {
		t.Errorf("without slots: ran %d writes, error %v; want 2 and the error", ran, err)
	}
}
