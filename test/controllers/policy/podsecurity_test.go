package policy

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// spec.psa.enabled labels the operator's namespace for privileged pods, as
// NVIDIA's operator does (enforce, audit and warn). An enforce level
// someone else set is not overwritten, and the status says so until it
// goes; a warn level someone else set stays; turned off, the labels stay.
func TestPolicyLabelsTheNamespaceForPodSecurity(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	f.ExpectAllReady(f.Nodes...)
	enforce, audit, warn := "pod-security.kubernetes.io/enforce", "pod-security.kubernetes.io/audit", "pod-security.kubernetes.io/warn"
	setNamespaceLabels := func(set map[string]string, remove ...string) {
		g.Eventually(func() error {
			ns := namespace(g, f)
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			for k, v := range set {
				ns.Labels[k] = v
			}
			for _, k := range remove {
				delete(ns.Labels, k)
			}
			return suite.Client.Update(f.Ctx, ns)
		}, controllertest.Timeout, controllertest.Interval).Should(Succeed())
	}
	t.Cleanup(func() { setNamespaceLabels(nil, enforce, audit, warn) })
	setNamespaceLabels(map[string]string{enforce: "baseline", warn: "restricted"})

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.PSA = &gpuv1.PSASpec{Enabled: ptr.To(true)} })
	g.Eventually(func() string {
		cp := &gpuv1.ClusterPolicy{}
		g.Expect(suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(f.Policy), cp)).To(Succeed())
		if c := meta.FindStatusCondition(cp.Status.Conditions, gpuv1.ConditionDegraded); c != nil {
			return c.Message
		}
		return ""
	}, controllertest.Timeout, controllertest.Interval).Should(ContainSubstring(
		"labelling namespace " + controllertest.Namespace + " " + enforce + "=privileged (another manager set it to \"baseline\"?"))
	g.Expect(namespace(g, f).Labels).To(HaveKeyWithValue(enforce, "baseline"), "another's level is not overwritten")

	setNamespaceLabels(nil, enforce)
	g.Eventually(func() map[string]string { return namespace(g, f).Labels }, controllertest.Timeout, controllertest.Interval).
		Should(And(HaveKeyWithValue(enforce, "privileged"), HaveKeyWithValue(audit, "privileged")))
	g.Expect(namespace(g, f).Labels).To(HaveKeyWithValue(warn, "restricted"), "a warning level someone set stays")
	g.Eventually(func() []string {
		cp := &gpuv1.ClusterPolicy{}
		g.Expect(suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(f.Policy), cp)).To(Succeed())
		return cp.Status.IgnoredFields
	}, controllertest.Timeout, controllertest.Interval).ShouldNot(ContainElement(HavePrefix("spec.psa")))

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.PSA.Enabled = ptr.To(false) })
	f.AfterPasses("clusterpolicy")
	g.Expect(namespace(g, f).Labels).To(HaveKeyWithValue(enforce, "privileged"), "turned off, the labels stay, as NVIDIA leaves them")
}

func namespace(g Gomega, f *controllertest.Fixture) *corev1.Namespace {
	ns := &corev1.Namespace{}
	g.Expect(suite.Client.Get(f.Ctx, client.ObjectKey{Name: controllertest.Namespace}, ns)).To(Succeed())
	return ns
}
