package crd

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
)

// draPool is a driver pool of the given mode, with extra fields.
func draPool(mode string, extra map[string]any) []any {
	pool := map[string]any{"name": "nvl72", "nodeSelector": map[string]any{"rack": "nvl72"}, "allocationMode": mode}
	for k, v := range extra {
		pool[k] = v
	}
	return []any{pool}
}

// The allocation-mode and DRA-driver settings a person can get wrong, each
// refused with the field and the fix. Several are the DRA driver's own
// startup checks (pkg/featuregates/featuregates.go at
// kubernetes-sigs/dra-driver-nvidia-gpu 95932046, L252-279), moved to the
// API server so that a bad gate fails at apply, not on every node.
func draInvalidCases() map[string]invalidCase {
	return map[string]invalidCase{
		"an unknown allocation mode": {
			path: p("driver", "allocationMode"), value: "mig",
			field: "spec.driver.allocationMode", wants: []string{`"device-plugin", "dra"`},
		},
		"a dra pool with a device plugin configuration": {
			path: p("driver", "nodePools"), value: draPool("dra", map[string]any{"devicePluginConfig": "ts-4"}),
			field: "spec.driver.nodePools", wants: []string{"runs no device plugin", "draDriver.featureGates"},
		},
		"a pool inheriting dra with a device plugin configuration": {
			path: p("driver"), value: map[string]any{"allocationMode": "dra",
				"nodePools": []any{map[string]any{"name": "a", "nodeSelector": map[string]any{"g": "a"}, "devicePluginConfig": "ts-4"}}},
			field: "spec.driver.nodePools", wants: []string{"runs no device plugin"},
		},
		"health checks with dynamic MIG": {
			path: p("draDriver", "featureGates"), value: map[string]any{"NVMLDeviceHealthCheck": true, "DynamicMIG": true},
			field: "spec.draDriver.featureGates", wants: []string{"NVMLDeviceHealthCheck and DynamicMIG or PassthroughSupport"},
		},
		"health checks with passthrough": {
			path: p("draDriver", "featureGates"), value: map[string]any{"NVMLDeviceHealthCheck": true, "PassthroughSupport": true},
			field: "spec.draDriver.featureGates", wants: []string{"NVMLDeviceHealthCheck and DynamicMIG or PassthroughSupport"},
		},
		"dynamic MIG with MPS": {
			path: p("draDriver", "featureGates"), value: map[string]any{"DynamicMIG": true, "MPSSupport": true},
			field: "spec.draDriver.featureGates", wants: []string{"DynamicMIG and PassthroughSupport or MPSSupport"},
		},
		"cliques, on by default, without DNS names": {
			path: p("draDriver", "featureGates"), value: map[string]any{"IMEXDaemonsWithDNSNames": false},
			field: "spec.draDriver.featureGates", wants: []string{"with IMEXDaemonsWithDNSNames=false set ComputeDomainCliques=false too"},
		},
		"device metadata without passthrough": {
			path: p("draDriver", "featureGates"), value: map[string]any{"DeviceMetadata": true},
			field: "spec.draDriver.featureGates", wants: []string{"DeviceMetadata needs PassthroughSupport=true"},
		},
		"a gate the driver does not know": {
			path: p("draDriver", "featureGates"), value: map[string]any{"MPSSupport": true, "GPUPartitioning": true},
			field: "spec.draDriver.featureGates", wants: []string{"stops at start on a feature gate it does not know"},
		},
		"both plugins' health on one port": {
			path: p("draDriver", "computeDomains", "kubeletPlugin", "healthcheck", "port"), value: int64(51516),
			field: "spec.draDriver.computeDomains.kubeletPlugin.healthcheck.port", wants: []string{"ports must differ"},
		},
		"health on the metrics port": {
			path: p("draDriver", "gpus", "kubeletPlugin", "healthcheck", "port"), value: int64(8081),
			field: "spec.draDriver.gpus.kubeletPlugin.healthcheck.port", wants: []string{"serve the kubelet plugin's metrics"},
		},
		"an image name with a path": {
			path: p("draDriver", "image"), value: "nvidia/dra-driver-nvidia-gpu",
			field: "spec.draDriver.image", wants: []string{"should match"},
		},
		"a health check on port 0": {
			path: p("draDriver", "computeDomains", "kubeletPlugin", "healthcheck", "port"), value: int64(0),
			field: "spec.draDriver.computeDomains.kubeletPlugin.healthcheck.port", wants: []string{"greater than or equal to 1"},
		},
		"a request over its limit": {
			path:  p("draDriver", "computeDomains", "controller", "resources"),
			value: map[string]any{"requests": map[string]any{"memory": "1Gi"}, "limits": map[string]any{"memory": "512Mi"}},
			field: "spec.draDriver.computeDomains.controller.resources", wants: []string{"every request must be less than or equal to the limit"},
		},
		// hack/sync-generated.sh bounds quantities, which keeps the
		// ClusterPolicy's CEL rules within the CRD's cost budget.
		"a quantity of 65 characters": {
			path: p("draDriver", "gpus", "kubeletPlugin", "resources", "limits", "memory"), value: strings.Repeat("1", 65),
			field: "spec.draDriver.gpus.kubeletPlugin.resources.limits.memory", wants: []string{"may not be more than 64"},
		},
		"an unknown pull policy": {
			path: p("draDriver", "imagePullPolicy"), value: "Sometimes",
			field: "spec.draDriver.imagePullPolicy", wants: []string{`"Always", "IfNotPresent", "Never"`},
		},
	}
}

func TestInvalidDRASettingsAreRejected(t *testing.T) {
	i := 0
	for name, tc := range draInvalidCases() {
		i++
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			obj := validPolicy(fmt.Sprintf("invalid-dra-%d", i))
			spec := obj.Object["spec"].(map[string]any)
			g.Expect(unstructured.SetNestedField(spec, tc.value, tc.path...)).To(Succeed())

			err := k8sClient.Create(context.Background(), obj, client.DryRunAll)
			g.Expect(err).To(HaveOccurred(), "the API server accepted %s = %v", tc.field, tc.value)
			g.Expect(apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)).To(BeTrue(), "unexpected error kind: %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.field))
			for _, want := range tc.wants {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
		})
	}
}

// CDI off with a DRA pool is refused: the plugin hands GPUs over as CDI
// specs (CDI_ROOT=/var/run/cdi in NVIDIA's
// manifests/state-dra-driver/0500_daemonset.yaml at gpu-operator v26.7.0).
// The rule is checked with the pool's mode valid otherwise, so the test
// keeps its meaning once dra is served.
func TestDRANeedsCDI(t *testing.T) {
	g := NewWithT(t)
	obj := validPolicy("dra-no-cdi")
	spec := obj.Object["spec"].(map[string]any)
	g.Expect(unstructured.SetNestedField(spec, false, "cdi", "enabled")).To(Succeed())
	g.Expect(unstructured.SetNestedSlice(spec, draPool("dra", nil), "driver", "nodePools")).To(Succeed())
	err := k8sClient.Create(context.Background(), obj, client.DryRunAll)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("spec.cdi.enabled"))
	g.Expect(err.Error()).To(ContainSubstring("allocation mode dra needs cdi.enabled=true"))
	g.Expect(unstructured.SetNestedField(spec, true, "cdi", "enabled")).To(Succeed())
	g.Expect(k8sClient.Create(context.Background(), obj, client.DryRunAll)).To(Succeed(), "a dra pool with CDI")
	g.Expect(unstructured.SetNestedField(spec, "dra", "driver", "allocationMode")).To(Succeed())
	g.Expect(k8sClient.Create(context.Background(), obj, client.DryRunAll)).To(Succeed(), "every pool in dra, with CDI")

	// A device-plugin pool runs without CDI, as before modes existed.
	obj = validPolicy("device-plugin-no-cdi")
	spec = obj.Object["spec"].(map[string]any)
	g.Expect(unstructured.SetNestedField(spec, false, "cdi", "enabled")).To(Succeed())
	g.Expect(unstructured.SetNestedSlice(spec, draPool("device-plugin", nil), "driver", "nodePools")).To(Succeed())
	g.Expect(k8sClient.Create(context.Background(), obj, client.DryRunAll)).To(Succeed())
}

// NVIDIA's GPUCluster draDriver section, as its v26.7.0 chart renders it
// (deployments/gpu-operator/templates/gpucluster.yaml with values.yaml
// L581-604, the feature gates its comment suggests), applies unchanged as
// the ClusterPolicy's draDriver.
func TestNVIDIAsDRADriverSectionApplies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	obj := validPolicy("nvidia-dra-section")
	spec := obj.Object["spec"].(map[string]any)
	spec["draDriver"] = map[string]any{
		"repository": "nvcr.io/nvidia", "image": "dra-driver-nvidia-gpu", "version": "v0.5.0",
		"imagePullPolicy": "IfNotPresent", "imagePullSecrets": []any{"ngc-secret"},
		"featureGates": map[string]any{"MPSSupport": true, "NVMLDeviceHealthCheck": true},
		"gpus": map[string]any{"kubeletPlugin": map[string]any{
			"env":         []any{map[string]any{"name": "ADDITIONAL_XIDS_TO_IGNORE", "value": "48"}},
			"resources":   map[string]any{"limits": map[string]any{"memory": "512Mi"}},
			"healthcheck": map[string]any{"enabled": false},
		}},
		"computeDomains": map[string]any{
			"enabled":       true,
			"controller":    map[string]any{"env": []any{map[string]any{"name": "MAX_NODES_PER_IMEX_DOMAIN", "value": "18"}}},
			"kubeletPlugin": map[string]any{"healthcheck": map[string]any{"port": int64(52515)}},
		},
	}
	g.Expect(k8sClient.Create(ctx, obj)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, obj) })

	got := &gpuv1.ClusterPolicy{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), got)).To(Succeed())
	d := got.Spec.DRADriver
	_, gpuProbed := d.GPUs.KubeletPlugin.Healthcheck.ProbePort()
	g.Expect(gpuProbed).To(BeFalse(), "healthcheck.enabled=false turns the gpus container's probes off")
	port, cdProbed := d.ComputeDomains.KubeletPlugin.Healthcheck.ProbePort()
	g.Expect(cdProbed).To(BeTrue(), "a port without enabled is enabled by default")
	g.Expect(port).To(Equal(int32(52515)))
	g.Expect(d.ComputeDomainsEnabled()).To(BeTrue())
	g.Expect(d.FeatureGate("NVMLDeviceHealthCheck")).To(BeTrue())
	g.Expect(got.Spec.IgnoredFields()).To(BeEmpty(), "every draDriver field is one the operator acts on")
}

// An NVIDIADriver names its pool's mode, one of the two.
func TestNVIDIADriverAllocationMode(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	nvd := &gpuv1alpha1.NVIDIADriver{}
	nvd.Name = "modes"
	for _, mode := range []gpuv1.AllocationMode{gpuv1.AllocationDRA, gpuv1.AllocationDevicePlugin} {
		nvd.Spec.AllocationMode = mode
		g.Expect(k8sClient.Create(ctx, nvd, client.DryRunAll)).To(Succeed(), "mode %s", mode)
	}
	nvd.Spec.AllocationMode = gpuv1.AllocationNone
	err := k8sClient.Create(ctx, nvd, client.DryRunAll)
	g.Expect(err).To(HaveOccurred(), "none is the switch's, never a person's")
	g.Expect(err.Error()).To(ContainSubstring("spec.allocationMode"))
}

// Gate sets the DRA driver starts with are accepted, its logging gates
// included.
func TestValidDRAGatesAreAccepted(t *testing.T) {
	for name, gates := range map[string]map[string]any{
		"both IMEX gates off":           {"IMEXDaemonsWithDNSNames": false, "ComputeDomainCliques": false},
		"device metadata with passthru": {"DeviceMetadata": true, "PassthroughSupport": true},
		"MPS with health checks":        {"MPSSupport": true, "NVMLDeviceHealthCheck": true},
		"dynamic MIG, health off":       {"DynamicMIG": true, "NVMLDeviceHealthCheck": false},
		"a logging gate":                {"ContextualLogging": true, "LoggingBetaOptions": false},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			obj := validPolicy("valid-dra-gates")
			spec := obj.Object["spec"].(map[string]any)
			g.Expect(unstructured.SetNestedField(spec, gates, "draDriver", "featureGates")).To(Succeed())
			g.Expect(k8sClient.Create(context.Background(), obj, client.DryRunAll)).To(Succeed())
		})
	}
}
