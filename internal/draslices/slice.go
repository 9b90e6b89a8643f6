package draslices

import (
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The drivers whose slices are kept: NVIDIA's DRA driver registers both
// from one kubelet plugin pod (kubernetes-sigs/dra-driver-nvidia-gpu
// 95932046, cmd/gpu-kubelet-plugin/main.go and
// cmd/compute-domain-kubelet-plugin/main.go: DriverName).
const (
	GPUDriver           = "gpu.nvidia.com"
	ComputeDomainDriver = "compute-domain.nvidia.com"
)

// The GPU driver's device types (cmd/gpu-kubelet-plugin/types.go): a
// whole GPU, a MIG device, and a GPU bound to vfio-pci for passthrough.
const (
	TypeGPU  = "gpu"
	TypeMIG  = "mig"
	TypeVFIO = "vfio"
)

// Slice is what the operator keeps of a ResourceSlice. Its ObjectMeta
// holds the name, UID and resource version alone: the informer keys it by
// name, and controllers receive it as an object.
type Slice struct {
	metav1.ObjectMeta
	// Node is spec.nodeName; "" for a slice of no single node.
	Node   string
	Driver string
	// Pool, Generation and Count are spec.pool: the pool the slice is one
	// of, the pool's generation and how many slices that generation has.
	Pool       string
	Generation int64
	Count      int64
	Devices    []Device
}

// Device is what the operator keeps of one device of a slice.
type Device struct {
	Name string
	// Type is the driver's type attribute: gpu, mig or vfio.
	Type string
	// UUID is the GPU's or MIG device's; ParentUUID a MIG device's GPU.
	UUID, ParentUUID string
	// Profile is a MIG device's profile as mig-parted names it (go-nvlib's
	// MigProfile.String, such as 1g.18gb or 1g.18gb+me:
	// cmd/gpu-kubelet-plugin/mig.go CommonAttributesMig); "" for a GPU.
	Profile string
	Taints  []Taint
}

// Taint is a device taint the driver publishes for an unhealthy device
// (cmd/gpu-kubelet-plugin/device_health.go: gpu.nvidia.com/xid=<xid>,
// gpu.nvidia.com/gpu-lost, gpu.nvidia.com/unmonitored).
type Taint struct {
	Key, Value string
	Effect     resourcev1.DeviceTaintEffect
}

// Keeps reports whether a taint keeps workloads off the device: None
// taints (XIDs the driver ignores, unmonitored GPUs) only inform.
func (t Taint) Keeps() bool {
	return t.Effect == resourcev1.DeviceTaintEffectNoSchedule || t.Effect == resourcev1.DeviceTaintEffectNoExecute
}

// Ours reports whether the slice is one of the NVIDIA driver's.
func (s *Slice) Ours() bool { return s.Driver == GPUDriver || s.Driver == ComputeDomainDriver }

// Keep keeps what the operator reads of a slice. Other drivers'
// slices keep their name, node and driver only.
func Keep(rs *resourcev1.ResourceSlice) *Slice {
	s := &Slice{Driver: rs.Spec.Driver}
	s.Name, s.UID, s.ResourceVersion = rs.Name, rs.UID, rs.ResourceVersion
	if rs.Spec.NodeName != nil {
		s.Node = *rs.Spec.NodeName
	}
	if !s.Ours() {
		return s
	}
	s.Pool, s.Generation, s.Count = rs.Spec.Pool.Name, rs.Spec.Pool.Generation, rs.Spec.Pool.ResourceSliceCount
	s.Devices = make([]Device, 0, len(rs.Spec.Devices))
	for _, d := range rs.Spec.Devices {
		dev := Device{Name: d.Name, Type: attribute(d, rs.Spec.Driver, "type"),
			UUID: attribute(d, rs.Spec.Driver, "uuid"), ParentUUID: attribute(d, rs.Spec.Driver, "parentUUID"),
			Profile: attribute(d, rs.Spec.Driver, "profile")}
		for _, t := range d.Taints {
			dev.Taints = append(dev.Taints, Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
		s.Devices = append(s.Devices, dev)
	}
	return s
}

// attribute reads a string attribute, named with or without the driver's
// domain, as the API allows both for the driver's own attributes.
func attribute(d resourcev1.Device, driver, name string) string {
	for _, key := range []resourcev1.QualifiedName{resourcev1.QualifiedName(name), resourcev1.QualifiedName(driver + "/" + name)} {
		if a, ok := d.Attributes[key]; ok && a.StringValue != nil {
			return *a.StringValue
		}
	}
	return ""
}

var _ runtime.Object = &Slice{}

// GetObjectKind implements runtime.Object: a summary has no kind of its own.
func (s *Slice) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (s *Slice) DeepCopyObject() runtime.Object {
	out := *s
	s.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Devices = make([]Device, len(s.Devices))
	for i, d := range s.Devices {
		d.Taints = slices.Clone(d.Taints)
		out.Devices[i] = d
	}
	return &out
}
