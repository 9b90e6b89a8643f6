package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
)

// mainChaos runs the chaos suite once, writes out and prints the table;
// it reports whether every invariant held.
func mainChaos(ctx context.Context, cfg config, kills int, out string) bool {
	res, err := runChaos(ctx, cfg, kills)
	if err != nil {
		res.Error = err.Error()
	}
	if werr := writeJSON(out, res); werr != nil {
		fmt.Fprintln(os.Stderr, "test-chaos:", werr)
		return false
	}
	printChaos(os.Stdout, res)
	fmt.Printf("figures: %s\n", out)
	return err == nil
}

// printChaos writes the faults with the time the fleet took to converge
// after each, then every invariant count.
func printChaos(w io.Writer, r *ChaosResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "chaos, %d GPU nodes, %d unrelated pods each, %d GPU workload pods under a PDB, maxParallelUpgrades %d\n",
		r.Nodes, r.UnrelatedPodsPerNode, r.GPUWorkloadPods, r.MaxParallelUpgrades)
	fmt.Fprintln(tw, "phase\tconverged after the last fault (s)\tfaults")
	for _, p := range r.Phases {
		conv := fmt.Sprintf("%.1f", p.ConvergedSeconds)
		if !p.Converged {
			conv = "NOT CONVERGED: " + p.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, conv, p.Faults)
	}
	_ = tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "leader failover: SIGKILL to the follower holding the lease (s)\t%.1f\n", r.FailoverSeconds)
	fmt.Fprintf(tw, "operator SIGKILLs; exits of its own, restarted\t%d; %d\n", r.OperatorKills, r.OperatorRestarts)
	fmt.Fprintf(tw, "peak nodes in an upgrade at once (budget %d)\t%d\n", r.MaxParallelUpgrades, r.PeakInUpgrade)
	fmt.Fprintln(tw, "invariant\tcount (must be 0)")
	inv := r.Invariants
	for _, row := range []struct {
		name string
		n    int
	}{
		{"pods created on a node before a prerequisite was ready there", inv.PodsBeforePrerequisites},
		{"driver pods deleted other than by the upgrade state machine", inv.DriverPodsDeletedOutsideUpgrade},
		{"GPU workload pods deleted by the operator other than through the Eviction API", inv.WorkloadPodsDeletedNotEvicted},
		{"instants with more nodes in an upgrade than the budget", inv.InstantsOverBudget},
		{"nodes left cordoned", inv.NodesLeftCordoned},
		{"faults not converged within 5 minutes", inv.PhasesNotConverged},
		{"user labels or taints lost", inv.UserMarksLost},
	} {
		fmt.Fprintf(tw, "%s\t%d\n", row.name, row.n)
	}
	fmt.Fprintf(tw, "checked: operand pods created; driver pods deleted\t%d; %d\n", r.Checked.PodsCreated, r.Checked.DriverPodsDeleted)
	fmt.Fprintf(tw, "not breaches: pods a DaemonSet controller created < %s after a prerequisite left ready\t%d\n",
		controllerLag, r.Checked.PodsCreatedOnStaleView)
	_ = tw.Flush()
	if r.WatchGaps > 0 {
		fmt.Fprintf(w, "note: the recording listed again %d times after an API server restart; versions between were not seen\n", r.WatchGaps)
	}
	for _, e := range r.Examples {
		fmt.Fprintln(w, "  breach:", e)
	}
	if r.Error != "" {
		fmt.Fprintln(w, "chaos run failed:", r.Error)
	}
}
