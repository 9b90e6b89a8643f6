package sharing

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/pluginconfig"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

func timeSlicing(replicas string) string {
	return "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: " + replicas + "\n"
}

// readers are the states whose pods read the node's configuration file.
var readers = []string{"device-plugin", "gpu-feature-discovery"}

// operandsOf records, on each node, the UID of every pod that reads the
// device plugin's configuration, and the template hash of every DaemonSet
// of theirs.
func operandsOf(f *controllertest.Fixture) (map[string]types.UID, map[string]string) {
	pods, templates := map[string]types.UID{}, map[string]string{}
	for _, s := range readers {
		for _, n := range f.Nodes {
			if p := f.PodOn(n, s); p != nil {
				pods[n+"/"+s] = p.UID
			}
		}
		for _, ds := range f.DaemonSets(s) {
			templates[ds.Name] = ds.Spec.Template.Annotations[render.AnnotationTemplateHash]
		}
	}
	return pods, templates
}

// Issue 55: an admin's typo in a device plugin configuration a node runs,
// with a GPU pod on it, is refused, and changes nothing on any node: no
// DaemonSet template, no pod that reads the file, not what the node
// advertises. The same holds when the ConfigMap is deleted, and when it
// comes back as it was. Without the validated copy the plugin's template
// carried the broken file's digest and its pod was replaced at once, to
// fail on the file (k8s-device-plugin v0.20.0 does not start with it).
func TestBrokenEditChangesNothingOnTheNodes(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.DevicePlugin.Config = &gpuv1.DevicePluginConfig{Name: "sharing"}
	})
	pluginConfigs(f, "sharing", map[string]string{"ts-4": timeSlicing("4")})
	shared := f.Nodes[0]
	f.SetLabel(shared, gpuv1.LabelDevicePluginConfig, "ts-4")
	f.ExpectLabel(shared, gpuv1.LabelDevicePluginConfigInUse, "ts-4")
	gpus := func() int64 { return f.Node(shared).Status.Allocatable.Name("nvidia.com/gpu", "").Value() }
	g.Eventually(gpus, 2*controllertest.Timeout, controllertest.Interval).Should(BeEquivalentTo(32))
	f.ExpectAllReady(f.Nodes...)
	f.EnsureNamespace("workloads")
	f.GPUPod("shared-gpu", shared, func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": controllertest.ResourceOne}
	})
	pods, templates := operandsOf(f)
	g.Expect(pods).To(HaveLen(len(readers) * len(f.Nodes)))

	unchanged := func(step string) {
		t.Helper()
		// A pass of the policy's controller that started after the node
		// controller saw the edit: what it rendered stands on it.
		f.AfterPasses("clusterpolicy")
		nowPods, nowTemplates := operandsOf(f)
		g.Expect(nowTemplates).To(Equal(templates), "%s: no DaemonSet that reads the file changes", step)
		g.Expect(nowPods).To(Equal(pods), "%s: no pod that reads the file is replaced", step)
		g.Expect(gpus()).To(BeEquivalentTo(32), "%s: the node advertises what it did", step)
		g.Expect(f.Node(shared).Labels).To(HaveKeyWithValue(gpuv1.LabelDevicePluginConfigInUse, "ts-4"), step)
		validated := &corev1.ConfigMap{}
		g.Expect(suite.Client.Get(f.Ctx, client.ObjectKey{Namespace: controllertest.Namespace, Name: pluginconfig.ValidatedConfigMap},
			validated)).To(Succeed())
		g.Expect(validated.Data).To(HaveKeyWithValue("ts-4", timeSlicing("4")), "%s: the last good copy is kept", step)
	}
	refusal := func(substring string) {
		t.Helper()
		g.Eventually(func() map[string]string { return f.Node(shared).Annotations }, controllertest.Timeout, controllertest.Interval).
			Should(HaveKeyWithValue(gating.AnnotationDevicePluginConfigRefused, ContainSubstring(substring)))
	}
	told := func(step string) {
		t.Helper()
		g.Expect(f.Node(shared).Annotations).To(HaveKeyWithValue(gating.AnnotationDevicePluginConfigRefused,
			ContainSubstring("The node runs the last good copy of ts-4")), step)
		g.Expect(f.Node(shared).Annotations).NotTo(HaveKey(gating.AnnotationDevicePluginConfigWaiting), "%s: the node is to move nowhere", step)
	}

	// The typo.
	g.Eventually(func() error {
		cm := &corev1.ConfigMap{}
		if err := suite.Client.Get(f.Ctx, client.ObjectKey{Namespace: controllertest.Namespace, Name: "sharing"}, cm); err != nil {
			return err
		}
		cm.Data["ts-4"] = timeSlicing("-4")
		return suite.Client.Update(f.Ctx, cm)
	}, controllertest.Timeout, controllertest.Interval).Should(Succeed())
	refusal("has -4 replicas")
	unchanged("a broken edit")
	told("a broken edit")

	// The ConfigMap deleted under the running node.
	g.Expect(suite.Client.Delete(f.Ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sharing", Namespace: controllertest.Namespace}})).
		To(Succeed())
	refusal("does not exist")
	unchanged("the ConfigMap deleted")
	told("the ConfigMap deleted")

	// Back as it was: the refusal goes, and nothing moves.
	pluginConfigs(f, "sharing", map[string]string{"ts-4": timeSlicing("4")})
	g.Eventually(func() map[string]string { return f.Node(shared).Annotations }, controllertest.Timeout, controllertest.Interval).
		ShouldNot(HaveKey(gating.AnnotationDevicePluginConfigRefused))
	unchanged("the ConfigMap back as it was")

	// No ConfigMap named any more: the operator's copy goes.
	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.DevicePlugin.Config = nil })
	g.Eventually(func() bool {
		err := suite.Client.Get(f.Ctx, client.ObjectKey{Namespace: controllertest.Namespace, Name: pluginconfig.ValidatedConfigMap},
			&corev1.ConfigMap{})
		return apierrors.IsNotFound(err)
	}, controllertest.Timeout, controllertest.Interval).Should(BeTrue(), "the validated copy is pruned")
}
