package packaging

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// NVIDIA's chart's default values: at the release whose operands we ship,
// and at the one before CDI became the default (each file says where it
// comes from).
var (
	nvidiaValues       = filepath.Join("testdata", "nvidia-v26.7.0-values.yaml")
	nvidiaValuesBefore = filepath.Join("testdata", "nvidia-v25.3.1-values.yaml")
)

// NVIDIA's default values files render unchanged, every object passes the
// API server's validation, and what they say that we implement reaches the
// objects under NVIDIA's names (issue 13, item 5; issue 27, item 1).
func TestNVIDIAValuesFileInstalls(t *testing.T) {
	for file, want := range map[string]struct {
		driver string
		cdi    bool
	}{nvidiaValues: {"595.91.07", true}, nvidiaValuesBefore: {"570.148.08", false}} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			g := NewWithT(t)
			objs := template(t, "-f", file)
			checked := 0
			for _, o := range objs {
				err := k8sClient.Create(context.Background(), o, client.DryRunAll)
				if meta.IsNoMatchError(err) {
					continue
				}
				g.Expect(err).NotTo(HaveOccurred(), "%s %s", o.GetKind(), o.GetName())
				checked++
			}
			g.Expect(checked).To(BeNumerically(">=", 15))

			pod := operatorDeployment(g, objs).Spec.Template.Spec
			c := pod.Containers[0]
			g.Expect(c.Image).To(Equal("ghcr.io/gpu-operator/gpu-operator:v"+version(t)), "NVIDIA's operator image is not this operator")
			g.Expect(c.Args).To(ContainElements("--zap-log-level=info", "--zap-time-encoding=epoch"))
			g.Expect(pod.PriorityClassName).To(Equal("system-node-critical"))

			cp := &gpuv1.ClusterPolicy{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(objs, "ClusterPolicy", "cluster-policy").Object, cp)).To(Succeed())
			g.Expect(string(cp.Spec.Driver.Version)).To(Equal(want.driver))
			g.Expect(cp.Spec.CDI.IsEnabled()).To(Equal(want.cdi), "cdi.enabled")
			g.Expect(cp.Spec.HostPaths).To(Equal(gpuv1.HostPathsSpec{RootFS: "/", DriverInstallDir: "/run/nvidia/driver", KubeletRootDir: "/var/lib/kubelet"}))
			g.Expect(cp.Spec.Toolkit.InstallDir).To(Equal("/usr/local/nvidia"))
			g.Expect(cp.Spec.Driver.KernelModuleType).To(Equal("auto"))
			g.Expect(cp.Spec.DevicePlugin.Config).To(BeNil(), "an empty config name means none")
			g.Expect(cp.Spec.IgnoredFields()).To(BeEmpty(), "NVIDIA-only values are listed by the notes, not passed on")
		})
	}
}

// NVIDIA's clusterPolicy.deployCR: false leaves the ClusterPolicy out, as
// clusterPolicy.create: false does; GKE's settings from NVIDIA's guide
// reach the policy.
func TestNVIDIAPolicyValues(t *testing.T) {
	g := NewWithT(t)
	for _, o := range template(t, "-f", nvidiaValues, "--set", "clusterPolicy.deployCR=false") {
		g.Expect(o.GetKind()).NotTo(Equal("ClusterPolicy"))
	}
	objs := template(t, "-f", nvidiaValues, "--set", "hostPaths.driverInstallDir=/home/kubernetes/bin/nvidia",
		"--set", "toolkit.installDir=/home/kubernetes/bin/nvidia", "--set", "cdi.enabled=true", "--set", "cdi.default=true",
		"--set", "driver.enabled=false", "--set", "driver.kernelModuleType=open")
	cp := &gpuv1.ClusterPolicy{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(objs, "ClusterPolicy", "cluster-policy").Object, cp)).To(Succeed())
	g.Expect(cp.Spec.HostPaths.DriverInstallDir).To(Equal("/home/kubernetes/bin/nvidia"))
	g.Expect(cp.Spec.Toolkit.InstallDir).To(Equal("/home/kubernetes/bin/nvidia"))
	g.Expect(cp.Spec.Driver.KernelModuleType).To(Equal("open"))
	g.Expect(cp.Spec.DriverRootPath(gpuv1.DriverRootHost)).To(Equal("/home/kubernetes/bin/nvidia"))
	// The NRI plugin's admission guard is the operator's, rendered from
	// the ClusterPolicy however NRI was turned on: the chart has none.
	for _, o := range template(t, "-f", nvidiaValues, "--set", "cdi.nriPluginEnabled=true") {
		g.Expect(o.GetKind()).NotTo(Equal("ValidatingAdmissionPolicy"), "the operator's, not the chart's")
	}
	// driver.manager's env, as NVIDIA's documentation sets it, reaches the
	// policy and the chart's default NVIDIADriver; its image does not.
	objs = template(t, "-f", nvidiaValues, "--set", "driver.manager.env[0].name=ENABLE_AUTO_DRAIN", "--set-string", "driver.manager.env[0].value=true",
		"--set", "driver.nvidiaDriverCRD.enabled=true", "--set", "driver.nvidiaDriverCRD.deployDefaultCR=true")
	cp = &gpuv1.ClusterPolicy{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(objs, "ClusterPolicy", "cluster-policy").Object, cp)).To(Succeed())
	g.Expect(cp.Spec.Driver.Manager).To(Equal(&gpuv1.DriverManagerSpec{Env: []gpuv1.EnvVar{{Name: "ENABLE_AUTO_DRAIN", Value: "true"}}}))
	nvd := find(objs, "NVIDIADriver", "default")
	env, _, _ := unstructured.NestedSlice(nvd.Object, "spec", "manager", "env")
	g.Expect(env).To(Equal([]any{map[string]any{"name": "ENABLE_AUTO_DRAIN", "value": "true"}}))
	_, err := helm("template", "gpu-operator", chartPath, "--set", "driver.kernelModuleType=closed")
	g.Expect(err).To(MatchError(ContainSubstring("kernelModuleType")))
}

// Keys of NVIDIA's chart are accepted; keys of neither chart are typos.
func TestValuesOfNeitherChartAreRejected(t *testing.T) {
	for name, tt := range map[string]struct{ set, want string }{
		"typo in an NVIDIA-only section's name": {"migManger.enabled=true", "migManger"},
		"typo in an NVIDIA key of ours":         {"operator.loging.level=debug", "loging"},
		"typo under an NVIDIA key":              {"driver.rdma.enabeld=true", "enabeld"},
		"NVIDIA level of the wrong kind":        {"operator.logging.level=verbose", "operator.logging.level"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := helm("template", "gpu-operator", chartPath, "--set", tt.set)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
	for _, set := range []string{"global.imageRegistry=r.example", "migManager.enabled=true", "node-feature-discovery.gc.enable=false",
		"validator.plugin.env[0].name=WITH_WORKLOAD", "hostPaths.rootFS=/"} {
		_, err := helm("template", "gpu-operator", chartPath, "--set", set)
		NewWithT(t).Expect(err).NotTo(HaveOccurred(), set)
	}
}

// NVIDIA's names for what we implement under ours work the same.
func TestNVIDIANamesAreAliases(t *testing.T) {
	g := NewWithT(t)
	c := operatorDeployment(g, template(t, "--set", "operator.logging.level=debug", "--set", "operator.logLevel=error",
		"--set", "operator.logging.develMode=true")).Spec.Template.Spec.Containers[0]
	g.Expect(c.Args).To(ContainElements("--zap-log-level=debug", "--zap-devel"), "NVIDIA's level wins")
	c = operatorDeployment(g, template(t, "--set", "operator.logLevel=warn")).Spec.Template.Spec.Containers[0]
	g.Expect(c.Args).To(ContainElement("--zap-log-level=error"), "warn logs what error does: nothing logs at warn")

	for _, set := range []string{"operator.cleanupCRD=true", "crds.deleteOnUninstall=true"} {
		objs := template(t, "--set", set)
		role := &rbacv1.ClusterRole{}
		g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(objs, "ClusterRole", "gpu-operator-cleanup").Object, role)).To(Succeed())
		g.Expect(role.Rules).To(ContainElement(HaveField("Resources", ContainElement("customresourcedefinitions"))), set)
		g.Expect(jobArgs(t, objs, "gpu-operator-cleanup")).To(ContainElement("--delete-crds"), set)
	}
}

// devicePlugin.config.create makes the ConfigMap the plugin reads, as
// NVIDIA's chart does; a default that names no configuration is refused.
func TestDevicePluginConfigFromValues(t *testing.T) {
	g := NewWithT(t)
	objs := template(t, "--set", "devicePlugin.config.create=true", "--set", "devicePlugin.config.name=plugin-configs",
		"--set", "devicePlugin.config.default=shared", "--set-string", "devicePlugin.config.data.shared=version: v1")
	cm := &corev1.ConfigMap{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(objs, "ConfigMap", "plugin-configs").Object, cm)).To(Succeed())
	g.Expect(cm.Data).To(Equal(map[string]string{"shared": "version: v1"}))
	cp := &gpuv1.ClusterPolicy{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(find(objs, "ClusterPolicy", "cluster-policy").Object, cp)).To(Succeed())
	g.Expect(cp.Spec.DevicePlugin.Config).To(HaveField("Name", BeEquivalentTo("plugin-configs")))

	_, err := helm("template", "gpu-operator", chartPath, "--set", "devicePlugin.config.create=true", "--set", "devicePlugin.config.name=c",
		"--set", "devicePlugin.config.default=missing", "--set-string", "devicePlugin.config.data.shared=version: v1")
	g.Expect(err).To(MatchError(ContainSubstring("devicePlugin.config.default=missing is not a key of devicePlugin.config.data (shared)")))
}

// NVIDIA's draDriver section (its GPUCluster's) reaches the ClusterPolicy
// unchanged, and with allocationMode dra the policy passes the API
// server's validation (issue 29, item 2).
func TestNVIDIADRADriverValuesReachThePolicy(t *testing.T) {
	g := NewWithT(t)
	objs := template(t, "-f", nvidiaValues, "--set", "draDriver.featureGates.NVMLDeviceHealthCheck=true",
		"--set", "driver.allocationMode=dra", "--set", "draDriver.gpus.kubeletPlugin.healthcheck.port=52516")
	o := find(objs, "ClusterPolicy", "cluster-policy")
	g.Expect(k8sClient.Create(context.Background(), o, client.DryRunAll)).To(Succeed())
	cp := &gpuv1.ClusterPolicy{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, cp)).To(Succeed())
	d := cp.Spec.DRADriver
	g.Expect(cp.Spec.Driver.AllocationMode).To(Equal(gpuv1.AllocationDRA))
	g.Expect([]string{string(d.Repository), string(d.Image), string(d.Version), string(d.ImagePullPolicy)}).To(
		Equal([]string{"nvcr.io/nvidia", "dra-driver-nvidia-gpu", "v0.5.0", "IfNotPresent"}), "NVIDIA's v26.7.0 values L350-363")
	g.Expect(d.FeatureGate("NVMLDeviceHealthCheck")).To(BeTrue())
	g.Expect(d.ComputeDomainsEnabled()).To(BeTrue())
	port, probed := d.GPUs.KubeletPlugin.Healthcheck.ProbePort()
	g.Expect(probed).To(BeTrue())
	g.Expect(port).To(Equal(int32(52516)))
}

// NVIDIA's validator values reach the policy and shape the CUDA workload;
// those of charts before v25.10 name an image without a tag of this
// release unless they give a version: the default image runs then.
func TestNVIDIAValidatorValues(t *testing.T) {
	g := NewWithT(t)
	validator := func(args ...string) map[string]any {
		objs := template(t, args...)
		v, _, _ := unstructured.NestedMap(find(objs, "ClusterPolicy", "cluster-policy").Object, "spec", "validator")
		return v
	}
	v := validator("-f", nvidiaValuesBefore)
	g.Expect(v).NotTo(HaveKey("image"))
	g.Expect(v).NotTo(HaveKey("repository"))
	g.Expect(v).To(HaveKeyWithValue("plugin", HaveKeyWithValue("env", ContainElement(HaveKeyWithValue("name", "WITH_WORKLOAD")))))
	v = validator("-f", nvidiaValuesBefore, "--set", "validator.version=v25.3.1")
	g.Expect(v).To(HaveKeyWithValue("image", "gpu-operator-validator"))
	g.Expect(v).To(HaveKeyWithValue("version", "v25.3.1"))
	v = validator("-f", nvidiaValues, "--set", "validator.cuda.env[0].name=WITH_WORKLOAD", "--set-string", "validator.cuda.env[0].value=false")
	g.Expect(v).To(HaveKeyWithValue("repository", "nvcr.io/nvidia"))
	g.Expect(v).To(HaveKeyWithValue("cuda", HaveKeyWithValue("env", ContainElement(HaveKeyWithValue("value", "false")))))
}
