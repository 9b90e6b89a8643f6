package maintenance

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
	"github.com/gpu-operator/gpu-operator/internal/test/podindex"
)

// One clock per node (issue 52, finding 4): a MIG configuration applied
// again within a driver upgrade's validation (the table lets it in: the
// validation waits for its devices) may take longer than the validation's
// timeout. The upgrade's validation pauses while the MIG reconfiguration
// acts and counts afresh from its end; before, the upgrade failed and kept
// its cordon after the restore had succeeded. A pause kept long writes the
// validation's time forward, so that a restore let go halfway leaves it
// time.
func TestAMIGRestoreDoesNotRunOutTheUpgradesValidation(t *testing.T) {
	g := NewWithT(t)
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
	cp := driverPolicy(g)
	cp.Spec.MIGManager.Enabled = ptr.To(true)
	timeout := fixture.Timers().DriverValidationTimeout
	now := time.Now()
	stamp := func(ago time.Duration) string { return now.Add(-ago).UTC().Format(time.RFC3339) }
	a := gpuNode("a", map[string]string{
		gpuv1.LabelUpgradeState:                      string(gpuv1.UpgradeValidation),
		gpuv1.LabelMIGReconfigureState:               string(gpuv1.MIGApply),
		gpuv1.LabelMIGConfig:                         "all-1g.18gb",
		gpuv1.DeployLabel(string(state.MIGManager)):  gpuv1.LabelTrue,
		gpuv1.StateLabel(string(state.DevicePlugin)): string(gpuv1.StatePending),
		gpuv1.StateLabel(string(state.MIGManager)):   string(gpuv1.StateReady),
	}, map[string]string{AnnotationSince: stamp(8 * timeout), AnnotationMIGSince: stamp(7 * timeout), AnnotationCordoned: gpuv1.LabelTrue})
	a.Spec.Unschedulable = true
	c := fakeAPI(cp, a, newDriverDaemonSet()).Build()
	driver := outdatedDriver("a")
	driver.Annotations[render.AnnotationTemplateHash] = "new"
	driver.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	graph, err := registry.Graph()
	g.Expect(err).NotTo(HaveOccurred())
	f := &repairHoldsThePlace{ctx: ctx, c: c, graph: graph}
	r := f.reconciler(t, g, c)
	r.Pods = podindex.Fixed(t, *driver)
	r.Now = func() time.Time { return now }
	upgradeState := func() string { return labelOf(ctx, g, c, "a", gpuv1.LabelUpgradeState) }
	mig := func(st gpuv1.MIGReconfigureState, since time.Duration) {
		n := &corev1.Node{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "a"}, n)).To(Succeed())
		n.Labels[gpuv1.LabelMIGReconfigureState] = string(st)
		n.Annotations[AnnotationMIGSince] = stamp(since)
		g.Expect(c.Update(ctx, n)).To(Succeed())
	}

	f.look(g, r)
	g.Expect(upgradeState()).To(Equal(string(gpuv1.UpgradeValidation)), "paused while the MIG configuration is applied")
	g.Expect(annotationOf(ctx, g, c, "a", AnnotationSince)).To(Equal(stamp(0)), "its time kept forward, half of its timeout gone")

	// The restore let go halfway (mig-manager turned off): no trace of
	// the pause is left but the time kept forward.
	n := &corev1.Node{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "a"}, n)).To(Succeed())
	delete(n.Labels, gpuv1.LabelMIGReconfigureState)
	delete(n.Annotations, AnnotationMIGSince)
	g.Expect(c.Update(ctx, n)).To(Succeed())
	f.look(g, r)
	g.Expect(upgradeState()).To(Equal(string(gpuv1.UpgradeValidation)), "the time kept forward stands")

	// Its own time gone, a restore that ended since counts.
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "a"}, n)).To(Succeed())
	n.Annotations[AnnotationSince] = stamp(timeout + time.Second)
	g.Expect(c.Update(ctx, n)).To(Succeed())
	mig(gpuv1.MIGReconfigureDone, timeout/2)
	f.look(g, r)
	g.Expect(upgradeState()).To(Equal(string(gpuv1.UpgradeValidation)), "counting from the restore's end")

	mig(gpuv1.MIGReconfigureDone, timeout+time.Second)
	f.look(g, r)
	g.Expect(upgradeState()).To(Equal(string(gpuv1.UpgradeFailed)), "a validation of its own time out")
}

// annotationOf reads a node's annotation as the API server has it.
func annotationOf(ctx context.Context, g Gomega, c client.Client, node, key string) string {
	n := &corev1.Node{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
	return n.Annotations[key]
}
