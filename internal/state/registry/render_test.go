package registry

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func policies(t *testing.T) map[string]*gpuv1.ClusterPolicy {
	t.Helper()
	p, err := fixture.Policies()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func renderObjects(t *testing.T, g *state.Graph, s state.State, cp *gpuv1.ClusterPolicy) []client.Object {
	t.Helper()
	objs, err := s.Operand.Render(state.RenderInput{
		Policy: cp, Namespace: fixture.Namespace, Gate: g.Gate(s.Name), GateEither: g.GateEither(s.Name), DriverPools: fixture.DriverPools(cp),
		Variants: fixture.Variants(cp), ServiceMonitorAvailable: true, BindsOperandClusterRoles: true,
		// The full policy's files; time-slicing-4's content is unknown.
		DevicePluginConfigDigests: fixture.DevicePluginConfigDigests,
		DCGMMetrics:               metricsList(cp),
		MPSConfigs:                map[string]bool{"H200_MPS.x2": true},
		// As if a pool were in allocation mode dra: the DRA driver's
		// objects render nothing otherwise.
		DRAInUse: true,
	})
	if err != nil {
		t.Fatalf("rendering %s: %v", s.Name, err)
	}
	return objs
}

// workloadPod is the CUDA workload pod the node controller makes on a
// node, for the golden files and the privilege table: the state renders
// no shared object.
func workloadPod(cp *gpuv1.ClusterPolicy) *corev1.Pod {
	return cudaworkload.Pod(cp, fixture.Namespace, "gpu-node-0", cudaworkload.Request{
		Generation: cudaworkload.Generation("boot-id", "driver-pod-uid", "device-plugin-pod-uid", ""), Attempt: 1,
		Resource: "nvidia.com/gpu", RuntimeClass: state.RuntimeClassName(&cp.Spec, gpuv1.RuntimeContainerd)})
}

// draWorkloadPod is the CUDA workload pod on a node of a DRA pool.
func draWorkloadPod(cp *gpuv1.ClusterPolicy) *corev1.Pod {
	return cudaworkload.Pod(cp, fixture.Namespace, "gpu-node-1", cudaworkload.Request{
		Generation: cudaworkload.Generation("boot-id", "driver-pod-uid", "dra-plugin-pod-uid", ""), Attempt: 1,
		DeviceClass: cudaworkload.GPUDeviceClass})
}

func renderState(t *testing.T, g *state.Graph, s state.State, cp *gpuv1.ClusterPolicy) []byte {
	t.Helper()
	objs := renderObjects(t, g, s, cp)
	if s.Name == state.CUDAWorkload && s.Operand.Enabled(&cp.Spec) {
		objs = append(objs, workloadPod(cp), draWorkloadPod(cp))
	}
	var buf bytes.Buffer
	for _, o := range objs {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		delete(u, "status") // the server's, never rendered
		data, err := yaml.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(data)
	}
	return buf.Bytes()
}

// Every state renders what its golden file holds, and the same bytes every
// time: a reconcile never changes a pod template by accident.
func TestRenderGolden(t *testing.T) {
	graph, err := Graph()
	if err != nil {
		t.Fatal(err)
	}
	for caseName, cp := range policies(t) {
		for _, s := range graph.States() {
			t.Run(caseName+"/"+string(s.Name), func(t *testing.T) {
				g := NewWithT(t)
				got := renderState(t, graph, s, cp)
				for range 5 {
					g.Expect(renderState(t, graph, s, cp)).To(Equal(got), "rendering is not deterministic")
				}
				path := filepath.Join("testdata", caseName, string(s.Name)+".yaml")
				if *update {
					g.Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
					g.Expect(os.WriteFile(path, got, 0o644)).To(Succeed())
				}
				want, err := os.ReadFile(path)
				g.Expect(err).NotTo(HaveOccurred(), "run go test ./internal/state/registry -update to create it")
				g.Expect(string(got)).To(Equal(string(want)), "run go test ./internal/state/registry -update if the change is intended")
			})
		}
	}
}

// Every object a state renders is of a kind it declares, so pruning looks
// everywhere the operator may have created something.
func TestKindsCoverRenders(t *testing.T) {
	graph, err := Graph()
	if err != nil {
		t.Fatal(err)
	}
	for caseName, cp := range policies(t) {
		for _, s := range graph.States() {
			kinds := s.Operand.Kinds()
			for _, o := range renderObjects(t, graph, s, cp) {
				NewWithT(t).Expect(kinds).To(ContainElement(o.GetObjectKind().GroupVersionKind()),
					"%s/%s renders %s %s", caseName, s.Name, o.GetObjectKind().GroupVersionKind().Kind, o.GetName())
			}
		}
	}
}

func TestGraph(t *testing.T) {
	g := NewWithT(t)
	graph, err := Graph()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(graph.PerNode()).To(Equal([]state.Name{
		state.Driver, state.ContainerToolkit, state.MIGManager, state.MPSControlDaemon, state.DevicePlugin, state.DRADriver,
		state.DCGM, state.DCGMExporter, state.GPUFeatureDiscovery, state.CUDAWorkload,
	}))
	g.Expect(graph.Prerequisites(state.Driver)).To(BeEmpty(), "NFD is cluster-wide and gates nothing per node")
	g.Expect(graph.Prerequisites(state.CUDAWorkload)).To(Equal([]state.Name{state.Driver, state.ContainerToolkit, state.MIGManager,
		state.MPSControlDaemon, state.DevicePlugin, state.DRADriver}),
		"the CUDA workload asks the device plugin, or on a DRA node the DRA driver, for its GPU")
	g.Expect(graph.Downstream(state.CUDAWorkload)).To(BeEmpty(), "nothing but the readiness taint waits for the workload proof")
	g.Expect(graph.Prerequisites(state.ContainerToolkit)).To(BeEmpty(), "a driver replacement does not tear the toolkit down")
	g.Expect(graph.StartPrerequisites(state.ContainerToolkit)).To(Equal([]state.Name{state.Driver}),
		"the toolkit first starts after the driver, whose files its CDI spec names")
	g.Expect(graph.Prerequisites(state.DCGMExporter)).To(Equal([]state.Name{state.Driver, state.ContainerToolkit, state.MIGManager,
		state.MPSControlDaemon, state.DevicePlugin, state.DRADriver, state.DCGM}),
		"one of the two plugins is disabled on each node; the standalone host engine the exporter reads, where it runs, first")
	g.Expect(graph.Prerequisites(state.DCGM)).To(Equal([]state.Name{state.Driver, state.ContainerToolkit, state.MIGManager,
		state.MPSControlDaemon, state.DevicePlugin, state.DRADriver}), "NVIDIA's order: the host engine after the device plugin")
	g.Expect(graph.Prerequisites(state.DRADriver)).To(Equal([]state.Name{state.Driver, state.ContainerToolkit, state.MIGManager}),
		"the DRA driver does not wait for the device plugin's MPS daemon")
	g.Expect(graph.Downstream(state.Driver)).To(Equal([]state.Name{
		state.MIGManager, state.MPSControlDaemon, state.DevicePlugin, state.DRADriver, state.DCGM, state.DCGMExporter, state.GPUFeatureDiscovery,
		state.CUDAWorkload,
	}), "a driver replacement leaves the toolkit, and so the runtime's config, alone")
	g.Expect(graph.Downstream(state.ContainerToolkit)).To(Equal([]state.Name{
		state.MIGManager, state.MPSControlDaemon, state.DevicePlugin, state.DRADriver, state.DCGM, state.DCGMExporter, state.GPUFeatureDiscovery,
		state.CUDAWorkload,
	}))
	g.Expect(graph.Downstream(state.MIGManager)).To(Equal([]state.Name{
		state.MPSControlDaemon, state.DevicePlugin, state.DRADriver, state.DCGM, state.DCGMExporter, state.GPUFeatureDiscovery,
		state.CUDAWorkload,
	}), "a MIG reconfiguration takes every GPU client off the node, the DRA driver included: it reads MIG devices when it starts")
	g.Expect(graph.Downstream(state.DCGM)).To(Equal([]state.Name{state.DCGMExporter}), "an exporter follows its host engine")
	g.Expect(graph.Downstream(state.DCGMExporter)).To(BeEmpty())
	g.Expect(graph.Gate(state.NodeFeatureDiscovery)).To(BeEmpty())
	g.Expect(graph.Gate(state.DevicePlugin)).To(Equal([]corev1.NodeSelectorRequirement{
		{Key: "nvidia.com/gpu.present", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}},
		{Key: "nvidia.com/gpu.deploy.operands", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"false"}},
		{Key: "nvidia.com/gpu.deploy.device-plugin", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}},
		{Key: "nvidia.com/gpu.state.driver", Operator: corev1.NodeSelectorOpIn, Values: []string{"disabled", "ready"}},
		{Key: "nvidia.com/gpu.state.container-toolkit", Operator: corev1.NodeSelectorOpIn, Values: []string{"disabled", "ready"}},
		// Not In: a node the operator has not labelled for mig-manager yet
		// (an operator upgrade) keeps its device plugin.
		{Key: "nvidia.com/gpu.state.mig-manager", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"failed", "pending", "upgrading"}},
		{Key: "nvidia.com/gpu.state.mps-control-daemon", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"failed", "pending", "upgrading"}},
		// Not In: a node the operator has not labelled with its allocation
		// mode yet keeps its device plugin.
		{Key: "nvidia.com/gpu.allocation-mode", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"dra", "none"}},
	}))
	g.Expect(graph.Gate(state.DRADriver)).To(ContainElement(corev1.NodeSelectorRequirement{
		Key: "nvidia.com/gpu.allocation-mode", Operator: corev1.NodeSelectorOpIn, Values: []string{"dra"}}))
	g.Expect(graph.Gate(state.DCGMExporter)).To(ContainElement(corev1.NodeSelectorRequirement{
		Key: "nvidia.com/gpu.state.dra-driver", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"failed", "pending", "upgrading"}}),
		"a node the operator has not labelled for the DRA driver yet keeps dcgm-exporter")
}

// A per-node state's pods are read by their state label: only its
// DaemonSets' pods may carry it. A Deployment's pod labelled so would be
// taken for the state's pod of whatever node it lands on.
func TestOnlyDaemonSetPodsCarryAPerNodeStatesLabel(t *testing.T) {
	graph, err := Graph()
	if err != nil {
		t.Fatal(err)
	}
	for caseName, cp := range policies(t) {
		for _, name := range graph.PerNode() {
			s, _ := graph.Get(name)
			for _, o := range renderObjects(t, graph, s, cp) {
				if d, ok := o.(*appsv1.Deployment); ok {
					NewWithT(t).Expect(d.Spec.Template.Labels[render.LabelState]).NotTo(Equal(string(name)),
						"%s: Deployment %s's pods carry the per-node state label of %s", caseName, d.Name, name)
				}
			}
		}
	}
}

// metricsList is a policy's dcgm-exporter metrics list, as
// the controller would read it.
func metricsList(cp *gpuv1.ClusterPolicy) string {
	if cp.Spec.DCGMExporter.Config.Named() == "" {
		return ""
	}
	return fixture.DCGMMetrics
}

// The metadata hash is on OnDelete templates alone: on a rolling one it
// would roll every pod once, for nothing (the DaemonSet controller makes
// them again on any template change, with the new labels).
func TestMetadataHashOnlyOnOnDeleteTemplates(t *testing.T) {
	graph, err := Graph()
	if err != nil {
		t.Fatal(err)
	}
	onDelete := 0
	for caseName, cp := range policies(t) {
		for _, s := range graph.States() {
			for _, o := range renderObjects(t, graph, s, cp) {
				switch w := o.(type) {
				case *appsv1.DaemonSet:
					_, hashed := w.Spec.Template.Annotations[render.AnnotationMetadataHash]
					isOnDelete := w.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType
					if hashed != isOnDelete {
						t.Errorf("%s: DaemonSet %s (%s): metadata hash %t", caseName, w.Name, w.Spec.UpdateStrategy.Type, hashed)
					}
					if isOnDelete {
						onDelete++
					}
				case *appsv1.Deployment:
					if _, hashed := w.Spec.Template.Annotations[render.AnnotationMetadataHash]; hashed {
						t.Errorf("%s: Deployment %s: metadata hash", caseName, w.Name)
					}
				}
			}
		}
	}
	if onDelete == 0 {
		t.Fatal("no OnDelete DaemonSet rendered: the test looks at nothing")
	}
}
