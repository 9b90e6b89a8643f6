package dradriver

import (
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
)

// upstreamSlicePolicy is NVIDIA's 0700.
const upstreamSlicePolicy = "testdata/dra-resourceslices-policy-v26.7.0.yaml"

// The admission policy and its binding are NVIDIA's with our namespace
// (0700_resourceslices-policy.yaml L1-36, L38-44): the same match, the same
// CEL variables and validations, Deny.
func TestSliceAdmissionPolicyMatchesNVIDIA(t *testing.T) {
	g := NewWithT(t)
	var upPolicy *admissionv1.ValidatingAdmissionPolicy
	var upBinding *admissionv1.ValidatingAdmissionPolicyBinding
	for _, o := range upstreamObjects(t, upstreamSlicePolicy) {
		switch u := o.(type) {
		case *admissionv1.ValidatingAdmissionPolicy:
			upPolicy = u
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			upBinding = u
		}
	}
	g.Expect(upPolicy).NotTo(BeNil(), upstreamSlicePolicy)
	g.Expect(upBinding).NotTo(BeNil(), upstreamSlicePolicy)

	in, _ := draInput(upstreamNamespace, true, false)
	objs := sliceAdmissionPolicy(in.Policy, upstreamNamespace)
	g.Expect(objs).To(HaveLen(2))
	policy, binding := objs[0].(*admissionv1.ValidatingAdmissionPolicy), objs[1].(*admissionv1.ValidatingAdmissionPolicyBinding)

	g.Expect(policy.Name).To(Equal(upPolicy.Name))
	g.Expect(binding.Name).To(Equal(upBinding.Name))
	g.Expect(policy.Namespace).To(BeEmpty(), "cluster-scoped")
	g.Expect(binding.Namespace).To(BeEmpty(), "cluster-scoped")
	// Field by field first, so that a difference names its part (L13-16,
	// L17-29, L30-36), then whole.
	g.Expect(policy.Spec.MatchConditions).To(Equal(upPolicy.Spec.MatchConditions), "matchConditions (L13-16)")
	g.Expect(policy.Spec.Variables).To(Equal(upPolicy.Spec.Variables), "variables (L17-29)")
	g.Expect(policy.Spec.Validations).To(Equal(upPolicy.Spec.Validations), "validations (L30-36)")
	g.Expect(policy.Spec).To(Equal(upPolicy.Spec), upstreamSlicePolicy)
	g.Expect(binding.Spec).To(Equal(upBinding.Spec), upstreamSlicePolicy)
}

// The policy restricts the kubelet plugin's ServiceAccount in the
// namespace it runs in, whichever that is (0700 L16 templates it).
func TestSliceAdmissionPolicyRestrictsOurPlugin(t *testing.T) {
	g := NewWithT(t)
	in, _ := draInput("other-namespace", true, false)
	policy := sliceAdmissionPolicy(in.Policy, in.Namespace)[0].(*admissionv1.ValidatingAdmissionPolicy)
	g.Expect(policy.Spec.MatchConditions).To(Equal([]admissionv1.MatchCondition{{
		Name:       "isRestrictedUser",
		Expression: `request.userInfo.username == "system:serviceaccount:other-namespace:nvidia-dra-driver-kubeletplugin"`,
	}}))
}
