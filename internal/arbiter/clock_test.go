package arbiter

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// One clock per node (issue 52, finding 4): every operation the table lets
// act within another's validation pauses that validation's clock while it
// acts, and the validation counts afresh from when it stopped acting. A
// MIG restore admitted during an upgrade's validation can take longer than
// the validation's timeout; the upgrade must not fail for it.
func TestAValidationCountsOnlyItsOwnTime(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	rows := 0
	for _, r := range Table {
		if r.Phase != Validating || r.Verdict != Allow {
			continue
		}
		rows++
		at := func(want Phase, since time.Time) *Node {
			n := &Node{Name: "n"}
			n.Ops[r.Holder] = Position{Phase: Validating, Since: t0}
			n.Ops[r.Want] = Position{Phase: want, Since: since}
			return n
		}
		since, paused := at(Active, t0.Add(time.Minute)).Clock(r.Holder)
		g.Expect(paused).To(BeTrue(), "the %s validates while a %s it let in acts", r.Holder, r.Want)
		g.Expect(since).To(Equal(t0))

		ended := t0.Add(45 * time.Minute)
		since, paused = at(Idle, ended).Clock(r.Holder)
		g.Expect(paused).To(BeFalse())
		g.Expect(since).To(Equal(ended), "the %s's validation counts from the end of the %s", r.Holder, r.Want)

		// Parked after it (failed): counts from then, not paused.
		since, paused = at(Parked, ended).Clock(r.Holder)
		g.Expect([]any{since, paused}).To(Equal([]any{ended, false}))

		// Queued to act within it (for a place, or back in the queue for
		// another attempt): paused too.
		restore := at(Queued, ended)
		restore.MIGRestore = r.RestoreOnly
		since, paused = restore.Clock(r.Holder)
		g.Expect([]any{since, paused}).To(Equal([]any{t0, true}), "the %s waits for the %s to act", r.Holder, r.Want)

		// Queued and held back by the table until the validation ends (a
		// new MIG configuration), or changed before the validation:
		// nothing changes.
		cases := []*Node{at(Idle, t0.Add(-time.Hour))}
		if r.RestoreOnly {
			cases = append(cases, at(Queued, ended))
		}
		for _, n := range cases {
			since, paused = n.Clock(r.Holder)
			g.Expect([]any{since, paused}).To(Equal([]any{t0, false}), "%s %v", r.Want, n.Ops[r.Want])
		}

		// The operation acting keeps its own time.
		n := at(Active, t0.Add(time.Minute))
		since, paused = n.Clock(r.Want)
		g.Expect([]any{since, paused}).To(Equal([]any{t0.Add(time.Minute), false}))
	}
	g.Expect(rows).To(BeNumerically(">=", 3), "the table lets a MIG restore act within the validations of an upgrade, a repair and a switch")

	// An operation the table never lets in changes nothing: a repair
	// marked required (not started) during an upgrade's validation.
	n := &Node{Name: "n"}
	n.Ops[DriverUpgrade] = Position{Phase: Validating, Since: t0}
	n.Ops[Repair] = Position{Phase: Idle, Since: t0.Add(time.Minute)}
	since, paused := n.Clock(DriverUpgrade)
	g.Expect([]any{since, paused}).To(Equal([]any{t0, false}))
}
