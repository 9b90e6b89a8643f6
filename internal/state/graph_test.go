package state

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

type fakeOperand struct{}

func (fakeOperand) Enabled(*gpuv1.ClusterPolicySpec) bool       { return true }
func (fakeOperand) Render(RenderInput) ([]client.Object, error) { return nil, nil }
func (fakeOperand) Kinds() []schema.GroupVersionKind            { return nil }

func TestNewGraphRejectsBadOrders(t *testing.T) {
	op := fakeOperand{}
	tests := map[string]struct {
		states []State
		want   string
	}{
		"duplicate": {
			states: []State{{Name: "a", Operand: op}, {Name: "a", Operand: op}},
			want:   `state "a" is declared twice`,
		},
		"prerequisite declared later": {
			states: []State{{Name: "b", After: []Name{"a"}, Operand: op}, {Name: "a", Operand: op}},
			want:   `state "b" must come after its prerequisite "a"`,
		},
		"self cycle": {
			states: []State{{Name: "a", After: []Name{"a"}, Operand: op}},
			want:   `state "a" must come after its prerequisite "a"`,
		},
		"no operand": {
			states: []State{{Name: "a"}},
			want:   `state "a" has no operand`,
		},
		"a mode no node has": {
			states: []State{{Name: "a", Operand: op, Mode: gpuv1.AllocationNone}},
			want:   `state "a" runs in allocation mode "none": only a per-node state has a mode, device-plugin or dra`,
		},
		"a mode on a cluster-wide state": {
			states: []State{{Name: "a", Operand: op, Scope: ClusterWide, Mode: gpuv1.AllocationDRA}},
			want:   `state "a" runs in allocation mode "dra": only a per-node state has a mode, device-plugin or dra`,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := NewGraph(tt.states...)
			NewWithT(t).Expect(err).To(MatchError(tt.want))
		})
	}
}

func TestDiamond(t *testing.T) {
	g := NewWithT(t)
	op := fakeOperand{}
	graph, err := NewGraph(
		State{Name: "a", Operand: op},
		State{Name: "b", After: []Name{"a"}, Operand: op},
		State{Name: "c", After: []Name{"a"}, Operand: op},
		State{Name: "d", After: []Name{"b", "c"}, Operand: op},
	)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(graph.Prerequisites("d")).To(Equal([]Name{"a", "b", "c"}))
	g.Expect(graph.Downstream("a")).To(Equal([]Name{"b", "c", "d"}))
	g.Expect(graph.Downstream("b")).To(Equal([]Name{"d"}))
}

// A state that starts after another is gated on either: the other up for
// its first start, or itself ready, so that it stays when the other
// leaves; the other's leaving does not reach it.
func TestStartsAfter(t *testing.T) {
	g := NewWithT(t)
	op := fakeOperand{}
	graph, err := NewGraph(
		State{Name: "nfd", Scope: ClusterWide, Operand: op},
		State{Name: "a", After: []Name{"nfd"}, Operand: op},
		State{Name: "b", After: []Name{"nfd"}, StartsAfter: []Name{"a"}, Operand: op},
		State{Name: "c", After: []Name{"a", "b"}, Operand: op},
	)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(graph.Prerequisites("b")).To(BeEmpty())
	g.Expect(graph.StartPrerequisites("b")).To(Equal([]Name{"a"}))
	g.Expect(graph.StartPrerequisites("c")).To(Equal([]Name{"a", "b"}))
	g.Expect(graph.Downstream("a")).To(Equal([]Name{"c"}), "b is not torn down when a leaves")
	g.Expect(graph.GateEither("c")).To(BeNil())
	g.Expect(graph.GateEither("b")).To(Equal([][]corev1.NodeSelectorRequirement{
		{{Key: "nvidia.com/gpu.state.a", Operator: corev1.NodeSelectorOpIn, Values: []string{"disabled", "ready"}}},
		{{Key: "nvidia.com/gpu.state.b", Operator: corev1.NodeSelectorOpIn, Values: []string{"ready"}}},
	}))

	_, err = NewGraph(State{Name: "b", StartsAfter: []Name{"a"}, Operand: op}, State{Name: "a", Operand: op})
	g.Expect(err).To(MatchError(`state "b" must come after its prerequisite "a"`))
}

// A state of one allocation mode is gated on the node's mode label: the
// DRA side on dra alone, the device plugin's side on anything but dra and
// none, so that a node not labelled yet keeps its device plugin. Their
// common successor runs on either, each disabling the other per node.
func TestModesGateOnTheAllocationModeLabel(t *testing.T) {
	g := NewWithT(t)
	op := fakeOperand{}
	graph, err := NewGraph(
		State{Name: "driver", Operand: op},
		State{Name: "plugin", After: []Name{"driver"}, Operand: op, Mode: gpuv1.AllocationDevicePlugin},
		State{Name: "dra", After: []Name{"driver"}, Operand: op, Mode: gpuv1.AllocationDRA},
		State{Name: "metrics", After: []Name{"plugin", "dra"}, Operand: op},
	)
	g.Expect(err).NotTo(HaveOccurred())
	mode := func(name Name) []corev1.NodeSelectorRequirement {
		var out []corev1.NodeSelectorRequirement
		for _, r := range graph.Gate(name) {
			if r.Key == gpuv1.LabelAllocationMode {
				out = append(out, r)
			}
		}
		return out
	}
	g.Expect(mode("dra")).To(ConsistOf(corev1.NodeSelectorRequirement{Key: gpuv1.LabelAllocationMode,
		Operator: corev1.NodeSelectorOpIn, Values: []string{"dra"}}))
	g.Expect(mode("plugin")).To(ConsistOf(corev1.NodeSelectorRequirement{Key: gpuv1.LabelAllocationMode,
		Operator: corev1.NodeSelectorOpNotIn, Values: []string{"dra", "none"}}))
	g.Expect(mode("metrics")).To(BeEmpty())
	g.Expect(mode("driver")).To(BeEmpty())
	g.Expect(graph.Prerequisites("metrics")).To(ConsistOf(Name("driver"), Name("plugin"), Name("dra")))
}
