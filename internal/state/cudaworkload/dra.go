package cudaworkload

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// The DeviceClasses a proof on a DRA node claims a device of: NVIDIA's
// DRA driver publishes a GPU out of MIG mode as a device of type gpu and
// a GPU in MIG mode as its MIG devices (type mig), which the dra-driver
// state's DeviceClasses select (gpu-operator v26.7.0
// manifests/state-dra-driver/0400_deviceclass-gpu.yaml,
// 0410_deviceclass-mig.yaml).
const (
	GPUDeviceClass = "gpu.nvidia.com"
	MIGDeviceClass = "mig.nvidia.com"
)

// PriorityClassName is the PriorityClass of the proof's pods on DRA
// nodes. They meet the scheduler, unlike the pods bound by name: its
// preemptionPolicy Never keeps them from ever preempting a pod, and its
// value 0, an ordinary pod's without a class, queues them behind any
// workload of a higher class. A pod cannot ask for Never on its own: the
// Priority admission plugin refuses a pod whose preemptionPolicy differs
// from its class's.
const PriorityClassName = "nvidia-cuda-validator-gpu-operator"

// priority is the class's value.
const priority = 0

// claimName is the pod's name for its claim, and its container's.
const claimName = "gpu"

// ClaimTemplateName names the ResourceClaimTemplate, in the operator's
// namespace, whose claim asks for one device of the class.
func ClaimTemplateName(deviceClass string) string {
	if deviceClass == MIGDeviceClass {
		return App + "-mig"
	}
	return App + "-gpu"
}

// draObjects are what the proof's pods on DRA nodes name: the
// PriorityClass, and one claim template per DeviceClass, each asking for
// exactly one device as NVIDIA's DRA quickstart asks for a GPU
// (k8s-dra-driver-gpu 22407113 demo/specs/quickstart/v1/gpu-test1.yaml:
// requests [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}],
// one device being ExactCount's default). The scheduler picks the device
// on the node the pod is pinned to.
func draObjects(policy *gpuv1.ClusterPolicy, namespace string) []client.Object {
	class := &schedulingv1.PriorityClass{
		TypeMeta:         render.TypeMeta("scheduling.k8s.io/v1", "PriorityClass"),
		ObjectMeta:       render.ObjectMeta(policy, PriorityClassName, "", string(state.CUDAWorkload)),
		Value:            priority,
		PreemptionPolicy: ptr.To(corev1.PreemptNever),
		Description: "The GPU operator's CUDA workload proof on DRA nodes: it never preempts a pod, " +
			"and waits behind workloads of higher classes.",
	}
	objs := []client.Object{class}
	for _, deviceClass := range []string{GPUDeviceClass, MIGDeviceClass} {
		objs = append(objs, &resourcev1.ResourceClaimTemplate{
			TypeMeta:   render.TypeMeta("resource.k8s.io/v1", "ResourceClaimTemplate"),
			ObjectMeta: render.ObjectMeta(policy, ClaimTemplateName(deviceClass), namespace, string(state.CUDAWorkload)),
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
				Requests: []resourcev1.DeviceRequest{{Name: claimName, Exactly: &resourcev1.ExactDeviceRequest{
					DeviceClassName: deviceClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1,
				}}},
			}}},
		})
	}
	return objs
}

// claimOnNode makes the pod claim one device of the request's class on
// the node: no nodeName, which would keep it from the scheduler and its
// claim from being allocated, but a required node affinity on the node's
// name, as the DaemonSet controller pins its pods, under the
// PriorityClass that never preempts. The priority and policy are written
// too: the Priority admission plugin refuses the pod if a class of that
// name says otherwise (one someone else made). Its tolerations are a
// scheduled pod's (render.NotReadyTolerations): a cordoned node, or one
// held for maintenance, gets no proof, which would take a device its
// eviction just freed. No RuntimeClass: the DRA driver's devices reach
// the container through the runtime's own CDI support, as NVIDIA's DRA
// examples run (gpu-test1.yaml names none).
func claimOnNode(pod *corev1.Pod, cp *gpuv1.ClusterPolicy, node, deviceClass string) {
	pod.Spec.NodeName = ""
	pod.Spec.RuntimeClassName = nil
	pod.Spec.PriorityClassName = PriorityClassName
	pod.Spec.Priority, pod.Spec.PreemptionPolicy = ptr.To[int32](priority), ptr.To(corev1.PreemptNever)
	pod.Spec.Tolerations = render.NotReadyTolerations(cp)
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}}
	template := ClaimTemplateName(deviceClass)
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: claimName, ResourceClaimTemplateName: &template}}
	c := &pod.Spec.Containers[0]
	c.Resources.Claims = []corev1.ResourceClaim{{Name: claimName}}
}
