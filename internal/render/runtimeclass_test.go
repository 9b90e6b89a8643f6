package render

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// One RuntimeClass per class in use, its handler of its own name: named by
// an operand, or registered by the toolkit for GPU workloads, with its cdi
// and legacy modes' when CDI is on.
func TestRuntimeClasses(t *testing.T) {
	cp := &gpuv1.ClusterPolicy{}
	cp.Spec.Operator.RuntimeClass = "nvidia"
	naming := func(class *string) client.Object {
		ds := &appsv1.DaemonSet{}
		ds.Spec.Template.Spec.RuntimeClassName = class
		return ds
	}
	handlers := func(objs []client.Object) map[string]string {
		out := map[string]string{}
		for _, o := range objs {
			rc := o.(*nodev1.RuntimeClass)
			out[rc.Name] = rc.Handler
		}
		return out
	}
	tests := map[string]struct {
		objs      []client.Object
		registers bool
		cdi       bool
		want      map[string]string
	}{
		"operands name it":                 {objs: []client.Object{naming(ptr.To("nvidia")), naming(ptr.To("nvidia"))}, want: map[string]string{"nvidia": "nvidia"}},
		"toolkit only, for GPU workloads":  {registers: true, want: map[string]string{"nvidia": "nvidia"}},
		"an operand on another class":      {objs: []client.Object{naming(ptr.To("other"))}, registers: true, want: map[string]string{"nvidia": "nvidia", "other": "other"}},
		"CRI-O only: nothing registers it": {objs: []client.Object{naming(nil)}, want: map[string]string{}},
		"CDI: the toolkit's three runtimes": {registers: true, cdi: true,
			want: map[string]string{"nvidia": "nvidia", "nvidia-cdi": "nvidia-cdi", "nvidia-legacy": "nvidia-legacy"}},
		"CDI, nothing registers": {cdi: true, want: map[string]string{}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			policy := cp.DeepCopy()
			policy.Spec.CDI.Enabled = ptr.To(tt.cdi)
			NewWithT(t).Expect(handlers(RuntimeClasses(policy, tt.objs, tt.registers))).To(Equal(tt.want))
		})
	}
}
