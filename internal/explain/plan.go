package explain

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gpu-operator/gpu-operator/internal/controller/maintenance"
)

// Plan is what kubectl gpu plan prints: the maintenance controller's plan
// (maintenance.Reconciler.Plan), per pool in the order the starts will be
// served.
type Plan struct {
	maintenance.Plan
}

// WriteText prints the plan for a person.
func (p Plan) WriteText(w io.Writer, now time.Time) error {
	if len(p.Starts) == 0 {
		fmt.Fprintln(w, "No driver upgrade, repair, MIG reconfiguration or mode switch waits to start.")
		return nil
	}
	fmt.Fprintf(w, "Budgets: %s\n\n", strings.Join(p.Budgets, ", "))
	// Each pool's starts in the order Admit serves them; the pools in
	// the order their first start comes.
	var pools []string
	byPool := map[string][]maintenance.PlannedStart{}
	for _, s := range p.Starts {
		pool := cmp.Or(s.Pool, "default")
		if byPool[pool] == nil {
			pools = append(pools, pool)
		}
		byPool[pool] = append(byPool[pool], s)
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "POOL\t#\tNODE\tOPERATION\tQUEUED\tNEXT LOOK")
	for _, pool := range pools {
		for i, s := range byPool[pool] {
			next := "starts"
			if !s.Next {
				next = "waits: " + s.Waiting
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", pool, i+1, s.Node, s.Operation, age(s.Since, now), next)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range p.Starts {
		if !s.Detailed {
			continue
		}
		fmt.Fprintf(w, "\n%s, %s:\n", s.Node, s.Operation)
		if len(s.Evicts) == 0 && len(s.Blocked) == 0 {
			fmt.Fprintln(w, "  evicts no pod")
		}
		for _, e := range s.Evicts {
			fmt.Fprintf(w, "  evicts %s\n", e)
		}
		for _, b := range s.Blocked {
			fmt.Fprintf(w, "  blocked by %s\n", b)
		}
	}
	return nil
}
