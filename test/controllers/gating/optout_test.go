package gating

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state/dcgmexporter"
	"github.com/gpu-operator/gpu-operator/internal/test/controllertest"
)

// A user's deploy label is never overwritten; the operand it names is
// disabled on that node and the controllertest.States after it proceed. A driver opted
// out goes from ready to disabled: the node now uses its host's driver, so
// everything that used the driver container's root restarts, in order, with
// the host's.
func TestUserOptOutSurvives(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2)
	node, other := f.Nodes[0], f.Nodes[1]
	f.ExpectAllReady(f.Nodes...)
	oldToolkit, oldPlugin := f.PodOn(node, "container-toolkit").UID, f.PodOn(node, "device-plugin").UID

	f.SetLabel(node, gpuv1.DeployLabel("driver"), "false")
	f.ExpectState("disabled", "driver", node)
	f.ExpectLabel(node, gpuv1.LabelDriverRoot, "host")
	g.Eventually(func() bool { return f.PodOn(node, "driver") == nil }, controllertest.Timeout, controllertest.Interval).Should(BeTrue())
	f.ExpectAllUp(node)
	for state, old := range map[string]any{"container-toolkit": oldToolkit, "device-plugin": oldPlugin} {
		// The old pod may still be on its way out.
		g.Eventually(func() string {
			p := f.PodOn(node, state)
			if p == nil || p.UID == old {
				return ""
			}
			return controllertest.EnvOf(p, "NVIDIA_DRIVER_ROOT")
		}, controllertest.Timeout, controllertest.Interval).Should(Equal("/"), "%s restarted on the host's driver root", state)
	}
	f.ExpectAllUp(node)

	// A policy change makes every node reconcile again: the user's value
	// stays.
	deploy := f.WatchLabel(node, gpuv1.DeployLabel("driver"))
	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Daemonsets.Labels = gpuv1.Labels{"team": "gpu"} })
	f.Reconciled()
	time.Sleep(2 * time.Second) // the node controller's pass after the change
	g.Expect(deploy.Seen()).To(Equal([]string{"false"}), "every value the label took")
	g.Expect(f.StateOf(other, "driver")()).To(Equal("ready"))
}

// nvidia.com/gpu.deploy.operands=false takes every operand off the node.
func TestOperandsFalseTakesEverythingOff(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 1)
	node := f.Nodes[0]
	f.ExpectAllReady(node)

	f.SetLabel(node, gpuv1.LabelDeployOperands, "false")
	for _, s := range controllertest.States {
		f.ExpectState("disabled", s, node)
	}
	for _, s := range controllertest.States {
		g.Eventually(func() bool { return f.PodOn(node, s) == nil }, controllertest.Timeout, controllertest.Interval).Should(BeTrue(), "%s pod", s)
	}

	f.SetLabel(node, gpuv1.LabelDeployOperands, "")
	f.ExpectAllReady(node)
}

// Disabling an operand removes its objects and marks it disabled on every
// node; enabling it brings it back.
func TestDisableAndEnableAnOperand(t *testing.T) {
	g := NewWithT(t)
	f := suite.Setup(t, 2)
	f.ExpectAllReady(f.Nodes...)
	key := client.ObjectKey{Namespace: controllertest.Namespace, Name: dcgmexporter.DaemonSetName}
	g.Expect(suite.Client.Get(f.Ctx, key, &appsv1.DaemonSet{})).To(Succeed())

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.DCGMExporter.Enabled = ptr.To(false) })
	f.ExpectState("disabled", "dcgm-exporter", f.Nodes...)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(suite.Client.Get(f.Ctx, key, &appsv1.DaemonSet{}))
	}, controllertest.Timeout, controllertest.Interval).Should(BeTrue(), "the DaemonSet of a disabled operand is pruned")
	f.ExpectState("ready", "gpu-feature-discovery", f.Nodes...)

	f.UpdatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.DCGMExporter.Enabled = ptr.To(true) })
	// The DaemonSet first: under load the exporter's state can read ready
	// from the pruned DaemonSet's pods before the simulator's garbage
	// collection removes them and before the new one is applied.
	g.Eventually(func() error { return suite.Client.Get(f.Ctx, key, &appsv1.DaemonSet{}) },
		controllertest.Timeout, controllertest.Interval).Should(Succeed(), "the DaemonSet of an enabled operand comes back")
	f.ExpectAllReady(f.Nodes...)
}
