package driverpool

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// nvidiaDriverSelection is what an NVIDIADriver's pool selects its nodes
// by.
type nvidiaDriverSelection struct {
	selector map[string]gpuv1.LabelValue
	required *corev1.NodeSelector
}

// Equal reports whether two sets hold the same pools, selecting the same
// nodes, with the same verdicts and DRA driver: whether every question
// asked of one is answered alike by the other. A set is built anew at
// each look; a look that finds it equal to the last one's may keep what
// it judged with it.
func (s *Set) Equal(o *Set) bool {
	if s == nil || o == nil {
		return s == o
	}
	if len(s.Pools) != len(o.Pools) {
		return false
	}
	for i := range s.Pools {
		a, b := s.Pools[i], o.Pools[i]
		// A function is equal to none: the pools compare what their
		// selections were made from.
		a.selects, b.selects = nil, nil
		if !reflect.DeepEqual(a, b) {
			return false
		}
	}
	return s.FromNVIDIADrivers == o.FromNVIDIADrivers && s.GPUCluster == o.GPUCluster &&
		reflect.DeepEqual(s.Images, o.Images) && reflect.DeepEqual(s.draDriver, o.draDriver)
}
