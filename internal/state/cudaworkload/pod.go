package cudaworkload

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// Names NVIDIA users know from its CUDA validation pod (gpu-operator
// v26.7.0 validator/manifests/cuda-workload-validation.yaml): the app
// label they select the pods by, and the container whose log is the
// sample's output.
const (
	App           = "nvidia-cuda-validator"
	ContainerName = "cuda-validation"
	// Program is the CUDA sample, on the validator image's PATH
	// (gpu-operator v26.7.0 docker/Dockerfile: /usr/bin/vectorAdd, built
	// from NVIDIA/cuda-samples). It exits non-zero, with CUDA's error
	// string on stderr, when CUDA cannot start or allocate on the GPU.
	Program = "vectorAdd"
)

// Annotations on a CUDA workload pod, under the operator's prefix so that
// the operand pod index keeps them.
const (
	// AnnotationGeneration is what the pod proves: the node's driver pod,
	// device plugin pod and MIG configuration when it was made (Generation).
	AnnotationGeneration = gpuv1.OperatorAnnotationPrefix + "workload-generation"
	// AnnotationAttempt counts the pods of a generation on a node, from 1:
	// a failed proof is tried again by a new pod.
	AnnotationAttempt = gpuv1.OperatorAnnotationPrefix + "workload-attempt"
	// AnnotationNode is the node the pod proves: a pod the scheduler has
	// not bound yet (on a DRA node) is on that node's account, whatever
	// an admission webhook added to its affinity.
	AnnotationNode = gpuv1.OperatorAnnotationPrefix + "workload-node"
)

// Generation names what a proof proves on a node: a new boot, driver pod,
// device plugin pod or MIG configuration is a new generation, proved
// again.
func Generation(bootID, driverPod, pluginPod, migConfig string) string {
	return fmt.Sprintf("boot=%s,driver=%s,plugin=%s,mig=%s", bootID, driverPod, pluginPod, migConfig)
}

// Request is the CUDA workload pod a node's decision wants made.
type Request struct {
	Generation string
	Attempt    int
	// Resource is the GPU resource the pod asks one of: what the device
	// plugin advertises on the node, a MIG device first, as NVIDIA's
	// plugin validation picks (cmd/nvidia-validator/main.go:
	// getGPUResourceName).
	Resource corev1.ResourceName
	// DeviceClass, on a node of a DRA pool, is the DeviceClass the pod
	// claims one device of (GPUDeviceClass or MIGDeviceClass), in
	// Resource's place.
	DeviceClass string
	// RuntimeClass is the RuntimeClass the node's GPU pods name, nil where
	// the runtime has no NVIDIA handler to name (NRI injects GPUs) and on
	// DRA nodes.
	RuntimeClass *string
}

// PodName is the name of a node's pod for a generation and attempt: the
// same each time it is asked for, so that a decision made on a cache that
// has not seen the pod yet creates nothing twice.
func PodName(node string, r Request) string {
	sum := sha256.Sum256([]byte(node + "\n" + r.Generation + "\n" + strconv.Itoa(r.Attempt)))
	return App + "-" + hex.EncodeToString(sum[:5])
}

// Pod is the CUDA workload pod for node, owned by the policy. It runs as
// NVIDIA's plugin workload validation does (gpu-operator v26.7.0
// validator/manifests/plugin-workload-validation.yaml,
// cmd/nvidia-validator/main.go: runWorkload): the validator image's
// vectorAdd, unprivileged, limited to one GPU of the device plugin's
// resource, bound to the node by name, under the node's RuntimeClass, with
// validator's pull policy and secrets. It differs where a verdict must be
// read from it: it runs the sample in its only container and never
// restarts (NVIDIA's retries forever with restartPolicy OnFailure), so its
// end, with the sample's output as the termination message, is the
// verdict, and a finished pod holds no GPU.
//
// Bound by name, it never meets the scheduler and so never preempts a
// pod; and, with no priority class (the cluster's default, if any, is not
// critical), the kubelet never evicts a pod to admit it. On a DRA node it
// claims its device instead, and goes through the scheduler under a class
// that never preempts (claimOnNode).
func Pod(cp *gpuv1.ClusterPolicy, namespace, node string, r Request) *corev1.Pod {
	v := &cp.Spec.Validator
	settings := v.Container()
	meta := render.ObjectMeta(cp, PodName(node, r), namespace, string(state.CUDAWorkload))
	meta.Labels[render.LabelName] = App
	meta.Labels[render.LabelApp] = App
	meta.Annotations = map[string]string{AnnotationGeneration: r.Generation, AnnotationAttempt: strconv.Itoa(r.Attempt),
		AnnotationNode: node}
	container := corev1.Container{
		Name:                     ContainerName,
		Image:                    render.Image(v.ImageParts()),
		ImagePullPolicy:          settings.ImagePullPolicy,
		Command:                  []string{Program},
		Env:                      render.Env(nil, settings.Env),
		SecurityContext:          &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if res := settings.Resources; res != nil {
		container.Resources = corev1.ResourceRequirements{Limits: res.Limits.DeepCopy(), Requests: res.Requests.DeepCopy()}
	}
	if r.DeviceClass == "" {
		one := resource.MustParse("1")
		if container.Resources.Limits == nil {
			container.Resources.Limits = corev1.ResourceList{}
		}
		container.Resources.Limits[r.Resource] = one
		if container.Resources.Requests != nil {
			container.Resources.Requests[r.Resource] = one
		}
	}
	pod := &corev1.Pod{TypeMeta: render.TypeMeta("v1", "Pod"), ObjectMeta: meta, Spec: corev1.PodSpec{
		NodeName:                     node,
		RestartPolicy:                corev1.RestartPolicyNever,
		AutomountServiceAccountToken: ptr.To(false),
		RuntimeClassName:             r.RuntimeClass,
		Tolerations:                  tolerations(cp),
		Containers:                   []corev1.Container{container},
	}}
	if settings.UsesHostNetwork() {
		pod.Spec.HostNetwork, pod.Spec.DNSPolicy = true, corev1.DNSClusterFirstWithHostNet
	}
	for _, s := range settings.ImagePullSecrets {
		pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: string(s)})
	}
	if r.DeviceClass != "" {
		claimOnNode(pod, cp, node, r.DeviceClass)
	}
	return pod
}

// tolerations are the pod's: it is bound by name, so NoSchedule taints
// (the GPU taint, the operator's own readiness taint it lifts) would not
// keep it off the node, and are tolerated to say so; of NoExecute taints,
// only those the policy's daemonsets.tolerations let operands run under,
// as a quarantined node runs no workload.
func tolerations(cp *gpuv1.ClusterPolicy) []corev1.Toleration {
	return append([]corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		render.NoExecuteTolerations(cp)...)
}
