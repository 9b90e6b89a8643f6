package contract

import (
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/gfd"
	"github.com/gpu-operator/gpu-operator/internal/state/nfd"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// Sources of the label names nfd-master must let through.
const (
	gfdLabelers   = "NVIDIA/k8s-device-plugin@v0.20.0:internal/lm (labelers run with the repo's device mocks: MIG none, single, mixed; time-slicing; MPS; IMEX)"
	nfdLabelCheck = nfdMaster + ":522-554 (filterFeatureLabel: labelWhiteList matches the name after the prefix, 536 and 549)"
	nfdConfig     = nfdMaster + ":73-95 (Restrictions, NFDConfig; read with sigs.k8s.io/yaml, 1338)"
	nfdDenyLabels = nfdMaster + ":676-690, 709-711 (denyNodeFeatureLabels drops the labels of any NodeFeature but the worker's own)"
)

// gfdLabelNames are the names (after nvidia.com/) GFD v0.20.0 writes; MIG
// profile names vary, so the mixed strategy's keys are checked for a few.
var gfdLabelNames = []string{"cuda.driver-version.full", "cuda.driver-version.major", "cuda.driver-version.minor", "cuda.driver-version.revision", "cuda.driver.major", "cuda.driver.minor", "cuda.driver.rev", "cuda.runtime-version.full", "cuda.runtime-version.major", "cuda.runtime-version.minor", "cuda.runtime.major", "cuda.runtime.minor", "gfd.timestamp", "gpu.clique", "gpu.compute.major", "gpu.compute.minor", "gpu.count", "gpu.engines.copy", "gpu.engines.decoder", "gpu.engines.encoder", "gpu.engines.jpeg", "gpu.engines.ofa", "gpu.family", "gpu.machine", "gpu.memory", "gpu.mode", "gpu.multiprocessors", "gpu.product", "gpu.replicas", "gpu.sharing-strategy", "gpu.slices.ci", "gpu.slices.gi", "mig-1g.10gb.count", "mig-1g.10gb.engines.copy", "mig-1g.10gb.engines.decoder", "mig-1g.10gb.engines.encoder", "mig-1g.10gb.engines.jpeg", "mig-1g.10gb.engines.ofa", "mig-1g.10gb.multiprocessors", "mig-1g.10gb.product", "mig-1g.10gb.replicas", "mig-1g.10gb.sharing-strategy", "mig-1g.10gb.slices.ci", "mig-1g.10gb.slices.gi", "mig.capable", "mig.strategy", "mps.capable", "vgpu.host-driver-branch", "vgpu.host-driver-version", "vgpu.present"}

var gfdMIGAttributes = []string{"count", "engines.copy", "engines.decoder", "engines.encoder", "engines.jpeg", "engines.ofa",
	"memory", "multiprocessors", "product", "replicas", "sharing-strategy", "slices.ci", "slices.gi"}

// masterConf is the part of nfd-master's config the operator sets, read as
// nfd-master reads it (sigs.k8s.io/yaml into a *regexp.Regexp; nfdConfig).
type masterConf struct {
	LabelWhiteList *regexp.Regexp `json:"labelWhiteList"`
	Restrictions   struct {
		DenyNodeFeatureLabels bool `json:"denyNodeFeatureLabels"`
	} `json:"restrictions"`
}

func renderedMasterConf(t *testing.T) masterConf {
	t.Helper()
	graph, err := registry.Graph()
	if err != nil {
		t.Fatal(err)
	}
	s, _ := graph.Get(state.NodeFeatureDiscovery)
	objs, err := s.Operand.Render(state.RenderInput{Policy: policies(t)["default"], Namespace: fixture.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == nfd.MasterName+"-conf" {
			var conf masterConf
			if err := yaml.UnmarshalStrict([]byte(cm.Data["nfd-master.conf"]), &conf); err != nil {
				t.Fatalf("nfd-master.conf does not parse as nfd-master reads it (%s): %v", nfdConfig, err)
			}
			return conf
		}
	}
	t.Fatal("no nfd-master ConfigMap rendered")
	return masterConf{}
}

// nfd-master lets through what GFD and NFD's own sources write, and none of
// the labels the operator decides with: a node cannot label itself, or
// another node, into a state or onto a deploy gate.
func TestNFDMasterAdmitsOnlyFeatureLabels(t *testing.T) {
	g := NewWithT(t)
	conf := renderedMasterConf(t)
	g.Expect(conf.LabelWhiteList).NotTo(BeNil())
	g.Expect(conf.Restrictions.DenyNodeFeatureLabels).To(BeTrue(), "other namespaces' NodeFeatures must not label nodes (%s)", nfdDenyLabels)
	admits := func(key string) bool {
		_, name, _ := strings.Cut(key, "/")
		return conf.LabelWhiteList.MatchString(name)
	}

	for _, n := range gfdLabelNames {
		g.Expect(admits("nvidia.com/"+n)).To(BeTrue(), "GFD writes nvidia.com/%s (%s; %s)", n, gfdLabelers, nfdLabelCheck)
	}
	for _, profile := range []string{"1g.10gb", "1g.10gb.me", "1c.2g.20gb", "7g.80gb", "3g.40gb"} {
		for _, a := range gfdMIGAttributes {
			g.Expect(admits("nvidia.com/mig-"+profile+"."+a)).To(BeTrue(), "mixed strategy: mig-%s.%s", profile, a)
		}
	}
	for _, key := range []string{
		"feature.node.kubernetes.io/pci-10de.present", "feature.node.kubernetes.io/pci-0302_10de.present",
		"feature.node.kubernetes.io/system-os_release.ID", "feature.node.kubernetes.io/system-os_release.VERSION_ID",
		"feature.node.kubernetes.io/kernel-version.full", "feature.node.kubernetes.io/cpu-model.vendor_id",
	} {
		g.Expect(admits(key)).To(BeTrue(), "NFD's own %s, which the operator and driver pools read", key)
	}

	operatorLabels := []string{
		gpuv1.LabelGPUPresent, gpuv1.LabelDeployOperands, gpuv1.LabelDriverPool, gpuv1.LabelDriverVersion,
		gpuv1.LabelDriverRoot, gpuv1.LabelContainerRuntime, gpuv1.LabelUpgradeState, gpuv1.LabelUpgradeSkip,
		gpuv1.AnnotationHostDriver, gpuv1.UpgradeAnnotationPrefix + "x",
		"nvidia.com/mig.config", "nvidia.com/mig.config.state", "nvidia.com/device-plugin.config",
	}
	for _, s := range []state.Name{state.NodeFeatureDiscovery, state.Driver, state.ContainerToolkit,
		state.DevicePlugin, state.DCGMExporter, state.GPUFeatureDiscovery} {
		operatorLabels = append(operatorLabels, gpuv1.StateLabel(string(s)), gpuv1.DeployLabel(string(s)))
	}
	for _, key := range operatorLabels {
		g.Expect(admits(key)).To(BeFalse(), "%s is the operator's to set, never NFD's", key)
	}
	for _, near := range []string{"gpu.count.x", "gpu.countx", "xgpu.count", "mig-x.count", "gpu", "gpu.state.driver"} {
		g.Expect(admits("nvidia.com/"+near)).To(BeFalse(), "near miss %s", near)
	}
}

// The cleanup of a deleted ClusterPolicy removes what GFD published and
// nothing else: every name GFD writes, none of the operator's or NFD's own.
func TestGFDLabelsAreTheNamesGFDWrites(t *testing.T) {
	g := NewWithT(t)
	for _, n := range gfdLabelNames {
		g.Expect(gfd.IsLabel("nvidia.com/"+n)).To(BeTrue(), "GFD writes nvidia.com/%s (%s)", n, gfdLabelers)
	}
	for _, key := range []string{
		gpuv1.LabelGPUPresent, gpuv1.LabelDeployOperands, gpuv1.LabelDriverPool, gpuv1.LabelUpgradeState,
		"nvidia.com/mig.config", "nvidia.com/mig.config.state", "nvidia.com/device-plugin.config",
		gpuv1.StateLabel(string(state.GPUFeatureDiscovery)), "feature.node.kubernetes.io/pci-10de.present",
		"example.com/gpu.product", "gpu.product",
	} {
		g.Expect(gfd.IsLabel(key)).To(BeFalse(), "%s is not GFD's", key)
	}
}
