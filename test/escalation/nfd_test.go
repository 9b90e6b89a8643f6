package escalation

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state/nfd"
)

func nodeFeature(name, node string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
		"metadata": map[string]any{"name": name, "namespace": namespace,
			"labels": map[string]any{"nfd.node.kubernetes.io/node-name": node}},
		"spec": map[string]any{"labels": map[string]any{"feature.node.kubernetes.io/pci-10de.present": "true"}},
	}}
	return u
}

// nfd-worker's token, on every node, may write its own node's NodeFeature
// only (issue 56): its Role lets it write every NodeFeature of the
// namespace, and nfd-master labels the node a NodeFeature's node-name
// label names, whatever its name.
func TestNFDWorkerTokenWritesItsOwnNodeFeatureOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	applyAccess(t, ctx, nfd.Operand{}, testPolicy(func(*gpuv1.ClusterPolicy) {}), nil)
	worker := impersonate(t, namespace, nfd.WorkerName, "nfd-worker-x1", "gpu-a")

	g.Eventually(func() error { return worker.Create(ctx, nodeFeature("gpu-b", "gpu-b"), client.DryRunAll) }, 30*time.Second, 200*time.Millisecond).
		Should(MatchError(ContainSubstring("nfd-worker may write its own node's NodeFeature 'gpu-a' only, not gpu-b")))
	g.Expect(worker.Create(ctx, nodeFeature("gpu-a", "gpu-b"), client.DryRunAll)).
		To(MatchError(ContainSubstring("must be labelled nfd.node.kubernetes.io/node-name=gpu-a")), "its own name, another node's label")
	unlabelled := nodeFeature("gpu-a", "")
	unlabelled.SetLabels(nil)
	g.Expect(worker.Create(ctx, unlabelled, client.DryRunAll)).To(MatchError(ContainSubstring("must be labelled")))

	own := nodeFeature("gpu-a", "gpu-a")
	g.Expect(worker.Create(ctx, own)).To(Succeed(), "its own node's, as nfd-worker writes it")
	g.Expect(worker.Update(ctx, own)).To(Succeed())
	other := nodeFeature("gpu-b", "gpu-b")
	g.Expect(admin.Create(ctx, other)).To(Succeed())
	g.Expect(worker.Delete(ctx, other)).To(MatchError(ContainSubstring("not gpu-b")))
}
