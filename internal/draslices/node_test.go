package draslices

import (
	"testing"

	. "github.com/onsi/gomega"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

func gpuSlice(pool string, gen, count int64, devices ...Device) *Slice {
	s := &Slice{Node: "node-a", Driver: GPUDriver, Pool: pool, Generation: gen, Count: count, Devices: devices}
	s.Name = pool + "-slice"
	return s
}

func gpu(uuid string, taints ...Taint) Device {
	return Device{Name: "gpu-" + uuid, Type: TypeGPU, UUID: uuid, Taints: taints}
}

func mig(name, parent string, taints ...Taint) Device {
	return Device{Name: name, Type: TypeMIG, ParentUUID: parent, Taints: taints}
}

var (
	xid79    = Taint{Key: "gpu.nvidia.com/xid", Value: "79", Effect: resourcev1.DeviceTaintEffectNoSchedule}
	lost     = Taint{Key: "gpu.nvidia.com/gpu-lost", Effect: resourcev1.DeviceTaintEffectNoExecute}
	ignored  = Taint{Key: "gpu.nvidia.com/xid", Value: "13", Effect: resourcev1.DeviceTaintEffectNone}
	blindEye = Taint{Key: "gpu.nvidia.com/unmonitored", Effect: resourcev1.DeviceTaintEffectNone}
)

func TestSummarize(t *testing.T) {
	for name, tc := range map[string]struct {
		slices    []*Slice
		complete  bool
		gpus      int
		tainted   map[string][]string
		informing []string
		count     int
	}{
		"no slice: not complete, nothing proven": {},
		"one slice of eight GPUs": {
			slices:   []*Slice{gpuSlice("node-a", 1, 1, gpu("a"), gpu("b"), gpu("c"), gpu("d"), gpu("e"), gpu("f"), gpu("g"), gpu("h"))},
			complete: true, gpus: 8, count: 1,
		},
		"MIG devices count their GPUs once": {
			slices: []*Slice{gpuSlice("node-a", 1, 1, mig("gpu-0-mig-1g18gb-19-0", "A"), mig("gpu-0-mig-1g18gb-19-1", "A"),
				mig("gpu-1-mig-3g71gb-9-0", "B"), gpu("C"))},
			complete: true, gpus: 3, count: 1,
		},
		"a generation half published": {
			slices:   []*Slice{gpuSlice("node-a", 2, 2, gpu("a"))},
			complete: false, gpus: 1, count: 1,
		},
		"the newest generation alone counts": {
			slices: []*Slice{gpuSlice("node-a", 1, 1, gpu("old-a"), gpu("old-b")),
				gpuSlice("node-a", 2, 1, gpu("a"))},
			complete: true, gpus: 1, count: 2,
		},
		"taints that keep workloads off, by GPU, MIG parents included": {
			slices: []*Slice{gpuSlice("node-a", 1, 1, gpu("a", xid79), gpu("b", lost, xid79),
				mig("m0", "C", xid79), mig("m1", "C", xid79), gpu("d", ignored, blindEye))},
			complete: true, gpus: 4, count: 1,
			tainted: map[string][]string{"a": {"gpu.nvidia.com/xid=79"}, "b": {"gpu.nvidia.com/gpu-lost", "gpu.nvidia.com/xid=79"},
				"C": {"gpu.nvidia.com/xid=79"}},
			informing: []string{"gpu-d: gpu.nvidia.com/unmonitored", "gpu-d: gpu.nvidia.com/xid=13"},
		},
		"compute domains count as slices, not GPUs; other drivers not at all": {
			slices: []*Slice{gpuSlice("node-a", 1, 1, gpu("a")),
				{Node: "node-a", Driver: ComputeDomainDriver, Pool: "node-a", Generation: 1, Count: 1,
					Devices: []Device{{Name: "channel-0", Type: "channel"}}},
				{Node: "node-a", Driver: "nic.example.com"}},
			complete: true, gpus: 1, count: 2,
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			n := Summarize(tc.slices)
			g.Expect(n.Complete()).To(Equal(tc.complete), n.Incomplete())
			g.Expect(n.GPUs).To(Equal(tc.gpus))
			g.Expect(n.Slices).To(Equal(tc.count))
			g.Expect(n.Tainted).To(Equal(tc.tainted))
			g.Expect(n.Informing).To(Equal(tc.informing))
			if !tc.complete && len(tc.slices) > 0 {
				g.Expect(n.Incomplete()).To(Equal("pool node-a generation 2: 1 of 2 slices"))
			}
		})
	}
}

// A MIG configuration is checked against what the newest generation
// publishes: whole GPUs, and MIG devices by profile.
func TestSummarizeCountsWholeGPUsAndMIGDevicesByProfile(t *testing.T) {
	g := NewWithT(t)
	withProfile := func(d Device, profile string) Device { d.Profile = profile; return d }
	n := Summarize([]*Slice{
		gpuSlice("node-a", 1, 1, gpu("old-a"), gpu("old-b"), gpu("old-c")),
		gpuSlice("node-a", 2, 1, withProfile(mig("gpu-0-mig-1g18gb-19-0", "A"), "1g.18gb"),
			withProfile(mig("gpu-0-mig-1g18gb-19-1", "A"), "1g.18gb"), withProfile(mig("gpu-1-mig-3g71gb-9-0", "B"), "3g.71gb"),
			gpu("C")),
	})
	g.Expect(n.GPUs).To(Equal(3))
	g.Expect(n.WholeGPUs).To(Equal(1), "the older generation is being replaced")
	g.Expect(n.MIGDevices).To(Equal(map[string]int{"1g.18gb": 2, "3g.71gb": 1}))
	g.Expect(Summarize([]*Slice{gpuSlice("node-a", 1, 1, gpu("a"))}).MIGDevices).To(BeNil())
}

// Keep reads a MIG device's attributes as the driver publishes them
// (cmd/gpu-kubelet-plugin/mig.go CommonAttributesMig, deviceinfo.go
// MigDeviceInfo.GetDevice at kubernetes-sigs/dra-driver-nvidia-gpu
// 95932046), short or qualified.
func TestKeepReadsAMIGDevice(t *testing.T) {
	g := NewWithT(t)
	rs := resourceSlice("a-gpus", "node-a", GPUDriver)
	rs.Spec.Devices = []resourcev1.Device{{Name: "gpu-0-mig-1g18gb-19-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		"type":                      {StringValue: ptr.To(TypeMIG)},
		"uuid":                      {StringValue: ptr.To("MIG-1")},
		"gpu.nvidia.com/parentUUID": {StringValue: ptr.To("GPU-A")},
		"profile":                   {StringValue: ptr.To("1g.18gb")},
	}}}
	g.Expect(Keep(&rs).Devices).To(Equal([]Device{{Name: "gpu-0-mig-1g18gb-19-0", Type: TypeMIG, UUID: "MIG-1", ParentUUID: "GPU-A",
		Profile: "1g.18gb"}}))
}
