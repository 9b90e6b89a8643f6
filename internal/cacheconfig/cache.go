package cacheconfig

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
)

// Options returns the cache options: by default only objects labelled as the
// operator's, in its namespace; nodes and policies whole, trimmed.
func Options(namespace string) cache.Options {
	return cache.Options{
		DefaultNamespaces:    map[string]cache.Config{namespace: {}},
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{render.LabelManagedBy: render.ManagedBy}),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Node{}:         {Label: labels.Everything(), Transform: TrimNode},
			&gpuv1.ClusterPolicy{}: {Label: labels.Everything()},
			&corev1.Pod{}:          {Transform: TrimPod},
		},
	}
}

// TrimNode keeps what the operator reads of a node: name, labels, its own
// annotations, whether it is cordoned, the boot ID, the runtime and its
// handlers, the capacity and the Ready condition. Images, managed fields and
// other controllers' annotations can be most of a node's size.
func TrimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	trimmed := &corev1.Node{}
	trimmed.TypeMeta = n.TypeMeta
	trimmed.Name, trimmed.UID, trimmed.ResourceVersion = n.Name, n.UID, n.ResourceVersion
	trimmed.CreationTimestamp, trimmed.DeletionTimestamp = n.CreationTimestamp, n.DeletionTimestamp
	trimmed.Labels = n.Labels
	for k, v := range n.Annotations {
		if strings.HasPrefix(k, gpuv1.OperatorAnnotationPrefix) || strings.HasPrefix(k, gpuv1.UpgradeAnnotationPrefix) {
			if trimmed.Annotations == nil {
				trimmed.Annotations = map[string]string{}
			}
			trimmed.Annotations[k] = v
		}
	}
	trimmed.Spec.Unschedulable = n.Spec.Unschedulable
	trimmed.Spec.Taints = n.Spec.Taints
	trimmed.Status.NodeInfo.BootID = n.Status.NodeInfo.BootID
	trimmed.Status.NodeInfo.ContainerRuntimeVersion = n.Status.NodeInfo.ContainerRuntimeVersion
	for _, h := range n.Status.RuntimeHandlers {
		// The names only: the toolkit's proof is the NVIDIA handler there.
		trimmed.Status.RuntimeHandlers = append(trimmed.Status.RuntimeHandlers, corev1.NodeRuntimeHandler{Name: h.Name})
	}
	trimmed.Status.Capacity = n.Status.Capacity
	trimmed.Status.Allocatable = n.Status.Allocatable
	trimmed.Status.Conditions = readyCondition(n.Status.Conditions)
	return trimmed, nil
}

func readyCondition(conds []corev1.NodeCondition) []corev1.NodeCondition {
	for _, c := range conds {
		if c.Type == corev1.NodeReady {
			return []corev1.NodeCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
		}
	}
	return nil
}

// TrimPod keeps what the readiness judgement reads of an operand pod.
func TrimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	trimmed := &corev1.Pod{}
	trimmed.TypeMeta = p.TypeMeta
	trimmed.Name, trimmed.Namespace, trimmed.UID, trimmed.ResourceVersion = p.Name, p.Namespace, p.UID, p.ResourceVersion
	trimmed.CreationTimestamp, trimmed.DeletionTimestamp = p.CreationTimestamp, p.DeletionTimestamp
	// Pods carry every label of their template (user daemonsets.labels,
	// revision hashes); the operator selects them by these two only.
	for _, k := range []string{render.LabelState, render.LabelManagedBy} {
		if v, ok := p.Labels[k]; ok {
			if trimmed.Labels == nil {
				trimmed.Labels = make(map[string]string, 2)
			}
			trimmed.Labels[k] = v
		}
	}
	for k, v := range p.Annotations {
		if strings.HasPrefix(k, gpuv1.OperatorAnnotationPrefix) {
			if trimmed.Annotations == nil {
				trimmed.Annotations = map[string]string{}
			}
			trimmed.Annotations[k] = v
		}
	}
	// Only the controller (the DaemonSet) is ever looked at.
	if owner := metav1.GetControllerOf(p); owner != nil {
		trimmed.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	trimmed.Spec.NodeName = p.Spec.NodeName
	trimmed.Status.Phase, trimmed.Status.Reason = p.Status.Phase, p.Status.Reason
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			trimmed.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
		}
	}
	trimmed.Status.InitContainerStatuses = trimStatuses(p.Status.InitContainerStatuses)
	trimmed.Status.ContainerStatuses = trimStatuses(p.Status.ContainerStatuses)
	return trimmed, nil
}

func trimStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, cs := range in {
		out[i] = corev1.ContainerStatus{Name: cs.Name, Ready: cs.Ready, RestartCount: cs.RestartCount}
		if w := cs.State.Waiting; w != nil {
			out[i].State.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason, Message: truncate(w.Message, 256)}
		}
		// How a container exited: the driver's host-driver check answers
		// by its exit code and message.
		out[i].State.Terminated = trimTerminated(cs.State.Terminated)
		out[i].LastTerminationState.Terminated = trimTerminated(cs.LastTerminationState.Terminated)
	}
	return out
}

func trimTerminated(t *corev1.ContainerStateTerminated) *corev1.ContainerStateTerminated {
	if t == nil {
		return nil
	}
	return &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Message: truncate(t.Message, 256)}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
