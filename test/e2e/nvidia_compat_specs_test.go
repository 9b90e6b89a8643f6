//go:build e2e

package e2e

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// nvidiaSelectors are the label selectors NVIDIA users find each operand's
// pods by (NVIDIA's gpu-operator v26.7.0 assets/, its CI scripts and
// must-gather), and the state whose pods each must find.
var nvidiaSelectors = []struct {
	selector string
	state    state.Name
}{
	{"app=nvidia-driver-daemonset", state.Driver},
	{"app.kubernetes.io/component=nvidia-driver", state.Driver},
	{"app=nvidia-container-toolkit-daemonset", state.ContainerToolkit},
	{"app=nvidia-device-plugin-daemonset", state.DevicePlugin},
	{"app=nvidia-dcgm-exporter", state.DCGMExporter},
	{"app=gpu-feature-discovery", state.GPUFeatureDiscovery},
}

// NVIDIASelectorsSpec runs the kubectl lines of NVIDIA users' runbooks as
// they wrote them: each finds its operand's pod on every ready node, and
// only that operand's pods.
func NVIDIASelectorsSpec(ctx context.Context, nodes []string) {
	for _, s := range nvidiaSelectors {
		out, err := output("bin/kubectl", "get", "pods", "-n", "gpu-operator", "-l", s.selector,
			"-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}")
		Expect(err).NotTo(HaveOccurred(), "kubectl get pods -l %s", s.selector)
		found := map[string]bool{}
		for _, name := range strings.Fields(out) {
			p := &corev1.Pod{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "gpu-operator", Name: name}, p)).To(Succeed())
			Expect(p.Labels[render.LabelState]).To(Equal(string(s.state)), "-l %s found pod %s", s.selector, name)
			found[p.Spec.NodeName] = true
		}
		for _, n := range nodes {
			Expect(found).To(HaveKey(n), "kubectl get pods -n gpu-operator -l %s finds no pod on node %s", s.selector, n)
		}
		GinkgoWriter.Printf("kubectl get pods -n gpu-operator -l %s: %d pods\n", s.selector, len(strings.Fields(out)))
	}
}
