package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
)

const (
	policyName      = "cluster-policy"
	driverVersion   = "535.154.05"
	upgradedVersion = "575.57.08"

	// The operator's heap near its memory's peak in the rollout, and near
	// the whole run's where a later phase passed the rollout's by peakStep
	// (as of the last garbage collection before each).
	heapPeakRollout = "heap-peak-rollout.pprof"
	heapPeakRun     = "heap-peak-run.pprof"

	// idleProfileMargin is how long before the quiet period's end its CPU
	// profile ends, for the operator to write it out within the period.
	idleProfileMargin = 5 * time.Second

	// settle is the quiescence target: the operator should be done writing
	// this long after every node is ready.
	settle = 10 * time.Second
)

// config is what one run measures.
type config struct {
	root      string
	log       io.Writer
	nodes     int
	unrelated int // pods per node
	rebooted  int
	quiet     time.Duration
	churn     time.Duration // kubelet churn phase; 0 skips it
	// churnEvery is how often each node reports its status in it.
	churnEvery time.Duration
	// cpuProfiles takes the operator's CPU profiles, one at a time.
	cpuProfiles *cpuProfiles
	// ws is where the run keeps its clusters and profiles, and its ports.
	ws workspace
	// stall ends a phase no node has made progress in for this long.
	stall time.Duration
	// Phases left out (-skip): their figures stay 0.
	skipFloor, skipReboot, skipUpgrade bool
}

// limit bounds a phase that a thousand nodes finish well within perThousand:
// the simulated cluster's pod throughput sets a phase's length, so the
// bound grows with the nodes. A phase that hangs ends at the stall; this
// only ends one that keeps moving too slowly (a 5000-node rollout on two
// cores readied 4-6.5 toolkit pods a second, on pace for about an hour).
func (c config) limit(perThousand time.Duration) time.Duration {
	return max(perThousand, perThousand*time.Duration(c.nodes)/1000)
}

// skipped names the phases this run leaves out.
func (c config) skipped() []string {
	var out []string
	for phase, skip := range map[string]bool{"floor": c.skipFloor, "churn": c.churn == 0, "reboot": c.skipReboot, "upgrade": c.skipUpgrade} {
		if skip {
			out = append(out, phase)
		}
	}
	slices.Sort(out)
	return out
}

// runOnce measures one ordered rollout and its floor, each on a fresh
// cluster.
func runOnce(ctx context.Context, cfg config) (*Result, error) {
	graph, err := registry.Graph()
	if err != nil {
		return &Result{}, err
	}
	r := &Result{Nodes: cfg.nodes, UnrelatedPodsPerNode: cfg.unrelated, QuietSeconds: cfg.quiet.Seconds(), Skipped: cfg.skipped()}
	w, err := gated(ctx, cfg, graph, r)
	if err != nil {
		return r, err
	}
	if cfg.skipFloor {
		return r, nil
	}
	if err := floor(ctx, cfg, w, r); err != nil {
		return r, err
	}
	r.Ratio = r.RolloutSeconds / r.FloorSeconds
	return r, nil
}

// gated runs the operator through a rollout, a quiet period, a reboot and a
// fleet upgrade, and returns its workloads for the floor run.
func gated(ctx context.Context, cfg config, graph *state.Graph, r *Result) (*floorWorkloads, error) {
	// Informers on this cluster stop with it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	progress(cfg.log, "ordered rollout: a fresh cluster of %d GPU nodes, audit log of the operator's user", cfg.nodes)
	s, err := startSim(cfg, cfg.nodes, true)
	if err != nil {
		return nil, err
	}
	// The informers stop before the cluster does: a watch that loses its
	// server only logs noise.
	defer func() { cancel(); s.Down() }()
	nodes, err := trackNodes(ctx, s.Clientset)
	if err != nil {
		return nil, err
	}
	nodes.log, nodes.stall = cfg.log, cfg.stall
	names := nodes.names()
	slices.Sort(names)
	progress(cfg.log, "creating %d unrelated pods", len(names)*cfg.unrelated)
	if err := simcluster.CreateUnrelatedPods(ctx, s.Clientset, names, cfg.unrelated); err != nil {
		return nil, err
	}
	if err := installChart(s); err != nil {
		return nil, err
	}
	listen := cfg.ws.listen()
	op, err := startOperator(ctx, s, listen)
	if err != nil {
		return nil, err
	}
	defer op.Kill()
	metricsURL := "http://" + listen.Metrics + "/metrics"
	// A heap profile at each new peak of the operator's memory, in the
	// rollout, then over the whole run where a later phase passes it.
	profiles := cfg.ws.profiles()
	for _, stale := range []string{heapPeakRollout, heapPeakRun} {
		_ = os.Remove(filepath.Join(profiles, stale))
		_ = os.Remove(filepath.Join(profiles, strings.TrimSuffix(stale, ".pprof")+".txt"))
	}
	var peakProfile atomic.Pointer[string]
	peakProfile.Store(ptr.To(heapPeakRollout))
	rss := watchRSS(ctx, op.Pid(), time.Second, func(rssSplit) {
		name := *peakProfile.Load()
		saveProfile(ctx, cfg.log, listen.Pprof, profiles, name, "/debug/pprof/heap")
		// The same heap as text, ending in the runtime's MemStats: what
		// the resident set holds beyond the live heap (the heap's free
		// and unreturned pages, stacks, the collector's metadata), which
		// the profile does not say.
		saveProfile(ctx, cfg.log, listen.Pprof, profiles, strings.TrimSuffix(name, ".pprof")+".txt", "/debug/pprof/heap?debug=1")
	})

	// The rollout, from the ClusterPolicy's creation to every node ready on
	// every state.
	nodes.setGoal(stackUp(graph))
	cpu0, err := processUsage(op.Pid())
	if err != nil {
		return nil, err
	}
	rest0, err := restRequests(metricsURL)
	if err != nil {
		return nil, err
	}
	cluster0, err := clusterCPU(s.Dir)
	if err != nil {
		return nil, err
	}
	progress(cfg.log, "creating the ClusterPolicy")
	t0 := time.Now()
	if err := s.Client.Create(ctx, policy(cfg.nodes)); err != nil {
		return nil, err
	}
	statusReady := watchPolicyReady(ctx, s.Client, cfg.limit(time.Hour))
	// Profiles of the rollout, for whoever wants to know where the time
	// and memory go: go tool pprof _output/bench/profiles/<file>.
	cfg.cpuProfiles.save(ctx, cfg.log, listen.Pprof, profiles, "cpu-rollout.pprof", 60)
	saveAPIServerProfile(ctx, cfg.log, s.Clientset.CoreV1().RESTClient(), profiles, "apiserver-cpu-rollout.pprof", 60)
	allReady, err := nodes.wait(ctx, names, cfg.limit(30*time.Minute))
	if err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}
	r.RolloutSeconds = allReady.Sub(t0).Seconds()
	saveProfile(ctx, cfg.log, listen.Pprof, profiles, "heap-ready.pprof", "/debug/pprof/heap")
	progress(cfg.log, "every node ready on every state after %.1fs", r.RolloutSeconds)
	// The pods as the rollout left them, before reboots and the upgrade
	// replace some: where each wave's time went.
	times, err := capturePodTimes(ctx, s.Clientset)
	if err != nil {
		return nil, err
	}

	// The quiet period starts settle after all-ready; what the operator
	// writes from then on is reported as writes when nothing changes.
	quietStart := allReady.Add(settle)
	sleepUntil(ctx, quietStart)
	cpu1, err := processUsage(op.Pid())
	if err != nil {
		return nil, err
	}
	rolloutRSS := rss.get()
	peakProfile.Store(ptr.To(heapPeakRun))
	// The cluster's CPU in the rollout is read with the operator's: up to
	// settle after all-ready.
	quietCluster0, err := clusterCPU(s.Dir)
	if err != nil {
		return nil, err
	}
	r.RolloutClusterCPU = quietCluster0.since(cluster0)
	rest1, err := restRequests(metricsURL)
	if err != nil {
		return nil, err
	}
	progress(cfg.log, "quiet period: %s", cfg.quiet)
	// What the idle CPU is spent on, over the period it is measured in
	// but its last seconds: the operator writes the profile out when it
	// ends, and that CPU belongs in the idle figure, not in the churn's
	// that starts as the period ends.
	cfg.cpuProfiles.save(ctx, cfg.log, cfg.ws.listen().Pprof, cfg.ws.profiles(), "cpu-idle.pprof",
		int((cfg.quiet - idleProfileMargin).Seconds()))
	sleepUntil(ctx, quietStart.Add(cfg.quiet))
	select {
	case at := <-statusReady:
		if !at.IsZero() {
			r.StatusReadySeconds = at.Sub(t0).Seconds()
		}
	default: // still not ready: reported as 0, and visible in the table
	}
	cpu2, err := processUsage(op.Pid())
	if err != nil {
		return nil, err
	}
	quietEnd := time.Now()
	quietCluster1, err := clusterCPU(s.Dir)
	if err != nil {
		return nil, err
	}
	r.RolloutCPUSeconds = cpu1.CPUSeconds - cpu0.CPUSeconds
	r.RolloutPeakRSSMiB = mib(cpu1.PeakRSS)
	r.RolloutPeakRSS = splitMiB(rolloutRSS)
	minutes := cfg.quiet.Minutes()
	r.IdleCPUSecondsPerMinute = (cpu2.CPUSeconds - cpu1.CPUSeconds) / minutes
	r.IdleClusterCPUSecondsPerMinute = quietCluster1.since(quietCluster0).total() / minutes

	r.RESTWritesRollout = writesOf(rest1) - writesOf(rest0)

	w, err := captureWorkloads(ctx, s.Clientset, namespace)
	if err != nil {
		return nil, err
	}
	r.OperandPods = w.Pods

	var churnWindow window
	if cfg.churn > 0 {
		if churnWindow, err = churnPhase(ctx, cfg, s, names, op, r); err != nil {
			return nil, err
		}
	}
	var rebootWindow, upgradeWindow window
	if !cfg.skipReboot {
		if rebootWindow, err = rebootPhase(ctx, cfg, s, nodes, names, graph, r); err != nil {
			return nil, err
		}
	}
	if !cfg.skipUpgrade {
		if upgradeWindow, err = upgradePhase(ctx, cfg, s, nodes, names, graph, r); err != nil {
			return nil, err
		}
	}

	// Every phase is over: the audit log is read once and counted by window.
	reqs, err := simcluster.ReadAudit(s.AuditLog())
	if err != nil {
		return nil, err
	}
	if len(reqs) == 0 || reqs[0].At.After(t0) {
		// The API server rotates its audit log at --audit-log-maxsize:
		// counts from a log that starts late would be short, silently.
		return nil, fmt.Errorf("the audit log %s does not go back to the policy's creation (%s): was it rotated?",
			s.AuditLog(), t0.Format(time.RFC3339))
	}
	r.Rollout = countRequests(reqs, t0, quietStart)
	prerequisites, gatedStates := stateGraph(graph)
	wv := waves(times, prerequisites, gatedStates, nodeWrites(reqs), t0)
	r.Waves = &wv
	r.WritesPerNode = float64(r.Rollout.Writes) / float64(cfg.nodes)
	r.Quiet = countRequests(reqs, quietStart, quietEnd)
	r.IdleReadsPerMinute = float64(r.Quiet.Reads) / minutes
	r.IdleWritesPerMinute = float64(r.Quiet.Writes) / minutes
	r.IdleLeaseWritesPerMinute = float64(r.Quiet.LeaseWrites) / minutes
	if last, ok := lastWrite(reqs, t0, quietEnd); ok {
		r.QuiescenceSeconds = last.Sub(allReady).Seconds()
	}
	if cfg.churn > 0 {
		r.Churn = countRequests(reqs, churnWindow.from, churnWindow.to)
		r.ChurnReadsPerMinute = float64(r.Churn.Reads) / churnWindow.to.Sub(churnWindow.from).Minutes()
	}
	r.Reboot = countRequests(reqs, rebootWindow.from, rebootWindow.to)
	r.Upgrade = countRequests(reqs, upgradeWindow.from, upgradeWindow.to)
	end, err := processUsage(op.Pid())
	if err != nil {
		return nil, err
	}
	r.PeakRSSMiB = mib(end.PeakRSS)
	r.PeakRSS = splitMiB(rss.get())
	return w, nil
}

// floor applies the operator's workloads without gates on a fresh cluster
// with the same nodes and unrelated pods, and times until every operand pod
// is ready.
func floor(ctx context.Context, cfg config, w *floorWorkloads, r *Result) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	progress(cfg.log, "floor: the same %d DaemonSets without gates on a fresh cluster", len(w.DaemonSets))
	s, err := startSim(cfg, cfg.nodes, false)
	if err != nil {
		return err
	}
	// The informers stop before the cluster does: a watch that loses its
	// server only logs noise.
	defer func() { cancel(); s.Down() }()
	nodes, err := trackNodes(ctx, s.Clientset)
	if err != nil {
		return err
	}
	names := nodes.names()
	if err := simcluster.CreateUnrelatedPods(ctx, s.Clientset, names, cfg.unrelated); err != nil {
		return err
	}
	pods, err := watchReadyPods(ctx, s.Clientset, namespace, w.Pods)
	if err != nil {
		return err
	}
	cluster0, err := clusterCPU(s.Dir)
	if err != nil {
		return err
	}
	saveAPIServerProfile(ctx, cfg.log, s.Clientset.CoreV1().RESTClient(), cfg.ws.profiles(), "apiserver-cpu-floor.pprof", 60)
	start, err := applyFloor(ctx, s.Clientset, namespace, w)
	if err != nil {
		return err
	}
	done, err := pods.wait(ctx, cfg.limit(30*time.Minute), cfg.stall)
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	cluster1, err := clusterCPU(s.Dir)
	if err != nil {
		return err
	}
	r.FloorClusterCPU = cluster1.since(cluster0)
	r.FloorSeconds = done.Sub(start).Seconds()
	progress(cfg.log, "floor: %d operand pods ready after %.1fs", w.Pods, r.FloorSeconds)
	return nil
}

// policy is the ClusterPolicy the chart's documented install creates, with
// the fleet upgrade budget of the benchmark: 10% of the nodes.
func policy(nodes int) *gpuv1.ClusterPolicy {
	cp := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: policyName}}
	cp.Spec.Driver.Enabled = ptr.To(true)
	cp.Spec.Driver.Version = driverVersion
	cp.Spec.Driver.UpgradePolicy.MaxParallelUpgrades = ptr.To(int32(maxParallel(nodes)))
	return cp
}

func maxParallel(nodes int) int { return max(1, nodes/10) }

// watchPolicyReady reports when the ClusterPolicy's status first said
// ready; it gives up, reporting a zero time, after limit.
func watchPolicyReady(ctx context.Context, c client.Client, limit time.Duration) <-chan time.Time {
	out := make(chan time.Time, 1)
	go func() {
		deadline := time.Now().Add(limit)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			cp := &gpuv1.ClusterPolicy{}
			if err := c.Get(ctx, client.ObjectKey{Name: policyName}, cp); err == nil && cp.Status.State == gpuv1.PolicyReady {
				out <- time.Now()
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		out <- time.Time{}
	}()
	return out
}

func sleepUntil(ctx context.Context, t time.Time) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(t)):
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func progress(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "[bench %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
