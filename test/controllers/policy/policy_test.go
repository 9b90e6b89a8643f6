package policy

import (
	"maps"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// A second ClusterPolicy is ignored and says why; deleting the active one
// leaves no operator label on any node and no operand object.
func TestSecondPolicyIgnoredAndDeletionCleansUp(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	// A node NFD does not see, marked as a GPU node by its admin: the
	// admin's label must survive the operator's cleanup.
	marked := f.Nodes[0] + "-marked"
	f.CreateNode(marked, map[string]string{gpuv1.LabelGPUPresent: "true"})
	f.Nodes = append(f.Nodes, marked)
	f.SetLabel(marked, "feature.node.kubernetes.io/pci-10de.present", "")
	// And an admin's opt-out stays too.
	f.SetLabel(marked, gpuv1.DeployLabel("dcgm-exporter"), "false")
	f.ExpectAllReady(f.Nodes[0])
	f.ExpectState("disabled", "dcgm-exporter", marked)
	f.ExpectState("ready", "gpu-feature-discovery", marked)

	second := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "second"}}
	g.Expect(suite.Client.Create(f.Ctx, second)).To(Succeed())
	g.Eventually(func() gpuv1.PolicyState {
		g.Expect(suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(second), second)).To(Succeed())
		return second.Status.State
	}, controllertest.Timeout, controllertest.Interval).Should(Equal(gpuv1.PolicyIgnored))
	ready := meta.FindStatusCondition(second.Status.Conditions, gpuv1.ConditionReady)
	g.Expect(ready.Reason).To(Equal(gpuv1.ReasonIgnored))
	g.Expect(ready.Message).To(ContainSubstring("ClusterPolicy cluster-policy is the active one"))
	g.Expect(suite.Client.Delete(f.Ctx, second)).To(Succeed())

	g.Expect(suite.Client.Delete(f.Ctx, f.Policy)).To(Succeed())
	g.Eventually(f.Policies, controllertest.Timeout, controllertest.Interval).Should(BeEmpty())
	for _, n := range f.Nodes {
		for k := range f.Node(n).Labels {
			g.Expect(strings.HasPrefix(k, gpuv1.StateLabelPrefix)).To(BeFalse(), "node %s still has %s", n, k)
		}
		for k := range f.Node(n).Annotations {
			g.Expect(strings.HasPrefix(k, gpuv1.OperatorAnnotationPrefix)).To(BeFalse(), "node %s still has %s", n, k)
		}
	}
	nfdLabels := map[string]string{
		"feature.node.kubernetes.io/system-os_release.ID":         "ubuntu",
		"feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
	}
	want := maps.Clone(nfdLabels)
	want["feature.node.kubernetes.io/pci-10de.present"] = "true"
	g.Expect(f.Node(f.Nodes[0]).Labels).To(Equal(want), "every label the operator set is gone")
	want = maps.Clone(nfdLabels)
	want[gpuv1.LabelGPUPresent], want[gpuv1.DeployLabel("dcgm-exporter")] = "true", "false"
	g.Expect(f.Node(marked).Labels).To(Equal(want), "the admin's labels stay")

	selector := client.MatchingLabels{render.LabelManagedBy: render.ManagedBy}
	for _, list := range []client.ObjectList{
		&appsv1.DaemonSetList{}, &appsv1.DeploymentList{}, &nodev1.RuntimeClassList{}, &corev1.ServiceAccountList{},
		&corev1.ConfigMapList{}, &corev1.ServiceList{}, &rbacv1.RoleList{}, &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{},
	} {
		g.Expect(suite.Client.List(f.Ctx, list, selector)).To(Succeed())
		g.Expect(meta.LenList(list)).To(BeZero(), "%T left behind", list)
	}
}

// Once everything is ready, the operator sends no write request, even
// when something unrelated happens (a node heartbeat).
func TestSteadyStateWritesNothing(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 3)
	f.ExpectAllReady(f.Nodes...)
	// Let the status catch up, then count.
	g.Eventually(func() gpuv1.PolicyState {
		cp := &gpuv1.ClusterPolicy{}
		g.Expect(suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(f.Policy), cp)).To(Succeed())
		return cp.Status.State
	}, controllertest.Timeout, controllertest.Interval).Should(Equal(gpuv1.PolicyReady))
	time.Sleep(time.Second)

	before := suite.Writes()
	node := f.Node(f.Nodes[0])
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	g.Expect(suite.Client.Status().Update(f.Ctx, node)).To(Succeed())
	quiet := 5 * time.Second
	time.Sleep(quiet)
	writes := suite.Writes() - before
	t.Logf("write requests by the operator over a %s quiet period with %d ready nodes: %d", quiet, len(f.Nodes), writes)
	g.Expect(writes).To(BeZero())
}

// Asking for a ServiceMonitor without the Prometheus Operator's CRD says
// so in the status, and everything else still rolls out.
func TestServiceMonitorWithoutItsCRD(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.DCGMExporter.ServiceMonitor = &gpuv1.ServiceMonitorSpec{Enabled: ptr.To(true)}
	})
	f.ExpectAllReady(f.Nodes...)
	g.Eventually(func() *metav1.Condition {
		cp := &gpuv1.ClusterPolicy{}
		g.Expect(suite.Client.Get(f.Ctx, client.ObjectKeyFromObject(f.Policy), cp)).To(Succeed())
		return meta.FindStatusCondition(cp.Status.Conditions, gpuv1.ConditionDegraded)
	}, controllertest.Timeout, controllertest.Interval).Should(And(
		HaveField("Status", metav1.ConditionTrue),
		HaveField("Reason", gpuv1.ReasonPrerequisiteMissing),
		HaveField("Message", ContainSubstring("install the Prometheus Operator's CRDs, or set it to false")),
	))
}

// An edit of an operator-owned DaemonSet (its gate removed, its image
// changed) is reverted without any change to the policy (issue 12,
// finding 3).
func TestEditedDaemonSetIsRestored(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	f.ExpectAllReady(f.Nodes...)
	key := client.ObjectKey{Namespace: controllertest.Namespace, Name: "nvidia-device-plugin-daemonset"}
	ds := &appsv1.DaemonSet{}
	g.Expect(suite.Client.Get(f.Ctx, key, ds)).To(Succeed())
	wantAffinity := ds.Spec.Template.Spec.Affinity.DeepCopy()
	wantImage := ds.Spec.Template.Spec.Containers[0].Image
	g.Expect(wantAffinity).NotTo(BeNil())

	ds.Spec.Template.Spec.Affinity = nil
	ds.Spec.Template.Spec.Containers[0].Image = "example.com/not-nvidia:latest"
	g.Expect(suite.Client.Update(f.Ctx, ds)).To(Succeed())
	edited := ds.Generation

	g.Eventually(func(g Gomega) {
		live := &appsv1.DaemonSet{}
		g.Expect(suite.Client.Get(f.Ctx, key, live)).To(Succeed())
		g.Expect(live.Generation).To(BeNumerically(">", edited))
		g.Expect(live.Spec.Template.Spec.Affinity).To(Equal(wantAffinity))
		g.Expect(live.Spec.Template.Spec.Containers[0].Image).To(Equal(wantImage))
	}, controllertest.Timeout, controllertest.Interval).Should(Succeed())
}
