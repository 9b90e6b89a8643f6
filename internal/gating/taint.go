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

// UnhealthyTaint is the taint spec.operator.remediation keeps on a node
// from the start of its repair until its GPUs are healthy again. Its value
// marks it as the operator's.
var UnhealthyTaint = corev1.Taint{Key: gpuv1.TaintGPUUnhealthy, Value: gpuv1.TaintGPUNotReadyValue,
	Effect: corev1.TaintEffectNoSchedule}

// IsOwnUnhealthyTaint matches the operator's unhealthy taint; one of the
// key with another value is someone else's, and left alone.
func IsOwnUnhealthyTaint(t corev1.Taint) bool {
	return t.Key == UnhealthyTaint.Key && t.Effect == UnhealthyTaint.Effect && t.Value == UnhealthyTaint.Value
}

// MIGTaint is the taint a node keeps from the eviction of its GPU pods for
// a MIG reconfiguration until its new MIG devices are advertised. Its
// value marks it as the operator's.
var MIGTaint = corev1.Taint{Key: gpuv1.TaintMIGReconfiguring, Value: gpuv1.TaintGPUNotReadyValue,
	Effect: corev1.TaintEffectNoSchedule}

// IsOwnMIGTaint matches the operator's reconfiguring taint; one of the key
// with another value is someone else's, and left alone.
func IsOwnMIGTaint(t corev1.Taint) bool {
	return t.Key == MIGTaint.Key && t.Effect == MIGTaint.Effect && t.Value == MIGTaint.Value
}

// ModeSwitchTaint is the taint a node keeps from the eviction of its GPU
// pods for an allocation mode switch until the plugin of its new mode
// serves its GPUs. Its value marks it as the operator's.
var ModeSwitchTaint = corev1.Taint{Key: gpuv1.TaintModeSwitching, Value: gpuv1.TaintGPUNotReadyValue,
	Effect: corev1.TaintEffectNoSchedule}

// IsOwnModeSwitchTaint matches the operator's switching taint; one of the
// key with another value is someone else's, and left alone.
func IsOwnModeSwitchTaint(t corev1.Taint) bool {
	return t.Key == ModeSwitchTaint.Key && t.Effect == ModeSwitchTaint.Effect && t.Value == ModeSwitchTaint.Value
}
