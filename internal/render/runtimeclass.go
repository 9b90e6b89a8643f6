package render

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	nodev1 "k8s.io/api/node/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// runtimeClassState labels the RuntimeClass: it serves every operand that
// names it, and GPU workloads, rather than one state.
const runtimeClassState = "runtime-class"

// +kubebuilder:rbac:groups=node.k8s.io,resources=runtimeclasses,verbs=get;list;watch;create;patch;delete

// CDIRuntimeClasses are the RuntimeClasses of the two runtimes the toolkit
// registers beside the main one, under these fixed names, whatever the
// main one's (nvidia-container-toolkit v1.20.0
// cmd/nvidia-ctk-installer/container/operator/operator.go): the NVIDIA
// runtime in its cdi and legacy modes. NVIDIA's operator creates their
// RuntimeClasses with CDI on (gpu-operator v26.7.0
// assets/pre-requisites/0210_runtime_class_legacy.yaml,
// 0220_runtime_class_cdi.yaml; controllers/object_controls.go:5275-5293
// deletes them with CDI off), and charts written for it name them.
var CDIRuntimeClasses = []string{"nvidia-cdi", "nvidia-legacy"}

// RuntimeClasses returns a RuntimeClass for every runtime class the
// DaemonSets' pods name, and for the policy's when the toolkit registers
// its handlers somewhere (GPU workloads name it, whichever operands run),
// with those of CDIRuntimeClasses when CDI is on, each with the handler of
// its own name: the toolkit registers the NVIDIA runtime under the
// RuntimeClass's name. None is rendered where nothing registers or uses
// one (every GPU node runs CRI-O with the NVIDIA hook, or the NRI plugin
// injects GPUs).
func RuntimeClasses(policy *gpuv1.ClusterPolicy, objs []client.Object, toolkitRegisters bool) []client.Object {
	var names []string
	if toolkitRegisters {
		names = append(names, string(policy.Spec.Operator.RuntimeClass))
		if policy.Spec.CDI.IsEnabled() {
			for _, n := range CDIRuntimeClasses {
				if !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
	}
	for _, o := range objs {
		if ds, ok := o.(*appsv1.DaemonSet); ok {
			if rc := ds.Spec.Template.Spec.RuntimeClassName; rc != nil && !slices.Contains(names, *rc) {
				names = append(names, *rc)
			}
		}
	}
	slices.Sort(names)
	out := make([]client.Object, 0, len(names))
	for _, name := range names {
		out = append(out, &nodev1.RuntimeClass{
			TypeMeta:   TypeMeta("node.k8s.io/v1", "RuntimeClass"),
			ObjectMeta: ObjectMeta(policy, name, "", runtimeClassState),
			Handler:    name,
		})
	}
	return out
}
