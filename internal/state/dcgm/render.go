package dcgm

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// Names users know from the NVIDIA GPU Operator (gpu-operator v26.7.0
// assets/state-dcgm/).
const (
	DaemonSetName      = "nvidia-dcgm"
	ServiceName        = "nvidia-dcgm"
	ServiceAccountName = "nvidia-dcgm"
	// ContainerName is the host engine's container.
	ContainerName = "nvidia-dcgm-ctr"
	// PortName names the host engine's port on the pod and the Service.
	PortName = "dcgm"
)

// Port is where nv-hostengine listens (NVIDIA/DCGM v4.6.0
// hostengine/src/HostEngineCommandLine.cpp: --port, default 5555); the
// image binds it on every interface (docker/Dockerfile.ubuntu22.04: CMD
// -n -b 0.0.0.0).
const Port = 5555

// RemoteHostEngine is the address dcgm-exporter reaches its node's host
// engine at, as NVIDIA sets it (gpu-operator v26.7.0
// controllers/object_controls.go: DCGM_REMOTE_HOSTENGINE_INFO
// nvidia-dcgm:5555): the Service's name, whose internalTrafficPolicy Local
// keeps each exporter on its own node's engine.
var RemoteHostEngine = fmt.Sprintf("%s:%d", ServiceName, Port)

// Operand renders the dcgm state.
type Operand struct{}

// Enabled reports whether the policy runs the standalone host engine.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.DCGM.IsEnabled() }

// dimensions: the host engine gets the GPUs and NVML as the runtime
// injects them, through the RuntimeClass where the runtime has the NVIDIA
// handler.
var dimensions = state.Dimensions{Runtime: true}

// Render returns the host engine's ServiceAccount, one DaemonSet per
// runtime in use, and its node-local Service.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	spec := in.Policy.Spec.DCGM
	if spec == nil {
		return nil, nil // no dcgm section: nothing to run
	}
	image := render.Image(string(spec.Repository), string(spec.Image), string(spec.Version))
	sets, err := in.DaemonSets(DaemonSetName, state.DCGM, &spec.ContainerSettings, image, dimensions, podSpec)
	if err != nil {
		return nil, err
	}
	objs := append([]client.Object{render.ServiceAccount(in.Policy, ServiceAccountName, in.Namespace, string(state.DCGM))}, sets...)
	return append(objs, service(in)), nil
}

// podSpec is the host engine's pod, as NVIDIA runs it (gpu-operator
// v26.7.0 assets/state-dcgm/0400_dcgm.yml): privileged, on the image's
// entrypoint (nv-hostengine, not daemonized, on every interface), live
// and ready once it accepts connections on its port. NVIDIA's
// toolkit-validation init container is this state's place in the chain.
func podSpec(cp *gpuv1.ClusterPolicy, v state.Variant) corev1.PodSpec {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(Port)}},
		InitialDelaySeconds: 15}
	return corev1.PodSpec{
		ServiceAccountName:           ServiceAccountName,
		AutomountServiceAccountToken: ptr.To(false),
		RuntimeClassName:             state.RuntimeClassName(&cp.Spec, v.Runtime),
		Containers: []corev1.Container{{
			Name: ContainerName,
			// The image sets it too (docker/Dockerfile.ubuntu22.04); the
			// runtime reads the container's.
			Env:             []corev1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"}},
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			Ports:           []corev1.ContainerPort{{Name: PortName, ContainerPort: Port}},
			LivenessProbe:   probe,
			ReadinessProbe:  probe.DeepCopy(),
		}},
	}
}

// service reaches each node's host engine from that node only
// (gpu-operator v26.7.0 assets/state-dcgm/0500_service.yaml).
func service(in state.RenderInput) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   render.TypeMeta("v1", "Service"),
		ObjectMeta: render.ObjectMeta(in.Policy, ServiceName, in.Namespace, string(state.DCGM)),
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeClusterIP,
			InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyLocal),
			// Every host engine pod, of whichever of its DaemonSets.
			Selector: map[string]string{render.LabelState: string(state.DCGM), render.LabelManagedBy: render.ManagedBy},
			Ports:    []corev1.ServicePort{{Name: PortName, Port: Port, TargetPort: intstr.FromInt32(Port), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// Kinds lists the kinds Render returns.
func (Operand) Kinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{render.KindServiceAccount, render.KindDaemonSet, render.KindService}
}
