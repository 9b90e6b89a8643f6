package crd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/test/crdschema"
)

// An empty ClusterPolicy is filled in entirely by the CRD's defaults.
func TestDefaults(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cp := &gpuv1.ClusterPolicy{}
	cp.Name = "defaults"
	g.Expect(k8sClient.Create(ctx, cp)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, cp) })

	got := &gpuv1.ClusterPolicy{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(cp), got)).To(Succeed())
	g.Expect(got.Spec).To(Equal(expectedDefaults()))
	g.Expect(got.Spec.IgnoredFields()).To(BeEmpty())

	// The defaulting pure tests use gives the same result.
	offline, err := crdschema.Defaulted(&gpuv1.ClusterPolicy{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(offline.Spec).To(Equal(got.Spec))
}

func expectedDefaults() gpuv1.ClusterPolicySpec {
	enabled := gpuv1.ComponentSpec{Enabled: ptr.To(true)}
	return gpuv1.ClusterPolicySpec{
		Operator: gpuv1.OperatorSpec{DefaultRuntime: gpuv1.RuntimeContainerd, RuntimeClass: "nvidia",
			Remediation: gpuv1.RemediationSpec{
				MaxParallel: ptr.To(intstr.FromInt32(1)), AutoStart: ptr.To(true),
				EvictionTimeoutSeconds: ptr.To[int32](300), ValidationTimeoutSeconds: ptr.To[int32](1800),
			}},
		Daemonsets: gpuv1.DaemonsetsSpec{
			PriorityClassName: "system-node-critical",
			UpdateStrategy:    "RollingUpdate",
		},
		CDI:       gpuv1.CDISpec{Enabled: ptr.To(true), NRIPluginEnabled: ptr.To(false)},
		HostPaths: gpuv1.HostPathsSpec{RootFS: "/", DriverInstallDir: "/run/nvidia/driver", KubeletRootDir: "/var/lib/kubelet"},
		Validator: gpuv1.ValidatorSpec{Repository: "nvcr.io/nvidia", Image: "gpu-operator", Version: "v26.7.0"},
		Driver: gpuv1.DriverSpec{
			ComponentSpec: enabled,
			Repository:    "nvcr.io/nvidia", Image: "driver", Version: "595.91.07", KernelModuleType: "auto",
			AllocationMode: gpuv1.AllocationDevicePlugin,
			UpgradePolicy: gpuv1.DriverUpgradePolicySpec{
				AutoUpgrade:         ptr.To(true),
				MaxParallelUpgrades: ptr.To[int32](1),
				MaxUnavailable:      ptr.To(intstr.FromString("25%")),
				WaitForCompletion:   gpuv1.WaitForCompletionSpec{TimeoutSeconds: ptr.To[int32](0)},
				PodDeletion: gpuv1.PodDeletionSpec{
					Force: ptr.To(false), TimeoutSeconds: ptr.To[int32](300), DeleteEmptyDir: ptr.To(false),
				},
				Drain: gpuv1.DrainSpec{
					Enable: ptr.To(false), Force: ptr.To(false), TimeoutSeconds: ptr.To[int32](300), DeleteEmptyDir: ptr.To(false),
				},
			},
		},
		Toolkit: gpuv1.ToolkitSpec{
			ComponentSpec: enabled,
			Repository:    "nvcr.io/nvidia/k8s", Image: "container-toolkit", Version: "v1.20.0@sha256:f8c647d581f7c8b178efdb7e6c94f5fb6eb12ebc05e2157fa314d327560fcb7a", InstallDir: "/usr/local/nvidia",
		},
		DevicePlugin: gpuv1.DevicePluginSpec{
			ComponentSpec: enabled,
			Repository:    "nvcr.io/nvidia", Image: "k8s-device-plugin", Version: "v0.20.0@sha256:a61ba9fd8efb82f3a79f877f7580e02c1e8e7593f62473644bc9c79e315c3312",
			MPS: gpuv1.DevicePluginMPS{Root: "/run/nvidia/mps"},
		},
		DCGMExporter: gpuv1.DCGMExporterSpec{
			ComponentSpec: enabled,
			Repository:    "nvcr.io/nvidia/k8s", Image: "dcgm-exporter", Version: "4.6.0-4.8.3-distroless@sha256:613ab03c11d442fd960ff515f547e9921537454a712d08160bc8f677f89f1c35",
		},
		GFD: gpuv1.GFDSpec{
			ComponentSpec: enabled,
			Repository:    "nvcr.io/nvidia", Image: "k8s-device-plugin", Version: "v0.20.0@sha256:a61ba9fd8efb82f3a79f877f7580e02c1e8e7593f62473644bc9c79e315c3312",
		},
		NFD: gpuv1.NFDSpec{
			ComponentSpec: enabled,
			Repository:    "registry.k8s.io/nfd", Image: "node-feature-discovery", Version: "v0.19.0",
		},
		MIG: gpuv1.MIGSpec{Strategy: gpuv1.MIGStrategySingle},
		// NVIDIA's v26.7.0 chart's draDriver values.
		DRADriver: gpuv1.DRADriverSpec{
			Repository: "nvcr.io/nvidia", Image: "dra-driver-nvidia-gpu", Version: "v0.5.0@sha256:9b46984c0eb18def60e2b9817b874275f4b5b08d12d491de4f1a7b91b51d706c",
			GPUs: gpuv1.DRAGPUsSpec{KubeletPlugin: gpuv1.DRAGPUKubeletPluginSpec{
				Healthcheck: gpuv1.DRAGPUHealthcheckSpec{Enabled: ptr.To(true), Port: ptr.To[int32](51516)},
			}},
			ComputeDomains: gpuv1.DRAComputeDomainsSpec{
				Enabled: ptr.To(true),
				KubeletPlugin: gpuv1.DRAComputeDomainKubeletPluginSpec{
					Healthcheck: gpuv1.DRAComputeDomainHealthcheckSpec{Enabled: ptr.To(true), Port: ptr.To[int32](51515)},
				},
			},
		},
		// Off unless enabled: turning it on reconfigures MIG-capable nodes.
		MIGManager: gpuv1.MIGManagerSpec{
			Enabled:    ptr.To(false),
			Repository: "nvcr.io/nvidia/cloud-native", Image: "k8s-mig-manager", Version: "v0.15.0@sha256:cab2cf9deafc9602da69d0832a82958a7687f22f4a2f19674099dc9a5c4ea8e2",
			Config:      gpuv1.MIGManagerConfig{Default: "all-disabled"},
			MaxParallel: ptr.To(intstr.FromInt32(1)), EvictionTimeoutSeconds: ptr.To[int32](300),
			ApplyTimeoutSeconds: ptr.To[int32](600), ValidationTimeoutSeconds: ptr.To[int32](600),
		},
	}
}

// Every sample applies with strict validation, and whatever it leaves out
// is defaulted.
func TestSamplesApply(t *testing.T) {
	dir := filepath.Join(crdschema.RepoRoot(), "config", "samples")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples in %s (err %v)", dir, err)
	}
	for _, file := range files {
		if filepath.Base(file) == "kustomization.yaml" {
			continue
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			if strings.Contains(file, "nvidiadriver") {
				for _, obj := range readNVIDIADrivers(t, file) {
					g.Expect(k8sClient.Create(ctx, obj)).To(Succeed())
					t.Cleanup(func() { _ = k8sClient.Delete(ctx, obj) })
					got := &gpuv1alpha1.NVIDIADriver{}
					g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), got)).To(Succeed())
					g.Expect(got.Spec.IgnoredFields()).To(BeEmpty(), "samples use only supported fields")
				}
				return
			}
			if strings.Contains(file, "gpucluster") {
				obj := &unstructured.Unstructured{}
				data, err := os.ReadFile(file)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(yaml.Unmarshal(data, &obj.Object)).To(Succeed())
				g.Expect(k8sClient.Create(ctx, obj)).To(Succeed())
				t.Cleanup(func() { _ = k8sClient.Delete(ctx, obj) })
				got := &gpuv1alpha1.GPUCluster{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), got)).To(Succeed())
				g.Expect(got.Spec.IgnoredFields()).To(BeEmpty(), "samples use only supported fields")
				return
			}
			obj := readObject(t, file)
			g.Expect(k8sClient.Create(ctx, obj)).To(Succeed())
			t.Cleanup(func() { _ = k8sClient.Delete(ctx, obj) })

			got := &gpuv1.ClusterPolicy{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), got)).To(Succeed())
			expectDefaulted(g, &got.Spec)
			g.Expect(got.Spec.IgnoredFields()).To(BeEmpty(), "samples use only supported fields")
		})
	}
}

// A policy shaped like the NVIDIA GPU Operator's applies unchanged; the
// sections this operator does not implement are kept and reported.
func TestNVIDIAClusterPolicyApplies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	obj := readObject(t, filepath.Join("testdata", "nvidia-gpu-operator-clusterpolicy.yaml"))
	g.Expect(k8sClient.Create(ctx, obj)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, obj) })

	got := &gpuv1.ClusterPolicy{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), got)).To(Succeed())
	expectDefaulted(g, &got.Spec)
	g.Expect(got.Spec.Driver.Version).To(Equal(gpuv1.DriverVersion("570.172.08")))
	g.Expect(got.Spec.Daemonsets.RollingUpdate.MaxUnavailable).To(Equal(ptr.To(intstr.FromString("1"))))
	g.Expect(got.Spec.Driver.Manager.Env).To(ContainElement(gpuv1.EnvVar{Name: "ENABLE_AUTO_DRAIN", Value: "false"}), "driver.manager's env is honoured")
	g.Expect(got.Spec.IgnoredFields()).To(ConsistOf(
		"spec.operator.initContainer", "spec.operator.use_ocp_driver_toolkit",
		"spec.driver.manager.repository", "spec.driver.manager.image", "spec.driver.manager.version", "spec.driver.manager.imagePullPolicy",
		"spec.driver.licensingConfig", "spec.driver.virtualTopology",
		"spec.dcgm.hostPort",
		"spec.nodeStatusExporter", "spec.sandboxWorkloads", "spec.vgpuManager", "spec.vgpuDeviceManager",
		"spec.vfioManager", "spec.sandboxDevicePlugin", "spec.kataManager", "spec.ccManager", "spec.cdi.default",
		"spec.psp",
	))
	// What NVIDIA's ClusterPolicy says that we implement under its names.
	g.Expect(got.Spec.Driver.StartupProbe).To(Equal(&gpuv1.ContainerProbeSpec{InitialDelaySeconds: 60, PeriodSeconds: 10,
		TimeoutSeconds: 60, FailureThreshold: 120}))
	g.Expect(got.Spec.DCGMExporter.ServiceMonitor.HonorLabels).To(Equal(ptr.To(false)))
	g.Expect(got.Spec.DCGM.IsEnabled()).To(BeFalse(), "its dcgm.enabled: false, kept")
	repository, image, version := got.Spec.Validator.ImageParts()
	g.Expect([]string{repository, image, version}).To(Equal([]string{"nvcr.io/nvidia/cloud-native", "gpu-operator-validator", "v25.3.2"}),
		"its validator image is the CUDA workload's")
	g.Expect(got.Spec.Validator.WorkloadProof()).To(BeTrue(), "plugin's WITH_WORKLOAD=false leaves NVIDIA's CUDA workload, and the proof, on")
	g.Expect(*got.Spec.DCGMExporter.Service.InternalTrafficPolicy).To(Equal(corev1.ServiceInternalTrafficPolicyCluster))
	g.Expect(got.Spec.CDI.IsEnabled()).To(BeFalse(), "its cdi.enabled: false")
	g.Expect(got.Spec.Toolkit.InstallDir).To(Equal("/usr/local/nvidia"))
	g.Expect(got.Spec.HostPaths.DriverInstallDir).To(Equal("/run/nvidia/driver"))

	// Opaque sections are kept as written, not pruned.
	raw := &unstructured.Unstructured{}
	raw.SetGroupVersionKind(gpuv1.GroupVersion.WithKind("ClusterPolicy"))
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), raw)).To(Succeed())
	strategy, _, _ := unstructured.NestedString(raw.Object, "spec", "mig", "strategy")
	g.Expect(strategy).To(Equal("single"))
	g.Expect(got.Spec.MIGManager.Manages()).To(BeTrue())
	g.Expect(got.Spec.MIGManager.ConfigMapName()).To(Equal(gpuv1.DefaultMIGConfigMap))
	mofed, found, _ := unstructured.NestedBool(raw.Object, "spec", "driver", "rdma", "useHostMofed")
	g.Expect(found).To(BeTrue())
	g.Expect(mofed).To(BeFalse())
}

// expectDefaulted checks the defaults every stored policy must carry,
// whatever the user wrote.
func expectDefaulted(g Gomega, spec *gpuv1.ClusterPolicySpec) {
	g.Expect(spec.Operator.RuntimeClass).NotTo(BeEmpty())
	g.Expect(spec.Daemonsets.PriorityClassName).NotTo(BeEmpty())
	g.Expect(spec.Daemonsets.UpdateStrategy).NotTo(BeEmpty())
	for name, c := range map[string]struct {
		enabled        *bool
		image, version string
	}{
		"driver":       {spec.Driver.Enabled, string(spec.Driver.Image), string(spec.Driver.Version)},
		"toolkit":      {spec.Toolkit.Enabled, string(spec.Toolkit.Image), string(spec.Toolkit.Version)},
		"devicePlugin": {spec.DevicePlugin.Enabled, string(spec.DevicePlugin.Image), string(spec.DevicePlugin.Version)},
		"dcgmExporter": {spec.DCGMExporter.Enabled, string(spec.DCGMExporter.Image), string(spec.DCGMExporter.Version)},
		"gfd":          {spec.GFD.Enabled, string(spec.GFD.Image), string(spec.GFD.Version)},
		"nfd":          {spec.NFD.Enabled, string(spec.NFD.Image), string(spec.NFD.Version)},
	} {
		g.Expect(c.enabled).NotTo(BeNil(), "%s.enabled", name)
		g.Expect(c.image).NotTo(BeEmpty(), "%s.image", name)
		g.Expect(c.version).NotTo(BeEmpty(), "%s.version", name)
	}
	up := spec.Driver.UpgradePolicy
	g.Expect(up.AutoUpgrade).NotTo(BeNil())
	g.Expect(up.MaxParallelUpgrades).NotTo(BeNil())
	g.Expect(up.MaxUnavailable).NotTo(BeNil())
	g.Expect(up.PodDeletion.TimeoutSeconds).NotTo(BeNil())
	g.Expect(up.Drain.TimeoutSeconds).NotTo(BeNil())
	g.Expect(up.WaitForCompletion.TimeoutSeconds).NotTo(BeNil())
}

func readObject(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !strings.HasSuffix(obj.GetKind(), "ClusterPolicy") {
		t.Fatalf("%s: kind %q is not ClusterPolicy", path, obj.GetKind())
	}
	return obj
}
