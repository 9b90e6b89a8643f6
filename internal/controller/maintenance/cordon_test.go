package maintenance

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/metrics"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/envtest"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
	"github.com/gpu-operator/gpu-operator/internal/test/podindex"
)

// conflictOnce answers the first apply of one field owner with a
// conflict, as the API server does when another writer (the node
// lifecycle controller tainting a node just cordoned) changed the node
// between two writes of one look.
type conflictOnce struct {
	client.Client
	owner string
	done  bool
}

func (c *conflictOnce) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	o := &client.ApplyOptions{}
	o.ApplyOptions(opts)
	if !c.done && o.FieldManager == c.owner {
		c.done = true
		return apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "a", nil)
	}
	return c.Client.Apply(ctx, obj, opts...)
}

// The upgrade's cordon and the mark that it is the upgrade's go in one
// write: a conflict on the state label's write after the cordon (the
// node lifecycle controller taints a cordoned node at once) must not lose
// which cordon is the upgrade's, or the node stays cordoned after its
// upgrade. Found in the e2e pool spec: nodes upgrade-done and cordoned.
func TestTheUpgradesCordonSurvivesAConflictAfterIt(t *testing.T) {
	g := NewWithT(t)
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
	cp := driverPolicy(g)
	a := gpuNode("a", map[string]string{gpuv1.LabelUpgradeState: string(gpuv1.UpgradeCordonRequired)}, nil)
	c := fakeAPI(cp, a, newDriverDaemonSet()).Build()
	graph, err := registry.Graph()
	g.Expect(err).NotTo(HaveOccurred())
	m, err := metrics.New(prometheus.NewRegistry())
	g.Expect(err).NotTo(HaveOccurred())
	writes := &conflictOnce{Client: c, owner: StateFieldOwner}
	r := &Reconciler{Client: writes, APIReader: c, Pods: podindex.Fixed(t, *outdatedDriver("a")), Graph: graph, Namespace: fixture.Namespace,
		Recorder: events.NewFakeRecorder(100), Metrics: m, Timers: fixture.Timers()}
	node := func() *corev1.Node {
		n := &corev1.Node{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "a"}, n)).To(Succeed())
		return n
	}

	// The cordon lands; the state label's write conflicts.
	_, _ = r.Reconcile(ctx, ctrl.Request{})
	g.Expect(writes.done).To(BeTrue(), "the state write conflicted")
	g.Expect(node().Spec.Unschedulable).To(BeTrue())
	g.Expect(node().Labels).To(HaveKeyWithValue(gpuv1.LabelUpgradeState, string(gpuv1.UpgradeCordonRequired)))

	// The next look finds the node cordoned: by the upgrade, not a person.
	_, err = r.Reconcile(ctx, ctrl.Request{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(node().Labels).To(HaveKeyWithValue(gpuv1.LabelUpgradeState, string(gpuv1.UpgradeWaitForJobs)))
	g.Expect(node().Annotations).To(HaveKeyWithValue(AnnotationCordoned, gpuv1.LabelTrue))

	// At its end the upgrade takes its cordon back.
	n := node()
	n.Labels[gpuv1.LabelUpgradeState] = string(gpuv1.UpgradeUncordon)
	g.Expect(c.Update(ctx, n)).To(Succeed())
	_, err = r.Reconcile(ctx, ctrl.Request{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(node().Labels).To(HaveKeyWithValue(gpuv1.LabelUpgradeState, string(gpuv1.UpgradeDone)))
	g.Expect(node().Spec.Unschedulable).To(BeFalse(), "uncordoned after the upgrade")
	g.Expect(node().Annotations).NotTo(HaveKey(AnnotationCordoned))
}

// Turning remediation off removes the repair's label, annotations and
// taint, and leaves a person's approval: it is theirs to remove.
func TestForgettingARepairKeepsTheApproval(t *testing.T) {
	g := NewWithT(t)
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
	a := gpuNode("a", nil, nil)
	c := fake.NewClientBuilder().WithScheme(envtest.NewScheme()).WithObjects(a).Build()
	r := &Reconciler{Client: c, APIReader: c, Recorder: events.NewFakeRecorder(10), Timers: fixture.Timers()}
	n := &corev1.Node{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "a"}, n)).To(Succeed())
	written, err := r.apply(ctx, corev1ac.Node("a").WithResourceVersion(n.ResourceVersion).
		WithLabels(map[string]string{gpuv1.LabelRemediationState: string(gpuv1.RemediationEviction)}).
		WithAnnotations(map[string]string{AnnotationRemediationSince: "2026-12-01T00:00:00Z"}), RemediationFieldOwner, "a repair")
	g.Expect(err).NotTo(HaveOccurred())
	tainted, err := r.patchTaint(ctx, written, true, false)
	g.Expect(err).NotTo(HaveOccurred())
	tainted.Annotations[gpuv1.AnnotationRemediationApproved] = gpuv1.LabelTrue
	g.Expect(c.Update(ctx, tainted, client.FieldOwner("kubectl-annotate"))).To(Succeed())

	g.Expect(c.Get(ctx, client.ObjectKey{Name: "a"}, n)).To(Succeed())
	g.Expect(r.forgetRemediation(ctx, n)).To(Succeed())
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "a"}, n)).To(Succeed())
	g.Expect(hasRemediationMarks(n)).To(BeFalse(), "labels %v, annotations %v, taints %v", n.Labels, n.Annotations, n.Spec.Taints)
	g.Expect(n.Annotations).To(HaveKeyWithValue(gpuv1.AnnotationRemediationApproved, gpuv1.LabelTrue))
}
