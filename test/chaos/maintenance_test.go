//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
)

const (
	// rackSize is how many consecutive nodes of the run share an NVLink
	// domain, as GFD labels the trays of one rack.
	rackSize = 8
	// domainCap is the policy's maxUnavailableNVLinkDomains.
	domainCap = 2
	// maintenanceBudget is the repair's and MIG manager's maxParallel.
	maintenanceBudget = "10%"
	// migLayout is the MIG configuration one node in ten asks for.
	migLayout = "all-1g.18gb"
	// maintenanceLimit is how long the fleet has to converge after the
	// maintenance phase.
	maintenanceLimit = 10 * time.Minute
)

// limits are the run's budgets, as policy and the maintenance phase set
// them: a tenth of the fleet each, rounded up, and domainCap racks.
func (r *chaosRun) limits() limits {
	tenth := (r.opts.nodes + 9) / 10
	return limits{
		ops: [arbiter.NumOperations]int{
			arbiter.DriverUpgrade: maxParallel(r.opts.nodes), arbiter.Repair: tenth, arbiter.MIGReconfiguration: tenth,
			arbiter.ModeSwitch: maxParallel(r.opts.nodes),
		},
		domains: domainCap,
	}
}

// labelCliques labels nodes with their NVLink domain, as GFD would: the
// rackSize consecutive nodes of r.names share one.
func (r *chaosRun) labelCliques(ctx context.Context, names []string) error {
	return simcluster.Parallel(names, 16, func(name string) error {
		rack := slices.Index(r.names, name) / rackSize
		return r.editNode(ctx, name, func(n *corev1.Node) {
			n.Labels[gpuv1.LabelGPUClique] = fmt.Sprintf("chaos-fabric.%d", rack)
		})
	})
}

// maintenance turns repair and MIG management on and has every operation
// want nodes at once: a MIG layout on one node in ten; unhealthy GPUs on
// four nodes, healed by a device plugin restart, a driver reload, and a
// reboot (two of them, one a MIG node, whose devices the reboot
// destroys); and a driver upgrade, with operator SIGKILLs and the version
// changed again mid-flight. A kured stand-in reboots each node a repair
// marks reboot-required.
func (r *chaosRun) maintenance(ctx context.Context, kills int) error {
	if err := r.editPolicy(ctx, func(cp *gpuv1.ClusterPolicy) {
		cp.Spec.Operator.Remediation = gpuv1.RemediationSpec{Enabled: true, MaxParallel: ptr.To(intstr.FromString(maintenanceBudget))}
		cp.Spec.MIGManager.Enabled = ptr.To(true)
		cp.Spec.MIGManager.MaxParallel = ptr.To(intstr.FromString(maintenanceBudget))
	}); err != nil {
		return err
	}
	// The GPUs' layout as found is taken as applied first, on every node:
	// only the nodes given a new one reconfigure.
	if err := simcluster.Poll(ctx, 3*time.Minute, time.Second, func() (bool, string, error) {
		nodes := &corev1.NodeList{}
		if err := r.s.Client.List(ctx, nodes); err != nil {
			return false, "listing nodes", nil
		}
		for _, n := range nodes.Items {
			if slices.Contains(r.names, n.Name) && n.Annotations[gpuv1.AnnotationMIGApplied] == "" {
				return false, "node " + n.Name + " has no MIG configuration taken as applied yet", nil
			}
		}
		return true, "", nil
	}); err != nil {
		return err
	}
	go r.kured(ctx)

	r.migNodes = nil
	for i := 0; i < len(r.names); i += 10 {
		r.migNodes = append(r.migNodes, r.names[i])
	}
	sick := map[string]string{
		r.names[0]: fakenode.HealOnReboot, // a MIG node
		r.names[1]: fakenode.HealOnReboot,
		r.names[2]: fakenode.HealOnDriverReload,
		r.names[3]: fakenode.HealOnDevicePluginRestart,
	}
	for name, heal := range sick {
		if err := r.editNode(ctx, name, func(n *corev1.Node) {
			n.Annotations[fakenode.AnnotationUnhealthyUntil] = heal
			n.Annotations[fakenode.AnnotationUnhealthyGPUs] = "2"
		}); err != nil {
			return err
		}
	}
	if err := simcluster.Parallel(r.migNodes, 16, func(name string) error {
		return r.editNode(ctx, name, func(n *corev1.Node) { n.Labels[gpuv1.LabelMIGConfig] = migLayout })
	}); err != nil {
		return err
	}
	if err := r.upgradeTo(ctx, chaosVersions[6]); err != nil {
		return err
	}
	if err := r.killOperator(ctx, kills); err != nil {
		return err
	}
	if err := r.waitInUpgrade(ctx, ""); err != nil {
		return err
	}
	return r.upgradeTo(ctx, chaosVersions[7])
}

// kured reboots, as kured configured to read the operator's label would,
// each node a repair marks reboot-required: once per mark, until ctx ends.
func (r *chaosRun) kured(ctx context.Context) {
	rebooted := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		nodes := &corev1.NodeList{}
		if err := r.s.Client.List(ctx, nodes); err != nil {
			continue // the API server may be restarting
		}
		for _, n := range nodes.Items {
			if n.Labels[gpuv1.LabelRemediationState] != string(gpuv1.RemediationRebootRequired) {
				delete(rebooted, n.Name)
				continue
			}
			if rebooted[n.Name] {
				continue
			}
			if out, err := r.s.Run("hack/sim/reboot.sh", n.Name); err != nil {
				progress(r.log, "kured: rebooting %s: %v\n%s", n.Name, err, out)
				continue
			}
			rebooted[n.Name] = true
			r.reboots.Add(1)
			progress(r.log, "kured: rebooted %s", n.Name)
		}
	}
}

// maintenanceDone reports why a node has not come back from the
// maintenance phase: its repair, its MIG reconfiguration, or a taint of
// the operator's; "" once it has.
func (r *chaosRun) maintenanceDone(n *corev1.Node) string {
	v := versionOf(n)
	switch {
	case v.phase(arbiter.Repair) != arbiter.Idle:
		return "repair " + n.Labels[gpuv1.LabelRemediationState]
	case v.phase(arbiter.MIGReconfiguration) != arbiter.Idle:
		return "MIG reconfiguration " + n.Labels[gpuv1.LabelMIGReconfigureState]
	case v.unhealthyTaint || v.migTaint || v.switchTaint:
		return "the operator's taint"
	case slices.Contains(r.migNodes, n.Name) && n.Labels[gpuv1.LabelMIGConfigState] != gpuv1.MIGConfigSuccess:
		return "mig.config.state " + n.Labels[gpuv1.LabelMIGConfigState]
	}
	return ""
}
