package toolkit

import (
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// The guard comes with the NRI plugin, and stays while a pod made to run
// it is left, before any other object; its binding spares the operator's
// namespace alone. (That it refuses a tenant's pod
// is TestNRIGuardFollowsThePolicy, test/controllers/policy, on an API
// server.)
func TestNRIGuardComesWithThePlugin(t *testing.T) {
	g := NewWithT(t)
	ps, err := fixture.Policies()
	g.Expect(err).NotTo(HaveOccurred())
	cp := ps["default"]
	// The guard's objects, which come before any other.
	guard := func(podsLeft bool) []client.Object {
		objs, err := Operand{}.Render(state.RenderInput{Policy: cp, Namespace: fixture.Namespace, NRIPluginPods: podsLeft})
		g.Expect(err).NotTo(HaveOccurred())
		var out []client.Object
		for i, o := range objs {
			switch w := o.(type) {
			case *admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding:
				g.Expect(i).To(BeNumerically("<", 2), "the guard is applied first")
				out = append(out, o)
			case *appsv1.DaemonSet:
				_, marked := w.Spec.Template.Annotations[AnnotationNRIPlugin]
				g.Expect(marked).To(Equal(cp.Spec.CDI.UsesNRI()), "only the plugin's pods are marked")
			}
		}
		return out
	}
	cp.Spec.CDI.Enabled, cp.Spec.CDI.NRIPluginEnabled = ptr.To(true), ptr.To(false)
	g.Expect(guard(false)).To(BeEmpty())
	g.Expect(guard(true)).To(HaveLen(2), "while a pod made to run the plugin is left")

	cp.Spec.CDI.NRIPluginEnabled = ptr.To(true)
	objs := guard(false)
	g.Expect(objs).To(HaveLen(2))
	for _, o := range objs {
		g.Expect(o.GetName()).To(Equal(NRIGuardName(fixture.Namespace)))
	}
	binding := objs[1].(*admissionv1.ValidatingAdmissionPolicyBinding)
	g.Expect(binding.Spec.ValidationActions).To(Equal([]admissionv1.ValidationAction{admissionv1.Deny}))
	g.Expect(binding.Spec.MatchResources.NamespaceSelector.MatchExpressions).To(HaveExactElements(
		HaveField("Values", Equal([]string{fixture.Namespace}))))
	vap := objs[0].(*admissionv1.ValidatingAdmissionPolicy)
	g.Expect(vap.Spec.Variables[0].Expression).To(ContainSubstring("'" + state.NRIDevicesAnnotationPrefix + "'"))
	g.Expect(vap.Spec.MatchConstraints.ResourceRules[0].Resources).To(ConsistOf("pods", "pods/status"))
}

// A pod summary marked as the plugin's keeps the guard; another state's,
// or an unmarked toolkit pod, does not.
func TestNRIPluginPodsLeft(t *testing.T) {
	g := NewWithT(t)
	marked := &operandpods.Pod{State: state.ContainerToolkit, Annotations: []state.Annotation{{Key: AnnotationNRIPlugin, Value: "true"}}}
	g.Expect(NRIPluginPodsLeft([]*operandpods.Pod{marked})).To(BeTrue())
	g.Expect(NRIPluginPodsLeft([]*operandpods.Pod{{State: state.ContainerToolkit}})).To(BeFalse())
	g.Expect(NRIPluginPodsLeft([]*operandpods.Pod{{State: state.DevicePlugin, Annotations: marked.Annotations}})).To(BeFalse())
	g.Expect(NRIPluginPodsLeft(nil)).To(BeFalse())
}

// The deletion of a plugin's pod brings a pass of the policy, which prunes
// the guard once none is left; other pods' deletions, and the plugin pod's
// creation or updates, do not.
func TestNRIPluginPodGone(t *testing.T) {
	g := NewWithT(t)
	gone := NRIPluginPodGone()
	marked := &operandpods.Pod{State: state.ContainerToolkit, Annotations: []state.Annotation{{Key: AnnotationNRIPlugin, Value: "true"}}}
	g.Expect(gone.Delete(event.DeleteEvent{Object: marked})).To(BeTrue())
	g.Expect(gone.Delete(event.DeleteEvent{Object: &operandpods.Pod{State: state.ContainerToolkit}})).To(BeFalse())
	g.Expect(gone.Create(event.CreateEvent{Object: marked})).To(BeFalse())
	g.Expect(gone.Update(event.UpdateEvent{ObjectOld: marked, ObjectNew: marked})).To(BeFalse())
}
