package controllers

import (
	"context"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
)

func withReadinessTaint(cp *gpuv1.ClusterPolicy) { cp.Spec.Operator.ReadinessTaint.Enabled = true }

// taintsOf returns a node's taints as key:effect, but for the node
// lifecycle controller's (node.kubernetes.io/not-ready and the like, which
// come and go with the node's Ready condition).
func (f *fixture) taintsOf(node string) func() []string {
	return func() []string {
		var out []string
		for _, t := range f.node(node).Spec.Taints {
			if !strings.HasPrefix(t.Key, "node.kubernetes.io/") {
				out = append(out, t.Key+":"+string(t.Effect))
			}
		}
		slices.Sort(out)
		return out
	}
}

func (f *fixture) addTaint(node string, t corev1.Taint) {
	NewWithT(f.t).Eventually(func() error {
		n := f.node(node)
		n.Spec.Taints = append(n.Spec.Taints, t)
		return k8sClient.Update(f.ctx, n)
	}, timeout, interval).Should(Succeed())
}

const (
	notReadyTaint = gpuv1.TaintGPUNotReady + ":NoSchedule"
	usersTaint    = "team:NoSchedule"
)

// The readiness taint is on a GPU node while a state is not ready there,
// after a reboot too, and goes once every state is ready; a user's taints
// stay as they are throughout.
func TestReadinessTaintUntilTheNodeIsReady(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 2, withReadinessTaint)
	node, other := f.nodes[0], f.nodes[1]
	sim.set(node, "dcgm-exporter", staysNotReady)
	f.addTaint(node, corev1.Taint{Key: "team", Value: "ml", Effect: corev1.TaintEffectNoSchedule})

	g.Eventually(f.taintsOf(node), timeout, interval).Should(ConsistOf(notReadyTaint, usersTaint))
	g.Expect(f.node(node).Spec.Taints).To(ContainElement(gating.ReadinessTaint), "the value says it is the operator's")
	f.expectAllReady(other)
	g.Eventually(f.taintsOf(other), timeout, interval).Should(BeEmpty())
	g.Consistently(f.taintsOf(node), "2s", interval).Should(ConsistOf(notReadyTaint, usersTaint),
		"dcgm-exporter is not ready there")

	sim.set(node, "dcgm-exporter", becomesReady)
	f.expectAllReady(node)
	g.Eventually(f.taintsOf(node), timeout, interval).Should(Equal([]string{usersTaint}))

	// A reboot resets the chain: the taint is back until it re-forms.
	sim.set(node, "driver", staysNotReady)
	f.setBootID(node, "boot-2")
	g.Expect(sim.restart(f.ctx, node)).To(Succeed())
	g.Eventually(f.taintsOf(node), timeout, interval).Should(ConsistOf(notReadyTaint, usersTaint))
	sim.set(node, "driver", becomesReady)
	f.expectAllReady(node)
	g.Eventually(f.taintsOf(node), timeout, interval).Should(Equal([]string{usersTaint}))
}

// Turning the option off, or deleting the policy, removes the taints the
// operator set and no other: a taint of the key with another value is not
// the operator's to remove.
func TestReadinessTaintGoesWithTheOption(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 2, withReadinessTaint)
	held, ready := f.nodes[0], f.nodes[1]
	sim.set(held, "driver", staysNotReady)
	g.Eventually(f.taintsOf(held), timeout, interval).Should(Equal([]string{notReadyTaint}))
	f.expectAllReady(ready)
	g.Eventually(f.taintsOf(ready), timeout, interval).Should(BeEmpty())
	// Someone taints the ready node with the key, by hand, and another
	// value.
	f.addTaint(ready, corev1.Taint{Key: gpuv1.TaintGPUNotReady, Value: "maintenance", Effect: corev1.TaintEffectNoSchedule})

	f.updatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Operator.ReadinessTaint.Enabled = false })
	g.Eventually(f.taintsOf(held), timeout, interval).Should(BeEmpty())
	g.Consistently(f.taintsOf(ready), "2s", interval).Should(Equal([]string{notReadyTaint}), "not the operator's")

	// On again, then the policy goes: the held node's taint goes with it,
	// and the policy waits for that.
	f.updatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Operator.ReadinessTaint.Enabled = true })
	g.Eventually(f.taintsOf(held), timeout, interval).Should(Equal([]string{notReadyTaint}))

	g.Expect(k8sClient.Delete(f.ctx, f.policy)).To(Succeed())
	g.Eventually(f.taintsOf(held), timeout, interval).Should(BeEmpty())
	g.Eventually(f.policies, timeout, interval).Should(BeEmpty(), "the policy goes once the taint is gone")
}

// An API server that refuses the taint (an admission policy on node
// taints) holds back nothing else: the labels are written and every state
// becomes ready.
func TestRefusedReadinessTaintHoldsNothingBack(t *testing.T) {
	g := NewWithT(t)
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-gpu-not-ready-taint"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
						Resources: []string{"nodes"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!has(object.spec.taints) || !object.spec.taints.exists(t, t.key == '" + gpuv1.TaintGPUNotReady + "')",
				Message:    "no readiness taints here",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "no-gpu-not-ready-taint"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: vap.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	ctx := context.Background()
	g.Expect(k8sClient.Create(ctx, vap)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, vap) })
	g.Expect(k8sClient.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, binding) })
	// The policy takes effect once the API server has loaded it.
	probe := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vap-probe"}}
	g.Expect(k8sClient.Create(ctx, probe)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, probe) })
	g.Eventually(func() error {
		n := &corev1.Node{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(probe), n); err != nil {
			return err
		}
		n.Spec.Taints = []corev1.Taint{gating.ReadinessTaint}
		return k8sClient.Update(ctx, n)
	}, timeout, interval).Should(MatchError(ContainSubstring("no readiness taints here")))

	f := setup(t, 1, withReadinessTaint)
	f.expectAllReady(f.nodes...)
	g.Expect(f.taintsOf(f.nodes[0])()).To(BeEmpty())
}
