package controllers

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
)

// A user's deploy label is never overwritten; the operand it names is
// disabled on that node and the states after it proceed. A driver opted
// out goes from ready to disabled: the node now uses its host's driver, so
// everything that used the driver container's root restarts, in order, with
// the host's.
func TestUserOptOutSurvives(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 2)
	node, other := f.nodes[0], f.nodes[1]
	f.expectAllReady(f.nodes...)
	oldToolkit, oldPlugin := f.podOn(node, "container-toolkit").UID, f.podOn(node, "device-plugin").UID

	f.setLabel(node, gpuv1.DeployLabel("driver"), "false")
	f.expectState("disabled", "driver", node)
	f.expectLabel(node, gpuv1.LabelDriverRoot, "host")
	g.Eventually(func() bool { return f.podOn(node, "driver") == nil }, timeout, interval).Should(BeTrue())
	f.expectAllUp(node)
	for state, old := range map[string]any{"container-toolkit": oldToolkit, "device-plugin": oldPlugin} {
		// The old pod may still be on its way out.
		g.Eventually(func() string {
			p := f.podOn(node, state)
			if p == nil || p.UID == old {
				return ""
			}
			return envOf(p, "NVIDIA_DRIVER_ROOT")
		}, timeout, interval).Should(Equal("/"), "%s restarted on the host's driver root", state)
	}
	f.expectAllUp(node)

	// A policy change makes every node reconcile again: the user's value
	// stays.
	deploy := f.watchLabel(node, gpuv1.DeployLabel("driver"))
	f.updatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.Daemonsets.Labels = gpuv1.Labels{"team": "gpu"} })
	f.reconciled()
	time.Sleep(2 * time.Second) // the node controller's pass after the change
	g.Expect(deploy.seen()).To(Equal([]string{"false"}), "every value the label took")
	g.Expect(f.stateOf(other, "driver")()).To(Equal("ready"))
}

// nvidia.com/gpu.deploy.operands=false takes every operand off the node.
func TestOperandsFalseTakesEverythingOff(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 1)
	node := f.nodes[0]
	f.expectAllReady(node)

	f.setLabel(node, gpuv1.LabelDeployOperands, "false")
	for _, s := range states {
		f.expectState("disabled", s, node)
	}
	for _, s := range states {
		g.Eventually(func() bool { return f.podOn(node, s) == nil }, timeout, interval).Should(BeTrue(), "%s pod", s)
	}

	f.setLabel(node, gpuv1.LabelDeployOperands, "")
	f.expectAllReady(node)
}

// Disabling an operand removes its objects and marks it disabled on every
// node; enabling it brings it back.
func TestDisableAndEnableAnOperand(t *testing.T) {
	g := NewWithT(t)
	f := setup(t, 2)
	f.expectAllReady(f.nodes...)
	key := client.ObjectKey{Namespace: namespace, Name: dcgmexporter.DaemonSetName}
	g.Expect(k8sClient.Get(f.ctx, key, &appsv1.DaemonSet{})).To(Succeed())

	f.updatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.DCGMExporter.Enabled = ptr.To(false) })
	f.expectState("disabled", "dcgm-exporter", f.nodes...)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(f.ctx, key, &appsv1.DaemonSet{}))
	}, timeout, interval).Should(BeTrue(), "the DaemonSet of a disabled operand is pruned")
	f.expectState("ready", "gpu-feature-discovery", f.nodes...)

	f.updatePolicy(func(cp *gpuv1.ClusterPolicy) { cp.Spec.DCGMExporter.Enabled = ptr.To(true) })
	f.expectAllReady(f.nodes...)
	g.Expect(k8sClient.Get(f.ctx, key, &appsv1.DaemonSet{})).To(Succeed())
}
