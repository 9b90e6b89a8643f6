package cudaworkload

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// Operand is the cuda-workload state's place in the graph. It renders
// nothing: its pods are made per node, per generation, by the node
// controller (Pod), and owned by the policy.
type Operand struct{}

// Enabled reports whether the policy runs the proof: NVIDIA's switches of
// its CUDA workloads (validator.cuda and validator.plugin WITH_WORKLOAD).
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.Validator.WorkloadProof() }

// Render returns no object.
func (Operand) Render(state.RenderInput) ([]client.Object, error) { return nil, nil }

// Kinds lists none.
func (Operand) Kinds() []schema.GroupVersionKind { return nil }
