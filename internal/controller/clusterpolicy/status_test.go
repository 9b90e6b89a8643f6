package clusterpolicy

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
)

// gpuNode is a GPU node with the given state label values, in graph order
// (driver, container-toolkit, device-plugin, dcgm-exporter, GFD).
func gpuNode(name string, values ...gpuv1.StateValue) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{gpuv1.LabelGPUPresent: "true"}}}
	names := []string{"driver", "container-toolkit", "device-plugin", "dcgm-exporter", "gpu-feature-discovery"}
	for i, v := range values {
		n.Labels[gpuv1.StateLabel(names[i])] = string(v)
	}
	return n
}

func ready(name string) corev1.Node {
	r := gpuv1.StateReady
	return gpuNode(name, r, r, r, r, r)
}

func testSummary(t *testing.T, nodes []corev1.Node, enabled func(map[state.Name]bool)) summary {
	t.Helper()
	g, err := registry.Graph()
	if err != nil {
		t.Fatal(err)
	}
	e := map[state.Name]bool{}
	for _, s := range g.States() {
		e[s.Name] = true
	}
	if enabled != nil {
		enabled(e)
	}
	ds := &appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: int32(len(nodes)), NumberReady: int32(len(nodes))}}
	return summarize(g, e, nodes, ds)
}

func TestSetReadyCondition(t *testing.T) {
	p, r, f := gpuv1.StatePending, gpuv1.StateReady, gpuv1.StateFailed
	many := []corev1.Node{}
	for i := range 12 {
		many = append(many, gpuNode(fmt.Sprintf("n%02d", i), p))
	}
	tests := map[string]struct {
		nodes       []corev1.Node
		enabled     func(map[state.Name]bool)
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		"no GPU nodes": {
			wantStatus: metav1.ConditionTrue, wantReason: gpuv1.ReasonAllStatesReady,
			wantMessage: "no GPU nodes found: nodes are GPU nodes once NFD labels them feature.node.kubernetes.io/pci-10de.present=true, or when labelled nvidia.com/gpu.present=true",
		},
		"all ready": {
			nodes:      []corev1.Node{ready("a"), ready("b")},
			wantStatus: metav1.ConditionTrue, wantReason: gpuv1.ReasonAllStatesReady,
			wantMessage: "2 of 2 GPU nodes are ready on every state",
		},
		"first state in order is named": {
			nodes:      []corev1.Node{ready("a"), gpuNode("b", r, r, p, p, p), gpuNode("c", r, f, p, p, p)},
			wantStatus: metav1.ConditionFalse, wantReason: gpuv1.ReasonStateNotReady,
			wantMessage: "container-toolkit is ready on 2 of 3 nodes; not ready: c",
		},
		"disabled states do not hold nodes back": {
			nodes:      []corev1.Node{gpuNode("a", gpuv1.StateDisabled, r, r, r, r)},
			wantStatus: metav1.ConditionTrue, wantReason: gpuv1.ReasonAllStatesReady,
			wantMessage: "1 of 1 GPU nodes are ready on every state",
		},
		"at most ten nodes are named": {
			nodes:      many,
			wantStatus: metav1.ConditionFalse, wantReason: gpuv1.ReasonStateNotReady,
			wantMessage: "driver is ready on 0 of 12 nodes; not ready: n00, n01, n02, n03, n04, n05, n06, n07, n08, n09 and 2 more",
		},
		"a node without labels yet is pending": {
			nodes:      []corev1.Node{gpuNode("new")},
			wantStatus: metav1.ConditionFalse, wantReason: gpuv1.ReasonStateNotReady,
			wantMessage: "driver is ready on 0 of 1 nodes; not ready: new",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var conds []metav1.Condition
			setReadyCondition(&conds, testSummary(t, tt.nodes, tt.enabled), 3)
			c := meta.FindStatusCondition(conds, gpuv1.ConditionReady)
			g.Expect(c.Status).To(Equal(tt.wantStatus))
			g.Expect(c.Reason).To(Equal(tt.wantReason))
			g.Expect(c.Message).To(Equal(tt.wantMessage))
			g.Expect(c.ObservedGeneration).To(Equal(int64(3)))
		})
	}
}

func TestSetProgressingCondition(t *testing.T) {
	p, r := gpuv1.StatePending, gpuv1.StateReady
	tests := map[string]struct {
		nodes       []corev1.Node
		wantStatus  metav1.ConditionStatus
		wantMessage string
	}{
		"done": {nodes: []corev1.Node{ready("a")}, wantStatus: metav1.ConditionFalse, wantMessage: "no node is on its way"},
		"rolling out": {
			nodes:       []corev1.Node{ready("a"), gpuNode("b", r, r, p, p, p)},
			wantStatus:  metav1.ConditionTrue,
			wantMessage: "1 of 2 GPU nodes ready; device-plugin pending on 1, dcgm-exporter pending on 1, gpu-feature-discovery pending on 1",
		},
		"a driver upgrade says how far it got": {
			nodes: func() []corev1.Node {
				a, b, c := ready("a"), ready("b"), ready("c")
				a.Labels[gpuv1.LabelUpgradeState] = "upgrade-done"
				b.Labels[gpuv1.LabelUpgradeState] = "pod-deletion-required"
				c.Labels[gpuv1.LabelUpgradeState] = "upgrade-required"
				return []corev1.Node{a, b, c}
			}(),
			wantStatus:  metav1.ConditionTrue,
			wantMessage: "driver upgrade: 1 of 3 nodes done, 1 in progress, 1 waiting, 0 failed",
		},
		"an upgrade names the nodes waiting, and why": {
			nodes: func() []corev1.Node {
				a, b := ready("a"), ready("b")
				a.Labels[gpuv1.LabelUpgradeState] = "pod-deletion-required"
				b.Labels[gpuv1.LabelUpgradeState] = "upgrade-required"
				b.Annotations = map[string]string{gpuv1.AnnotationMaintenanceWaiting: "the driver upgrade waits for driver.upgradePolicy.maxParallelUpgrades"}
				return []corev1.Node{a, b}
			}(),
			wantStatus: metav1.ConditionTrue,
			wantMessage: "driver upgrade: 0 of 2 nodes done, 1 in progress, 1 waiting, 0 failed; " +
				"1 node waits for maintenance: b (the driver upgrade waits for driver.upgradePolicy.maxParallelUpgrades)",
		},
		"a repair waiting for its place": {
			nodes: func() []corev1.Node {
				a := ready("a")
				a.Annotations = map[string]string{gpuv1.AnnotationMaintenanceWaiting: "the repair waits for operator.remediation.maxParallel"}
				return []corev1.Node{a}
			}(),
			wantStatus:  metav1.ConditionTrue,
			wantMessage: "1 node waits for maintenance: a (the repair waits for operator.remediation.maxParallel)",
		},
		"upgrading counts as on its way": {
			nodes:       []corev1.Node{gpuNode("a", r, gpuv1.StateUpgrading, r, r, r)},
			wantStatus:  metav1.ConditionTrue,
			wantMessage: "0 of 1 GPU nodes ready; container-toolkit pending on 1",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var conds []metav1.Condition
			setProgressingCondition(&conds, testSummary(t, tt.nodes, nil), 1)
			c := meta.FindStatusCondition(conds, gpuv1.ConditionProgressing)
			g.Expect(c.Status).To(Equal(tt.wantStatus))
			g.Expect(c.Message).To(Equal(tt.wantMessage))
		})
	}
}

func TestSetDegradedCondition(t *testing.T) {
	p, r, f := gpuv1.StatePending, gpuv1.StateReady, gpuv1.StateFailed
	tests := map[string]struct {
		nodes       []corev1.Node
		applyErr    error
		missing     []string
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		"a missing prerequisite": {nodes: []corev1.Node{ready("a")}, missing: []string{"install the CRD"},
			wantStatus: metav1.ConditionTrue, wantReason: gpuv1.ReasonPrerequisiteMissing, wantMessage: "install the CRD"},
		"healthy": {nodes: []corev1.Node{ready("a")}, wantStatus: metav1.ConditionFalse, wantReason: gpuv1.ReasonNoFailures,
			wantMessage: "no state failed on any node"},
		"failed nodes are named per state": {
			nodes:      []corev1.Node{gpuNode("b", f, p, p, p, p), gpuNode("a", f, p, p, p, p), gpuNode("c", r, r, f, p, p)},
			wantStatus: metav1.ConditionTrue, wantReason: gpuv1.ReasonStateFailed,
			wantMessage: "driver failed on 2 nodes: a, b; device-plugin failed on 1 nodes: c (see the events of those nodes)",
		},
		"apply errors come first": {
			nodes: []corev1.Node{gpuNode("a", f)}, applyErr: errors.New("applying DaemonSet x: forbidden"),
			wantStatus: metav1.ConditionTrue, wantReason: gpuv1.ReasonApplyFailed, wantMessage: "applying DaemonSet x: forbidden",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var conds []metav1.Condition
			setDegradedCondition(&conds, testSummary(t, tt.nodes, nil), problems{apply: tt.applyErr, missing: tt.missing}, 1)
			c := meta.FindStatusCondition(conds, gpuv1.ConditionDegraded)
			g.Expect(c.Status).To(Equal(tt.wantStatus))
			g.Expect(c.Reason).To(Equal(tt.wantReason))
			g.Expect(c.Message).To(Equal(tt.wantMessage))
		})
	}
}

func TestBuildStatus(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cp", Generation: 4}}
	s := testSummary(t, []corev1.Node{ready("a"), gpuNode("b", gpuv1.StateReady, gpuv1.StatePending)},
		func(e map[state.Name]bool) { e[state.DCGMExporter] = false })
	st := buildStatus(cp, "gpu-operator", s, problems{})
	g.Expect(st.State).To(Equal(gpuv1.PolicyNotReady))
	g.Expect(st.ReadyNodes).To(Equal("1/2"))
	g.Expect(st.ObservedGeneration).To(Equal(int64(4)))
	g.Expect(st.Namespace).To(Equal("gpu-operator"))
	g.Expect(st.States).To(Equal([]gpuv1.StateSummary{
		{Name: "node-feature-discovery", Desired: 2, Ready: 2},
		{Name: "driver", Desired: 2, Ready: 2},
		{Name: "container-toolkit", Desired: 2, Ready: 1, Message: "not ready on b"},
		// Enabled, and no node has a MIG configuration, or shares GPUs
		// with MPS.
		{Name: "mig-manager", Disabled: 2},
		{Name: "mps-control-daemon", Disabled: 2},
		{Name: "device-plugin", Desired: 2, Ready: 1, Message: "not ready on b"},
		// Enabled, and no node is in allocation mode dra.
		{Name: "dra-driver", Disabled: 2},
		// Enabled, and no node labelled for it yet: it gates nothing.
		{Name: "dcgm", Disabled: 2},
		{Name: "gpu-feature-discovery", Desired: 2, Ready: 1, Message: "not ready on b"},
		// Enabled, and no node labelled for it yet: it gates nothing.
		{Name: "cuda-workload", Disabled: 2},
	}), "disabled states are left out")

	// A failed apply keeps the old observed generation, and so do the
	// conditions about the nodes; Degraded is about this generation.
	cp.Status.ObservedGeneration = 3
	failed := buildStatus(cp, "gpu-operator", s, problems{apply: errors.New("x")})
	g.Expect(failed.ObservedGeneration).To(Equal(int64(3)))
	for _, c := range failed.Conditions {
		want := int64(3)
		if c.Type == gpuv1.ConditionDegraded {
			want = 4
		}
		g.Expect(c.ObservedGeneration).To(Equal(want), "condition %s", c.Type)
	}
}

// The status says which nodes use their host's driver, and why each state
// is not ready on the nodes it names.
func TestStateMessages(t *testing.T) {
	g := NewWithT(t)
	r, d, p := gpuv1.StateReady, gpuv1.StateDisabled, gpuv1.StatePending
	found := gpuNode("found", d, r, r, r, r)
	found.Annotations = map[string]string{gpuv1.AnnotationHostDriver: "the host runs NVIDIA driver 550.54.15"}
	declared := gpuNode("declared", d, r, r, r, r)
	declared.Labels[gpuv1.DeployLabel("driver")] = "pre-installed"
	stuck := gpuNode("stuck", r, p, p, p, p)
	s := testSummary(t, []corev1.Node{ready("a"), found, declared, stuck}, nil)
	s.why = map[string]map[state.Name]string{"stuck": {state.ContainerToolkit: `the runtime reports no "nvidia" handler yet`}}
	st := buildStatus(&gpuv1.ClusterPolicy{}, "gpu-operator", s, problems{})
	g.Expect(st.States).To(ContainElement(gpuv1.StateSummary{Name: "driver", Desired: 2, Ready: 2, Disabled: 2,
		Message: "2 nodes use the driver installed on their host: declared (nvidia.com/gpu.deploy.driver=pre-installed), " +
			"found (the host runs NVIDIA driver 550.54.15)"}))
	g.Expect(st.States).To(ContainElement(gpuv1.StateSummary{Name: "container-toolkit", Desired: 4, Ready: 3,
		Message: `not ready on stuck (the runtime reports no "nvidia" handler yet)`}))
	c := meta.FindStatusCondition(st.Conditions, gpuv1.ConditionReady)
	g.Expect(c.Message).To(Equal(`container-toolkit is ready on 3 of 4 nodes; not ready: stuck (the runtime reports no "nvidia" handler yet)`))
	g.Expect(s.namedNodes()).To(Equal(map[string]bool{"stuck": true}))
}

func TestIgnoredStatus(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "second", Generation: 2}}
	active := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "first"}}
	st := ignoredStatus(cp, active, "gpu-operator")
	g.Expect(st.State).To(Equal(gpuv1.PolicyIgnored))
	for _, c := range st.Conditions {
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(gpuv1.ReasonIgnored))
		g.Expect(c.Message).To(Equal("ClusterPolicy first is the active one, being the oldest; this one is ignored until first is deleted"))
	}
	g.Expect(st.Conditions).To(HaveLen(3))
}

// A failed driver upgrade reaches the policy: Degraded names the nodes and
// says how to retry (issue 12, finding 9).
func TestDegradedByFailedUpgrades(t *testing.T) {
	g := NewWithT(t)
	failed := ready("z-node")
	failed.Labels[gpuv1.LabelUpgradeState] = string(gpuv1.UpgradeFailed)
	other := ready("a-node")
	other.Labels[gpuv1.LabelUpgradeState] = string(gpuv1.UpgradeFailed)
	var conds []metav1.Condition
	setDegradedCondition(&conds, testSummary(t, []corev1.Node{failed, ready("b"), other}, nil), problems{}, 1)
	c := meta.FindStatusCondition(conds, gpuv1.ConditionDegraded)
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(c.Reason).To(Equal(gpuv1.ReasonUpgradeFailed))
	g.Expect(c.Message).To(HavePrefix("the driver upgrade failed on 2 nodes: a-node, z-node (they stay cordoned"))
}

func TestGPUHealthInStatus(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cp"}}
	st := buildStatus(cp, "gpu-operator", testSummary(t, []corev1.Node{ready("a"), ready("b")}, nil), problems{})
	g.Expect(st.GPUHealth).To(BeNil(), "absent while every GPU is healthy")

	sick := func(name, count string) corev1.Node {
		n := ready(name)
		n.Annotations = map[string]string{gpuv1.AnnotationUnhealthyGPUs: count}
		return n
	}
	nodes := []corev1.Node{ready("a"), sick("c", "2"), sick("b", "1"), sick("d", "not a number")}
	st = buildStatus(cp, "gpu-operator", testSummary(t, nodes, nil), problems{})
	g.Expect(st.GPUHealth).To(Equal(&gpuv1.GPUHealthSummary{UnhealthyNodes: 2, UnhealthyGPUs: 3,
		Message: "unhealthy GPUs on b (1), c (2)"}))
}
