package maintenance

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
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
