package eventtrail

import (
	"strings"
	"time"
	"unicode/utf8"
)

// noteLimit is the most bytes an Event's message may hold: the API server
// refuses a longer one (NoteLengthLimit, k8s.io/kubernetes
// pkg/apis/core/validation/events.go).
const noteLimit = 1024

// separator parts a trail's steps, newest first, on one line: kubectl
// describe shows an Event's message on one row of its table. A step's own
// text that holds it is split there when the trail is cut, which loses
// nothing but the cut part.
const separator = " | "

// stampLayout is each step's time in the trail: to the second, in UTC, as
// kubectl shows event times.
const stampLayout = "15:04:05Z"

// step is one call of Eventf: what happened, and when.
type step struct {
	at   time.Time
	text string
}

func (s step) String() string { return s.at.UTC().Format(stampLayout) + " " + s.text }

// trail is the message of an Event that holds steps, newest first: the
// newest steps, then base (the message as it was, older steps), as many
// whole steps as fit noteLimit. A step longer than the limit alone is cut.
func trail(newest []step, base string) string {
	var b strings.Builder
	add := func(s string) bool {
		if b.Len() > 0 {
			if b.Len()+len(separator)+len(s) > noteLimit {
				return false
			}
			b.WriteString(separator)
		}
		b.WriteString(cut(s, noteLimit))
		return true
	}
	for i := len(newest) - 1; i >= 0; i-- {
		if !add(newest[i].String()) {
			return b.String()
		}
	}
	if base == "" {
		return b.String()
	}
	for _, s := range strings.Split(base, separator) {
		if !add(s) {
			break
		}
	}
	return b.String()
}

// cut shortens s to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// Steps splits an Event's message into its steps' texts, newest first,
// without their times: what each Eventf said. A message this package did
// not write is one step.
func Steps(message string) []string {
	var out []string
	for _, s := range strings.Split(message, separator) {
		if at, text, ok := strings.Cut(s, " "); ok {
			if _, err := time.Parse(stampLayout, at); err == nil {
				s = text
			}
		}
		out = append(out, s)
	}
	return out
}
