package cacheconfig

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-operator/gpu-operator/internal/test/heap"
)

func TestTrim(t *testing.T) {
	g := NewWithT(t)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "gpu-1", UID: "u", ResourceVersion: "7",
			Labels: map[string]string{"a": "b"},
			Annotations: map[string]string{"nvidia.com/gpu-operator.boot-id": "x", "other.io/big": "blob",
				"nvidia.com/gpu-driver-upgrade.since": "t", "nvidia.com/gpu-remediation.replaced-pod": "uid",
				"nvidia.com/gpu-remediation.approved": "true", "nvidia.com/gpu-mig-reconfigure.applied": "all-1g.18gb",
				"nvidia.com/gpu-allocation-mode-switch.mode": "none", "nvidia.com/gpu-maintenance.nvlink-domain": "fabric.1",
				"nfd.node.kubernetes.io/feature-labels": "nvidia.com/gpu.product,pci-10de.present", "nfd.node.kubernetes.io/extended-resources": ""},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.NodeSpec{Unschedulable: true, PodCIDR: "10.0.0.0/24"},
		Status: corev1.NodeStatus{
			NodeInfo: corev1.NodeSystemInfo{BootID: "boot", KernelVersion: "6.1"},
			Images:   []corev1.ContainerImage{{Names: []string{"big/image"}, SizeBytes: 1 << 30}},
			Capacity: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("96"),
				"nvidia.com/hostdev": resource.MustParse("4")},
			Allocatable: corev1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("7"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Message: "long"}, {Type: corev1.NodeMemoryPressure}},
		},
	}
	out, err := NewNodeTrimmer().Trim(node)
	g.Expect(err).NotTo(HaveOccurred())
	n := out.(*corev1.Node)
	g.Expect(n.Name).To(Equal("gpu-1"))
	g.Expect(n.ResourceVersion).To(Equal("7"))
	g.Expect(n.Labels).To(Equal(node.Labels))
	g.Expect(n.Annotations).To(Equal(map[string]string{"nvidia.com/gpu-operator.boot-id": "x",
		"nvidia.com/gpu-driver-upgrade.since": "t", "nvidia.com/gpu-remediation.replaced-pod": "uid",
		"nvidia.com/gpu-remediation.approved": "true", "nvidia.com/gpu-mig-reconfigure.applied": "all-1g.18gb",
		"nvidia.com/gpu-allocation-mode-switch.mode": "none", "nvidia.com/gpu-maintenance.nvlink-domain": "fabric.1",
		"nfd.node.kubernetes.io/feature-labels": "nvidia.com/gpu.product,pci-10de.present"}),
		"the operator's own annotations, the approval it reads, and which labels NFD set")
	g.Expect(n.ManagedFields).To(BeEmpty())
	g.Expect(n.Status.Images).To(BeEmpty())
	g.Expect(n.Status.NodeInfo).To(Equal(corev1.NodeSystemInfo{BootID: "boot"}))
	g.Expect(n.Status.Capacity).To(Equal(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}))
	g.Expect(n.Status.Allocatable).To(Equal(corev1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("7")}))
	g.Expect(n.Status.Conditions).To(Equal([]corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}))
	g.Expect(n.Spec.Unschedulable).To(BeTrue())
	g.Expect(n.Spec.PodCIDR).To(BeEmpty())
}

func TestTrimSharesLabelStringsAcrossNodes(t *testing.T) {
	g := NewWithT(t)
	decoded := func() *corev1.Node {
		// Strings built at run time, as a decoder builds them: two nodes
		// never share their bytes.
		key, value := strings.Repeat("feature.node.kubernetes.io/pci-10de.", 1)+"present", strings.Clone("true")
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{key: value}}}
	}
	a, b := decoded(), decoded()
	g.Expect(dataOfOnlyKey(a.Labels)).NotTo(BeIdenticalTo(dataOfOnlyKey(b.Labels)))
	trimmer := NewNodeTrimmer()
	ta, _ := trimmer.Trim(a)
	tb, _ := trimmer.Trim(b)
	la, lb := ta.(*corev1.Node).Labels, tb.(*corev1.Node).Labels
	g.Expect(la).To(Equal(a.Labels))
	g.Expect(dataOfOnlyKey(la)).To(BeIdenticalTo(dataOfOnlyKey(lb)))
	g.Expect(unsafe.StringData(la["feature.node.kubernetes.io/pci-10de.present"])).
		To(BeIdenticalTo(unsafe.StringData(lb["feature.node.kubernetes.io/pci-10de.present"])))
}

// A node's versions that change anything but its labels share its label
// map, as the cache and the nodes a controller wrote keep them; a version
// that changes them has a map of its own, and leaves the last one's as it
// was.
func TestTrimSharesALabelMapAcrossANodesVersions(t *testing.T) {
	g := NewWithT(t)
	trimmer := NewNodeTrimmer()
	version := func(rv string, labels map[string]string) map[string]string {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", ResourceVersion: rv, Labels: maps.Clone(labels)}}
		return trimmer.Node(n).Labels
	}
	mapOf := func(m map[string]string) uintptr { return uintptr(reflect.ValueOf(m).UnsafePointer()) }
	first := version("1", map[string]string{"a": "b"})
	second := version("2", map[string]string{"a": "b"})
	g.Expect(mapOf(second)).To(Equal(mapOf(first)))
	third := version("3", map[string]string{"a": "c"})
	g.Expect(mapOf(third)).NotTo(Equal(mapOf(first)))
	g.Expect(third).To(Equal(map[string]string{"a": "c"}))
	g.Expect(first).To(Equal(map[string]string{"a": "b"}))
	g.Expect(mapOf(version("4", map[string]string{"a": "c"}))).To(Equal(mapOf(third)))
	g.Expect(version("5", nil)).To(BeNil())
}

// The last labels of a node not seen for two generations, a deleted one,
// are forgotten; those of nodes seen are kept.
func TestLastLabelsForgetsANodeNotSeenForTwoGenerations(t *testing.T) {
	g := NewWithT(t)
	var l lastLabels
	l.keep("gone", map[string]string{"a": "b"})
	for i := range 4 * minLabelGeneration {
		l.keep(fmt.Sprint("node-", i%10), map[string]string{})
	}
	_, ok := l.of("gone")
	g.Expect(ok).To(BeFalse())
	for i := range 10 {
		_, ok := l.of(fmt.Sprint("node-", i))
		g.Expect(ok).To(BeTrue(), "node-%d", i)
	}
	g.Expect(len(l.current) + len(l.older)).To(BeNumerically("<=", 20))
}

// A fleet far larger than a generation's least, its nodes seen in turn,
// finds every node's last labels at the next round.
func TestLastLabelsKeepAFleetsNodesFromOneRoundToTheNext(t *testing.T) {
	g := NewWithT(t)
	var l lastLabels
	const fleet = 5 * minLabelGeneration
	for round := range 3 {
		for i := range fleet {
			name := fmt.Sprint("node-", i)
			_, ok := l.of(name)
			g.Expect(ok).To(Equal(round > 0), "round %d, %s", round, name)
			l.keep(name, map[string]string{})
		}
	}
	g.Expect(len(l.current) + len(l.older)).To(BeNumerically("<=", 2*fleet))
}

func dataOfOnlyKey(m map[string]string) *byte {
	for k := range m {
		return unsafe.StringData(k)
	}
	return nil
}

func TestTrimSharesResourceListsOfEqualValue(t *testing.T) {
	g := NewWithT(t)
	trimmer := NewNodeTrimmer()
	node := func(gpus string) *corev1.Node {
		n := &corev1.Node{}
		n.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus), corev1.ResourceCPU: resource.MustParse("96")}
		n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}
		return n
	}
	trim := func(n *corev1.Node) *corev1.Node {
		out, err := trimmer.Trim(n)
		g.Expect(err).NotTo(HaveOccurred())
		return out.(*corev1.Node)
	}
	a, b, c := trim(node("8")), trim(node("8")), trim(node("4"))
	g.Expect(reflect.ValueOf(a.Status.Capacity).UnsafePointer()).To(Equal(reflect.ValueOf(b.Status.Capacity).UnsafePointer()),
		"equal lists are one map")
	g.Expect(reflect.ValueOf(a.Status.Capacity).UnsafePointer()).To(Equal(reflect.ValueOf(a.Status.Allocatable).UnsafePointer()))
	g.Expect(reflect.ValueOf(a.Status.Capacity).UnsafePointer()).NotTo(Equal(reflect.ValueOf(c.Status.Capacity).UnsafePointer()))
	g.Expect(c.Status.Capacity).To(Equal(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}))
	g.Expect(a.Status.Capacity).To(Equal(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}))
}

// BenchmarkCacheBytesPerNode prints what the cache keeps per GPU node
// decoded from the API server's answer, trimmed, next to the decoded node.
func BenchmarkCacheBytesPerNode(b *testing.B) {
	const n = 5000
	raw := make([][]byte, n)
	for i := range raw {
		var err error
		if raw[i], err = json.Marshal(realisticNode(i)); err != nil {
			b.Fatal(err)
		}
	}
	decode := func(i int) *corev1.Node {
		node := &corev1.Node{}
		if err := json.Unmarshal(raw[i], node); err != nil {
			b.Fatal(err)
		}
		return node
	}
	for b.Loop() {
		trimmer := NewNodeTrimmer()
		b.ReportMetric(float64(heap.RetainedPer(n, func(i int) any { out, _ := trimmer.Trim(decode(i)); return out })), "trimmed-B/node")
		b.ReportMetric(float64(heap.RetainedPer(n, func(i int) any { return decode(i) })), "node-B/node")
	}
}

// realisticNode is a GPU node as NFD, GFD and the operator label it, with
// the status a kubelet reports.
func realisticNode(i int) *corev1.Node {
	labels := map[string]string{
		"kubernetes.io/hostname": fmt.Sprintf("gpu-%05d", i), "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"node.kubernetes.io/instance-type": "p5.48xlarge", "topology.kubernetes.io/zone": "us-east-1a",
		"feature.node.kubernetes.io/pci-10de.present": "true", "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
		"feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04", "feature.node.kubernetes.io/kernel-version.full": "5.15.0-1048-aws",
		"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.count": "8",
		"nvidia.com/gpu.memory": "143771", "nvidia.com/gpu.family": "hopper", "nvidia.com/cuda.driver-version.full": "570.172.08",
		"nvidia.com/gpu.driver-pool": "default", "nvidia.com/gpu.driver-root": "container", "nvidia.com/gpu.container-runtime": "containerd",
	}
	for _, s := range []string{"driver", "container-toolkit", "device-plugin", "dcgm-exporter", "gpu-feature-discovery"} {
		labels["nvidia.com/gpu.deploy."+s] = "true"
		labels["nvidia.com/gpu.state."+s] = "ready"
	}
	for j := range 20 {
		labels[fmt.Sprintf("feature.node.kubernetes.io/cpu-cpuid.FEATURE%02d", j)] = "true"
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gpu-%05d", i), UID: "2f1c6a4e-8d0b-4c1e-9f57-0a3b5c7d9e1f",
		ResourceVersion: "123456", Labels: labels,
		Annotations: map[string]string{"nvidia.com/gpu-operator.boot-id": "9c1b2d3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e",
			"nvidia.com/gpu-operator.discovered-at": "2026-12-01T00:00:00Z", "node.alpha.kubernetes.io/ttl": "0"}}}
	node.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("192"),
		corev1.ResourceMemory: resource.MustParse("2063940Mi"), corev1.ResourcePods: resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("3758096384Ki")}
	node.Status.Allocatable = node.Status.Capacity.DeepCopy()
	node.Status.NodeInfo = corev1.NodeSystemInfo{BootID: "9c1b2d3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e", KernelVersion: "5.15.0-1048-aws",
		OSImage: "Ubuntu 22.04.4 LTS", ContainerRuntimeVersion: "containerd://1.7.27", KubeletVersion: "v1.33.1"}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status"}}
	for j := range 10 {
		node.Status.Images = append(node.Status.Images, corev1.ContainerImage{Names: []string{fmt.Sprintf("registry.example.com/image-%d@sha256:%064d", j, j)}, SizeBytes: 1 << 30})
	}
	return node
}
