package contract

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/dradriver"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// Sources of the DRA driver's requirements: NVIDIA's manifests at
// gpu-operator v26.7.0, which ship the driver's v0.5.0 image, and the
// driver's source at its nearest published commit (v0.5.0-dev; the
// repository has no v0.5.0 tag).
const (
	draManifest   = "NVIDIA/gpu-operator@v26.7.0:manifests/state-dra-driver/0500_daemonset.yaml"
	draController = "NVIDIA/gpu-operator@v26.7.0:manifests/state-dra-driver/0600_controller-deployment.yaml"
	dra           = "kubernetes-sigs/dra-driver-nvidia-gpu@95932046:"
	draGPUMain    = dra + "cmd/gpu-kubelet-plugin/main.go"
	draGPUHealth  = dra + "cmd/gpu-kubelet-plugin/health.go"
	draCDMain     = dra + "cmd/compute-domain-kubelet-plugin/main.go"
	draCtlMain    = dra + "cmd/compute-domain-controller/main.go"
	draImage      = dra + "deployments/container/Dockerfile (L142-145: the binaries in /usr/bin)"
	draGates      = dra + "pkg/flags/featuregates.go (FEATURE_GATES: Name=bool,...)"
)

const (
	gpusCtr = dradriver.GPUContainer
	cdCtr   = dradriver.ComputeDomainContainer
)

// draPolicies are the DRA cases: every policy of the other operands (host
// drivers, GKE's paths, CRI-O), and DRA settings of NVIDIA's values file
// set (gates, pull secrets, ports), and compute domains and health checks
// off.
func draPolicies(t *testing.T) map[string]*gpuv1.ClusterPolicy {
	ps := policies(t)
	full := ps["default"].DeepCopy()
	d := &full.Spec.DRADriver
	d.ImagePullPolicy = corev1.PullAlways
	d.ImagePullSecrets = []gpuv1.ObjectName{"ngc", "mirror"}
	d.FeatureGates = map[string]bool{"PassthroughSupport": true, "MPSSupport": true, "TimeSlicingSettings": false}
	d.GPUs.KubeletPlugin.Env = []gpuv1.EnvVar{{Name: "ADDITIONAL_XIDS_TO_IGNORE", Value: "48"}, {Name: "LOG_VERBOSITY", Value: "6"}}
	d.GPUs.KubeletPlugin.Healthcheck.Port = ptr.To[int32](52516)
	d.ComputeDomains.KubeletPlugin.Env = []gpuv1.EnvVar{{Name: "KUBE_API_QPS", Value: "20"}}
	d.ComputeDomains.Controller.Env = []gpuv1.EnvVar{{Name: "MAX_NODES_PER_IMEX_DOMAIN", Value: "18"}}
	d.ComputeDomains.Controller.Resources = &gpuv1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}}
	d.ComputeDomains.KubeletPlugin.Resources = &gpuv1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}
	ps["dra-full"] = full
	bare := ps["default"].DeepCopy()
	bare.Spec.DRADriver.ComputeDomains.Enabled = ptr.To(false)
	bare.Spec.DRADriver.GPUs.KubeletPlugin.Healthcheck.Enabled = ptr.To(false)
	ps["dra-gpus-only"] = bare
	unprobed := ps["default"].DeepCopy()
	unprobed.Spec.DRADriver.ComputeDomains.KubeletPlugin.Healthcheck.Enabled = ptr.To(false)
	ps["dra-cd-unprobed"] = unprobed
	return ps
}

// draPods renders the DRA operand under every DRA case and returns the
// kubelet plugin's pod for each driver root.
func draPods(t *testing.T) []*podCase {
	t.Helper()
	var out []*podCase
	for name, cp := range draPolicies(t) {
		variants := fixture.Variants(cp)
		objs, err := dradriver.Operand{}.Render(state.RenderInput{Policy: cp, Namespace: fixture.Namespace,
			Variants: variants, DRAInUse: true})
		if err != nil {
			t.Fatalf("rendering dra-driver for the %s policy: %v", name, err)
		}
		for _, v := range variants {
			taking := 0
			for _, o := range objs {
				if ds, ok := o.(*appsv1.DaemonSet); ok && selects(ds, v) {
					taking++
					out = append(out, &podCase{policy: name, variant: v, workload: ds.Name, pod: &ds.Spec.Template.Spec,
						annotations: ds.Spec.Template.Annotations, spec: &cp.Spec})
				}
			}
			if taking != 1 {
				t.Errorf("%s policy: %d kubelet plugin DaemonSets take the nodes of %+v, want 1", name, taking, v)
			}
		}
	}
	return out
}

func cdOn(spec *gpuv1.ClusterPolicySpec) bool  { return spec.DRADriver.ComputeDomainsEnabled() }
func cdOff(spec *gpuv1.ClusterPolicySpec) bool { return !cdOn(spec) }
func passthrough(spec *gpuv1.ClusterPolicySpec) bool {
	return spec.DRADriver.FeatureGate("PassthroughSupport")
}
func gatesSet(spec *gpuv1.ClusterPolicySpec) bool { return len(spec.DRADriver.FeatureGates) > 0 }

// kubeletDir is one of the kubelet's directories under
// hostPaths.kubeletRootDir.
func kubeletDir(p *podCase, dir string) string { return path.Join(p.spec.KubeletRoot(), dir) }

// registers are the requirements the GPU and compute-domain plugins share
// to register with the kubelet and hand out devices by CDI.
func registers(ctr string) []func(*podCase) error {
	return []func(*podCase) error{
		fieldEnv(ctr, "NODE_NAME", "spec.nodeName"),
		fieldEnv(ctr, "NAMESPACE", "metadata.namespace"),
		envBy(ctr, "KUBELET_REGISTRAR_DIRECTORY_PATH", func(p *podCase) string { return kubeletDir(p, "plugins_registry") }),
		envBy(ctr, "KUBELET_PLUGINS_DIRECTORY_PATH", func(p *podCase) string { return kubeletDir(p, "plugins") }),
		hostMountBy(ctr, func(p *podCase) mount {
			return mount{host: kubeletDir(p, "plugins_registry"), at: kubeletDir(p, "plugins_registry")}
		}),
		hostMountBy(ctr, func(p *podCase) mount {
			return mount{host: kubeletDir(p, "plugins"), at: kubeletDir(p, "plugins"), propagation: corev1.MountPropagationBidirectional}
		}),
		env(ctr, "CDI_ROOT", toolkit.CDISpecDir),
		hostMount(ctr, mount{host: toolkit.CDISpecDir, at: toolkit.CDISpecDir}),
		env(ctr, "NVIDIA_VISIBLE_DEVICES", "void"),
		privileged(ctr, true),
	}
}

// seesDriver are the driver root and host mounts both plugins have.
func seesDriver(ctr string) []func(*podCase) error {
	return []func(*podCase) error{
		envBy(ctr, "NVIDIA_DRIVER_ROOT", func(p *podCase) string { return p.spec.DriverRootPath(p.variant.DriverRoot) }),
		env(ctr, "DRIVER_ROOT_CTR_PATH", "/driver-root"),
		hostMountBy(ctr, func(p *podCase) mount {
			return mount{host: toolkit.DriverRootSource(p.spec, p.variant.DriverRoot), at: "/driver-root",
				readOnly: ctr != gpusCtr, propagation: corev1.MountPropagationHostToContainer}
		}),
		hostMountBy(ctr, func(p *podCase) mount {
			return mount{host: p.spec.HostRoot(), at: "/host", readOnly: true, propagation: corev1.MountPropagationHostToContainer}
		}),
	}
}

var draDriverContract = []requirement{
	{source: draImage + "; " + draManifest + " (L157: exec gpu-kubelet-plugin -v ${LOG_VERBOSITY})",
		need:  "runs the GPU plugin at NVIDIA's verbosity",
		check: all(commandIs(gpusCtr, "gpu-kubelet-plugin", "-v", "$(LOG_VERBOSITY)"), env(gpusCtr, "LOG_VERBOSITY", "4")),
		where: func(s *gpuv1.ClusterPolicySpec) bool { return len(s.DRADriver.GPUs.KubeletPlugin.Env) == 0 }},
	{source: draGPUMain + " (--node-name and --image-name required; --namespace for its objects)",
		need:  "knows its node, its namespace and its own image, for the MPS daemons it starts",
		check: all(fieldEnv(gpusCtr, "NODE_NAME", "spec.nodeName"), fieldEnv(gpusCtr, "NAMESPACE", "metadata.namespace"), imageNameIsOwn(gpusCtr))},
	{source: draGPUMain + " (kubelet-registrar-directory-path, kubelet-plugins-directory-path); " + draManifest + " (L185-188, L218-223)",
		need:  "registers with the kubelet and serves its socket under the kubelet's root, propagated back to the host; writes CDI specs where the runtime reads them",
		check: all(registers(gpusCtr)...)},
	{source: draGPUMain + " (--host-root: fabric manager, IOMMU, modprobe); " + draManifest + " (L171-172, L229-232)",
		need: "sees the host read-only at /host", check: env(gpusCtr, "HOST_ROOT", "/host")},
	{source: draGPUMain + " (--nvidia-driver-root, the host path its CDI specs name; --container-driver-root); " +
		dra + "cmd/gpu-kubelet-plugin/sharing.go (the MPS daemon's /dev/shm under /driver-root); " +
		dra + "pkg/fabricmanager/manager.go (the fabric manager's socket under /driver-root/run); " +
		dra + "deployments/helm/dra-driver-nvidia-gpu/templates/kubeletplugin.yaml (driver-root at /driver-root, the host's / by default)",
		need:  "sees the node's driver root at /driver-root whatever it is, a host's / included, writable for the GPU plugin",
		check: all(seesDriver(gpusCtr)...)},
	{source: draManifest + " (L158-198: the env NVIDIA gives the GPU plugin alone)", need: "HOST_ROOT, IMAGE_NAME and the MPS settings are the GPU plugin's alone",
		check: all(noEnv(cdCtr, "HOST_ROOT"), noEnv(cdCtr, "IMAGE_NAME")), where: cdOn},
	{source: dra + "deployments/helm/dra-driver-nvidia-gpu/templates/kubeletplugin.yaml (SERVICE_ACCOUNT_NAME from spec.serviceAccountName); " + draGPUMain,
		need:  "runs the MPS control daemons it starts as its own ServiceAccount, not the namespace's default",
		check: fieldEnv(gpusCtr, "SERVICE_ACCOUNT_NAME", "spec.serviceAccountName")},
	{source: draGPUHealth + " (gRPC Check, services \"\" and liveness); " + draManifest + " (L189-190, L199-214)",
		need:  "is started and kept alive by its gRPC health check on the configured port",
		check: grpcHealth(gpusCtr, func(s *gpuv1.DRADriverSpec) prober { return s.GPUs.KubeletPlugin.Healthcheck }, 30)},
	{source: draGates + "; " + draManifest + " (L191-194)",
		need:  "gets its feature gates as one sorted Name=bool list",
		check: all(gates(gpusCtr), gates(cdCtr)), where: gatesSet},
	{source: draManifest + " (L191: FEATURE_GATES only when gates are set)", need: "without gates, runs the driver's defaults",
		check: noEnv(gpusCtr, "FEATURE_GATES"), where: func(s *gpuv1.ClusterPolicySpec) bool { return !gatesSet(s) }},
	{source: draManifest + " (L195-198: the user's env after NVIDIA's)", need: "takes the user's env over the operator's",
		check: env(gpusCtr, "LOG_VERBOSITY", "6"), where: func(s *gpuv1.ClusterPolicySpec) bool { return len(s.DRADriver.GPUs.KubeletPlugin.Env) > 0 }},
	{source: draManifest + " (L236-247); " + dra + "cmd/gpu-kubelet-plugin/vfio-device.go (binds GPUs to vfio-pci through sysfs)",
		need: "with PassthroughSupport, sees the host's modules and writes its sysfs",
		check: all(hostMount(gpusCtr, mount{host: "/lib/modules/", at: "/lib/modules/", readOnly: true, propagation: corev1.MountPropagationHostToContainer}),
			hostMount(gpusCtr, mount{host: "/sys/", at: "/sys/", propagation: corev1.MountPropagationBidirectional}),
			hostMount(gpusCtr, mount{host: "/proc/", at: "/proc/", propagation: corev1.MountPropagationBidirectional})),
		where: passthrough},
	{source: draGPUMain + " (IMAGE_PULL_SECRETS, IMAGE_PULL_POLICY: how the MPS control daemons it starts pull; NVIDIA's manifest sets neither)",
		need:  "hands its pull secrets and policy to the MPS daemons it starts",
		check: all(env(gpusCtr, "IMAGE_PULL_SECRETS", "ngc,mirror"), env(gpusCtr, "IMAGE_PULL_POLICY", "Always")),
		where: func(s *gpuv1.ClusterPolicySpec) bool { return len(s.DRADriver.ImagePullSecrets) > 0 }},
	{source: draManifest + " (L46: serviceAccountName); " + draGPUMain + " (publishes the node's ResourceSlices)",
		need:  "runs as the kubelet plugin's ServiceAccount, with its token",
		check: all(serviceAccount(dradriver.KubeletPluginServiceAccount), token(true))},
	{source: draImage + "; " + draManifest + " (L273, L274-312); " + draCDMain,
		need: "with compute domains, runs their plugin beside the GPU plugin, labelling the node's NVLink clique",
		check: all(append(append(registers(cdCtr), seesDriver(cdCtr)...),
			commandIs(cdCtr, "compute-domain-kubelet-plugin", "-v", "$(LOG_VERBOSITY)"),
			env(cdCtr, "HTTP_ENDPOINT", ":8081"), env(cdCtr, "GPU_CLIQUE_LABEL_ENABLED", "true"),
			grpcHealth(cdCtr, func(s *gpuv1.DRADriverSpec) prober {
				return s.ComputeDomains.KubeletPlugin.Healthcheck
			}, 10))...),
		where: cdOn},
	{source: draManifest + " (L309-312, L329-331: the user's env and resources for the compute-domain plugin)",
		need:  "takes the user's env and resources on the compute-domain plugin, not on the GPU plugin",
		check: all(env(cdCtr, "KUBE_API_QPS", "20"), noEnv(gpusCtr, "KUBE_API_QPS"), memoryLimit(cdCtr, "256Mi"), memoryLimit(gpusCtr, "")),
		where: func(s *gpuv1.ClusterPolicySpec) bool {
			return cdOn(s) && len(s.DRADriver.ComputeDomains.KubeletPlugin.Env) > 0
		}},
	{source: draManifest + " (L248: the container only with computeDomains.enabled)", need: "without compute domains, runs the GPU plugin alone",
		check: func(p *podCase) error {
			if len(p.pod.Containers) != 1 {
				return fmt.Errorf("%d containers, want gpus alone", len(p.pod.Containers))
			}
			return nil
		}, where: cdOff},
	{source: dra + "hack/kubelet-plugin-prestart.sh (links /driver-root to /driver-root-parent/<basename NVIDIA_DRIVER_ROOT>, leaves once " +
		"nvidia-smi --version answers from it); " + dra + "deployments/helm/dra-driver-nvidia-gpu/templates/kubeletplugin.yaml " +
		"(L55-85, L365-376: init-container, privileged, the root's parent DirectoryOrCreate, HostToContainer; / read-only); " +
		draImage + " (L148: the script at /usr/bin); " + dra + "cmd/gpu-kubelet-plugin/nvlib.go (exits without the driver's libraries)",
		need: "waits for the node's driver before either plugin starts, seeing a driver container's root once mounted",
		check: all(
			commandIs(dradriver.WaitForDriverContainer, "bash", "/usr/bin/kubelet-plugin-prestart.sh"),
			privileged(dradriver.WaitForDriverContainer, true),
			sameImage(dradriver.WaitForDriverContainer, gpusCtr),
			env(dradriver.WaitForDriverContainer, "NVIDIA_VISIBLE_DEVICES", "void"),
			func(p *podCase) error {
				root := toolkit.DriverRootSource(p.spec, p.variant.DriverRoot)
				m := mount{host: path.Dir(root), at: "/driver-root-parent", propagation: corev1.MountPropagationHostToContainer}
				if root == "/" {
					m = mount{host: "/", at: "/driver-root-parent", readOnly: true}
				}
				// The script finds the root under the parent by its
				// last element.
				return all(env(dradriver.WaitForDriverContainer, "NVIDIA_DRIVER_ROOT", root),
					hostMount(dradriver.WaitForDriverContainer, m))(p)
			},
			func(p *podCase) error {
				if len(p.pod.InitContainers) != 1 {
					return fmt.Errorf("init containers %d, want the wait alone", len(p.pod.InitContainers))
				}
				return nil
			})},
}

func TestDRADriverContract(t *testing.T) { checkCases(t, draPods(t), draDriverContract) }

// imageNameIsOwn checks IMAGE_NAME is the container's own image.
func imageNameIsOwn(ctr string) func(*podCase) error {
	return func(p *podCase) error {
		c, err := container(p, ctr)
		if err != nil {
			return err
		}
		return env(ctr, "IMAGE_NAME", c.Image)(p)
	}
}

// prober is a plugin's health check setting.
type prober interface{ ProbePort() (int32, bool) }

// grpcHealth checks HEALTHCHECK_PORT and the probes against the policy's
// healthcheck: -1 and no probes when it is off.
func grpcHealth(ctr string, of func(*gpuv1.DRADriverSpec) prober, livenessPeriod int32) func(*podCase) error {
	return func(p *podCase) error {
		port, on := of(&p.spec.DRADriver).ProbePort()
		if !on {
			return all(env(ctr, "HEALTHCHECK_PORT", "-1"), probe(ctr, "startup", nil), probe(ctr, "liveness", nil))(p)
		}
		is := func(threshold, period int32) func(*corev1.Probe) error {
			return func(pr *corev1.Probe) error {
				if pr.GRPC == nil || pr.GRPC.Port != port || ptr.Deref(pr.GRPC.Service, "") != "liveness" ||
					pr.FailureThreshold != threshold || pr.PeriodSeconds != period || pr.TimeoutSeconds != 10 {
					return fmt.Errorf("probe %+v, want gRPC liveness on %d, %d failures every %ds", pr, port, threshold, period)
				}
				return nil
			}
		}
		return all(env(ctr, "HEALTHCHECK_PORT", fmt.Sprint(port)),
			probe(ctr, "startup", is(600, 1)), probe(ctr, "liveness", is(3, livenessPeriod)))(p)
	}
}

// gates checks FEATURE_GATES against the policy's gates: Name=bool, by
// name, comma-separated.
func gates(ctr string) func(*podCase) error {
	return func(p *podCase) error {
		if _, err := container(p, ctr); err != nil && ctr == cdCtr && cdOff(p.spec) {
			return nil
		}
		var pairs []string
		for _, n := range slices.Sorted(maps.Keys(p.spec.DRADriver.FeatureGates)) {
			pairs = append(pairs, fmt.Sprintf("%s=%t", n, p.spec.DRADriver.FeatureGates[n]))
		}
		return env(ctr, "FEATURE_GATES", strings.Join(pairs, ","))(p)
	}
}

func serviceAccount(name string) func(*podCase) error {
	return func(p *podCase) error {
		if p.pod.ServiceAccountName != name {
			return fmt.Errorf("serviceAccountName %q, want %q", p.pod.ServiceAccountName, name)
		}
		return nil
	}
}

// memoryLimit checks a container's memory limit; "" asks for none.
func memoryLimit(ctr, want string) func(*podCase) error {
	return func(p *podCase) error {
		c, err := container(p, ctr)
		if err != nil {
			return err
		}
		got, ok := c.Resources.Limits[corev1.ResourceMemory]
		switch {
		case want == "" && ok:
			return fmt.Errorf("%s has a memory limit %s", ctr, got.String())
		case want != "" && (!ok || got.Cmp(resource.MustParse(want)) != 0):
			return fmt.Errorf("%s memory limit %v, want %s", ctr, c.Resources.Limits, want)
		}
		return nil
	}
}
