package escalation

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/state/dradriver"
)

func slice(name, driver string, spec func(*resourcev1.ResourceSliceSpec)) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, Pool: resourcev1.ResourcePool{Name: "imex-node", ResourceSliceCount: 1}}}
	spec(&s.Spec)
	return s
}

// The kubelet plugin's token, on every GPU node, may publish its own
// node's slices of the driver's two drivers, and nothing for other nodes
// or other drivers (issue 56): its ClusterRole lets it write every slice,
// and NVIDIA's policy lets a cluster-wide slice through.
func TestDRAPluginTokenPublishesItsOwnNodesSlicesOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	applyDRAAccess(t, ctx)
	gpuNodes(t, ctx, "imex-node")
	plugin := impersonate(t, namespace, dradriver.KubeletPluginServiceAccount, "plugin-x", "imex-node")
	onNode := func(s *resourcev1.ResourceSliceSpec) { s.NodeName = ptr.To("imex-node") }

	g.Eventually(func() error {
		return plugin.Create(ctx, slice("all-nodes", dradriver.GPUDriverName, func(s *resourcev1.ResourceSliceSpec) { s.AllNodes = ptr.To(true) }), client.DryRunAll)
	}, 30*time.Second, 200*time.Millisecond).Should(MatchError(ContainSubstring("not one for every node or a node selector")))
	g.Expect(plugin.Create(ctx, slice("other-driver", "evil.example.com", onNode), client.DryRunAll)).
		To(MatchError(ContainSubstring("may write slices of drivers gpu.nvidia.com and compute-domain.nvidia.com only, not evil.example.com")))
	g.Expect(plugin.Create(ctx, slice("other-node", dradriver.GPUDriverName, func(s *resourcev1.ResourceSliceSpec) {
		s.NodeName = ptr.To("imex-node-2")
	}), client.DryRunAll)).To(MatchError(ContainSubstring("may not modify cluster or node resourceslices")), "NVIDIA's policy")
	for _, driver := range []string{dradriver.GPUDriverName, dradriver.ComputeDomainDriverName} {
		g.Expect(plugin.Create(ctx, slice("own-"+driver, driver, onNode), client.DryRunAll)).To(Succeed(), driver)
	}
}
