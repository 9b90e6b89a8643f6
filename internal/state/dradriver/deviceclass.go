package dradriver

import (
	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// deviceClass is a DeviceClass a claim names, and the devices it selects.
type deviceClass struct{ name, selector string }

// gpuDeviceClasses select the GPU plugin's devices by the type attribute
// it publishes: whole GPUs, MIG devices and GPUs bound to vfio-pci for
// passthrough (gpu-operator v26.7.0, manifests/state-dra-driver/
// 0400_deviceclass-gpu.yaml L4-8, 0410_deviceclass-mig.yaml L4-8,
// 0430_deviceclass-vfio-gpu.yaml L4-8). NVIDIA renders the vfio class
// even without the PassthroughSupport gate, when it selects nothing; so
// do we, so that a claim naming it waits rather than fails.
var gpuDeviceClasses = []deviceClass{
	{"gpu.nvidia.com", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"},
	{"mig.nvidia.com", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"},
	{"vfio.gpu.nvidia.com", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'"},
}

// computeDomainDeviceClasses select the compute-domain plugin's devices:
// the IMEX daemon's, which the controller's DaemonSet claims, and a
// workload's default IMEX channel, channel 0 (0420_deviceclass-compute-domains.yaml
// L2-18).
var computeDomainDeviceClasses = []deviceClass{
	{"compute-domain-daemon.nvidia.com",
		"device.driver == 'compute-domain.nvidia.com' && device.attributes['compute-domain.nvidia.com'].type == 'daemon'"},
	{"compute-domain-default-channel.nvidia.com",
		"device.driver == 'compute-domain.nvidia.com' && device.attributes['compute-domain.nvidia.com'].type == 'channel' && " +
			"device.attributes['compute-domain.nvidia.com'].id == 0"},
}

// deviceClasses returns the DeviceClasses in resource.k8s.io/v1, served
// from Kubernetes 1.34, which allocation mode dra requires (NVIDIA
// discovers the newest served version and falls back to v1beta2 and
// v1beta1). They set no extendedResourceName, as
// NVIDIA's do not (the driver's own chart sets nvidia.com/gpu on v1):
// with it the scheduler would place pods asking for nvidia.com/gpu on DRA
// nodes too, while this operator keeps that resource the device plugin's.
// They are cluster-scoped, like the RuntimeClasses.
func deviceClasses(policy *gpuv1.ClusterPolicy, computeDomains bool) []client.Object {
	classes := gpuDeviceClasses
	if computeDomains {
		classes = append(classes[:len(classes):len(classes)], computeDomainDeviceClasses...)
	}
	out := make([]client.Object, 0, len(classes))
	for _, c := range classes {
		out = append(out, &resourcev1.DeviceClass{
			TypeMeta:   render.TypeMeta("resource.k8s.io/v1", "DeviceClass"),
			ObjectMeta: render.ObjectMeta(policy, c.name, "", string(state.DRADriver)),
			Spec: resourcev1.DeviceClassSpec{
				Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: c.selector}}},
			},
		})
	}
	return out
}
