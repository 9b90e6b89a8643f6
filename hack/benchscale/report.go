package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// Result is what one run measured. Durations are seconds, memory MiB.
type Result struct {
	Nodes                int `json:"nodes"`
	UnrelatedPodsPerNode int `json:"unrelatedPodsPerNode"`
	// OperandPods is how many operand pods ran once every node was ready.
	OperandPods int `json:"operandPods"`

	// RolloutSeconds: ClusterPolicy created -> every node ready on every
	// state (the last node label write that made it so, as watched).
	RolloutSeconds float64 `json:"rolloutSeconds"`
	// FloorSeconds: the same workloads without gates, applied at once on a
	// fresh cluster -> every operand pod ready.
	FloorSeconds float64 `json:"floorSeconds"`
	Ratio        float64 `json:"ratio"`
	// StatusReadySeconds: ClusterPolicy created -> status.state ready, as
	// polled every 0.5 s; 0 if not ready by the end of the quiet period.
	StatusReadySeconds float64 `json:"statusReadySeconds"`
	// QuiescenceSeconds: every node ready -> the operator's last write other
	// than a lease renewal, up to the end of the quiet period.
	QuiescenceSeconds float64 `json:"quiescenceSeconds"`

	// Waves says where the time of each state's wave on a node went.
	Waves *Waves `json:"waves,omitempty"`

	RolloutCPUSeconds float64 `json:"rolloutCPUSeconds"`
	// RolloutClusterCPU and FloorClusterCPU are the simulated cluster's
	// CPU seconds by process in the rollout (policy created -> all ready +
	// settle, the window of RolloutCPUSeconds) and in the floor (workloads
	// applied -> all pods ready): on a small machine the operator's gates
	// cost the cluster time as well.
	RolloutClusterCPU cpuByProcess `json:"rolloutClusterCPU,omitempty"`
	FloorClusterCPU   cpuByProcess `json:"floorClusterCPU,omitempty"`
	RolloutPeakRSSMiB float64      `json:"rolloutPeakRSSMiB"`
	// PeakRSSMiB is the peak over the whole run, upgrade included.
	PeakRSSMiB float64 `json:"peakRSSMiB"`
	// RolloutPeakRSS and PeakRSS say what the largest resident set read
	// once a second, in the rollout and over the run, was made of.
	RolloutPeakRSS RSSSplitMiB `json:"rolloutPeakRSS"`
	PeakRSS        RSSSplitMiB `json:"peakRSS"`

	// Rollout counts the operator's requests from the ClusterPolicy's
	// creation to the start of the quiet period (all-ready + 10 s).
	Rollout       Requests `json:"rollout"`
	WritesPerNode float64  `json:"writesPerNode"`
	// RESTWritesRollout is the same window's writes, leases included, by
	// the operator's own rest_client_requests_total: a cross-check.
	RESTWritesRollout float64 `json:"restWritesRollout"`

	QuietSeconds            float64  `json:"quietSeconds"`
	Quiet                   Requests `json:"quiet"`
	IdleCPUSecondsPerMinute float64  `json:"idleCPUSecondsPerMinute"`
	// IdleClusterCPUSecondsPerMinute is what the simulated cluster itself
	// uses in the quiet period (kwok renewing node leases, the
	// controllers' resyncs): the load a phase pays for as long as it runs.
	IdleClusterCPUSecondsPerMinute float64 `json:"idleClusterCPUSecondsPerMinute"`
	IdleReadsPerMinute             float64 `json:"idleReadsPerMinute"`
	IdleWritesPerMinute            float64 `json:"idleWritesPerMinute"`
	IdleLeaseWritesPerMinute       float64 `json:"idleLeaseWritesPerMinute"`

	// The kubelet churn phase: every node's status reported once per
	// -churn-every (heartbeats; DiskPressure turning on one node in a
	// hundred).
	ChurnSeconds             float64  `json:"churnSeconds"`
	ChurnReports             int      `json:"churnReports"`
	Churn                    Requests `json:"churn"`
	ChurnCPUSecondsPerMinute float64  `json:"churnCPUSecondsPerMinute"`
	ChurnReadsPerMinute      float64  `json:"churnReadsPerMinute"`

	RebootedNodes         int      `json:"rebootedNodes"`
	RebootRecoverySeconds float64  `json:"rebootRecoverySeconds"`
	Reboot                Requests `json:"reboot"`

	UpgradeParallel int     `json:"upgradeParallel"`
	UpgradeSeconds  float64 `json:"upgradeSeconds"`
	// UpgradingMean and UpgradingPeak are the nodes in the upgrade at
	// once (cordoned for it up to uncordoned): how much of the budget
	// (UpgradeParallel) the upgrade used.
	UpgradingMean float64  `json:"upgradingMean"`
	UpgradingPeak int      `json:"upgradingPeak"`
	Upgrade       Requests `json:"upgrade"`

	// Skipped are the phases left out (-skip, -churn 0): their figures are
	// not measured.
	Skipped []string `json:"skipped,omitempty"`

	// Error is why the run stopped early, if it did.
	Error string `json:"error,omitempty"`
}

// RSSSplitMiB is an rssSplit in MiB.
type RSSSplitMiB struct {
	Anon float64 `json:"anon"`
	File float64 `json:"file"`
}

func splitMiB(s rssSplit) RSSSplitMiB { return RSSSplitMiB{Anon: mib(s.Anon), File: mib(s.File)} }

// row is one line of the table: a figure per run, and its target.
type row struct {
	name, target string
	value        func(r *Result) string
}

func rows() []row {
	f1 := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	f2 := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	d := func(v int) string { return fmt.Sprint(v) }
	out := []row{
		{"operand pods (+ unrelated per node)", "", func(r *Result) string { return fmt.Sprintf("%d (+%d)", r.OperandPods, r.UnrelatedPodsPerNode) }},
		{"rollout: policy created -> all nodes ready (s)", "", func(r *Result) string { return f1(r.RolloutSeconds) }},
		{"floor: ungated DaemonSets -> all pods ready (s)", "", func(r *Result) string { return f1(r.FloorSeconds) }},
		{"rollout / floor", "<= 1.3", func(r *Result) string { return f2(r.Ratio) }},
		{"wave: prerequisites ready -> gate opened (s, mean / p90)", "", wave(func(w WaveStages) Stat { return w.Decision })},
		{"wave: gate opened -> pod created (s, mean / p90)", "", wave(func(w WaveStages) Stat { return w.DaemonSet })},
		{"wave: pod created -> bound (s, mean / p90)", "", wave(func(w WaveStages) Stat { return w.Scheduler })},
		{"wave: bound -> ready (s, mean / p90)", "", wave(func(w WaveStages) Stat { return w.Kubelet })},
		{"policy status ready (s)", "", func(r *Result) string { return f1(r.StatusReadySeconds) }},
		{"all ready -> last operator write (s)", "<= 10", func(r *Result) string { return f1(r.QuiescenceSeconds) }},
		{"operator peak RSS, rollout (MiB)", "< 64", func(r *Result) string { return f1(r.RolloutPeakRSSMiB) }},
		{"operator peak RSS, whole run (MiB)", "< 80", func(r *Result) string { return f1(r.PeakRSSMiB) }},
		{"operator RSS at its largest reading, rollout: anonymous + file (MiB)", "", func(r *Result) string {
			return fmt.Sprintf("%.1f + %.1f", r.RolloutPeakRSS.Anon, r.RolloutPeakRSS.File)
		}},
		{"operator RSS at its largest reading, whole run: anonymous + file (MiB)", "", func(r *Result) string {
			return fmt.Sprintf("%.1f + %.1f", r.PeakRSS.Anon, r.PeakRSS.File)
		}},
		{"operator CPU, rollout (s)", "", func(r *Result) string { return f1(r.RolloutCPUSeconds) }},
	}
	out = append(out, clusterCPURows()...)
	return append(out, []row{
		{"writes per node, rollout (leases apart)", "<= 10", func(r *Result) string { return f2(r.WritesPerNode) }},
		{"writes, rollout: audit+leases / rest_client", "", func(r *Result) string {
			return fmt.Sprintf("%d / %.0f", r.Rollout.Writes+r.Rollout.LeaseWrites, r.RESTWritesRollout)
		}},
		{"writes in the quiet period (leases apart)", "0", func(r *Result) string { return d(r.Quiet.Writes) }},
		{"idle writes / min (leases apart)", "0", func(r *Result) string { return f1(r.IdleWritesPerMinute) }},
		{"idle lease writes / min", "", func(r *Result) string { return f1(r.IdleLeaseWritesPerMinute) }},
		{"idle reads / min (leases apart)", "< 10", func(r *Result) string { return f1(r.IdleReadsPerMinute) }},
		{"idle CPU s / min", "< 0.3", func(r *Result) string { return f2(r.IdleCPUSecondsPerMinute) }},
		{"idle cluster CPU s / min (the simulated cluster's own)", "", func(r *Result) string { return f1(r.IdleClusterCPUSecondsPerMinute) }},
		{"kubelet churn: status reports / min", "", func(r *Result) string {
			return f1(float64(r.ChurnReports) / max(r.ChurnSeconds, 1) * 60)
		}},
		{"kubelet churn: operator reads / min (leases apart)", "< 10", func(r *Result) string { return f1(r.ChurnReadsPerMinute) }},
		{"kubelet churn: operator writes (leases apart)", "0", func(r *Result) string { return d(r.Churn.Writes) }},
		{"kubelet churn: operator CPU s / min", "< 0.3", func(r *Result) string { return f2(r.ChurnCPUSecondsPerMinute) }},
		{"reboot: nodes -> chains re-formed (s)", "", func(r *Result) string { return fmt.Sprintf("%d -> %.1f", r.RebootedNodes, r.RebootRecoverySeconds) }},
		{"reboot: writes per rebooted node", "", func(r *Result) string {
			return f1(float64(r.Reboot.Writes) / float64(max(1, r.RebootedNodes)))
		}},
		{"upgrade: nodes at a time -> fleet done (s)", "", func(r *Result) string { return fmt.Sprintf("%d -> %.1f", r.UpgradeParallel, r.UpgradeSeconds) }},
		{"upgrade: nodes upgrading at once, mean / peak", "", func(r *Result) string {
			return fmt.Sprintf("%.1f / %d", r.UpgradingMean, r.UpgradingPeak)
		}},
		{"upgrade: writes per node", "", func(r *Result) string { return f1(float64(r.Upgrade.Writes) / float64(max(1, r.Nodes))) }},
		{"upgrade: writes per node by field manager", "", func(r *Result) string { return byManager(r.Upgrade, r.Nodes) }},
	}...)
}

// byManager is the writes per node of each field manager, the largest
// first: what tells the controllers' shares apart.
func byManager(c Requests, nodes int) string {
	sums := map[string]int{}
	for key, n := range c.WritesByManager {
		manager, _, _ := strings.Cut(key, ": ")
		sums[manager] += n
	}
	managers := slices.Collect(maps.Keys(sums))
	slices.SortFunc(managers, func(a, b string) int { return cmp.Or(sums[b]-sums[a], strings.Compare(a, b)) })
	parts := make([]string, 0, len(managers))
	for _, m := range managers {
		parts = append(parts, fmt.Sprintf("%s %.1f", m, float64(sums[m])/float64(max(1, nodes))))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// clusterCPURows are the simulated cluster's CPU by process, rollout
// against floor ("-" for a floor not run).
func clusterCPURows() []row {
	pair := func(r *Result, of func(cpuByProcess) float64) string {
		floor := "-"
		if r.FloorClusterCPU != nil {
			floor = fmt.Sprintf("%.1f", of(r.FloorClusterCPU))
		}
		return fmt.Sprintf("%.1f / %s", of(r.RolloutClusterCPU), floor)
	}
	out := []row{{"cluster CPU, rollout / floor (s): all", "", func(r *Result) string {
		return pair(r, cpuByProcess.total)
	}}}
	for _, name := range clusterProcesses() {
		out = append(out, row{"cluster CPU, rollout / floor (s): " + name, "", func(r *Result) string {
			return pair(r, func(c cpuByProcess) float64 { return c[name] })
		}})
	}
	return out
}

// wave formats one part of the rollout's waves, over every state.
func wave(part func(WaveStages) Stat) func(*Result) string {
	return func(r *Result) string {
		if r.Waves == nil {
			return "-"
		}
		st := part(r.Waves.All)
		return fmt.Sprintf("%.2f / %.0f", st.Mean, st.P90)
	}
}

// printTable writes one row per figure and one column per run.
func printTable(w io.Writer, results []*Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%d GPU nodes", results[0].Nodes)
	for i, res := range results {
		fmt.Fprintf(tw, "\trun %d", i+1)
		if res.Error != "" {
			fmt.Fprint(tw, " (stopped early)")
		}
	}
	fmt.Fprintln(tw, "\ttarget")
	for _, r := range rows() {
		fmt.Fprint(tw, r.name)
		for _, res := range results {
			if phase := phaseOf(r.name); phase != "" && slices.Contains(res.Skipped, phase) {
				fmt.Fprint(tw, "\tskipped")
				continue
			}
			fmt.Fprint(tw, "\t"+r.value(res))
		}
		fmt.Fprintln(tw, "\t"+r.target)
	}
	_ = tw.Flush()
	for i, res := range results {
		if res.Error != "" {
			fmt.Fprintf(w, "run %d stopped early: %s\n", i+1, res.Error)
		}
	}
}

// phaseOf names the phase a row's figure comes from, for the phases a run
// may leave out.
func phaseOf(row string) string {
	switch {
	case strings.HasPrefix(row, "floor:"), row == "rollout / floor":
		return "floor"
	case strings.HasPrefix(row, "kubelet churn:"):
		return "churn"
	case strings.HasPrefix(row, "reboot:"):
		return "reboot"
	case strings.HasPrefix(row, "upgrade:"):
		return "upgrade"
	}
	return ""
}
