package maintenance

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// A deploy label a person deletes, rather than sets to false, ends no
// upgrade or MIG reconfiguration in flight (issue 52, finding 1, the
// node controller's own labels): forgetting one uncordons a node mid-
// drain, or drops the MIG taint mid-apply, before the node controller
// writes the label back. A value other than true is an opt-out and ends
// it; a node never labelled starts nothing.
func TestDeletedDeployLabelEndsNoOperation(t *testing.T) {
	p := &pass{cp: &gpuv1.ClusterPolicy{}}
	p.cp.Spec.MIGManager.Enabled = ptr.To(true)
	tests := map[string]struct {
		machine interface {
			runs(*pass, *corev1.Node) bool
		}
		deploy string
		stateL string
		since  string
		// inFlight and idle are the state label's values in flight and not.
		inFlight, idle string
	}{
		"upgrade": {machine: upgrades{}, deploy: gpuv1.DeployLabel(string(state.Driver)), stateL: gpuv1.LabelUpgradeState, since: AnnotationSince,
			inFlight: string(gpuv1.UpgradePodDeletion), idle: string(gpuv1.UpgradeDone)},
		"MIG reconfiguration": {machine: reconfigurations{}, deploy: gpuv1.DeployLabel(string(state.MIGManager)),
			stateL: gpuv1.LabelMIGReconfigureState, since: AnnotationMIGSince, inFlight: string(gpuv1.MIGReconfigureRequired), idle: string(gpuv1.MIGReconfigureDone)},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			node := func(deploy, st string) *corev1.Node {
				n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{gpuv1.LabelGPUPresent: gpuv1.LabelTrue}}}
				if deploy != "-" {
					n.Labels[tt.deploy] = deploy
				}
				if st != "" {
					n.Labels[tt.stateL] = st
					n.Annotations = map[string]string{tt.since: "2026-12-06T21:00:00Z"}
				}
				return n
			}
			g.Expect(tt.machine.runs(p, node("true", tt.inFlight))).To(BeTrue())
			g.Expect(tt.machine.runs(p, node("-", tt.inFlight))).To(BeTrue(), "deleted mid-operation: it goes on")
			g.Expect(tt.machine.runs(p, node("false", tt.inFlight))).To(BeFalse(), "an opt-out ends it")
			g.Expect(tt.machine.runs(p, node("-", tt.idle))).To(BeFalse(), "nothing in flight: it waits for the label")
			g.Expect(tt.machine.runs(p, node("-", ""))).To(BeFalse(), "never labelled: nothing starts")
			foreign := node("-", tt.inFlight)
			foreign.Annotations = nil
			g.Expect(tt.machine.runs(p, foreign)).To(BeFalse(), "a state another operator left is no operation of this one's")
			opted := node("true", tt.inFlight)
			opted.Labels[gpuv1.LabelDeployOperands] = "false"
			g.Expect(tt.machine.runs(p, opted)).To(BeFalse(), "every operand opted out")
		})
	}
}
