package explain

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/controller/maintenance"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
)

var now = time.Date(2026, 12, 6, 22, 0, 0, 0, time.UTC)

// gpuNode is a GPU node of a pool with the given state values.
func gpuNode(name, pool string, states map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		gpuv1.LabelGPUPresent: "true", gpuv1.LabelDriverPool: pool, gpuv1.LabelAllocationMode: "device-plugin"},
		Annotations: map[string]string{}}}
	for s, v := range states {
		n.Labels[gpuv1.StateLabel(s)] = v
	}
	return n
}

func readyStates() map[string]string {
	return map[string]string{"driver": "ready", "container-toolkit": "ready", "device-plugin": "ready", "dcgm-exporter": "ready",
		"gpu-feature-discovery": "ready", "cuda-workload": "ready", "dra-driver": "disabled"}
}

// A node whose driver never loads: its chain in order with the node
// controller's reasons, the readiness taint, and what to do.
func TestWhyANodeIsNotReady(t *testing.T) {
	g := NewWithT(t)
	graph, err := registry.Graph()
	g.Expect(err).NotTo(HaveOccurred())
	states := readyStates()
	states["driver"], states["container-toolkit"], states["device-plugin"] = "failed", "pending", "pending"
	n := gpuNode("gpu-node-4", "default", states)
	n.Spec.Taints = []corev1.Taint{{Key: gpuv1.TaintGPUNotReady, Value: gpuv1.TaintGPUNotReadyValue, Effect: corev1.TaintEffectNoSchedule}}
	why := map[state.Name]string{state.Driver: "pod nvidia-driver-daemonset-x crash-loops: nvidia.ko not loaded",
		state.ContainerToolkit: "waiting for driver"}

	r := ForNode(n, graph, Facts{Why: why, Pods: map[state.Name]string{state.Driver: "nvidia-driver-daemonset-x"}, Namespace: "gpu-operator"})
	g.Expect(r.GPUNode).To(BeTrue())
	g.Expect(r.ReadinessTaint).To(BeTrue())
	g.Expect(r.States[0]).To(Equal(State{Name: "driver", Value: "failed", Reason: why[state.Driver], Pod: "nvidia-driver-daemonset-x"}),
		"the chain's order")
	g.Expect(r.States[1]).To(Equal(State{Name: "container-toolkit", Value: "pending", Reason: "waiting for driver"}))
	g.Expect(r.Next).To(ContainElements(ContainSubstring("state driver failed: kubectl describe node gpu-node-4"),
		ContainSubstring("kubectl logs -n gpu-operator nvidia-driver-daemonset-x --all-containers")))
	g.Expect(r.Next).NotTo(ContainElement(ContainSubstring("state container-toolkit")), "it only waits for the driver")

	var text bytes.Buffer
	g.Expect(r.WriteText(&text, now)).To(Succeed())
	g.Expect(text.String()).To(And(ContainSubstring("States, in order:"), ContainSubstring("nvidia.ko not loaded"),
		ContainSubstring("Readiness taint:  yes")))
	g.Expect(text.String()).NotTo(MatchRegexp(`(?m) $`), "no line ends in blanks")
	out, err := json.Marshal(r)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring(`"name":"driver","value":"failed"`))
}

// The operations a node's labels record, with since and reason, and the
// docs' commands for a person: retry a failed upgrade, approve a repair.
func TestWhySaysWhatHoldsTheNode(t *testing.T) {
	g := NewWithT(t)
	graph, err := registry.Graph()
	g.Expect(err).NotTo(HaveOccurred())
	n := gpuNode("gpu-node-1", "default", readyStates())
	n.Labels[gpuv1.LabelUpgradeState] = string(gpuv1.UpgradeFailed)
	n.Annotations[maintenance.AnnotationSince] = now.Add(-time.Hour).Format(time.RFC3339)
	n.Labels[gpuv1.LabelRemediationState] = string(gpuv1.RemediationRequired)
	n.Labels[gpuv1.LabelMIGReconfigureState] = string(gpuv1.MIGReconfigureDone)
	n.Annotations[gpuv1.AnnotationMaintenanceWaiting] = "the repair waits: the driver upgrade holds the node"

	r := ForNode(n, graph, Facts{Namespace: "gpu-operator"})
	g.Expect(r.Operations).To(ConsistOf(
		Operation{Name: "driver upgrade", State: "upgrade-failed", Since: now.Add(-time.Hour)},
		Operation{Name: "repair", State: "remediation-required"}), "an idle MIG state holds nothing")
	g.Expect(r.Next).To(ContainElements(
		"the driver upgrade failed: once its cause is fixed, retry it with kubectl label node gpu-node-1 "+
			"nvidia.com/gpu-driver-upgrade-state=upgrade-required --overwrite",
		ContainSubstring("kubectl annotate node gpu-node-1 nvidia.com/gpu-remediation.approved=true"),
		"it waits: the repair waits: the driver upgrade holds the node"))
	var text bytes.Buffer
	g.Expect(r.WriteText(&text, now)).To(Succeed())
	g.Expect(text.String()).To(ContainSubstring("driver upgrade  upgrade-failed        for 1h0m0s"))

	g.Expect(ForNode(n, graph, Facts{RepairsAutoStart: true}).Next).NotTo(ContainElement(ContainSubstring("approve")),
		"with autoStart on, the repair waits for its budget, not a person")
	n.Annotations[gpuv1.AnnotationRemediationApproved] = "true"
	g.Expect(ForNode(n, graph, Facts{Namespace: "gpu-operator"}).Next).NotTo(ContainElement(ContainSubstring("approve")), "already approved")

	// Moved to another pool while its failed upgrade holds it: the pool
	// it is held under is told; once nothing holds it, no more.
	n.Annotations[gpuv1.AnnotationMaintenancePool] = "a100"
	r = ForNode(n, graph, Facts{Namespace: "gpu-operator"})
	g.Expect(r.HeldUnder).To(Equal("a100"))
	text.Reset()
	g.Expect(r.WriteText(&text, now)).To(Succeed())
	g.Expect(text.String()).To(ContainSubstring("Held under pool:  a100"))
	n.Labels[gpuv1.LabelUpgradeState] = string(gpuv1.UpgradeRequired)
	g.Expect(ForNode(n, graph, Facts{Namespace: "gpu-operator"}).HeldUnder).To(BeEmpty())

	g.Expect(ForNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-1"}}, graph, Facts{})).To(And(
		HaveField("GPUNode", false), HaveField("Next", ConsistOf(ContainSubstring("serves no GPU")))))
}

// The fleet per pool and state, the nodes held and those waiting; nodes
// that are no GPU nodes are not counted.
func TestFleetStatus(t *testing.T) {
	g := NewWithT(t)
	graph, err := registry.Graph()
	g.Expect(err).NotTo(HaveOccurred())
	broken := readyStates()
	broken["driver"] = "failed"
	held := gpuNode("b-1", "b", readyStates())
	held.Labels[gpuv1.LabelUpgradeState] = string(gpuv1.UpgradeDrainRequired)
	waiting := gpuNode("a-2", "a", readyStates())
	waiting.Labels[gpuv1.LabelUpgradeState] = string(gpuv1.UpgradeRequired)
	waiting.Annotations[gpuv1.AnnotationMaintenanceWaiting] = "the driver upgrade waits for maxUnavailable (1 of 1 taken)"
	fresh := gpuNode("b-2", "b", nil)
	nodes := []corev1.Node{*gpuNode("a-1", "a", readyStates()), *waiting, *gpuNode("a-3", "a", broken), *held, *fresh,
		{ObjectMeta: metav1.ObjectMeta{Name: "cpu-1"}}}

	f := ForFleet(nodes, graph)
	g.Expect(f.GPUNodes).To(Equal(5))
	g.Expect(f.Ready).To(Equal(3), "a node not labelled yet is not ready, as the ClusterPolicy counts it")
	g.Expect(f.Pools[1].States["driver"]).To(HaveKeyWithValue("pending", 1))
	g.Expect(f.Pools[1].States["mig-manager"]).To(HaveKeyWithValue("disabled", 2), "it gates only once labelled")
	g.Expect(f.Pools).To(HaveLen(2))
	g.Expect(f.Pools[0]).To(And(HaveField("Name", "a"), HaveField("Nodes", 3), HaveField("Ready", 2)))
	g.Expect(f.Pools[0].States["driver"]).To(Equal(map[string]int{"ready": 2, "failed": 1}))
	g.Expect(f.Held).To(ConsistOf(HaveField("Node", "a-2"), HaveField("Node", "b-1")))
	g.Expect(f.Waiting).To(Equal([]Waiting{{Node: "a-2", Why: "the driver upgrade waits for maxUnavailable (1 of 1 taken)"}}))
	var text bytes.Buffer
	g.Expect(f.WriteText(&text, now)).To(Succeed())
	g.Expect(text.String()).To(And(ContainSubstring("GPU nodes: 5, ready on every state: 3"),
		MatchRegexp(`a\s+\(nodes\)\s+2/3`), ContainSubstring("a-2: the driver upgrade waits for maxUnavailable")))
	g.Expect(text.String()).NotTo(MatchRegexp(`(?m) $`), "the pools' nodes lines, whose last cells are empty, end without blanks")
}
