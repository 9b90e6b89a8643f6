package gating

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

func withReadinessTaint(in *Input) {
	in.Policy = &gpuv1.ClusterPolicy{Spec: gpuv1.ClusterPolicySpec{
		Operator: gpuv1.OperatorSpec{ReadinessTaint: gpuv1.ReadinessTaintSpec{Enabled: true}}}}
}

// The readiness taint stays while any enabled state is not ready, from
// discovery on, and goes once every one is ready or disabled.
func TestReadinessTaintUntilEveryStateIsReady(t *testing.T) {
	g := NewWithT(t)
	discovered := decide(t, node(nil, nil), nil, withReadinessTaint)
	g.Expect(discovered.ReadinessTaint).To(BeTrue(), "a GPU node just found")

	n, pods := readyNode()
	ready := decide(t, n, pods, withReadinessTaint)
	g.Expect(ready.ReadinessTaint).To(BeFalse())

	// One state down (its pod gone past the grace period) brings it back.
	delete(pods, state.DCGMExporter)
	n.Annotations[AnnotationMissingSince] = timeMap{state.DCGMExporter: now.Add(-2 * grace)}.String()
	down := decide(t, n, pods, withReadinessTaint)
	g.Expect(stateOf(down, state.DCGMExporter)).NotTo(Equal(string(gpuv1.StateReady)))
	g.Expect(down.ReadinessTaint).To(BeTrue())

	// A disabled state does not hold the node back.
	disabled := decide(t, n, pods, withReadinessTaint, func(in *Input) { in.Enabled[state.DCGMExporter] = false })
	g.Expect(stateOf(disabled, state.DCGMExporter)).To(Equal(string(gpuv1.StateDisabled)))
	g.Expect(disabled.ReadinessTaint).To(BeFalse())
}

func TestNoReadinessTaintUnlessAskedFor(t *testing.T) {
	g := NewWithT(t)
	r := decide(t, node(nil, nil), nil)
	g.Expect(r.ReadinessTaint).To(BeFalse())
	g.Expect(decide(t, node(nil, nil), nil, func(in *Input) { in.Policy = nil }).ReadinessTaint).To(BeFalse())
}

func TestOnlyTheOperatorsTaintIsItsOwn(t *testing.T) {
	g := NewWithT(t)
	g.Expect(IsOwnReadinessTaint(ReadinessTaint)).To(BeTrue())
	users := ReadinessTaint
	users.Value = ""
	g.Expect(IsOwnReadinessTaint(users)).To(BeFalse(), "a user's taint of the key")
	g.Expect(HasReadinessTaintKey(users)).To(BeTrue())
	other := ReadinessTaint
	other.Effect = corev1.TaintEffectNoExecute
	g.Expect(HasReadinessTaintKey(other)).To(BeFalse())
}
