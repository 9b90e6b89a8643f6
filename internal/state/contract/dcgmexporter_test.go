package contract

import (
	"fmt"
	"testing"

	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/dcgmexporter"
)

// Sources of dcgm-exporter's requirements, at 4.2.3-4.1.3.
const (
	dcgmHostname   = "NVIDIA/dcgm-exporter@4.2.3-4.1.3:internal/pkg/hostname/hostname.go"
	dcgmServer     = "NVIDIA/dcgm-exporter@4.2.3-4.1.3:internal/pkg/server/server.go"
	dcgmEntrypoint = "NVIDIA/dcgm-exporter@4.2.3-4.1.3:docker/dcgm-exporter-entrypoint.sh"
	dcgmPods       = "NVIDIA/dcgm-exporter@4.2.3-4.1.3:internal/pkg/transformation/kubernetes.go"
	dcgmOperator   = "NVIDIA/gpu-operator@v25.3.1:assets/state-dcgm-exporter/0900_daemonset.yaml"
)

const dcgm = "nvidia-dcgm-exporter"

var dcgmContract = []requirement{
	{source: dcgmHostname + " (NODE_NAME, else the pod's hostname)", need: "labels metrics with the node's name",
		check: fieldEnv(dcgm, "NODE_NAME", "spec.nodeName")},
	{source: dcgmOperator, need: "collects DCGM's profiling metrics too",
		check: env(dcgm, "DCGM_EXPORTER_COLLECTORS", "/etc/dcgm-exporter/dcp-metrics-included.csv")},
	{source: dcgmServer + " (/health on the metrics listener)", need: "is ready once it serves",
		check: probe(dcgm, "readiness", httpProbe("/health", dcgmexporter.MetricsPort))},
	{source: dcgmEntrypoint + " (setcap cap_sys_admin, else no profiling metrics)", need: "SYS_ADMIN, and nothing more",
		check: all(privileged(dcgm, false), sysAdmin)},
	{source: dcgmPods + " (pod-resources/kubelet.sock)", need: "maps GPUs to pods through the kubelet's pod-resources socket",
		check: hostMount(dcgm, mount{host: "/var/lib/kubelet/pod-resources", at: "/var/lib/kubelet/pod-resources", readOnly: true})},
	{source: operatorPlugin, need: "gets the GPUs from the runtime: the RuntimeClass where the runtime has the NVIDIA handler",
		check: runtimeClass},
}

func TestDCGMExporterContract(t *testing.T) { checkAll(t, state.DCGMExporter, dcgmContract) }

func sysAdmin(p *podCase) error {
	c, err := container(p, dcgm)
	if err != nil {
		return err
	}
	if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil || len(c.SecurityContext.Capabilities.Add) != 1 ||
		c.SecurityContext.Capabilities.Add[0] != "SYS_ADMIN" {
		return fmt.Errorf("capabilities %+v, want SYS_ADMIN alone", c.SecurityContext)
	}
	return nil
}
