package explain

import (
	"bytes"
	"io"
	"strings"
	"text/tabwriter"
)

// table aligns columns as tabwriter does, and leaves no blanks at the end
// of a line: tabwriter pads a row whose last cells are empty (a reason
// not known, a pool's nodes line) to the widest row, which a person
// copying the output, or a diff of it, trips over.
type table struct {
	tw  *tabwriter.Writer
	buf bytes.Buffer
	out io.Writer
}

func newTable(out io.Writer) *table {
	t := &table{out: out}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 4, 2, ' ', 0)
	return t
}

func (t *table) Write(p []byte) (int, error) { return t.tw.Write(p) }

// Flush writes the aligned rows, each without its trailing blanks.
func (t *table) Flush() error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	var b strings.Builder
	for line := range strings.Lines(t.buf.String()) {
		body, newline := strings.CutSuffix(line, "\n")
		b.WriteString(strings.TrimRight(body, " "))
		if newline {
			b.WriteByte('\n')
		}
	}
	t.buf.Reset()
	_, err := io.WriteString(t.out, b.String())
	return err
}
