package toolkit

import (
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// The guard comes with the NRI plugin and only with it; its binding
// spares the operator's namespace alone. (That it refuses a tenant's pod
// is TestNRIGuardFollowsThePolicy, test/controllers/policy, on an API
// server.)
func TestNRIGuardComesWithThePlugin(t *testing.T) {
	g := NewWithT(t)
	ps, err := fixture.Policies()
	g.Expect(err).NotTo(HaveOccurred())
	cp := ps["default"]
	guard := func() []client.Object {
		objs, err := Operand{}.Render(state.RenderInput{Policy: cp, Namespace: fixture.Namespace})
		g.Expect(err).NotTo(HaveOccurred())
		var out []client.Object
		for _, o := range objs {
			switch o.(type) {
			case *admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding:
				out = append(out, o)
			}
		}
		return out
	}
	cp.Spec.CDI.Enabled, cp.Spec.CDI.NRIPluginEnabled = ptr.To(true), ptr.To(false)
	g.Expect(guard()).To(BeEmpty())

	cp.Spec.CDI.NRIPluginEnabled = ptr.To(true)
	objs := guard()
	g.Expect(objs).To(HaveLen(2))
	for _, o := range objs {
		g.Expect(o.GetName()).To(Equal(NRIGuardName(fixture.Namespace)))
	}
	binding := objs[1].(*admissionv1.ValidatingAdmissionPolicyBinding)
	g.Expect(binding.Spec.ValidationActions).To(Equal([]admissionv1.ValidationAction{admissionv1.Deny}))
	g.Expect(binding.Spec.MatchResources.NamespaceSelector.MatchExpressions).To(HaveExactElements(
		HaveField("Values", Equal([]string{fixture.Namespace}))))
	vap := objs[0].(*admissionv1.ValidatingAdmissionPolicy)
	g.Expect(vap.Spec.Validations[0].Expression).To(ContainSubstring("'" + state.NRIDevicesAnnotationPrefix + "'"))
}
