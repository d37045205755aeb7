package kubectlmcs

import (
	"fmt"
	"strings"
)

// width is the terminal width every line fits.
const width = 100

// table aligns rows in columns two spaces apart, as kubectl get does; a
// row wider than width has its last column cut.
func table(rows [][]string) []string {
	if len(rows) == 0 {
		return nil
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			if i < len(r)-1 && len(c) > widths[i] {
				widths[i] = len(c)
			}
		}
	}
	var out []string
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			if i == len(r)-1 {
				b.WriteString(c)
				break
			}
			fmt.Fprintf(&b, "%-*s  ", widths[i], c)
		}
		line := strings.TrimRight(b.String(), " ")
		if len(line) > width {
			line = line[:width-3] + "..."
		}
		out = append(out, line)
	}
	return out
}

// wrap breaks s into lines of at most w columns at spaces; lines after
// the first start with indent.
func wrap(s string, w int, indent string) []string {
	return wrapFrom("", s, w, indent)
}

// wrapFrom is wrap with a first line that starts with first.
func wrapFrom(first, s string, w int, indent string) []string {
	var out []string
	line := ""
	for _, word := range strings.Fields(s) {
		prefix := first
		if len(out) > 0 {
			prefix = indent
		}
		switch {
		case line == "":
			line = prefix + word
		case len(line)+1+len(word) <= w:
			line += " " + word
		default:
			out = append(out, line)
			line = indent + word
		}
		for len(line) > w {
			out = append(out, line[:w])
			line = indent + line[w:]
		}
	}
	if line != "" {
		out = append(out, line)
	}
	return out
}

// ChecklistLines renders diagnose's checklist: one line per check (more
// when it wraps), the fix under each failure, and a summary.
func ChecklistLines(title string, checks []Check) []string {
	out := []string{title}
	for _, c := range checks {
		mark := "[ ok ]"
		if !c.Passed {
			mark = "[FAIL]"
		}
		out = append(out, wrap(fmt.Sprintf("%s %s  %s: %s", mark, c.Cluster, c.Subject, c.Detail), width, "       ")...)
		if !c.Passed && c.Fix != "" {
			out = append(out, wrapFrom("       fix: ", c.Fix, width, "            ")...)
		}
	}
	failed := Failed(checks)
	out = append(out, fmt.Sprintf("%d checks, %d passed, %d failed", len(checks), len(checks)-failed, failed))
	return out
}
