package maintenance

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/draslices"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/remediation"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/timers"
)

// slicesSay is a SliceReader with one answer for every node.
type slicesSay struct {
	node *draslices.Node
	err  error
}

func (s slicesSay) OnNode(string) (*draslices.Node, error) { return s.node, s.err }

// A repair of a DRA node reads the DRA driver: its state ready again since
// the boot, its pod (not the one replaced) ready a while, and its slices
// naming every GPU of the repair's start with none tainted.
func TestRepairOfADRANodeReadsItsSlices(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	node := func(draState gpuv1.StateValue) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{
				gpuv1.LabelAllocationMode: "dra", gpuv1.StateLabel(string(state.DRADriver)): string(draState),
				gpuv1.StateLabel(string(state.DevicePlugin)): string(gpuv1.StateDisabled),
			}, Annotations: map[string]string{gating.AnnotationBootID: "b", gpuv1.AnnotationUnhealthyGPUs: "1"}},
			Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: "b"}},
		}
	}
	settled := &operandpods.Pod{ObjectMeta: metav1.ObjectMeta{UID: "new"}, Ready: true, ReadySince: now.Add(-time.Hour)}
	naming := func(gpus int, tainted ...string) *draslices.Node {
		n := &draslices.Node{Slices: 1, GPUs: gpus, Tainted: map[string][]string{},
			Pools: []draslices.Pool{{Name: "n", Generation: 1, Have: 1, Want: 1}}}
		for _, g := range tainted {
			n.Tainted[g] = []string{"gpu.nvidia.com/xid=79"}
		}
		return n
	}
	for name, tt := range map[string]struct {
		state    gpuv1.StateValue
		slices   SliceReader
		pod      *operandpods.Pod
		want     remediation.Health
		counting int64 // what the repair's start reads of the node's unhealthy GPUs
	}{
		"healthy":          {state: gpuv1.StateReady, slices: slicesSay{node: naming(8)}, pod: settled, want: remediation.Healthy},
		"a GPU tainted":    {state: gpuv1.StateReady, slices: slicesSay{node: naming(8, "gpu-3")}, pod: settled, want: remediation.Unhealthy, counting: 1},
		"a GPU gone":       {state: gpuv1.StateReady, slices: slicesSay{node: naming(7)}, pod: settled, want: remediation.Unhealthy},
		"plugin not ready": {state: gpuv1.StatePending, slices: slicesSay{node: naming(8)}, pod: settled, want: remediation.Unknown},
		"the replaced pod": {state: gpuv1.StateReady, slices: slicesSay{node: naming(8)}, pod: &operandpods.Pod{ObjectMeta: metav1.ObjectMeta{UID: "old"}, Ready: true, ReadySince: now.Add(-time.Hour)}, want: remediation.Unknown},
		// Unknown: the count as last recorded stands, and a queued repair
		// keeps its place.
		"slices not listed yet": {state: gpuv1.StateReady, slices: slicesSay{err: errors.New("not synced")}, pod: settled, want: remediation.Unknown, counting: 1},
		"API not served":        {state: gpuv1.StateReady, pod: settled, want: remediation.Unknown, counting: 1},
		"a pool half published": {state: gpuv1.StateReady, pod: settled, want: remediation.Unknown, counting: 1,
			slices: slicesSay{node: &draslices.Node{Slices: 1, GPUs: 4, Pools: []draslices.Pool{{Name: "n", Generation: 2, Have: 1, Want: 2}}}}},
		"slices wiped": {state: gpuv1.StateReady, slices: slicesSay{node: naming(0)}, pod: settled, want: remediation.Unknown},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := &Reconciler{Slices: tt.slices, Timers: timers.Timers{HealthSettle: 30 * time.Second}}
			n := node(tt.state)
			g.Expect(r.pluginHealth(n, tt.pod, "old", 8, now)).To(Equal(tt.want))
			g.Expect(r.unhealthyGPUs(n)).To(Equal(tt.counting))
		})
	}
}

// A repair's validation judges the GPUs in the units of the MIG layout
// they are in. The table lets a MIG configuration in within the repair's
// validation to make the devices its reload destroyed, which may be
// another layout than at the repair's start: its count of GPUs then says
// nothing of the new units. And for the kubelet's grace after the MIG
// change, the old resource is listed unallocatable: no word yet.
func TestARepairJudgesTheGPUsOfTheLayoutTheyAreIn(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	settled := &operandpods.Pod{ObjectMeta: metav1.ObjectMeta{UID: "new"}, Ready: true, ReadySince: now.Add(-time.Hour)}
	r := &Reconciler{Timers: timers.Timers{HealthSettle: 30 * time.Second, KubeletResourceGrace: 6 * time.Minute}}
	node := func(migDone time.Duration, oldResource bool) *corev1.Node {
		mig := corev1.ResourceList{"nvidia.com/mig-1g.18gb": resource.MustParse("7")}
		capacity, allocatable := mig.DeepCopy(), mig.DeepCopy()
		if oldResource {
			capacity["nvidia.com/gpu"] = resource.MustParse("1")
			allocatable["nvidia.com/gpu"] = resource.MustParse("0")
		}
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{
				gpuv1.StateLabel(string(state.DevicePlugin)): string(gpuv1.StateReady),
				gpuv1.LabelRemediationState:                  string(gpuv1.RemediationValidation),
				gpuv1.LabelMIGReconfigureState:               string(gpuv1.MIGReconfigureDone),
			}, Annotations: map[string]string{gating.AnnotationBootID: "b",
				AnnotationExpectedGPUs: "1", AnnotationExpectedLayout: "all-disabled", gpuv1.AnnotationMIGApplied: "all-1g.18gb",
				AnnotationMIGSince: now.Add(-migDone).Format(time.RFC3339)}},
			Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: "b"}, Capacity: capacity, Allocatable: allocatable},
		}
	}
	n := node(time.Hour, false)
	n.Annotations[AnnotationExpectedGPUs] = "8"
	g.Expect(r.repairHealth(n, settled, "", now)).To(Equal(remediation.Healthy),
		"7 MIG devices of all-1g.18gb, where the repair started with 8 whole GPUs")
	n.Annotations[gpuv1.AnnotationMIGApplied] = "all-disabled"
	g.Expect(r.repairHealth(n, settled, "", now)).To(Equal(remediation.Unhealthy), "the same layout: one GPU is missing")

	g.Expect(r.repairHealth(node(time.Minute, true), settled, "", now)).To(Equal(remediation.Unknown),
		"the kubelet still lists the old resource, unallocatable")
	g.Expect(r.repairHealth(node(6*time.Minute, true), settled, "", now)).To(Equal(remediation.Unhealthy),
		"after the grace, an unallocatable GPU is an unhealthy one")
}
