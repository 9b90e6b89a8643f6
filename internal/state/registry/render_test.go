package registry

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/crdschema"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// policies are the rendering cases: the defaults, and a policy that sets
// every field the renderers read.
func policies(t *testing.T) map[string]*gpuv1.ClusterPolicy {
	full := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cluster-policy", UID: "11111111-2222-3333-4444-555555555555"}}
	full.Spec.Operator = gpuv1.OperatorSpec{DefaultRuntime: gpuv1.RuntimeCRIO, RuntimeClass: "nvidia-crio"}
	full.Spec.Daemonsets = gpuv1.DaemonsetsSpec{
		Labels:            gpuv1.Labels{"team": "gpu", "zone": "a"},
		Annotations:       gpuv1.Annotations{"example.com/owner": "infra"},
		Tolerations:       []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoExecute}},
		PriorityClassName: "gpu-critical",
		UpdateStrategy:    "RollingUpdate",
		RollingUpdate:     &gpuv1.RollingUpdateSpec{MaxUnavailable: ptr.To(intstr.FromString("1"))},
	}
	common := gpuv1.ComponentSpec{
		ImagePullPolicy:  corev1.PullAlways,
		ImagePullSecrets: []gpuv1.ObjectName{"registry-a", "registry-b"},
		Env:              []gpuv1.EnvVar{{Name: "Z_LAST", Value: "z"}, {Name: "A_FIRST", Value: "a"}, {Name: "FAIL_ON_INIT_ERROR", Value: "false"}},
		Args:             []string{"--verbose"},
		Resources: &gpuv1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
		},
	}
	full.Spec.Driver = gpuv1.DriverSpec{ComponentSpec: common, Repository: "registry.local:5000/nvidia", Image: "driver",
		Version: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
	full.Spec.Toolkit = gpuv1.ToolkitSpec{ComponentSpec: common, Repository: "registry.local/k8s", Image: "container-toolkit", Version: "v1.17.8-ubi8"}
	full.Spec.DevicePlugin = gpuv1.DevicePluginSpec{ComponentSpec: common, Repository: "registry.local", Image: "k8s-device-plugin", Version: "v0.17.2"}
	full.Spec.DCGMExporter = gpuv1.DCGMExporterSpec{ComponentSpec: common, Repository: "registry.local/k8s", Image: "dcgm-exporter", Version: "4.2.3-4.1.3-ubuntu22.04"}
	full.Spec.GFD = gpuv1.GFDSpec{ComponentSpec: common, Repository: "registry.local", Image: "k8s-device-plugin", Version: "v0.17.2"}
	full.Spec.NFD = gpuv1.NFDSpec{ComponentSpec: common, Repository: "registry.local/nfd", Image: "node-feature-discovery", Version: "v0.17.3"}

	out := map[string]*gpuv1.ClusterPolicy{}
	for name, cp := range map[string]*gpuv1.ClusterPolicy{
		"default": {ObjectMeta: metav1.ObjectMeta{Name: "cluster-policy", UID: "11111111-2222-3333-4444-555555555555"}},
		"full":    full,
	} {
		d, err := crdschema.Defaulted(cp)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = d
	}
	return out
}

func renderState(t *testing.T, g *state.Graph, s state.State, cp *gpuv1.ClusterPolicy) []byte {
	t.Helper()
	objs, err := s.Operand.Render(state.RenderInput{Policy: cp, Namespace: "gpu-operator", Gate: g.Gate(s.Name)})
	if err != nil {
		t.Fatalf("rendering %s: %v", s.Name, err)
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

func TestGraph(t *testing.T) {
	g := NewWithT(t)
	graph, err := Graph()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(graph.PerNode()).To(Equal([]state.Name{
		state.Driver, state.ContainerToolkit, state.DevicePlugin, state.DCGMExporter, state.GPUFeatureDiscovery,
	}))
	g.Expect(graph.Prerequisites(state.Driver)).To(BeEmpty(), "NFD is cluster-wide and gates nothing per node")
	g.Expect(graph.Prerequisites(state.DCGMExporter)).To(Equal([]state.Name{state.Driver, state.ContainerToolkit, state.DevicePlugin}))
	g.Expect(graph.Downstream(state.Driver)).To(Equal([]state.Name{
		state.ContainerToolkit, state.DevicePlugin, state.DCGMExporter, state.GPUFeatureDiscovery,
	}))
	g.Expect(graph.Downstream(state.DCGMExporter)).To(BeEmpty())
	g.Expect(graph.Gate(state.NodeFeatureDiscovery)).To(BeEmpty())
	g.Expect(graph.Gate(state.ContainerToolkit)).To(Equal([]corev1.NodeSelectorRequirement{
		{Key: "nvidia.com/gpu.present", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}},
		{Key: "nvidia.com/gpu.deploy.operands", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"false"}},
		{Key: "nvidia.com/gpu.deploy.container-toolkit", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}},
		{Key: "nvidia.com/gpu.state.driver", Operator: corev1.NodeSelectorOpIn, Values: []string{"disabled", "ready"}},
	}))
}
