package state

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// A device plugin configuration names its DaemonSets after "-c-": as it is
// when short and lower case, by a hash otherwise; no name reads as
// another dimension's, and every name stays a label value, the longest
// (host driver, docker) included.
func TestConfigSuffix(t *testing.T) {
	g := NewWithT(t)
	longest := "nvidia-device-plugin-daemonset"
	for name, want := range map[string]string{
		"ts-4":         "-c-ts-4",
		"crio":         "-c-crio",
		"timeslice8":   "-c-timeslice8",
		"time-slicing": "-c-",
		"H200_MPS.x2":  "-c-",
		"a.b":          "-c-",
	} {
		v := Variant{DriverRoot: gpuv1.DriverRootHost, Runtime: gpuv1.RuntimeDocker, DevicePluginConfig: name}
		g.Expect(v.Suffix()).To(HavePrefix("-host-driver-docker" + want))
		g.Expect(validation.IsValidLabelValue(longest+v.Suffix())).To(BeEmpty(), "%s", name)
		g.Expect(validation.IsDNS1123Subdomain(longest+v.Suffix())).To(BeEmpty(), "%s", name)
	}
	g.Expect(Variant{DevicePluginConfig: "H200_MPS.x2"}.Suffix()).NotTo(Equal(Variant{DevicePluginConfig: "H200_MPS.x3"}.Suffix()))
}

// The default configuration's DaemonSets take the nodes without the
// label, so that a configuration coming into use changes none of them;
// another's take only its nodes; operands that do not read the
// configuration are not gated on it at all.
func TestConfigRequirements(t *testing.T) {
	g := NewWithT(t)
	def := Variant{DriverRoot: gpuv1.DriverRootContainer, Runtime: gpuv1.RuntimeContainerd}
	withConfig := Dimensions{DriverRoot: true, Runtime: true, DevicePluginConfig: true}
	g.Expect(def.Requirements(def, withConfig)).To(ContainElement(corev1.NodeSelectorRequirement{
		Key: gpuv1.LabelDevicePluginConfigInUse, Operator: corev1.NodeSelectorOpDoesNotExist}))
	other := def
	other.DevicePluginConfig = "ts-4"
	g.Expect(other.Requirements(def, withConfig)).To(ContainElement(corev1.NodeSelectorRequirement{
		Key: gpuv1.LabelDevicePluginConfigInUse, Operator: corev1.NodeSelectorOpIn, Values: []string{"ts-4"}}))
	for _, r := range def.Requirements(def, Dimensions{DriverRoot: true, Runtime: true}) {
		g.Expect(r.Key).NotTo(Equal(gpuv1.LabelDevicePluginConfigInUse))
	}

	v, ok := VariantOfLabels(map[string]string{gpuv1.LabelDriverRoot: "container", gpuv1.LabelContainerRuntime: "containerd",
		gpuv1.LabelDevicePluginConfigInUse: "ts-4"})
	g.Expect(ok).To(BeTrue())
	g.Expect(v).To(Equal(other))
	g.Expect(Dimensions{Runtime: true}.Project(v)).To(Equal(Variant{Runtime: gpuv1.RuntimeContainerd}))
}
