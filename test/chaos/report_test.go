package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"
)

// ChaosPhase is one fault and how the fleet came back from it.
type ChaosPhase struct {
	Name             string  `json:"name"`
	Faults           string  `json:"faults"`
	ConvergedSeconds float64 `json:"convergedSeconds"`
	Converged        bool    `json:"converged"`
	Error            string  `json:"error,omitempty"`
}

// ChaosResult is chaos.json.
type ChaosResult struct {
	Started              time.Time `json:"started"`
	Nodes                int       `json:"nodes"`
	UnrelatedPodsPerNode int       `json:"unrelatedPodsPerNode"`
	GPUWorkloadPods      int       `json:"gpuWorkloadPods"`
	MaxParallelUpgrades  int       `json:"maxParallelUpgrades"`
	MaxParallelRepairs   int       `json:"maxParallelRepairs"`
	MaxParallelMIG       int       `json:"maxParallelMIG"`
	MaxNVLinkDomains     int       `json:"maxUnavailableNVLinkDomains"`
	NodesPerNVLinkDomain int       `json:"nodesPerNVLinkDomain"`
	OperatorKills        int       `json:"operatorKills"`
	// OperatorRestarts counts exits of the operator the run did not cause
	// (a lost lease), each started again.
	OperatorRestarts int `json:"operatorRestarts"`
	// Reboots counts the nodes the kured stand-in rebooted.
	Reboots int          `json:"reboots"`
	Phases  []ChaosPhase `json:"phases"`
	// FailoverSeconds is from the leader's SIGKILL until the follower held
	// the lease.
	FailoverSeconds float64    `json:"failoverSeconds"`
	PeakInUpgrade   int        `json:"peakNodesInUpgrade"`
	Invariants      Invariants `json:"invariants"`
	Checked         Checked    `json:"checked"`
	Examples        []string   `json:"examples,omitempty"`
	WatchGaps       int        `json:"watchGaps"`
	Error           string     `json:"error,omitempty"`
}

// printChaos writes the faults with the time the fleet took to converge
// after each, then every invariant count.
func printChaos(w io.Writer, r *ChaosResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "chaos, %d GPU nodes, %d unrelated pods each, %d GPU workload pods under a PDB\n",
		r.Nodes, r.UnrelatedPodsPerNode, r.GPUWorkloadPods)
	fmt.Fprintf(tw, "budgets: %d upgrades, %d repairs, %d MIG reconfigurations, %d NVLink domains of %d nodes\n",
		r.MaxParallelUpgrades, r.MaxParallelRepairs, r.MaxParallelMIG, r.MaxNVLinkDomains, r.NodesPerNVLinkDomain)
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
	fmt.Fprintf(tw, "nodes rebooted by the kured stand-in\t%d\n", r.Reboots)
	fmt.Fprintln(tw, "invariant\tcount (must be 0)")
	inv := r.Invariants
	for _, row := range []struct {
		name string
		n    int
	}{
		{"pods created on a node before a prerequisite was ready there", inv.PodsBeforePrerequisites},
		{"driver pods deleted other than by the upgrade's pod restart or a repair's reload", inv.DriverPodsDeletedOutsideUpgrade},
		{"GPU workload pods deleted by the operator other than through the Eviction API", inv.WorkloadPodsDeletedNotEvicted},
		{"instants with an operation holding more nodes than its budget", inv.InstantsOverBudget},
		{"instants with more NVLink domains out of service than the cap", inv.InstantsOverDomainCap},
		{"instants with two operations acting on one node", inv.InstantsActedOnByTwo},
		{"nodes left cordoned", inv.NodesLeftCordoned},
		{"nodes left with the operator's repair, MIG or switch taint", inv.NodesLeftTainted},
		{"nodes left with an operation unfinished", inv.NodesNotFinal},
		{"faults not converged within their limit (5 minutes; 10 after maintenance)", inv.PhasesNotConverged},
		{"user labels or taints lost", inv.UserMarksLost},
		{"times a node had the device plugin and the DRA driver at once", inv.BothPluginsOnANode},
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

// writeJSON writes the result where the figures go, creating the
// directory: _output/ is not kept between checkouts.
func writeJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
