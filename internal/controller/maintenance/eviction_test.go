package maintenance

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
)

// Issue 52, finding 5: every operation on a node evicts by one policy,
// its NVIDIADriver's where one selects it. Before, a repair and a MIG
// change took the ClusterPolicy's settings and selector, so a pod the
// node's upgrade would evict stayed through them; and a MIG change or a
// repair left DaemonSet pods that hold a GPU, which then held it through
// mig-manager's apply. The operations that taint the node take those
// DaemonSet pods; the upgrade, which only cordons, does not.
func TestOneEvictionPolicyPerNode(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{Spec: gpuv1.ClusterPolicySpec{Driver: gpuv1.DriverSpec{UseNvidiaDriverCRD: ptr.To(true),
		UpgradePolicy: gpuv1.DriverUpgradePolicySpec{PodDeletion: gpuv1.PodDeletionSpec{Force: ptr.To(false)}}}}}
	nvd := gpuv1alpha1.NVIDIADriver{ObjectMeta: metav1.ObjectMeta{Name: "a100"}, Spec: gpuv1alpha1.NVIDIADriverSpec{
		NodeSelector: gpuv1.Labels{"gpu": "a100"},
		UpgradePolicy: &gpuv1.DriverUpgradePolicySpec{PodDeletion: gpuv1.PodDeletionSpec{Force: ptr.To(true),
			DeleteEmptyDir: ptr.To(true), PodSelector: "team=ml"}}}}
	pools := driverpool.Resolve(cp, []gpuv1alpha1.NVIDIADriver{nvd})
	policySel, err := parseSelectors(&cp.Spec.Driver.UpgradePolicy)
	g.Expect(err).NotTo(HaveOccurred())
	poolSel, err := parseSelectors(nvd.Spec.UpgradePolicy)
	g.Expect(err).NotTo(HaveOccurred())
	p := &pass{r: &Reconciler{Namespace: "gpu-operator"}, cp: cp, obs: &observed{pools: pools}, sel: policySel,
		poolSel: map[string]*podSelectors{"a100": poolSel}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a100-0", Labels: map[string]string{"gpu": "a100"}}}

	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	daemonSetGPUPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "monitoring",
		OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: gpu}}}}}
	selectedPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: "ml", Labels: map[string]string{"team": "ml"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}

	for op := range arbiter.NumOperations {
		e := p.gpuPodEviction(context.Background(), node, op)
		g.Expect(e.force).To(HaveValue(BeTrue()), "%s: the NVIDIADriver's podDeletion.force", op)
		g.Expect(e.deleteEmptyDir).To(HaveValue(BeTrue()), "%s: the NVIDIADriver's podDeletion.deleteEmptyDir", op)
		g.Expect(e.keep(selectedPod)).To(BeTrue(), "%s: the NVIDIADriver's podDeletion.podSelector", op)
		g.Expect(e.keep(daemonSetGPUPod)).To(Equal(op != arbiter.DriverUpgrade),
			"%s: a DaemonSet's GPU pod goes where the operation taints the node", op)
	}
}
