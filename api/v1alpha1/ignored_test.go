package v1alpha1

import (
	"reflect"
	"testing"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// Every NVIDIADriver and GPUCluster field accepted without being acted on
// says why, in its refused tag.
func TestEveryAcceptedOnlyFieldSaysWhy(t *testing.T) {
	for name, typ := range map[string]reflect.Type{"NVIDIADriver": reflect.TypeFor[NVIDIADriverSpec](), "GPUCluster": reflect.TypeFor[GPUClusterSpec]()} {
		fields := gpuv1.AcceptedOnly(typ, "spec")
		if len(fields) == 0 {
			t.Fatalf("%s: no accepted-only field found: the walk is broken", name)
		}
		for path, why := range fields {
			if why == "" {
				t.Errorf("%s %s is accepted without being acted on and gives no reason: add a refused tag", name, path)
			}
		}
	}
}
