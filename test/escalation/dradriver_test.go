package escalation

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state/dradriver"
)

const namespace = "gpu-operator"

// applyDRAAccess applies what the operator and the install grant the DRA
// driver with compute domains and MPS on: the RBAC and admission policies the
// operator renders, its ClusterRoleBindings included, and the ClusterRoles
// the install ships (dradriver.ClusterRules).
func applyDRAAccess(t *testing.T, ctx context.Context) {
	t.Helper()
	applyAccess(t, ctx, dradriver.Operand{}, testPolicy(func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.DRADriver.ComputeDomains.Enabled = ptr.To(true)
		cp.Spec.DRADriver.FeatureGates = map[string]bool{"MPSSupport": true}
		cp.Spec.DRADriver.Repository, cp.Spec.DRADriver.Image, cp.Spec.DRADriver.Version = "nvcr.io/nvidia", "dra-driver-nvidia-gpu", "v0.5.0"
	}), dradriver.ClusterRules())
}

// applyNamespaces creates the operator's namespace and kube-system.
func applyNamespaces(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, name := range []string{namespace, "kube-system"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

func pod(namespace, name string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{NodeName: "imex-node", Containers: []corev1.Container{{Name: "main", Image: "registry.example/app:1"}}}}
	return p
}

// mergePatch is a JSON merge patch, as the daemon sends it.
func mergePatch(t *testing.T, v map[string]any) client.Patch {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return client.RawPatch("application/merge-patch+json", data)
}

// The IMEX daemons' token, on every IMEX node, may label the daemon's own
// pod and nothing more (issue 56, finding 1): NVIDIA grants it pods patch
// in every namespace. Refused: patching a pod in kube-system, another pod
// of the operator's namespace (the operator's own, whose image would run
// as the operator), its own pod's image or annotations. Allowed: its
// clique label on its own pod, as cmd/compute-domain-daemon/main.go does.
func TestIMEXDaemonTokenLabelsItsOwnPodOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	applyDRAAccess(t, ctx)
	own, operator, system := pod(namespace, "imex-daemon-abc"), pod(namespace, "gpu-operator-7d9f"), pod("kube-system", "kube-proxy-x")
	for _, p := range []*corev1.Pod{own, operator, system} {
		g.Expect(client.IgnoreAlreadyExists(admin.Create(ctx, p))).To(Succeed())
	}
	daemon := impersonate(t, namespace, dradriver.ComputeDomainDaemonServiceAccount, own.Name, "imex-node")
	label := mergePatch(t, map[string]any{"metadata": map[string]any{"labels": map[string]string{"resource.nvidia.com/computeDomain.cliqueID": "clique-1"}}})

	// The policy is in force once the API server's informer has it: the
	// write to another pod of the namespace is refused then, by it.
	g.Eventually(func() error { return daemon.Patch(ctx, operator.DeepCopy(), label) }, 30*time.Second, 200*time.Millisecond).
		Should(MatchError(ContainSubstring("an IMEX daemon may update its own pod 'imex-daemon-abc' only")))

	err := daemon.Patch(ctx, system.DeepCopy(), label)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "kube-system: %v", err)
	g.Expect(err).To(MatchError(ContainSubstring(`cannot patch resource "pods" in API group "" in the namespace "kube-system"`)), "refused by RBAC")

	image := mergePatch(t, map[string]any{"spec": map[string]any{"containers": []map[string]any{{"name": "main", "image": "evil.example/x:1"}}}})
	g.Expect(daemon.Patch(ctx, own.DeepCopy(), image)).To(MatchError(ContainSubstring("may change its pod's labels only")))
	annotate := mergePatch(t, map[string]any{"metadata": map[string]any{"annotations": map[string]string{"nvidia.cdi.k8s.io/x": "all"}}})
	g.Expect(daemon.Patch(ctx, own.DeepCopy(), annotate)).To(MatchError(ContainSubstring("may change its pod's labels only")))

	g.Expect(daemon.Patch(ctx, own.DeepCopy(), label)).To(Succeed(), "its clique label on its own pod")
	got := &corev1.Pod{}
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(own), got)).To(Succeed())
	g.Expect(got.Labels).To(HaveKeyWithValue("resource.nvidia.com/computeDomain.cliqueID", "clique-1"))
	g.Expect(daemon.List(ctx, &corev1.PodList{}, client.InNamespace(namespace))).To(Succeed(), "it watches its own pod")
	g.Expect(apierrors.IsForbidden(daemon.List(ctx, &corev1.PodList{}, client.InNamespace("kube-system")))).To(BeTrue(), "no pods elsewhere")
}

// The kubelet plugin's and the controller's tokens read pods in the
// driver's namespace alone (NVIDIA: every namespace).
func TestDRATokensReadPodsInTheDriversNamespaceOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	applyDRAAccess(t, ctx)
	for _, sa := range []string{dradriver.KubeletPluginServiceAccount, dradriver.ControllerName} {
		c := impersonate(t, namespace, sa, "p", "imex-node")
		g.Expect(c.List(ctx, &corev1.PodList{}, client.InNamespace(namespace))).To(Succeed(), sa)
		err := c.List(ctx, &corev1.PodList{}, client.InNamespace("kube-system"))
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s lists kube-system's pods: %v", sa, err)
		g.Expect(apierrors.IsForbidden(c.List(ctx, &corev1.PodList{}))).To(BeTrue(), "%s lists every pod", sa)
	}
}
