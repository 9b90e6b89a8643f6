package contract

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-operator/gpu-operator/internal/state"
	dcgmstate "github.com/gpu-operator/gpu-operator/internal/state/dcgm"
)

// Sources of the standalone DCGM host engine's requirements: the image's
// Dockerfile and nv-hostengine at DCGM 4.6.0, the version NVIDIA's chart
// ships (nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04), and
// NVIDIA's manifests.
const (
	dcgmImage      = "NVIDIA/DCGM@v4.6.0:docker/Dockerfile.ubuntu22.04 (ENTRYPOINT nv-hostengine, CMD -n -b 0.0.0.0; EXPOSE 5555)"
	hostEngineArgs = "NVIDIA/DCGM@v4.6.0:hostengine/src/HostEngineCommandLine.cpp (--port default 5555, --bind-interface default 127.0.0.1)"
	dcgmAsset      = "NVIDIA/gpu-operator@v26.7.0:assets/state-dcgm/0400_dcgm.yml"
	dcgmService    = "NVIDIA/gpu-operator@v26.7.0:assets/state-dcgm/0500_service.yaml"
)

var dcgmHostEngineContract = []requirement{
	{source: dcgmImage + "; " + dcgmAsset + " (no command or args)",
		need: "runs the image's nv-hostengine, listening on every interface, not the loopback default",
		check: func(p *podCase) error {
			c, err := container(p, dcgmstate.ContainerName)
			if err != nil {
				return err
			}
			if len(c.Command) > 0 || (len(c.Args) > 0 && len(p.spec.DCGM.Args) == 0) {
				return fmt.Errorf("%s runs %v %v, not the image's entrypoint", dcgmstate.ContainerName, c.Command, c.Args)
			}
			return nil
		}},
	{source: hostEngineArgs + "; " + dcgmAsset + " (port dcgm 5555, TCP liveness and readiness)",
		need:  "is live and ready once it accepts connections on 5555",
		check: all(probe(dcgmstate.ContainerName, "liveness", tcpProbe(dcgmstate.Port)), probe(dcgmstate.ContainerName, "readiness", tcpProbe(dcgmstate.Port)))},
	{source: dcgmAsset + " (privileged)", need: "manages every GPU's profiling and health: privileged",
		check: privileged(dcgmstate.ContainerName, true)},
	{source: "NVIDIA/gpu-operator@v26.7.0:controllers/object_controls.go:1982-2027 (TransformDCGM: setRuntimeClassName, NRI annotation)",
		need:  "gets every GPU and NVML from the runtime: the RuntimeClass where the runtime has the NVIDIA handler",
		check: runtimeClass},
}

func TestDCGMHostEngineContract(t *testing.T) { checkAll(t, state.DCGM, dcgmHostEngineContract) }

// dcgm-exporter reads its node's standalone host engine, where one runs,
// through the node-local Service, as NVIDIA points it there.
var dcgmRemoteContract = []requirement{
	{source: dcgmTransform + " (DCGM_REMOTE_HOSTENGINE_INFO nvidia-dcgm:5555 when dcgm is enabled); " + dcgmFlags + ":177; " + dcgmService +
		" (internalTrafficPolicy Local)",
		need: "reads its node's standalone host engine where dcgm runs one, its embedded one elsewhere",
		check: func(p *podCase) error {
			if p.spec.DCGM.IsEnabled() {
				return env("nvidia-dcgm-exporter", "DCGM_REMOTE_HOSTENGINE_INFO", "nvidia-dcgm:5555")(p)
			}
			return noEnv("nvidia-dcgm-exporter", "DCGM_REMOTE_HOSTENGINE_INFO")(p)
		}},
}

func TestDCGMExporterReadsTheHostEngine(t *testing.T) {
	checkAll(t, state.DCGMExporter, dcgmRemoteContract)
}

// The host engine's Service keeps each exporter on its own node's engine.
func TestDCGMServiceIsNodeLocal(t *testing.T) {
	for pname, cp := range policies(t) {
		if !cp.Spec.DCGM.IsEnabled() {
			continue
		}
		objs, err := dcgmstate.Operand{}.Render(state.RenderInput{Policy: cp, Namespace: "gpu-operator"})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, o := range objs {
			svc, ok := o.(*corev1.Service)
			if !ok {
				continue
			}
			found = true
			if svc.Name != dcgmstate.ServiceName || svc.Spec.InternalTrafficPolicy == nil ||
				*svc.Spec.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyLocal || svc.Spec.Ports[0].Port != dcgmstate.Port {
				t.Errorf("%s policy: Service %+v is not %s, node-local, on %d\n  from %s", pname, svc.Spec, dcgmstate.ServiceName, dcgmstate.Port, dcgmService)
			}
		}
		if !found {
			t.Errorf("%s policy: no Service for the host engine", pname)
		}
	}
}

func tcpProbe(port int) func(*corev1.Probe) error {
	return func(pr *corev1.Probe) error {
		if pr.TCPSocket == nil || pr.TCPSocket.Port.IntValue() != port {
			return fmt.Errorf("probe %+v is not a TCP connect to %d", pr.ProbeHandler, port)
		}
		return nil
	}
}
