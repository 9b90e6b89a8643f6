//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// ManualUpgradeInput names the node a person upgrades by hand and the
// nodes left waiting.
type ManualUpgradeInput struct {
	Versions []string
	ByHand   string
	Waiting  []string
}

// ManualUpgradeSpec runs NVIDIA's manual driver upgrade with NVIDIA's
// lines: autoUpgrade turned off by a JSON patch, a new version, then a
// person deletes one node's driver pod, selected by NVIDIA's app label.
// The GPU pod on that node is evicted before the new driver loads (as
// NVIDIA's driver manager does, by driver.manager.env's defaults) and the
// node ends upgrade-done on the new version, schedulable; the other nodes
// wait in upgrade-required on the old one, their GPU pods untouched, until
// autoUpgrade is turned back on.
func ManualUpgradeSpec(ctx context.Context, in ManualUpgradeInput) {
	current := string(activePolicy(Default, ctx).Spec.Driver.Version)
	var version string
	for _, v := range in.Versions {
		if v != current {
			version = v
			break
		}
	}
	Expect(version).NotTo(BeEmpty())
	kubectl := func(args ...string) {
		GinkgoHelper()
		_, err := sh("bin/kubectl", args...)
		Expect(err).NotTo(HaveOccurred())
	}
	kubectl("patch", "clusterpolicy", "cluster-policy", "--type=json",
		"-p", `[{"op":"replace","path":"/spec/driver/upgradePolicy/autoUpgrade","value":false}]`)
	// The container's AfterEach puts the policy back (autoUpgrade on, the
	// version it had) and waits for every driver to settle.
	DeferCleanup(func() {
		_, _ = sh("bin/kubectl", "delete", "deployment", "-n", "workloads", "manual", "--ignore-not-found")
	})
	onNode := func(n string) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{n}}}}}}}}
	}
	createGPUDeployment(ctx, "workloads", "manual", 1, onNode(in.ByHand))
	var gpuPod corev1.Pod
	Eventually(func(g Gomega) {
		list := &corev1.PodList{}
		g.Expect(k8s.List(ctx, list, client.InNamespace("workloads"), client.MatchingLabels{"app": "manual"})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		g.Expect(list.Items[0].Status.Phase).To(Equal(corev1.PodRunning))
		gpuPod = list.Items[0]
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

	kubectl("patch", "clusterpolicy", "cluster-policy", "--type=json",
		"-p", fmt.Sprintf(`[{"op":"replace","path":"/spec/driver/version","value":%q}]`, version))
	Eventually(func(g Gomega) {
		for _, n := range append([]string{in.ByHand}, in.Waiting...) {
			g.Expect(nodeLabel(g, ctx, n, gpuv1.LabelUpgradeState)).To(Equal(string(gpuv1.UpgradeRequired)), "node %s", n)
		}
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

	// The person's line.
	kubectl("delete", "pod", "-n", "gpu-operator", "-l", "app=nvidia-driver-daemonset", "--field-selector", "spec.nodeName="+in.ByHand)
	Eventually(func(g Gomega) {
		n := node(g, ctx, in.ByHand)
		g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.LabelUpgradeState, string(gpuv1.UpgradeDone)))
		g.Expect(n.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverVersion, version))
		g.Expect(n.Spec.Unschedulable).To(BeFalse())
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	Eventually(func(g Gomega) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(&gpuPod), &corev1.Pod{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "the GPU pod on %s was evicted before its new driver loaded", in.ByHand)
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	events, err := output("bin/kubectl", "get", "events", "-A", "--field-selector", "involvedObject.name="+in.ByHand+",reason=GPUDriverUpgrade")
	Expect(err).NotTo(HaveOccurred())
	Expect(events).To(ContainSubstring("the driver pod was replaced outside the upgrade"))
	for _, n := range in.Waiting {
		Expect(nodeLabel(Default, ctx, n, gpuv1.LabelUpgradeState)).To(Equal(string(gpuv1.UpgradeRequired)), "node %s waits for its person", n)
		Expect(nodeLabel(Default, ctx, n, gpuv1.LabelDriverVersion)).To(Equal(current), "node %s", n)
	}
	GinkgoWriter.Printf("manual upgrade of %s to %s:\n%s\n", in.ByHand, version, events)
}
