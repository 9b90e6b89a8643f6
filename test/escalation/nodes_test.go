package escalation

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state/dradriver"
	"github.com/gpu-operator/gpu-operator/internal/state/migmanager"
)

// applyMIGManagerAccess applies what the operator and the install grant
// mig-manager: its rendered RBAC and admission policy, and its ClusterRole.
func applyMIGManagerAccess(t *testing.T, ctx context.Context) {
	t.Helper()
	applyAccess(t, ctx, migmanager.Operand{}, testPolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.MIGManager.Enabled = ptr.To(true) }),
		map[string][]rbacv1.PolicyRule{migmanager.ServiceAccountName: migmanager.ClusterRules()})
}

func gpuNodes(t *testing.T, ctx context.Context, names ...string) {
	t.Helper()
	for _, n := range names {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"nvidia.com/gpu.present": "true"}}}
		if err := client.IgnoreAlreadyExists(admin.Create(ctx, node)); err != nil {
			t.Fatal(err)
		}
	}
}

func labels(t *testing.T, l map[string]any) client.Patch {
	return mergePatch(t, map[string]any{"metadata": map[string]any{"labels": l}})
}

// mig-manager's token, on every MIG node, may set its own node's MIG state
// and deploy labels and nothing more (issue 56): its ClusterRole lets it
// patch every node, every field.
func TestMIGManagerTokenLabelsItsOwnNodeOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	applyMIGManagerAccess(t, ctx)
	gpuNodes(t, ctx, "mig-1", "mig-2")
	own, other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "mig-1"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "mig-2"}}
	mm := impersonate(t, namespace, migmanager.ServiceAccountName, "nvidia-mig-manager-x1", own.Name)
	state := labels(t, map[string]any{"nvidia.com/mig.config.state": "pending"})

	g.Eventually(func() error { return mm.Patch(ctx, other.DeepCopy(), state) }, 30*time.Second, 200*time.Millisecond).
		Should(MatchError(ContainSubstring("mig-manager may update its own node 'mig-1' only, not mig-2")))
	g.Expect(mm.Patch(ctx, own.DeepCopy(), labels(t, map[string]any{"nvidia.com/gpu.present": nil}))).
		To(MatchError(ContainSubstring("may change nvidia.com/mig.config.state and nvidia.com/gpu.deploy.* only, not nvidia.com/gpu.present")))
	g.Expect(mm.Patch(ctx, own.DeepCopy(), labels(t, map[string]any{"node-role.kubernetes.io/control-plane": ""}))).
		To(MatchError(ContainSubstring("only, not node-role.kubernetes.io/control-plane")))
	taint := mergePatch(t, map[string]any{"spec": map[string]any{"taints": []map[string]any{{"key": "x", "effect": "NoExecute"}}}})
	g.Expect(mm.Patch(ctx, own.DeepCopy(), taint)).To(MatchError(ContainSubstring("not their spec (taints, cordon)")))

	g.Expect(mm.Patch(ctx, own.DeepCopy(), state)).To(Succeed())
	g.Expect(mm.Patch(ctx, own.DeepCopy(), labels(t, map[string]any{"nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change"}))).To(Succeed())
	got := &corev1.Node{}
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(own), got)).To(Succeed())
	g.Expect(got.Labels).To(HaveKeyWithValue("nvidia.com/mig.config.state", "pending"))
}

// The DRA kubelet plugin's token, on every GPU node, may set and remove
// its own node's compute-domain label; the controller's may remove that
// label from any node, and do nothing else to nodes.
func TestDRATokensWriteTheComputeDomainLabelOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	applyDRAAccess(t, ctx)
	gpuNodes(t, ctx, "imex-node", "imex-node-2")
	own, other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "imex-node"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "imex-node-2"}}
	plugin := impersonate(t, namespace, dradriver.KubeletPluginServiceAccount, "plugin-x", own.Name)
	join := labels(t, map[string]any{"resource.nvidia.com/computeDomain": "cd-1"})

	g.Eventually(func() error { return plugin.Patch(ctx, other.DeepCopy(), join) }, 30*time.Second, 200*time.Millisecond).
		Should(MatchError(ContainSubstring("may update its own node 'imex-node' only, not imex-node-2")))
	g.Expect(plugin.Patch(ctx, own.DeepCopy(), labels(t, map[string]any{"nvidia.com/gpu.present": "false"}))).
		To(MatchError(ContainSubstring("only, not nvidia.com/gpu.present")))
	g.Expect(plugin.Patch(ctx, own.DeepCopy(), join)).To(Succeed(), "its own node joins the compute domain")
	clique := labels(t, map[string]any{"nvidia.com/gpu.clique": "8d1a.1"})
	g.Expect(plugin.Patch(ctx, own.DeepCopy(), clique)).To(Succeed(), "its own node's NVLink clique, GPU_CLIQUE_LABEL_ENABLED")
	g.Expect(plugin.Patch(ctx, other.DeepCopy(), clique)).To(MatchError(ContainSubstring("not imex-node-2")))
	// The compute-domain plugin updates its whole node to join or leave.
	n := &corev1.Node{}
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(own), n)).To(Succeed())
	delete(n.Labels, "resource.nvidia.com/computeDomain")
	g.Expect(plugin.Update(ctx, n)).To(Succeed(), "its own node leaves the domain")
	g.Expect(admin.Patch(ctx, other.DeepCopy(), join)).To(Succeed())

	// The controller updates the whole node, as its code does.
	controller := impersonate(t, namespace, dradriver.ControllerName, "controller-x", "control-plane-1")
	update := func(change func(*corev1.Node)) error {
		n := &corev1.Node{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(other), n); err != nil {
			return err
		}
		change(n)
		return controller.Update(ctx, n)
	}
	g.Expect(update(func(n *corev1.Node) { n.Labels["resource.nvidia.com/computeDomain"] = "cd-2" })).
		To(MatchError(ContainSubstring("may remove resource.nvidia.com/computeDomain only")))
	g.Expect(update(func(n *corev1.Node) { n.Spec.Unschedulable = true })).To(MatchError(ContainSubstring("not their spec")))
	g.Expect(update(func(n *corev1.Node) { delete(n.Labels, "resource.nvidia.com/computeDomain") })).
		To(Succeed(), "a deleted domain's label goes from any node")
}
