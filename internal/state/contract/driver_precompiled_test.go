package contract

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/driver"
)

// The precompiled drivers' DaemonSets and pods.
var precompiledContract = []requirement{
	{source: precompiledImages, need: "with usePrecompiled, one DaemonSet per kernel and OS, on the nodes whose kernel label names it, " +
		"its image tagged <branch>-<kernel>-<os> with NFD's kernel value as it is",
		check: precompiledImage, where: isPrecompiled},
	{source: precompiledScript, need: "with usePrecompiled, nothing is built or fetched: no repository, certificate or subscription " +
		"is mounted, and the driver is probed from 5 s on",
		check: all(noVolume("repo-config"), noVolume("cert-config"), noHostPath("/etc/pki/entitlement"),
			func(p *podCase) error {
				c, err := container(p, driver.ContainerName)
				if err != nil {
					return err
				}
				if d := c.StartupProbe.InitialDelaySeconds; d != 5 {
					return fmt.Errorf("the startup probe starts after %d s, want 5", d)
				}
				return nil
			}),
		where: isPrecompiled},
}

func TestPrecompiledDriverContract(t *testing.T) { checkAll(t, state.Driver, precompiledContract) }

// The precompiled images' sources: how NVIDIA names and places them, and
// what their script does.
const (
	precompiledImages = "NVIDIA/gpu-operator@v26.7.0:api/nvidia/v1alpha1/nvidiadriver_types.go (GetPrecompiledImagePath: " +
		"<repository>/<image>:<version>-<kernel>-<os>); internal/state/nodepool.go (one pool per OS and " +
		"feature.node.kubernetes.io/kernel-version.full value)"
	precompiledScript = "NVIDIA/gpu-driver-container@d10b41a:ubuntu22.04/precompiled/Dockerfile (ENTRYPOINT nvidia-driver init), " +
		"ubuntu22.04/precompiled/nvidia-driver (_install_driver: linux-modules-nvidia-<branch>-server[-open]-$(uname -r) from the " +
		"image's own repository); NVIDIA/gpu-operator@v26.7.0:internal/state/driver.go (getDefaultStartupProbe: 5 s when precompiled), " +
		"internal/state/driver_volumes.go (no repository, certificate or entitlement volumes when precompiled)"
)

func isPrecompiled(spec *gpuv1.ClusterPolicySpec) bool { return spec.Driver.IsPrecompiled() }

// precompiledImage checks that the pod's image is the one built for the
// kernel and OS its DaemonSet selects.
func precompiledImage(p *podCase) error {
	c, err := container(p, driver.ContainerName)
	if err != nil {
		return err
	}
	picked := map[string]string{}
	for _, term := range p.pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, r := range term.MatchExpressions {
			if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				picked[r.Key] = r.Values[0]
			}
		}
	}
	kernel := picked[gpuv1.LabelDriverKernel]
	if kernel == "" {
		return fmt.Errorf("the DaemonSet does not select nodes by %s", gpuv1.LabelDriverKernel)
	}
	want := fmt.Sprintf(":%s-%s-%s%s", p.spec.Driver.Version, kernel, picked[state.LabelOSReleaseID], picked[state.LabelOSVersionID])
	if !strings.HasSuffix(c.Image, want) {
		return fmt.Errorf("image %s, want one tagged %s", c.Image, strings.TrimPrefix(want, ":"))
	}
	return nil
}
