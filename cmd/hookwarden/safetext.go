package main

// Terminal safety of every text output. Bodies, headers, event ids, error
// texts of the app: much of what the commands print came from the network,
// and a raw ESC[2J, an OSC title sequence or a C1 CSI (U+009B) would drive
// the operator's terminal. Main wraps stdout and stderr in a safeWriter, so
// every text printer of every command is covered without thinking of it;
// the exact outputs (--json, events show --body) write to the raw writer
// (rawWriter), and JSON escapes control characters itself.

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"unicode/utf8"
)

// safeWriter escapes control characters on their way to w: C0 controls but
// newline and tab, DEL, C1 controls (U+0080-U+009F), bidirectional overrides
// and bytes that are not UTF-8 become visible escapes (\x1b, \u009b).
// Each Write is escaped alone: the printers write whole strings, so no
// character is split across two.
type safeWriter struct{ w io.Writer }

func newSafeWriter(w io.Writer) io.Writer {
	if _, ok := w.(*safeWriter); ok {
		return w
	}
	return &safeWriter{w: w}
}

func (s *safeWriter) Write(p []byte) (int, error) {
	if !needsEscape(p) {
		return s.w.Write(p)
	}
	if _, err := s.w.Write(sanitize(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// rawWriter is the writer under a safeWriter, for exact output.
func rawWriter(w io.Writer) io.Writer {
	if s, ok := w.(*safeWriter); ok {
		return s.w
	}
	return w
}

// osFile is the *os.File under w, if any (terminal detection).
func osFile(w io.Writer) (*os.File, bool) {
	f, ok := rawWriter(w).(*os.File)
	return f, ok
}

// needsEscape is the fast path: plain printable text goes through as is.
func needsEscape(p []byte) bool {
	for i := 0; i < len(p); {
		c := p[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
				return true
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && n == 1 || unsafeRune(r) {
			return true
		}
		i += n
	}
	return false
}

// sanitize returns p with every control character escaped (see safeWriter).
func sanitize(p []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(p) + 16)
	for i := 0; i < len(p); {
		c := p[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '\n' || c == '\t':
				b.WriteByte(c)
			case c == '\r':
				b.WriteString(`\r`)
			case c == 0x7f:
				// As \u (like C1 below): inside a JSON string, where serve's
				// JSON logs leave it raw, the escape means the same.
				b.WriteString(`\u007f`)
			case c < 0x20:
				fmt.Fprintf(&b, `\x%02x`, c)
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, c)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.Write(p[i : i+n])
		}
		i += n
	}
	return b.Bytes()
}

// unsafeRune: C1 controls, and the bidirectional overrides and isolates,
// which make a terminal show text in another order than it is.
func unsafeRune(r rune) bool {
	return r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// sanitizeString is sanitize for strings.
func sanitizeString(s string) string {
	if !needsEscape([]byte(s)) {
		return s
	}
	return string(sanitize([]byte(s)))
}
