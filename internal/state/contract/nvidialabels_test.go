package contract

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/dradriver"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// nvidiaLabels are the labels NVIDIA's operator gives each operand's
// workloads and pods, which NVIDIA users select pods by (kubectl get pods
// -l app=nvidia-driver-daemonset, NVIDIA's must-gather and upgrade
// controller by app.kubernetes.io/component=nvidia-driver).
var nvidiaLabels = map[state.Name]struct {
	source string
	labels map[string]string
}{
	state.Driver: {source: gpuOp + "assets/state-driver/0500_daemonset.yaml (metadata and template labels)",
		labels: map[string]string{"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver"}},
	state.ContainerToolkit: {source: gpuOp + "assets/state-container-toolkit/0500_daemonset.yaml",
		labels: map[string]string{"app": "nvidia-container-toolkit-daemonset"}},
	state.DevicePlugin: {source: gpuOp + "assets/state-device-plugin/0500_daemonset.yaml",
		labels: map[string]string{"app": "nvidia-device-plugin-daemonset"}},
	state.MPSControlDaemon: {source: gpuOp + "assets/state-mps-control-daemon/0400_daemonset.yaml",
		labels: map[string]string{"app": "nvidia-device-plugin-mps-control-daemon"}},
	state.MIGManager: {source: gpuOp + "assets/state-mig-manager/0600_daemonset.yaml",
		labels: map[string]string{"app": "nvidia-mig-manager"}},
	state.DCGM: {source: gpuOp + "assets/state-dcgm/0400_dcgm.yml",
		labels: map[string]string{"app": "nvidia-dcgm"}},
	state.DCGMExporter: {source: gpuOp + "assets/state-dcgm-exporter/0800_daemonset.yaml",
		labels: map[string]string{"app": "nvidia-dcgm-exporter"}},
	state.GPUFeatureDiscovery: {source: gpuOp + "assets/gpu-feature-discovery/0500_daemonset.yaml",
		labels: map[string]string{"app": "gpu-feature-discovery"}},
	state.DRADriver: {source: gpuOp + "manifests/state-dra-driver/0500_daemonset.yaml, 0600_controller-deployment.yaml",
		labels: map[string]string{"app": dradriver.KubeletPluginName}},
}

const gpuOp = "NVIDIA/gpu-operator@v26.7.0:"

// Every operand workload and pod carries NVIDIA's labels, beside ours; an
// NVIDIADriver's driver is app=<its DaemonSet's name>, as at NVIDIA
// (manifests/state-driver/0500_daemonset.yaml, internal/state/driver.go
// getDriverAppName), so that app=nvidia-driver-daemonset finds only a
// ClusterPolicy's drivers.
func TestNVIDIALabels(t *testing.T) {
	graph, err := registry.Graph()
	if err != nil {
		t.Fatal(err)
	}
	for pname, cp := range policies(t) {
		for _, fromNVIDIADrivers := range []bool{false, true} {
			pools := fixture.DriverPools(cp)
			for i := range pools {
				pools[i].NVIDIADriver = fromNVIDIADrivers
			}
			for _, s := range graph.States() {
				want, ok := nvidiaLabels[s.Name]
				if !ok || !s.Operand.Enabled(&cp.Spec) {
					continue
				}
				objs, err := s.Operand.Render(state.RenderInput{Policy: cp, Namespace: fixture.Namespace, Gate: graph.Gate(s.Name),
					DriverPools: pools, Variants: fixture.Variants(cp), ServiceMonitorAvailable: true, DRAInUse: true,
					DevicePluginConfigDigests: fixture.DevicePluginConfigDigests, MPSConfigs: map[string]bool{"H200_MPS.x2": true}})
				if err != nil {
					t.Fatalf("rendering %s: %v", s.Name, err)
				}
				for _, o := range objs {
					object, pod := workloadLabels(o)
					if object == nil {
						continue
					}
					labels := want.labels
					switch {
					case s.Name == state.Driver && fromNVIDIADrivers:
						labels = map[string]string{"app": o.GetName(), "app.kubernetes.io/component": "nvidia-driver"}
					case s.Name == state.DRADriver && o.GetName() == dradriver.ControllerName:
						labels = map[string]string{"app": dradriver.ControllerName}
					}
					for k, v := range labels {
						for where, got := range map[string]map[string]string{"workload": object, "pod template": pod} {
							if got[k] != v {
								t.Errorf("%s policy, %s %s (NVIDIADrivers %v): %s label %s=%q, want %q\n  from %s", pname, s.Name, o.GetName(),
									fromNVIDIADrivers, where, k, got[k], v, want.source)
							}
						}
					}
					if sel := selectorOf(o); sel[render.LabelApp] != "" {
						t.Errorf("%s %s: app is in the selector, which cannot change for the life of a workload", s.Name, o.GetName())
					}
				}
			}
		}
	}
}

// workloadLabels returns a DaemonSet's or Deployment's labels and its pod
// template's; nil for another object.
func workloadLabels(o client.Object) (map[string]string, map[string]string) {
	switch w := o.(type) {
	case *appsv1.DaemonSet:
		return w.Labels, w.Spec.Template.Labels
	case *appsv1.Deployment:
		return w.Labels, w.Spec.Template.Labels
	}
	return nil, nil
}

func selectorOf(o client.Object) map[string]string {
	var sel *metav1.LabelSelector
	switch w := o.(type) {
	case *appsv1.DaemonSet:
		sel = w.Spec.Selector
	case *appsv1.Deployment:
		sel = w.Spec.Selector
	}
	if sel == nil {
		return nil
	}
	return sel.MatchLabels
}
