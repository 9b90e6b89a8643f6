package contract

import (
	"fmt"

	"testing"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/migconfig"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/migmanager"
)

// Sources of mig-manager's requirements: mig-parted v0.12.1, and the
// manifests NVIDIA's operator runs it with.
const (
	migMain       = "NVIDIA/mig-parted@v0.12.1:cmd/nvidia-mig-manager/main.go"
	migScript     = "NVIDIA/mig-parted@v0.12.1:deployments/container/reconfigure-mig.sh"
	migDaemonSet  = "NVIDIA/gpu-operator@v25.3.1:assets/state-mig-manager/0600_daemonset.yaml"
	migEntrypoint = "NVIDIA/gpu-operator@v25.3.1:assets/state-mig-manager/0420_configmap.yaml (sources the validator's driver-ready file)"
	migImage      = "NVIDIA/mig-parted@v0.12.1:deployments/container/Dockerfile.ubuntu"
	migRuntime    = "NVIDIA/gpu-operator@v25.3.1:controllers/object_controls.go (setRuntimeClassName on mig-manager's DaemonSet)"
)

const mm = migmanager.ContainerName

var migManagerContract = []requirement{
	{source: migMain + " (flags --node-name, --config-file: env NODE_NAME, CONFIG_FILE, both required)",
		need: "knows its node and reads the configuration file from the ConfigMap",
		check: all(fieldEnv(mm, "NODE_NAME", "spec.nodeName"),
			env(mm, "CONFIG_FILE", "/mig-parted-config/"+migconfig.FileKey),
			configMapAtBy(mm, "/mig-parted-config", func(s *gpuv1.ClusterPolicySpec) string { return s.MIGManager.ConfigMapName() }))},
	{source: migMain + " (--gpu-clients-file, env GPU_CLIENTS_FILE); " + migDaemonSet,
		need: "reads the host's GPU clients to stop from their ConfigMap",
		check: all(env(mm, "GPU_CLIENTS_FILE", "/gpu-clients/"+migmanager.GPUClientsKey),
			configMapAtBy(mm, "/gpu-clients", func(s *gpuv1.ClusterPolicySpec) string { return s.MIGManager.GPUClientsConfigMapName() }))},
	{source: migImage + " (ENV NVIDIA_VISIBLE_DEVICES=all, NVIDIA_MIG_CONFIG_DEVICES=all, NVIDIA_DRIVER_CAPABILITIES=utility; NVML loaded by name); " + migRuntime,
		need:  "gets NVML from the NVIDIA runtime: the RuntimeClass where the runtime has the NVIDIA handler, whatever the runtime's default",
		check: runtimeClass},
	{source: migMain + " (--nvidia-driver-root, env NVIDIA_DRIVER_ROOT; --driver-root-ctr-path, env DRIVER_ROOT_CTR_PATH: read only with --cdi-enabled, getPathsForCDI); " + migEntrypoint,
		need: "is told the node's driver root, for CDI: the driver container's at /driver-root, the host's at /host",
		check: all(
			envBy(mm, "NVIDIA_DRIVER_ROOT", func(p *podCase) string {
				if p.variant.DriverRoot == gpuv1.DriverRootHost {
					return "/"
				}
				return p.variant.DriverRoot.Path()
			}),
			envBy(mm, "DRIVER_ROOT_CTR_PATH", func(p *podCase) string {
				if p.variant.DriverRoot == gpuv1.DriverRootHost {
					return "/host"
				}
				return "/driver-root"
			}),
			func(p *podCase) error {
				if p.variant.DriverRoot == gpuv1.DriverRootHost {
					return nil // the host's / is mounted at /host
				}
				return hostMount(mm, mount{host: p.variant.DriverRoot.Path(), at: "/driver-root", readOnly: true,
					propagation: corev1.MountPropagationHostToContainer})(p)
			})},
	{source: migEntrypoint + " (WITH_SHUTDOWN_HOST_GPU_CLIENTS=$IS_HOST_DRIVER)",
		need:  "stops the host's GPU services only beside a host driver",
		check: envBy(mm, "WITH_SHUTDOWN_HOST_GPU_CLIENTS", func(p *podCase) string { return fmt.Sprint(p.variant.DriverRoot == gpuv1.DriverRootHost) })},
	{source: migMain + " (--host-root-mount, default /host); " + migScript + " (chroot ${HOST_ROOT_MOUNT} systemctl, reboot)",
		need: "reaches the host's / to stop its services and reboot, and /sys to reset GPUs, privileged in the host's PID namespace",
		check: all(hostMount(mm, mount{host: "/", at: "/host", propagation: corev1.MountPropagationHostToContainer}),
			hostMount(mm, mount{host: "/sys", at: "/sys"}), privileged(mm, true), hostPID(true))},
	{source: migScript + " (kubectl label node, kubectl wait/delete pods); " + migDaemonSet + " (serviceAccountName)",
		need:  "talks to the API server with its ServiceAccount's token",
		check: token(true)},
	{source: migMain + " (the node informer's add event applies the label it finds)",
		need:  "runs only where the operator lets an apply attempt start, so that a pod is an attempt",
		check: gated(migmanager.ApplyGate)},
}

func TestMIGManagerContract(t *testing.T) { checkAll(t, state.MIGManager, migManagerContract) }

// configMapAtBy checks the ConfigMap the policy names is mounted
// read-only at a path.
func configMapAtBy(ctr, at string, name func(*gpuv1.ClusterPolicySpec) string) func(*podCase) error {
	return func(p *podCase) error { return configMapAt(ctr, name(p.spec), at)(p) }
}

func token(want bool) func(*podCase) error {
	return func(p *podCase) error {
		got := p.pod.AutomountServiceAccountToken != nil && *p.pod.AutomountServiceAccountToken
		if got != want {
			return fmt.Errorf("automountServiceAccountToken=%v, want %v", got, want)
		}
		return nil
	}
}

// gated checks the pod's node affinity requires a node selector
// requirement.
func gated(req corev1.NodeSelectorRequirement) func(*podCase) error {
	return func(p *podCase) error {
		aff := p.pod.Affinity
		if aff != nil && aff.NodeAffinity != nil && aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			for _, term := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
				for _, r := range term.MatchExpressions {
					if r.Key == req.Key && r.Operator == req.Operator && fmt.Sprint(r.Values) == fmt.Sprint(req.Values) {
						return nil
					}
				}
			}
		}
		return fmt.Errorf("the node affinity does not require %s %s %v", req.Key, req.Operator, req.Values)
	}
}
