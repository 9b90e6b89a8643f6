package gating

import (
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// ReadinessTaint is the taint spec.operator.readinessTaint keeps on a GPU
// node that is not ready. Its value marks it as the operator's.
var ReadinessTaint = corev1.Taint{Key: gpuv1.TaintGPUNotReady, Value: gpuv1.TaintGPUNotReadyValue,
	Effect: corev1.TaintEffectNoSchedule}

// HasReadinessTaintKey matches a taint of the readiness taint's key and
// effect, whoever set it: a node holds one at most.
func HasReadinessTaintKey(t corev1.Taint) bool {
	return t.Key == ReadinessTaint.Key && t.Effect == ReadinessTaint.Effect
}

// IsOwnReadinessTaint matches the operator's readiness taint.
func IsOwnReadinessTaint(t corev1.Taint) bool {
	return HasReadinessTaintKey(t) && t.Value == ReadinessTaint.Value
}
