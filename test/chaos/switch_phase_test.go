//go:build chaos

package chaos

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// draTrainer is a GPU workload that claims its GPU through DRA, which the
// switches back to the device plugin evict.
const draTrainer = "dra-trainer"

// switchModes moves the fleet to allocation mode dra and, once some node
// has taken its device plugin off, turns the fleet round to the device
// plugin and sends it on to dra again, with operator SIGKILLs meanwhile:
// the switches turn round through their evictions, and no node may ever
// run both plugins. Pods asking for nvidia.com/gpu cannot run on a fleet
// all in dra, and under their PodDisruptionBudget the last ones would hold
// the last nodes for ever: as a user moving every node must, the run
// scales them to nothing first, and starts a workload that claims its GPU
// through DRA.
func (r *chaosRun) switchModes(ctx context.Context, kills int) error {
	if err := r.scaleTrainers(ctx, 0); err != nil {
		return err
	}
	if err := r.claimWorkload(ctx); err != nil {
		return err
	}
	if err := r.setMode(ctx, gpuv1.AllocationDRA); err != nil {
		return err
	}
	if err := r.waitInSwitch(ctx); err != nil {
		return err
	}
	if err := r.setMode(ctx, gpuv1.AllocationDevicePlugin); err != nil {
		return err
	}
	r.sleep(ctx, 5*time.Second)
	if err := r.setMode(ctx, gpuv1.AllocationDRA); err != nil {
		return err
	}
	return r.killOperator(ctx, kills)
}

// switchBack moves the fleet back to the device plugin, the DRA workload's
// pods evicted (and left pending) on the way, then gives the nvidia.com/gpu
// workload its replicas again.
func (r *chaosRun) switchBack(ctx context.Context) error {
	if err := r.setMode(ctx, gpuv1.AllocationDevicePlugin); err != nil {
		return err
	}
	err := r.waitForNodes(ctx, convergeLimit, time.Second, func(nodes []corev1.Node) string {
		for _, n := range nodes {
			if n.Labels[gpuv1.LabelAllocationMode] == string(gpuv1.AllocationDRA) {
				return n.Name + " is still in mode dra"
			}
		}
		return ""
	})
	if err != nil {
		return err
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: draTrainer, Namespace: workloadNamespace}}
	if err := r.s.Client.Delete(ctx, d); client.IgnoreNotFound(err) != nil {
		return err
	}
	return r.scaleTrainers(ctx, r.res.GPUWorkloadPods)
}

// scaleTrainers sets the nvidia.com/gpu workload's replicas.
func (r *chaosRun) scaleTrainers(ctx context.Context, replicas int) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := &appsv1.Deployment{}
		if err := r.s.Client.Get(ctx, client.ObjectKey{Namespace: workloadNamespace, Name: "trainer"}, d); err != nil {
			return err
		}
		d.Spec.Replicas = ptr.To(int32(replicas))
		return r.s.Client.Update(ctx, d)
	})
}

// claimWorkload starts three pods that claim a GPU each through DRA, with
// no PodDisruptionBudget: once the fleet leaves dra they have nowhere to
// go, and a budget would hold the last node's switch until it timed out.
func (r *chaosRun) claimWorkload(ctx context.Context) error {
	tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "one-gpu", Namespace: workloadNamespace},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com"}}}}}}}
	if err := r.s.Client.Create(ctx, tmpl); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	labels := map[string]string{"app": draTrainer}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: draTrainer, Namespace: workloadNamespace},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(3)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl.Name}},
				Tolerations:    []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{Name: "train", Image: "registry.example/cuda-train:1",
					Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
			}}}}
	return client.IgnoreAlreadyExists(r.s.Client.Create(ctx, d))
}

// setMode sets the default pool's allocation mode, every node's here, and
// the mode the fleet must end in.
func (r *chaosRun) setMode(ctx context.Context, mode gpuv1.AllocationMode) error {
	r.mode = mode
	return r.editPolicy(ctx, func(cp *gpuv1.ClusterPolicy) { cp.Spec.Driver.AllocationMode = mode })
}

// plugin is the state that serves the nodes' GPUs in the fleet's mode.
func (r *chaosRun) plugin() string {
	if r.mode == gpuv1.AllocationDRA {
		return "dra-driver"
	}
	return "device-plugin"
}

// inMode says why a node is not yet serving in the fleet's mode, "" when
// it is: its mode label, and its switch done or never begun.
func (r *chaosRun) inMode(n *corev1.Node) string {
	mode := r.mode
	if mode == "" {
		mode = gpuv1.AllocationDevicePlugin
	}
	if got := n.Labels[gpuv1.LabelAllocationMode]; got != string(mode) {
		return "allocation mode " + got
	}
	if st := n.Labels[gpuv1.LabelModeSwitchState]; st != "" && st != string(gpuv1.ModeSwitchDone) {
		return "switch " + st
	}
	return ""
}

// waitInSwitch waits until some node has taken its old plugin off.
func (r *chaosRun) waitInSwitch(ctx context.Context) error {
	return r.waitForNodes(ctx, 3*time.Minute, 200*time.Millisecond, func(nodes []corev1.Node) string {
		for _, n := range nodes {
			switch gpuv1.ModeSwitchState(n.Labels[gpuv1.LabelModeSwitchState]) {
			case gpuv1.ModeSwitchPluginsOff, gpuv1.ModeSwitchPluginOn:
				return ""
			}
		}
		return "no node has taken its device plugin off yet"
	})
}
