package policy

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// A state label a user also applied with the operator's value is shared:
// server-side apply leaves it when the operator lets go. Deleting the
// policy used to wait for it for ever (issue 12, finding 8).
func TestUninstallCompletesWithAUsersSharedLabel(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	f.ExpectAllReady(f.Nodes...)
	n := f.Nodes[0]
	key := gpuv1.StateLabel("driver")
	g.Expect(suite.Client.Apply(f.Ctx, corev1ac.Node(n).WithLabels(map[string]string{key: "ready"}),
		client.FieldOwner("an-admin"))).To(Succeed())

	g.Expect(suite.Client.Delete(f.Ctx, f.Policy)).To(Succeed())
	g.Eventually(f.Policies, controllertest.Timeout, controllertest.Interval).Should(BeEmpty())
	g.Expect(f.Node(n).Labels).To(HaveKeyWithValue(key, "ready"), "the admin's label stays")
	for k := range f.Node(n).Annotations {
		g.Expect(strings.HasPrefix(k, gpuv1.OperatorAnnotationPrefix)).To(BeFalse(), "node %s still has %s", n, k)
	}
}

// Deleting the policy in the middle of an upgrade lets the policy go only
// once the upgrade let go of its cordon: nothing is left cordoned.
func TestUninstallMidUpgradeUncordons(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.UpgradePolicy.PodDeletion.TimeoutSeconds = ptr.To[int32](600)
	})
	f.ExpectAllReady(f.Nodes...)
	n := f.Nodes[0]
	f.HeldGPUPod("held", n)

	f.UpdatePolicy(controllertest.NewVersion("575.57.08"))
	f.ExpectLabel(n, gpuv1.LabelUpgradeState, string(gpuv1.UpgradePodDeletion))
	g.Expect(f.Node(n).Spec.Unschedulable).To(BeTrue())

	g.Expect(suite.Client.Delete(f.Ctx, f.Policy)).To(Succeed())
	g.Eventually(f.Policies, controllertest.Timeout, controllertest.Interval).Should(BeEmpty())
	node := f.Node(n)
	g.Expect(node.Spec.Unschedulable).To(BeFalse(), "the upgrade's cordon is gone before the policy")
	g.Expect(node.Labels).NotTo(HaveKey(gpuv1.LabelUpgradeState))
}
