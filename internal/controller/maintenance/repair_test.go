package maintenance

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/migconfig"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/migmanager"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
	"github.com/gpu-operator/gpu-operator/internal/test/podindex"
	"github.com/gpu-operator/gpu-operator/internal/timers"
)

// The one rule between a MIG reconfiguration and a repair that is not a
// row of the table (docs/maintenance.md): for KubeletResourceGrace after a
// MIG change ended, the kubelet still lists the old resource as
// unallocatable, which reads as unhealthy GPUs, so no repair queues.
// After the grace, the same node's repair queues.
func TestARepairWaitsOutTheKubeletAfterAMIGChange(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{}
	cp.Spec.Operator.Remediation.Enabled = true
	cp.Spec.Operator.Remediation.AutoStart = ptr.To(true)
	grace := timers.Defaults().KubeletResourceGrace
	r := &Reconciler{Timers: timers.Defaults()}
	done := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	n := gpuNode("x", map[string]string{
		gpuv1.LabelRemediationState:    string(gpuv1.RemediationRequired),
		gpuv1.LabelMIGReconfigureState: string(gpuv1.MIGReconfigureDone),
	}, map[string]string{AnnotationMIGSince: done.Format(time.RFC3339)})

	for at, want := range map[time.Time]arbiter.Phase{
		done.Add(time.Second):         arbiter.Idle,
		done.Add(grace - time.Second): arbiter.Idle,
		done.Add(grace):               arbiter.Queued,
	} {
		p := &pass{r: r, cp: cp, now: at, obs: &observed{pools: driverpool.FromPolicy(cp)}, machines: []machine{&repairs{}}}
		g.Expect(p.view(context.Background(), n).Ops[arbiter.Repair].Phase).To(Equal(want), "%s after the MIG change", at.Sub(done))
	}

	n.Labels[gpuv1.LabelMIGReconfigureState] = string(gpuv1.MIGReconfigureRequired)
	p := &pass{r: r, cp: cp, now: done.Add(time.Second), obs: &observed{pools: driverpool.FromPolicy(cp)}, machines: []machine{&repairs{}}}
	g.Expect(p.view(context.Background(), n).Ops[arbiter.Repair].Phase).To(Equal(arbiter.Queued),
		"only a MIG change that ended holds the repair back")
}

// A repair held back by the kubelet's grace after a MIG change is woken
// when the grace ends: no node event need come then (the kubelet may
// change nothing the controller watches), so the look that holds it back
// comes again, and the one after the grace starts it.
func TestARepairHeldByTheKubeletsGraceIsWokenAfterIt(t *testing.T) {
	g := NewWithT(t)
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
	cp := driverPolicy(g)
	cp.Spec.Operator.Remediation.Enabled = true
	cp.Spec.MIGManager.Enabled = ptr.To(true)
	configs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cp.Spec.MIGManager.ConfigMapName(), Namespace: fixture.Namespace},
		Data: map[string]string{migconfig.FileKey: migmanager.DefaultConfig}}
	done := time.Now().UTC().Truncate(time.Second)
	a := gpuNode("a", map[string]string{
		gpuv1.LabelRemediationState:                 string(gpuv1.RemediationRequired),
		gpuv1.LabelMIGReconfigureState:              string(gpuv1.MIGReconfigureDone),
		gpuv1.LabelMIGConfig:                        "all-1g.18gb",
		gpuv1.DeployLabel(string(state.MIGManager)): gpuv1.LabelTrue,
	}, map[string]string{
		AnnotationRemediationSince:    done.Add(-time.Hour).Format(time.RFC3339),
		gpuv1.AnnotationUnhealthyGPUs: "1",
		AnnotationMIGSince:            done.Format(time.RFC3339),
		gpuv1.AnnotationMIGApplied:    "all-1g.18gb",
	})
	// The kubelet counts one GPU unhealthy: the old resource, or a GPU
	// really lost; the repair cannot tell before the grace ends.
	a.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	a.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("7")}
	c := fakeAPI(cp, configs, a).Build()
	graph, err := registry.Graph()
	g.Expect(err).NotTo(HaveOccurred())
	r := (&repairHoldsThePlace{ctx: ctx, c: c, graph: graph}).reconciler(t, g, c)
	r.Pods = podindex.Fixed(t)
	repair := func() string { return labelOf(ctx, g, c, "a", gpuv1.LabelRemediationState) }

	r.Now = func() time.Time { return done.Add(time.Second) }
	result, err := r.Reconcile(ctx, ctrl.Request{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(repair()).To(Equal(string(gpuv1.RemediationRequired)), "held within the grace")
	g.Expect(result.RequeueAfter).To(BeNumerically(">", 0), "looked at again: nothing else says when the grace ends")

	r.Now = func() time.Time { return done.Add(r.Timers.KubeletResourceGrace) }
	_, err = r.Reconcile(ctx, ctrl.Request{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(repair()).NotTo(Equal(string(gpuv1.RemediationRequired)), "started once the grace has passed")
}
