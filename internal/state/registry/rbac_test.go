package registry

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
	"github.com/gpu-operator/gpu-operator/internal/test/operatorrbac"
)

// The operator changes and deletes cluster-scoped DeviceClasses and
// admission policies by name only (issue 56): the names its ClusterRole
// lists are exactly those its states render, with the DRA driver in use
// and the toolkit's NRI plugin on, so that it can neither miss one of its
// own nor touch someone else's.
func TestClusterScopedWritesNameTheOperatorsObjects(t *testing.T) {
	g := NewWithT(t)
	graph, err := Graph()
	g.Expect(err).NotTo(HaveOccurred())
	kinds := map[string]string{
		render.KindDeviceClass.Kind:                      "deviceclasses",
		render.KindValidatingAdmissionPolicy.Kind:        "validatingadmissionpolicies",
		render.KindValidatingAdmissionPolicyBinding.Kind: "validatingadmissionpolicybindings",
	}
	rendered := map[string][]string{}
	cases := policies(t)
	nri := cases["full"].DeepCopy()
	nri.Spec.CDI.Enabled = ptr.To(true)
	nri.Spec.CDI.NRIPluginEnabled = ptr.To(true)
	cases["nri"] = nri
	for _, cp := range cases {
		for _, s := range graph.States() {
			for _, o := range renderObjects(t, graph, s, cp) {
				if res, ok := kinds[o.GetObjectKind().GroupVersionKind().Kind]; ok && !slices.Contains(rendered[res], o.GetName()) {
					rendered[res] = append(rendered[res], o.GetName())
				}
			}
		}
	}
	g.Expect(rendered["validatingadmissionpolicies"]).To(ContainElement("nvidia-nri-devices-"+fixture.Namespace), "the NRI case renders the guard")

	rules, _, err := operatorrbac.Rules()
	g.Expect(err).NotTo(HaveOccurred())
	for _, res := range kinds {
		var named []string
		for _, r := range rules {
			if !slices.Contains(r.Resources, res) {
				continue
			}
			for _, v := range []string{"get", "patch", "update", "delete", "deletecollection", "*"} {
				if slices.Contains(r.Verbs, v) {
					g.Expect(r.ResourceNames).NotTo(BeEmpty(), "%s %s without resourceNames", v, res)
				}
			}
			if slices.Contains(r.Verbs, "patch") {
				named = append(named, r.ResourceNames...)
			}
		}
		g.Expect(named).To(ConsistOf(rendered[res]), "%s: the names the operator may change are those it renders", res)
	}
}
