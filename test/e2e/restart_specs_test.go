//go:build e2e

package e2e

import (
	"context"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// DriverRestartInPlaceSpec deletes a ready node's driver pod, its
// configuration unchanged, with a GPU pod running there: its successor
// carries the same configuration digest, so the driver container keeps
// the loaded modules. The node is never cordoned, its upgrade state stays
// upgrade-done, no state of its chain leaves ready, and the device plugin
// and the GPU pod run on, the same pods.
func DriverRestartInPlaceSpec(ctx context.Context, nodeName string) {
	AllReadySpec(ctx, AllReadyInput{Nodes: []string{nodeName}})
	onNode := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName}}}}}}}}
	createGPUDeployment(ctx, "workloads", "in-place", 1, onNode)
	var gpuPod types.UID
	Eventually(func(g Gomega) {
		list := &corev1.PodList{}
		g.Expect(k8s.List(ctx, list, client.InNamespace("workloads"), client.MatchingLabels{"app": "in-place"})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		g.Expect(list.Items[0].Status.Phase).To(Equal(corev1.PodRunning))
		gpuPod = list.Items[0].UID
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

	old := podOn(ctx, nodeName, string(state.Driver))
	plugin := podOn(ctx, nodeName, string(state.DevicePlugin))
	Expect(old).NotTo(BeNil())
	Expect(plugin).NotTo(BeNil())
	Expect(envOf(old, state.DriverConfigDigestEnv)).To(Equal(old.Annotations[render.AnnotationTemplateHash]))
	history.forgetValue(nodeName, string(gpuv1.StatePending))

	_, err := sh("bin/kubectl", "delete", "pod", "-n", "gpu-operator", old.Name, "--wait=false")
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) {
		p := podOn(ctx, nodeName, string(state.Driver))
		g.Expect(p).NotTo(BeNil())
		g.Expect(p.UID).NotTo(Equal(old.UID))
		g.Expect(envOf(p, state.DriverConfigDigestEnv)).To(Equal(envOf(old, state.DriverConfigDigestEnv)))
		g.Expect(p.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

	// The operator has judged the new pod: it is the node's driver pod now.
	Eventually(func(g Gomega) {
		n := node(g, ctx, nodeName)
		g.Expect(n.Annotations).To(HaveKeyWithValue(gating.AnnotationDriverPod, string(podOn(ctx, nodeName, string(state.Driver)).UID)))
		g.Expect(n.Annotations).NotTo(HaveKey(gating.AnnotationDriverRestart))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	n := node(Default, ctx, nodeName)
	Expect(n.Spec.Unschedulable).To(BeFalse(), "never cordoned")
	Expect(n.Labels).To(HaveKeyWithValue(gpuv1.LabelUpgradeState, string(gpuv1.UpgradeDone)))
	for _, s := range states {
		_, seen := history.firstSeen(nodeName, s, string(gpuv1.StatePending))
		Expect(seen).To(BeFalse(), "state %s left ready during the restart", s)
	}
	Expect(podOn(ctx, nodeName, string(state.DevicePlugin)).UID).To(Equal(plugin.UID), "the device plugin runs on")
	list := &corev1.PodList{}
	Expect(k8s.List(ctx, list, client.InNamespace("workloads"), client.MatchingLabels{"app": "in-place"})).To(Succeed())
	Expect(list.Items).To(HaveLen(1))
	Expect(list.Items[0].UID).To(Equal(gpuPod), "the GPU pod runs on")
	Expect(list.Items[0].Status.Phase).To(Equal(corev1.PodRunning))
}
