package gating

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// devicePluginConfig decides which configuration of devicePlugin.config's
// ConfigMap the node's device plugin and GFD run, "" for the policy's
// default: the node's nvidia.com/device-plugin.config label, else its
// driver pool's devicePluginConfig, else the default. A choice the
// operator cannot run (no ConfigMap, a name it does not hold, a name no
// label can carry) is told in an event, and the node keeps the
// configuration it runs: a typo in a label takes no GPU off a node.
func (d *decision) devicePluginConfig() string {
	spec := &d.in.Policy.Spec
	cfg := spec.DevicePlugin.Config
	current := d.in.Node.Labels[gpuv1.LabelDevicePluginConfigInUse]
	want, from := d.in.Node.Labels[gpuv1.LabelDevicePluginConfig], "the node's label "+gpuv1.LabelDevicePluginConfig
	if want == "" {
		for _, p := range spec.Driver.NodePools {
			if p.Name == d.in.DriverPool && p.DevicePluginConfig != "" {
				want, from = p.DevicePluginConfig, fmt.Sprintf("driver.nodePools[%s].devicePluginConfig", p.Name)
			}
		}
	}
	if want == "" || (cfg != nil && want == cfg.Default) {
		return ""
	}
	var problem string
	switch {
	case cfg == nil || cfg.Name == "":
		problem = "devicePlugin.config.name names no ConfigMap of configurations: set it"
	case len(validation.IsValidLabelValue(want)) > 0:
		problem = "the name is no label value (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit): rename the configuration"
	case d.in.DevicePluginConfigs == nil:
		return current // the ConfigMap could not be read: nothing changes
	case len(d.in.DevicePluginConfigs) == 0:
		problem = fmt.Sprintf("ConfigMap %s, in the operator's namespace, does not exist or holds no configuration", cfg.Name)
	case !slices.Contains(d.in.DevicePluginConfigs, want):
		problem = fmt.Sprintf("ConfigMap %s holds no such configuration; it holds: %s", cfg.Name, strings.Join(d.in.DevicePluginConfigs, ", "))
	}
	if problem != "" {
		keeps := "the default"
		if current != "" {
			keeps = current
		}
		msg := fmt.Sprintf("%s names device plugin configuration %q: %s. The node keeps %s.", from, want, problem, keeps)
		// On the node for as long as it holds, and told once: events go
		// with the writes of what the operator keeps on the node.
		d.result.Annotations[AnnotationDevicePluginConfigRefused] = msg
		d.event(true, "DevicePluginConfigInvalid", "%s", msg)
		return current
	}
	return want
}

// AnnotationDevicePluginConfigRefused says why the node does not run the
// device plugin configuration it is asked to; absent when it does.
const AnnotationDevicePluginConfigRefused = gpuv1.OperatorAnnotationPrefix + "device-plugin-config-refused"
