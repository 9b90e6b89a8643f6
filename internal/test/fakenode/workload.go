package fakenode

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
)

// AnnotationFabricManager is "down" on a node whose NVSwitch fabric is
// not ready: Fabric Manager died after it started (NVIDIA gpu-operator
// issue 2781). nvidia-smi answers and every operand runs, but every CUDA
// program fails to start, with error 802.
const AnnotationFabricManager = prefix + "fabric-manager"

// sampleFailure is what vectorAdd prints when CUDA cannot start on the
// GPU it was given (NVIDIA/cuda-samples vectorAdd.cu: the first
// cudaMalloc's error, by cudaGetErrorString) before it exits 1.
const sampleFailure = "[Vector addition of 50000 elements]\nFailed to allocate device vector A (error code system not yet initialized)!\n"

// WorkloadRun returns the status a CUDA workload pod ends with on the
// node: refused by the kubelet when the node advertises none of the GPU
// resource it asks for, failed with CUDA error 802 where Fabric Manager is
// down, and succeeded otherwise. Nil for any other pod, and for one that
// has ended already.
func WorkloadRun(n *corev1.Node, pod *corev1.Pod) *corev1.PodStatus {
	if pod.Labels[render.LabelState] != string(state.CUDAWorkload) || len(pod.Spec.Containers) == 0 ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	now := metav1.Now()
	c := pod.Spec.Containers[0]
	status := &corev1.PodStatus{
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted",
			LastTransitionTime: now}},
		// The claims the kube-controller-manager made for the pod stay
		// its own (a pod on a DRA node).
		ResourceClaimStatuses: pod.Status.ResourceClaimStatuses,
	}
	for res, q := range c.Resources.Limits {
		if have := n.Status.Allocatable[res]; q.Cmp(have) > 0 {
			// The kubelet's admission refuses it before any container.
			status.Phase, status.Reason = corev1.PodFailed, "OutOf"+string(res)
			status.Message = fmt.Sprintf("Pod was rejected: Node didn't have enough resource: %s, requested: %s, capacity: %s",
				res, q.String(), have.String())
			return status
		}
	}
	terminated := &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: now}
	status.Phase = corev1.PodSucceeded
	if n.Annotations[AnnotationFabricManager] == "down" {
		status.Phase = corev1.PodFailed
		terminated.ExitCode, terminated.Reason, terminated.Message = 1, "Error", sampleFailure
	}
	status.ContainerStatuses = []corev1.ContainerStatus{{Name: cudaworkload.ContainerName, Image: c.Image, ImageID: "sim://" + c.Image,
		State: corev1.ContainerState{Terminated: terminated}}}
	return status
}
