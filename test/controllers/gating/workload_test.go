package gating

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// workloadPods returns the names of the CUDA workload pods on a node.
func workloadPods(f *controllertest.Fixture, node string) func() []string {
	return func() []string {
		pods := &corev1.PodList{}
		NewWithT(f.T).Expect(suite.Client.List(f.Ctx, pods, client.InNamespace(controllertest.Namespace),
			client.MatchingLabels{render.LabelApp: cudaworkload.App})).To(Succeed())
		var out []string
		for _, p := range pods.Items {
			if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
				out = append(out, p.Name)
			}
		}
		return out
	}
}

// A node whose Fabric Manager is down runs every operand and answers
// nvidia-smi, but no CUDA program starts there: it is held out of
// readiness, tainted, with the cause named, while the other node becomes
// ready. Once Fabric Manager is back, the next attempt proves it, and the
// newest proof pod alone is kept as the record.
func TestFabricManagerDownNodeIsHeldOut(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1, controllertest.WithReadinessTaint)
	good, down := f.Nodes[0], f.Nodes[0]+"-fm"
	f.CreateNodeWith(down, nil, map[string]string{fakenode.AnnotationFabricManager: "down"})
	f.Nodes = append(f.Nodes, down)

	f.ExpectAllReady(good)
	g.Eventually(f.TaintsOf(good), controllertest.Timeout, controllertest.Interval).Should(BeEmpty())
	for _, s := range []string{"driver", "container-toolkit", "device-plugin", "dcgm-exporter", "gpu-feature-discovery"} {
		f.ExpectState("ready", s, down)
	}
	f.ExpectState("failed", "cuda-workload", down)
	g.Eventually(func() string { return strings.Join(f.EventsOf(down), "\n") }, controllertest.Timeout, controllertest.Interval).Should(
		And(ContainSubstring("cuda-workload went from"), ContainSubstring("CUDA error 802"), ContainSubstring("Fabric Manager")))
	g.Expect(workloadPods(f, good)()).To(HaveLen(1), "one proof, kept as the record")

	// The retry (2s here) runs the sample again; it fails again.
	first := workloadPods(f, down)()
	g.Eventually(workloadPods(f, down), controllertest.Timeout, controllertest.Interval).ShouldNot(Equal(first))
	f.ExpectState("failed", "cuda-workload", down)
	g.Expect(f.TaintsOf(down)()).To(Equal([]string{notReadyTaint}), "still held out after its second attempt")

	f.Annotate(down, fakenode.AnnotationFabricManager, "")
	f.ExpectAllReady(down)
	g.Eventually(f.TaintsOf(down), controllertest.Timeout, controllertest.Interval).Should(BeEmpty())
	g.Eventually(workloadPods(f, down), controllertest.Timeout, controllertest.Interval).Should(HaveLen(1),
		"the failed attempts go once a newer one exists")
}

// Turning the proof off as NVIDIA's values do (validator.cuda.env
// WITH_WORKLOAD=false) disables the state and removes its pods.
func TestWorkloadProofTurnedOff(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	node := f.Nodes[0]
	f.ExpectAllReady(node)
	g.Expect(workloadPods(f, node)()).To(HaveLen(1))

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Validator.CUDA = &gpuv1.ValidatorComponentSpec{Env: []gpuv1.EnvVar{{Name: gpuv1.EnvWithWorkload, Value: "false"}}}
	})
	f.ExpectState("disabled", "cuda-workload", node)
	g.Eventually(workloadPods(f, node), controllertest.Timeout, controllertest.Interval).Should(BeEmpty())
}
