package eventrecorder

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A note over the events API's limit would be refused with its event:
// it is cut on a character boundary, and says so.
func TestCutNote(t *testing.T) {
	for _, tc := range []struct {
		name string
		note string
		cut  bool
	}{
		{"short", "the import is ready", false},
		{"exactly the limit", strings.Repeat("a", NoteLimit), false},
		{"one byte over", strings.Repeat("a", NoteLimit+1), true},
		{"a character across the limit", strings.Repeat("a", NoteLimit-4) + strings.Repeat("é", 10), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CutNote(tc.note)
			if len(got) > NoteLimit || !utf8.ValidString(got) {
				t.Fatalf("cut to %d bytes (valid UTF-8: %v), want at most %d", len(got), utf8.ValidString(got), NoteLimit)
			}
			if cut := got != tc.note; cut != tc.cut || cut && !strings.HasSuffix(got, "...") {
				t.Errorf("cut %v (%q...), want cut %v, saying so", cut, got[max(0, len(got)-10):], tc.cut)
			}
		})
	}
}
