package gating

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

func addTaint(f *controllertest.Fixture, node string, t corev1.Taint) {
	NewWithT(f.T).Eventually(func() error {
		n := f.Node(node)
		n.Spec.Taints = append(n.Spec.Taints, t)
		return suite.Client.Update(f.Ctx, n)
	}, controllertest.Timeout, controllertest.Interval).Should(Succeed())
}

const (
	notReadyTaint = gpuv1.TaintGPUNotReady + ":NoSchedule"
	usersTaint    = "team:NoSchedule"
)

// untaintedUnready records every version of the fixture's nodes that has
// a state label neither ready nor disabled and no readiness taint: the
// scheduler could place a GPU pod there before the node's stack is up.
func untaintedUnready(f *controllertest.Fixture) func() []string {
	var mu sync.Mutex
	var out []string
	f.WatchOwnNodes(func(n *corev1.Node) {
		if slices.ContainsFunc(n.Spec.Taints, gating.HasReadinessTaintKey) {
			return
		}
		for k, v := range n.Labels {
			if strings.HasPrefix(k, gpuv1.StateLabelPrefix) && v != string(gpuv1.StateReady) && v != string(gpuv1.StateDisabled) {
				mu.Lock()
				out = append(out, fmt.Sprintf("%s at rv %s: %s=%s, untainted", n.Name, n.ResourceVersion, k, v))
				mu.Unlock()
				return
			}
		}
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(out)
	}
}

// The readiness taint is on a GPU node while a state is not ready there,
// after a reboot too, and goes once every state is ready; a user's taints
// stay as they are throughout. It goes on before a state leaves ready and
// comes off after the last one is: no version of the node shows it
// untainted with a state not ready.
func TestReadinessTaintUntilTheNodeIsReady(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2, controllertest.WithReadinessTaint)
	node, other := f.Nodes[0], f.Nodes[1]
	breaches := untaintedUnready(f)
	suite.Sim.Set(node, "dcgm-exporter", controllertest.StaysNotReady)
	addTaint(f, node, corev1.Taint{Key: "team", Value: "ml", Effect: corev1.TaintEffectNoSchedule})

	g.Eventually(f.TaintsOf(node), controllertest.Timeout, controllertest.Interval).Should(ConsistOf(notReadyTaint, usersTaint))
	g.Expect(f.Node(node).Spec.Taints).To(ContainElement(gating.ReadinessTaint), "the value says it is the operator's")
	f.ExpectAllReady(other)
	g.Eventually(f.TaintsOf(other), controllertest.Timeout, controllertest.Interval).Should(BeEmpty())
	g.Consistently(f.TaintsOf(node), "2s", controllertest.Interval).Should(ConsistOf(notReadyTaint, usersTaint),
		"dcgm-exporter is not ready there")

	suite.Sim.Set(node, "dcgm-exporter", controllertest.BecomesReady)
	f.ExpectAllReady(node)
	g.Eventually(f.TaintsOf(node), controllertest.Timeout, controllertest.Interval).Should(Equal([]string{usersTaint}))

	// A reboot resets the chain: the taint is back until it re-forms.
	suite.Sim.Set(node, "driver", controllertest.StaysNotReady)
	f.SetBootID(node, "boot-2")
	g.Expect(suite.Sim.Restart(f.Ctx, node)).To(Succeed())
	g.Eventually(f.TaintsOf(node), controllertest.Timeout, controllertest.Interval).Should(ConsistOf(notReadyTaint, usersTaint))
	suite.Sim.Set(node, "driver", controllertest.BecomesReady)
	f.ExpectAllReady(node)
	g.Eventually(f.TaintsOf(node), controllertest.Timeout, controllertest.Interval).Should(Equal([]string{usersTaint}))
	g.Expect(breaches()).To(BeEmpty())
}

// Turning the option off, or deleting the policy, removes the taints the
// operator set and no other: a taint of the key with another value is not
// the operator's to remove.
func TestReadinessTaintGoesWithTheOption(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2, controllertest.WithReadinessTaint)
	held, ready := f.Nodes[0], f.Nodes[1]
	suite.Sim.Set(held, "driver", controllertest.StaysNotReady)
	g.Eventually(f.TaintsOf(held), controllertest.Timeout, controllertest.Interval).Should(Equal([]string{notReadyTaint}))
	f.ExpectAllReady(ready)
	g.Eventually(f.TaintsOf(ready), controllertest.Timeout, controllertest.Interval).Should(BeEmpty())
	// Someone taints the ready node with the key, by hand, and another
	// value.
	addTaint(f, ready, corev1.Taint{Key: gpuv1.TaintGPUNotReady, Value: "maintenance", Effect: corev1.TaintEffectNoSchedule})

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Operator.ReadinessTaint.Enabled = false })
	g.Eventually(f.TaintsOf(held), controllertest.Timeout, controllertest.Interval).Should(BeEmpty())
	g.Consistently(f.TaintsOf(ready), "2s", controllertest.Interval).Should(Equal([]string{notReadyTaint}), "not the operator's")

	// On again, then the policy goes: the held node's taint goes with it,
	// and the policy waits for that.
	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Operator.ReadinessTaint.Enabled = true })
	g.Eventually(f.TaintsOf(held), controllertest.Timeout, controllertest.Interval).Should(Equal([]string{notReadyTaint}))

	g.Expect(suite.Client.Delete(f.Ctx, f.Policy)).To(Succeed())
	g.Eventually(f.TaintsOf(held), controllertest.Timeout, controllertest.Interval).Should(BeEmpty())
	g.Eventually(f.Policies, controllertest.Timeout, controllertest.Interval).Should(BeEmpty(), "the policy goes once the taint is gone")
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
	g.Expect(suite.Client.Create(ctx, vap)).To(Succeed())
	t.Cleanup(func() { _ = suite.Client.Delete(ctx, vap) })
	g.Expect(suite.Client.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() { _ = suite.Client.Delete(ctx, binding) })
	// The policy takes effect once the API server has loaded it.
	probe := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vap-probe"}}
	g.Expect(suite.Client.Create(ctx, probe)).To(Succeed())
	t.Cleanup(func() { _ = suite.Client.Delete(ctx, probe) })
	g.Eventually(func() error {
		n := &corev1.Node{}
		if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(probe), n); err != nil {
			return err
		}
		n.Spec.Taints = []corev1.Taint{gating.ReadinessTaint}
		return suite.Client.Update(ctx, n)
	}, controllertest.Timeout, controllertest.Interval).Should(MatchError(ContainSubstring("no readiness taints here")))

	f := suite.Setup(t, 1, controllertest.WithReadinessTaint)
	f.ExpectAllReady(f.Nodes...)
	g.Expect(f.TaintsOf(f.Nodes[0])()).To(BeEmpty())
}
