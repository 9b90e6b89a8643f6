package cudaworkload

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// The operator applies the proof's claim templates in its namespace and
// its PriorityClass, which it changes and deletes by name only: no one
// else's class (create, list and watch take no names).
// +kubebuilder:rbac:groups=resource.k8s.io,namespace=gpu-operator,resources=resourceclaimtemplates,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=list;watch;create
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;patch;delete,resourceNames=nvidia-cuda-validator-gpu-operator

// Operand is the cuda-workload state's place in the graph. Its pods are
// made per node, per generation, by the node controller (Pod), and owned
// by the policy; it renders only what they name on DRA nodes.
type Operand struct{}

// Enabled reports whether the policy runs the proof: NVIDIA's switches of
// its CUDA workloads (validator.cuda and validator.plugin WITH_WORKLOAD).
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.Validator.WorkloadProof() }

// Render returns the claim templates and the PriorityClass of the pods on
// DRA nodes while some node is in allocation mode dra, and nothing
// otherwise.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	if !in.DRAInUse {
		return nil, nil
	}
	return draObjects(in.Policy, in.Namespace), nil
}

// Kinds lists what Render may return.
func (Operand) Kinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{render.KindPriorityClass, render.KindResourceClaimTemplate}
}
