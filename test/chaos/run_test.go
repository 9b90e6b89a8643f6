//go:build chaos

package chaos

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

const (
	// convergeLimit is how long the fleet has to converge after a fault,
	// unless the phase says otherwise.
	convergeLimit = 5 * time.Minute
	// workloadNamespace holds the GPU workloads the upgrades must evict.
	workloadNamespace = "chaos-workloads"
	policyName        = "cluster-policy"
	// driverVersion is the version the first rollout installs; the
	// phases move the fleet on through chaosVersions.
	driverVersion = "535.154.05"
)

// Where the operators of the run serve: the leader, and the follower of
// the failover phase; apart from the demo's and e2e's ports.
var (
	leaderListen   = simcluster.Listen{Metrics: "127.0.0.1:18280", Probe: "127.0.0.1:18281", Pprof: "127.0.0.1:18282"}
	followerListen = simcluster.Listen{Metrics: "127.0.0.1:18283", Probe: "127.0.0.1:18284", Pprof: "127.0.0.1:18285"}
)

// options are the test's flags (chaos_test.go).
type options struct {
	nodes     int
	unrelated int // pods per node
	// kills is the operator SIGKILLs during the rollout, and again during
	// an upgrade.
	kills int
}

// chaosRun is one chaos run's moving parts.
type chaosRun struct {
	opts options
	// log receives the progress and the scripts' output.
	log   io.Writer
	s     *simcluster.Cluster
	op    *simcluster.Operator
	res   *ChaosResult
	rng   *rand.Rand
	names []string
	// version is the driver version the fleet must end on.
	version gpuv1.DriverVersion
	// mode is the allocation mode the fleet must end in; "" is the
	// device plugin's.
	mode gpuv1.AllocationMode
	// migNodes are the nodes given a MIG layout (the maintenance phase).
	migNodes []string
	// reboots counts the kured stand-in's reboots.
	reboots atomic.Int32
}

// keyOf is a cluster-scoped object's key.
func keyOf(name string) client.ObjectKey { return client.ObjectKey{Name: name} }

// runChaos builds a cluster, runs every fault in turn, and checks the
// invariants on what the API server stored meanwhile.
func runChaos(ctx context.Context, root string, log io.Writer, opts options) (*ChaosResult, error) {
	res := &ChaosResult{Started: time.Now(), Nodes: opts.nodes, UnrelatedPodsPerNode: opts.unrelated, MaxParallelUpgrades: maxParallel(opts.nodes)}
	graph, err := registry.Graph()
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	progress(log, "chaos: a fresh cluster of %d GPU nodes, audit log of the operator's user", opts.nodes)
	s, err := simcluster.Up(simcluster.Options{
		Root: root, Dir: filepath.Join(root, "_output", "bench", "sim"), Nodes: opts.nodes, AuditOperator: true, Log: log,
		// Thousands of unrelated pods; the simulated API server runs
		// without rate limits, so the client should not add one.
		QPS: 2000, Burst: 4000,
	})
	if err != nil {
		return res, err
	}
	defer s.Down()
	r := &chaosRun{opts: opts, log: log, s: s, res: res, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1)), version: driverVersion}
	if r.names, err = r.gpuNodes(ctx); err != nil {
		return res, err
	}
	if err := simcluster.CreateUnrelatedPods(ctx, s.Clientset, r.names, opts.unrelated); err != nil {
		return res, err
	}
	if err := r.markNodes(ctx, r.names); err != nil {
		return res, err
	}
	if err := r.labelCliques(ctx, r.names); err != nil {
		return res, err
	}
	l := r.limits()
	res.MaxParallelRepairs, res.MaxParallelMIG, res.MaxNVLinkDomains = l.ops[arbiter.Repair], l.ops[arbiter.MIGReconfiguration], l.domains
	res.NodesPerNVLinkDomain = rackSize
	// As documented, except that the run creates the ClusterPolicy itself.
	if err := s.InstallChart("clusterPolicy.create=false"); err != nil {
		return res, err
	}
	// Recording starts with the CRD installed and before any policy: every
	// operand pod is created under it.
	rec := newRecorder()
	if err := simcluster.Poll(ctx, time.Minute, time.Second, func() (bool, string, error) {
		err := s.Client.List(ctx, &gpuv1.ClusterPolicyList{})
		return err == nil, "waiting for the ClusterPolicy CRD to be served", nil
	}); err != nil {
		return res, err
	}
	if err := rec.record(ctx, s.Clientset, s.Client); err != nil {
		return res, err
	}
	if r.op, err = r.startOperator(ctx, "operator", leaderListen, true); err != nil {
		return res, err
	}
	defer func() { r.op.Kill() }()
	if res.GPUWorkloadPods, err = r.gpuWorkloads(ctx); err != nil {
		return res, err
	}

	for _, p := range r.phases(opts.kills) {
		progress(log, "chaos phase: %s", p.name)
		phase := ChaosPhase{Name: p.name, Faults: p.faults}
		if err := p.run(ctx); err != nil {
			phase.Error = err.Error()
			res.Phases = append(res.Phases, phase)
			return res, fmt.Errorf("phase %s: %w", p.name, err)
		}
		after := time.Now()
		err := r.converge(ctx, cmp.Or(p.limit, convergeLimit))
		phase.ConvergedSeconds = time.Since(after).Seconds()
		phase.Converged = err == nil
		if err != nil {
			phase.Error = err.Error()
			res.Invariants.PhasesNotConverged++
		}
		res.Phases = append(res.Phases, phase)
		progress(log, "chaos phase %s: converged %t after %.1fs", p.name, phase.Converged, phase.ConvergedSeconds)
	}
	return res, r.finish(ctx, rec, graph)
}

// finish counts what is left on the nodes and checks the history.
func (r *chaosRun) finish(ctx context.Context, rec *recorder, graph *state.Graph) error {
	// Let the last writes reach the watches.
	time.Sleep(3 * time.Second)
	inv, seen, examples, peak := rec.check(graph, r.limits())
	inv.PhasesNotConverged = r.res.Invariants.PhasesNotConverged
	nodes := &corev1.NodeList{}
	if err := r.s.Client.List(ctx, nodes); err != nil {
		return err
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.DeletionTimestamp != nil {
			continue
		}
		v := versionOf(n)
		if n.Spec.Unschedulable {
			inv.NodesLeftCordoned++
			examples = append(examples, "node "+n.Name+" left cordoned")
		}
		if v.unhealthyTaint || v.migTaint || v.switchTaint {
			inv.NodesLeftTainted++
			examples = append(examples, "node "+n.Name+" left with the operator's repair or MIG taint")
		}
		if !v.final() {
			inv.NodesNotFinal++
			examples = append(examples, fmt.Sprintf("node %s left with an operation unfinished: upgrade %q, repair %q, MIG %q", n.Name,
				n.Labels[gpuv1.LabelUpgradeState], n.Labels[gpuv1.LabelRemediationState], n.Labels[gpuv1.LabelMIGReconfigureState]))
		}
	}
	r.res.Reboots = int(r.reboots.Load())
	var err error
	if inv.UserMarksLost, err = r.userMarksLost(ctx, r.names); err != nil {
		return err
	}
	if inv.WorkloadPodsDeletedNotEvicted, err = workloadDeletes(r.s.AuditLog()); err != nil {
		return err
	}
	r.res.Invariants, r.res.Checked, r.res.PeakInUpgrade, r.res.WatchGaps = inv, seen, peak, rec.watchGaps()
	r.res.Examples = append(r.res.Examples, examples...)
	if n := inv.total(); n > 0 {
		return fmt.Errorf("%d invariant breaches", n)
	}
	return nil
}

// gpuNodes lists the GPU nodes' names.
func (r *chaosRun) gpuNodes(ctx context.Context) ([]string, error) {
	nodes := &corev1.NodeList{}
	if err := r.s.Client.List(ctx, nodes); err != nil {
		return nil, err
	}
	var names []string
	for _, n := range nodes.Items {
		if n.Labels["feature.node.kubernetes.io/pci-10de.present"] == "true" && n.DeletionTimestamp == nil {
			names = append(names, n.Name)
		}
	}
	return names, nil
}

// gpuWorkloads starts a GPU Deployment over half the nodes, protected by
// a PodDisruptionBudget that lets one pod in ten go at a time: upgrades
// must evict it through the Eviction API.
func (r *chaosRun) gpuWorkloads(ctx context.Context) (int, error) {
	replicas := int32(max(2, r.opts.nodes/2))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workloadNamespace}}
	if err := r.s.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return 0, err
	}
	labels := map[string]string{"app": "trainer"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: workloadNamespace},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{Name: "train", Image: "registry.example/cuda-train:1",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}},
			}}}}
	if err := r.s.Client.Create(ctx, d); err != nil {
		return 0, err
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: workloadNamespace},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromString("10%")),
			Selector: &metav1.LabelSelector{MatchLabels: labels}}}
	return int(replicas), r.s.Client.Create(ctx, pdb)
}

// converge waits until every GPU node runs every state on the expected
// driver, out of any upgrade, repair or MIG reconfiguration, untainted by
// the operator and schedulable.
func (r *chaosRun) converge(ctx context.Context, limit time.Duration) error {
	states := []string{"driver", "container-toolkit", r.plugin(), "dcgm-exporter", "gpu-feature-discovery"}
	return simcluster.Poll(ctx, limit, time.Second, func() (bool, string, error) {
		if err := r.ensureOperator(ctx); err != nil {
			return false, "restarting the operator", err
		}
		nodes := &corev1.NodeList{}
		if err := r.s.Client.List(ctx, nodes); err != nil {
			return false, "listing nodes", nil // the API server may be restarting
		}
		behind := 0
		example := ""
		for _, n := range nodes.Items {
			if n.Labels["feature.node.kubernetes.io/pci-10de.present"] != "true" || n.DeletionTimestamp != nil {
				continue
			}
			ok := !n.Spec.Unschedulable && n.Labels[gpuv1.LabelDriverVersion] == string(r.version) && r.maintenanceDone(&n) == "" &&
				r.inMode(&n) == ""
			if st := gpuv1.UpgradeState(n.Labels[gpuv1.LabelUpgradeState]); st != "" && st != gpuv1.UpgradeDone {
				ok = false
			}
			for _, s := range states {
				ok = ok && n.Labels[gpuv1.StateLabel(s)] == string(gpuv1.StateReady)
			}
			if !ok {
				behind++
				example = n.Name
			}
		}
		return behind == 0, fmt.Sprintf("%d GPU nodes not converged (one: %s)", behind, example), nil
	})
}

// waitInUpgrade waits until some node is past its cordon in an upgrade.
func (r *chaosRun) waitInUpgrade(ctx context.Context, past gpuv1.UpgradeState) error {
	return r.waitForNodes(ctx, 3*time.Minute, 200*time.Millisecond, func(nodes []corev1.Node) string {
		for _, n := range nodes {
			st := gpuv1.UpgradeState(n.Labels[gpuv1.LabelUpgradeState])
			if st == past || (past == "" && upgrade.InProgress(st)) {
				return ""
			}
		}
		return "no node in an upgrade yet"
	})
}

// waitForNodes polls the nodes, keeping the operator running, until
// behind says nothing holds them back ("").
func (r *chaosRun) waitForNodes(ctx context.Context, limit, every time.Duration, behind func([]corev1.Node) string) error {
	return simcluster.Poll(ctx, limit, every, func() (bool, string, error) {
		if err := r.ensureOperator(ctx); err != nil {
			return false, "restarting the operator", err
		}
		nodes := &corev1.NodeList{}
		if err := r.s.Client.List(ctx, nodes); err != nil {
			return false, "listing nodes", nil // the API server may be restarting
		}
		why := behind(nodes.Items)
		return why == "", why, nil
	})
}

// killOperator SIGKILLs the operator and starts it again, kills times, a
// random 1 to 5 seconds apart.
func (r *chaosRun) killOperator(ctx context.Context, kills int) error {
	for range kills {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second + time.Duration(r.rng.Int64N(int64(4*time.Second)))):
		}
		r.op.Kill()
		r.res.OperatorKills++
		op, err := r.startOperator(ctx, "operator", leaderListen, false)
		if err != nil {
			return err
		}
		r.op = op
	}
	return nil
}

// ensureOperator starts the operator again if it exited, as its
// Deployment would: a manager that cannot renew its lease (the API server
// refusing requests) exits by design.
func (r *chaosRun) ensureOperator(ctx context.Context) error {
	select {
	case <-r.op.Exited():
	default:
		return nil
	}
	progress(r.log, "the operator exited; starting it again, as its Deployment would")
	r.res.OperatorRestarts++
	op, err := r.startOperator(ctx, "operator", leaderListen, false)
	if err != nil {
		return err
	}
	r.op = op
	return nil
}

// sleep waits d, or less if the run is cancelled: a fault's pause.
func (r *chaosRun) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// startOperator runs an operator process with the arguments and
// environment of the chart's Deployment, so that the operator under fault
// is the one installed; with leader, it returns once some process holds
// the lease, else once this one is ready (a follower, or a restarted
// leader waiting for its old lease to lapse).
func (r *chaosRun) startOperator(ctx context.Context, name string, l simcluster.Listen, leader bool) (*simcluster.Operator, error) {
	args, env, err := r.s.ChartOperator()
	if err != nil {
		return nil, err
	}
	// BENCH_OPERATOR_GODEBUG reaches the operator alone, as in the
	// benchmark: gctrace=1 there logs its heap at every collection.
	if v := os.Getenv("BENCH_OPERATOR_GODEBUG"); v != "" {
		env = append(env, "GODEBUG="+v)
	}
	return r.s.StartOperator(ctx, simcluster.OperatorOptions{
		Name: name, Args: append(args, l.Args()...), Env: env, ProbeAddr: l.Probe, WaitReady: true, WaitLeader: leader,
	})
}

// policy is the ClusterPolicy the chart's documented install creates, with
// a fleet upgrade budget of 10% of the nodes and at most domainCap NVLink
// domains out of service at once.
func policy(nodes int) *gpuv1.ClusterPolicy {
	cp := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: policyName}}
	cp.Spec.Driver.Enabled = ptr.To(true)
	cp.Spec.Driver.Version = driverVersion
	cp.Spec.Driver.UpgradePolicy.MaxParallelUpgrades = ptr.To(int32(maxParallel(nodes)))
	cp.Spec.Operator.Maintenance.MaxUnavailableNVLinkDomains = ptr.To(intstr.FromInt32(domainCap))
	return cp
}

// maxParallel is the upgrade budget for a fleet of nodes.
func maxParallel(nodes int) int { return max(1, nodes/10) }

// progress says where the run is, with the time: a run takes minutes.
func progress(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "[chaos %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
