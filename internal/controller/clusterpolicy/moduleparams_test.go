package clusterpolicy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// A kernelModuleConfig ConfigMap may hold the files the driver container
// reads its module parameters from, and nothing else: every key is
// mounted into the privileged driver container beside the driver's
// sources, and each line of a file is one parameter, name=value (NVreg_
// ones for nvidia.conf). A pool whose ConfigMap holds another key or line
// is held, as one whose ConfigMap is missing, with a reason that names the
// key or line and the fix; the other pools go on.
func TestModuleParamsHoldOnlyTheDriversFiles(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	cm := func(name string, data map[string]string, binary map[string][]byte) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "gpu-operator"}, Data: data, BinaryData: binary}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		cm("gb200", map[string]string{"nvidia.conf": "NVreg_CoherentGPUMemoryMode=driver\n", "nvidia-uvm.conf": "uvm_perf_prefetch_enable=0\n"}, nil),
		cm("extra", map[string]string{"nvidia.conf": "NVreg_EnableGpuFirmware=0\n", "nvidia-driver": "#!/bin/sh\n"}, nil),
		cm("binary", map[string]string{"nvidia.conf": "NVreg_EnableGpuFirmware=0\n"}, map[string][]byte{"nvidia-modeset.conf": {0}}),
		cm("two-per-line", map[string]string{"nvidia-uvm.conf": "uvm_perf_prefetch_enable=0\n\nuvm_a=1 uvm_b=2\n"}, nil),
		cm("not-nvreg", map[string]string{"nvidia.conf": "NVreg_EnableGpuFirmware=0\nhdmi_deepcolor=1\n"}, nil),
		cm("comment", map[string]string{"nvidia-peermem.conf": "# peer memory\npeerdirect_support=1\n"}, nil)).Build()
	r := &Reconciler{Client: c, Namespace: "gpu-operator"}
	pool := func(name, configMap string) state.DriverPool {
		p := state.DriverPool{Name: name, Driver: &gpuv1.DriverSpec{}}
		p.Driver.KernelModuleConfig = &gpuv1.DriverKernelModuleConfig{Name: configMap}
		return p
	}
	out, failed, err := r.readModuleParams(context.Background(), []state.DriverPool{
		pool("a", "gb200"), pool("b", "extra"), pool("c", "binary"), pool("d", "missing"),
		pool("e", "two-per-line"), pool("f", "not-nvreg"), pool("g", "comment")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(HaveLen(1))
	g.Expect(out[0].ModuleParams.Files).To(Equal([]string{"nvidia-uvm.conf", "nvidia.conf"}))
	g.Expect(failed).To(HaveLen(6))
	// Each line is one word of the module's options: one parameter.
	g.Expect(failed["e"]).To(MatchError(And(ContainSubstring(`nvidia-uvm.conf line 3 "uvm_a=1 uvm_b=2"`),
		ContainSubstring("each line is one parameter"))))
	g.Expect(failed["f"]).To(MatchError(And(ContainSubstring(`nvidia.conf line 2 "hdmi_deepcolor=1"`), ContainSubstring("NVreg_"))))
	g.Expect(failed["g"]).To(MatchError(ContainSubstring(`nvidia-peermem.conf line 1 "# peer memory"`)))
	g.Expect(failed["b"]).To(MatchError(And(ContainSubstring("has keys nvidia-driver, which the driver container does not read"),
		ContainSubstring("keep only nvidia.conf, nvidia-uvm.conf, nvidia-modeset.conf, nvidia-peermem.conf"))))
	g.Expect(failed["c"]).To(MatchError(ContainSubstring("nvidia-modeset.conf (binaryData)")))
	g.Expect(failed["d"]).To(MatchError(ContainSubstring("which does not exist")))
}
