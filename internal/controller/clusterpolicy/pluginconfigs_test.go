package clusterpolicy

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/apply"
	"github.com/gpu-operator/gpu-operator/internal/state/deviceplugin"
)

// A DaemonSet whose pods read the validated device plugin configurations
// is not applied while the API server refuses those: its new template
// would start pods on the old files. Everything else is, and everything
// is kept from pruning.
func TestReadersWaitForTheValidatedConfigs(t *testing.T) {
	g := NewWithT(t)
	r, applied := applying(t, func(kind string) error {
		if kind == "ConfigMap" {
			return errors.New("admission webhook refused it")
		}
		return nil
	})
	_, _, reads := deviceplugin.ConfigSettings(&gpuv1.ClusterPolicy{Spec: gpuv1.ClusterPolicySpec{DevicePlugin: gpuv1.DevicePluginSpec{
		Config: &gpuv1.DevicePluginConfig{Name: "sharing"}}}}, "ts-4")
	wanted := []client.Object{
		deviceplugin.ValidatedConfigs(testPolicy, "gpu-operator", map[string]string{"ts-4": "version: v1\n"}),
		testDaemonSet("plugin", "s", reads...),
		testDaemonSet("exporter", "s"),
	}
	keep := map[apply.Key]bool{}
	_, errs := r.applyWanted(context.Background(), wanted, keep, nil)
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0]).To(MatchError(ContainSubstring("refused")))
	g.Expect(*applied).To(Equal([]string{"exporter"}), "the plugin waits for its files")
	g.Expect(keep).To(HaveLen(3), "nothing of what waits is pruned")
}
