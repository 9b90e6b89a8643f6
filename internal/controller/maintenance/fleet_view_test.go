package maintenance

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/migconfig"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/migmanager"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/timers"
)

// The arbiter's view of the model's nodes is the maintenance controller's
// own (pass.view, issue 52, finding 7): each node of the model is written
// as the labels, annotations and status that view reads, and judged by the
// production machines' runs and position, under a ClusterPolicy whose
// budgets budgetsOf makes. A queue condition, a pool, a since annotation
// or a free MIG start the controller reads differently from what the
// model meant is then the model's to meet, not a copy that agrees with
// itself. What stays the model's own: what the cluster does between looks
// (fleet_check_test.go), and each machine's facts and writes
// (fleet_pass_test.go).

// judge is the production look the model's views come from. Views are
// kept by node state: the fleet's few thousand node states are judged
// once each, not at each of the millions of looks.
type judge struct {
	shape
	p    *pass
	pods *podsOfModel
	memo map[judged]judgement
}

// judgement is the controller's look at one node: the arbiter's view, and
// which operations run there (machine.runs).
type judgement struct {
	view arbiter.Node
	runs [arbiter.NumOperations]bool
}

// judged is what a node's view depends on: the node, which node of the
// fleet it is (its name), and whether DynamicMIG is on.
type judged struct {
	n       node
	i       uint8
	dynamic bool
}

// newJudge is the controller's pass under the model's policy: the driver,
// repairs and mig-manager on, every start automatic, every budget 1 but
// those of the fleet's pools (shape.drivers).
func newJudge(t testing.TB, sh shape) *judge {
	g := NewWithT(t)
	cp := driverPolicy(g)
	one := intstr.FromInt32(1)
	up := &cp.Spec.Driver.UpgradePolicy
	up.AutoUpgrade, up.MaxParallelUpgrades, up.MaxUnavailable = ptr.To(true), ptr.To(int32(1)), &one
	cp.Spec.Operator.Remediation.Enabled, cp.Spec.Operator.Remediation.AutoStart = true, ptr.To(true)
	cp.Spec.Operator.Remediation.MaxParallel = &one
	cp.Spec.MIGManager.Enabled, cp.Spec.MIGManager.MaxParallel = ptr.To(true), &one
	graph, err := registry.Graph()
	g.Expect(err).NotTo(HaveOccurred())
	configs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cp.Spec.MIGManager.ConfigMapName(), Namespace: "gpu-operator"},
		Data: map[string]string{migconfig.FileKey: migmanager.DefaultConfig}}
	objs := []client.Object{cp, configs}
	for _, d := range sh.drivers(cp) {
		objs = append(objs, &d)
	}
	pods := &podsOfModel{}
	r := &Reconciler{Client: fakeAPI(objs...).Build(), APIReader: pods, Graph: graph, Namespace: configs.Namespace,
		Timers: timers.Defaults(), Now: func() time.Time { return now }}
	p, err := r.newPass(context.Background(), cp, &observed{})
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range []config{partitioned, whole} {
		g.Expect(p.configs.refusal(cp, &corev1.Node{}, c.String())).To(BeEmpty(), "the model's configuration %s", c)
	}
	if sh.pools {
		g.Expect(p.obs.pools.Pools).To(HaveLen(2), "the fleet's two driver pools")
	}
	return &judge{shape: sh, p: p, pods: pods, memo: map[judged]judgement{}}
}

// look is the controller's look at node i of the world.
func (j *judge) look(w *world, i int) judgement {
	k := judged{w.n[i], uint8(i), w.dynamicMIG}
	if v, ok := j.memo[k]; ok {
		return v
	}
	n := j.nodeOf(&w.n[i], i, w.dynamicMIG)
	j.pods.gpuPods, j.p.dynamicMIG = w.n[i].pods, w.dynamicMIG
	var v judgement
	for _, m := range j.p.machines {
		v.runs[m.operation()] = m.runs(j.p, n)
	}
	v.view = j.p.view(context.Background(), n)
	j.memo[k] = v
	return v
}

// view is the arbiter's view of node i of the world.
func (j *judge) view(w *world, i int) arbiter.Node { return j.look(w, i).view }

// dropped names an operation under way that the controller no longer runs
// on its node: the look would let it go (forget) mid-flight. "" when there
// is none (issue 52, finding 1).
func (j *judge) dropped(w *world) string {
	for i := range int(w.size) {
		runs := j.look(w, i).runs
		for op := range arbiter.NumOperations {
			n := &w.n[i]
			if op == arbiter.MIGReconfiguration && n.byDRADriver(w.dynamicMIG) {
				continue // let go to the DRA driver: a policy's choice
			}
			if !runs[op] && n.phase(op) != arbiter.Idle {
				return fmt.Sprintf("node %c: the %s (%s) no longer runs there, and would be let go mid-flight", 'a'+i, op, n.label(op))
			}
		}
	}
	return ""
}

// nodeOf writes node i of the model as the API server would hold it.
func (j *judge) nodeOf(m *node, i int, dynamic bool) *corev1.Node {
	labels := map[string]string{
		gpuv1.LabelGPUPresent:     gpuv1.LabelTrue,
		gpuv1.LabelAllocationMode: string(m.mode.label()),
	}
	if !m.byDRADriver(dynamic) {
		// Under DynamicMIG, the node controller writes no configuration.
		labels[gpuv1.LabelMIGConfig] = m.desired.String()
	}
	if !m.unlabelled {
		labels["feature.node.kubernetes.io/pci-10de.present"] = gpuv1.LabelTrue
		for _, s := range []state.Name{state.Driver, state.MIGManager, state.DevicePlugin} {
			labels[gpuv1.DeployLabel(string(s))] = gpuv1.LabelTrue
		}
	}
	annotations := map[string]string{}
	set := func(to map[string]string, key, value string) {
		if value != "" {
			to[key] = value
		}
	}
	set(labels, poolLabel, j.now(m, i))
	set(labels, gpuv1.LabelGPUClique, j.domain(i))
	set(labels, gpuv1.LabelUpgradeState, string(m.up.label()))
	set(labels, gpuv1.LabelRemediationState, string(m.rep.label()))
	set(labels, gpuv1.LabelMIGReconfigureState, string(m.mig.label()))
	set(labels, gpuv1.LabelModeSwitchState, string(m.sw.label()))
	for op, key := range map[arbiter.Operation]string{arbiter.DriverUpgrade: AnnotationSince,
		arbiter.Repair: AnnotationRemediationSince, arbiter.MIGReconfiguration: AnnotationMIGSince,
		arbiter.ModeSwitch: AnnotationSwitchSince} {
		if m.label(op) != "" {
			annotations[key] = m.since(op).Add(-time.Duration(j.waited(i)) * time.Minute).Format(time.RFC3339)
		}
	}
	// The driver and the toolkit are ready once the driver pod is back
	// and the GPU stack re-formed; the plugin of the node's mode is ready
	// where the node controller last judged it so.
	settled := gpuv1.StatePending
	if !m.driverGone && !m.restarting {
		settled = gpuv1.StateReady
	}
	for _, s := range j.p.r.Graph.Prerequisites(state.MIGManager) {
		labels[gpuv1.StateLabel(string(s))] = string(settled)
	}
	if m.pluginReady {
		plugin := state.DevicePlugin
		if m.mode == draMode {
			plugin = state.DRADriver
		}
		labels[gpuv1.StateLabel(string(plugin))] = string(gpuv1.StateReady)
	}
	// MIG devices last as long as the boot and driver they were made
	// under (gating.DriverGeneration): the model counts both as gen.
	set(annotations, gpuv1.AnnotationMIGApplied, m.applied.String())
	switch {
	case m.appliedDynamic:
		annotations[gpuv1.AnnotationMIGAppliedUnder] = gpuv1.MIGAppliedUnderDynamicMIG
	case m.applied == partitioned:
		annotations[gpuv1.AnnotationMIGAppliedUnder] = fmt.Sprintf("boot-%d/", m.appliedGen)
	}
	if m.upCordon {
		annotations[AnnotationCordoned] = gpuv1.LabelTrue
	}
	if m.kept != 0 {
		annotations[gpuv1.AnnotationMaintenancePool] = j.named(i, m.kept)
	}
	if m.served {
		annotations[gpuv1.AnnotationServed] = gpuv1.LabelTrue
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: string(rune('a' + i)), Labels: labels, Annotations: annotations},
		Spec:       corev1.NodeSpec{Unschedulable: m.cordoned()},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: fmt.Sprintf("boot-%d", m.gen)},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

// podsOfModel answers the controller's live list of a node's pods: one
// GPU pod where the model's node has its GPU pods.
type podsOfModel struct {
	client.Reader
	gpuPods bool
}

func (s *podsOfModel) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	pods := list.(*corev1.PodList)
	pods.Items = nil
	if s.gpuPods {
		gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		pods.Items = []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "training", Namespace: "default"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "cuda", Resources: corev1.ResourceRequirements{Limits: gpu}}}}}}
	}
	return nil
}
