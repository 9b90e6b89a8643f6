package controllers

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// A state label a user also applied with the operator's value is shared:
// server-side apply leaves it when the operator lets go. Deleting the
// policy used to wait for it for ever (issue 12, finding 8).
func TestUninstallCompletesWithAUsersSharedLabel(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 1)
	f.expectAllReady(f.nodes...)
	n := f.nodes[0]
	key := gpuv1.StateLabel("driver")
	g.Expect(k8sClient.Apply(f.ctx, corev1ac.Node(n).WithLabels(map[string]string{key: "ready"}),
		client.FieldOwner("an-admin"))).To(Succeed())

	g.Expect(k8sClient.Delete(f.ctx, f.policy)).To(Succeed())
	g.Eventually(f.policies, timeout, interval).Should(BeEmpty())
	g.Expect(f.node(n).Labels).To(HaveKeyWithValue(key, "ready"), "the admin's label stays")
	for k := range f.node(n).Annotations {
		g.Expect(strings.HasPrefix(k, gpuv1.OperatorAnnotationPrefix)).To(BeFalse(), "node %s still has %s", n, k)
	}
}

// Deleting the policy in the middle of an upgrade lets the policy go only
// once the upgrade let go of its cordon: nothing is left cordoned.
func TestUninstallMidUpgradeUncordons(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 1, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Driver.UpgradePolicy.PodDeletion.TimeoutSeconds = ptr.To[int32](600)
	})
	f.expectAllReady(f.nodes...)
	n := f.nodes[0]
	f.heldGPUPod("held", n)

	f.updatePolicy(newVersion("575.57.08"))
	f.expectLabel(n, gpuv1.LabelUpgradeState, string(gpuv1.UpgradePodDeletion))
	g.Expect(f.node(n).Spec.Unschedulable).To(BeTrue())

	g.Expect(k8sClient.Delete(f.ctx, f.policy)).To(Succeed())
	g.Eventually(f.policies, timeout, interval).Should(BeEmpty())
	node := f.node(n)
	g.Expect(node.Spec.Unschedulable).To(BeFalse(), "the upgrade's cordon is gone before the policy")
	g.Expect(node.Labels).NotTo(HaveKey(gpuv1.LabelUpgradeState))
}
