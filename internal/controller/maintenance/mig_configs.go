package maintenance

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/migconfig"
)

// migConfigs is the policy's file of MIG configurations, read once per look.
type migConfigs struct {
	file *migconfig.File
	// problem says why the file cannot be used; "" when it can.
	problem string
}

// partitions reports whether a configuration creates MIG devices, which
// a reboot or a driver reload destroys; true when the file cannot be
// read, so that a loss is never missed.
func (c migConfigs) partitions(config string) bool {
	return c.file == nil || c.file.Partitions(config)
}

// readMIGConfigs reads migManager.config's ConfigMap from the cache. A
// ConfigMap that does not exist or does not parse refuses every
// configuration, naming the field to fix.
func (r *Reconciler) readMIGConfigs(ctx context.Context, spec *gpuv1.MIGManagerSpec) (migConfigs, error) {
	name := spec.ConfigMapName()
	cm := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return migConfigs{problem: fmt.Sprintf("ConfigMap %s (migManager.config.name), in the operator's namespace, does not exist", name)}, nil
	case err != nil:
		return migConfigs{}, fmt.Errorf("reading ConfigMap %s: %w", name, err)
	}
	data, ok := cm.Data[migconfig.FileKey]
	if !ok {
		return migConfigs{problem: fmt.Sprintf("ConfigMap %s (migManager.config.name) has no %s", name, migconfig.FileKey)}, nil
	}
	f, err := migconfig.Parse(data)
	if err != nil {
		return migConfigs{problem: fmt.Sprintf("ConfigMap %s (migManager.config.name), %s: %v", name, migconfig.FileKey, err)}, nil
	}
	return migConfigs{file: f}, nil
}

// refusal says why a node's configuration cannot be applied, "" when it
// can: the file's trouble, a name it does not hold, on a node in
// allocation mode dra what the DRA driver cannot serve (draRefusal), or a
// layout the MIG strategy cannot advertise.
func (c migConfigs) refusal(cp *gpuv1.ClusterPolicy, n *corev1.Node, config string) string {
	if config == "" {
		return ""
	}
	if c.problem != "" {
		return c.problem
	}
	from := "the node's label " + gpuv1.LabelMIGConfig
	if n.Annotations[gpuv1.AnnotationMIGConfigWritten] == config {
		from = "its driver pool's migConfig (or migManager.config.default)"
	}
	layout, err := c.file.LayoutOf(config, max(knownGPUs(n), 1))
	if err != nil {
		return fmt.Sprintf("%s names MIG configuration %q, which ConfigMap %s (migManager.config.name) does not hold; it holds: %s",
			from, config, cp.Spec.MIGManager.ConfigMapName(), c.file.Holds())
	}
	if gating.AllocationModeOf(n) == gpuv1.AllocationDRA {
		if why := c.draRefusal(config, layout); why != "" {
			return fmt.Sprintf("%s names MIG configuration %q, which %s. Change it on nodes in allocation mode dra, "+
				"or use allocation mode device-plugin", from, config, why)
		}
	}
	if _, err := layout.Resources(string(cp.Spec.MIG.StrategyOrDefault())); err != nil && !c.file.Filtered(config) {
		return fmt.Sprintf("MIG configuration %q under mig.strategy %s: %v", config, cp.Spec.MIG.StrategyOrDefault(), err)
	}
	return ""
}

// draRefusal says why NVIDIA's DRA driver cannot serve a configuration,
// "" when it can: it stops at its start on a MIG device whose profile
// splits its GPU instance, whichever GPU model's entry names it, and
// publishes no device for a GPU in MIG mode without MIG devices, so the
// node's GPUs are never all served (kubernetes-sigs/dra-driver-nvidia-gpu
// 95932046, cmd/gpu-kubelet-plugin/nvlib.go: getGpuInfo, getMigDevices,
// enumerateAllPossibleDevices). What a device filter leaves depends on
// the GPU model, so only the profiles of such a configuration are read.
func (c migConfigs) draRefusal(config string, l migconfig.Layout) string {
	for _, profile := range c.file.ProfilesOf(config) {
		if migconfig.SplitsGPUInstance(profile) {
			return fmt.Sprintf("creates MIG devices of profile %s, whose compute instances do not fill its GPU instance: "+
				"the DRA driver knows no such profile and does not start", profile)
		}
	}
	if l.EmptyMIG > 0 && !c.file.Filtered(config) {
		return "leaves GPUs in MIG mode without MIG devices: the DRA driver publishes nothing for them, " +
			"so the node's GPUs are never all served"
	}
	return ""
}
