package explain

import (
	"fmt"
	"io"
	"time"
)

// WriteText prints the node's explanation for a person.
func (n Node) WriteText(w io.Writer, now time.Time) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "Node:\t%s\n", n.Name)
	if !n.GPUNode {
		fmt.Fprintf(tw, "GPU node:\tno\n")
	} else {
		fmt.Fprintf(tw, "Pool:\t%s\tAllocation mode:\t%s\n", orDash(n.Pool), orDash(n.Mode))
		if n.HeldUnder != "" {
			fmt.Fprintf(tw, "Held under pool:\t%s\t(its operation keeps that pool's budgets and settings until it ends)\n", n.HeldUnder)
		}
		fmt.Fprintf(tw, "Readiness taint:\t%s\tCordoned:\t%s\n", yesNo(n.ReadinessTaint), yesNo(n.Cordoned))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(n.States) > 0 {
		fmt.Fprintln(w, "\nStates, in order:")
		tw = newTable(w)
		for _, s := range n.States {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", s.Name, s.Value, orDash(s.Pod), s.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(n.Operations) > 0 {
		fmt.Fprintln(w, "\nOperations holding the node:")
		tw = newTable(w)
		for _, o := range n.Operations {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", o.Name, o.State, age(o.Since, now), o.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(n.Next) > 0 {
		fmt.Fprintln(w, "\nWhat to do:")
		for _, t := range n.Next {
			fmt.Fprintf(w, "  - %s\n", t)
		}
	}
	return nil
}

// WriteText prints the fleet's summary for a person.
func (f Fleet) WriteText(w io.Writer, now time.Time) error {
	fmt.Fprintf(w, "GPU nodes: %d, ready on every state: %d\n\n", f.GPUNodes, f.Ready)
	tw := newTable(w)
	fmt.Fprintf(tw, "POOL\tSTATE\tREADY\tPENDING\tFAILED\tUPGRADING\tDISABLED\n")
	for _, p := range f.Pools {
		fmt.Fprintf(tw, "%s\t(nodes)\t%d/%d\t\t\t\t\n", p.Name, p.Ready, p.Nodes)
		for _, s := range f.States {
			c, ok := p.States[s]
			if !ok {
				continue
			}
			fmt.Fprintf(tw, "\t%s\t%d\t%d\t%d\t%d\t%d\n", s, c["ready"], c["pending"], c["failed"], c["upgrading"], c["disabled"])
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(f.Held) > 0 {
		fmt.Fprintln(w, "\nHeld by an operation:")
		tw = newTable(w)
		for _, h := range f.Held {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", h.Node, h.Operation, h.State, age(h.Since, now))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(f.Waiting) > 0 {
		fmt.Fprintln(w, "\nWaiting:")
		for _, wt := range f.Waiting {
			fmt.Fprintf(w, "  %s: %s\n", wt.Node, wt.Why)
		}
	}
	return nil
}

func age(since, now time.Time) string {
	if since.IsZero() {
		return "-"
	}
	return "for " + now.Sub(since).Round(time.Second).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
