package contract

import (
	"fmt"
	"testing"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/dcgmexporter"
)

// Sources of dcgm-exporter's requirements. The 4.6.0-4.8.3 release commit
// (7ad58324) is not in the mirror we read; tag 4.5.3-4.8.2 has the same
// code for every line cited here.
const (
	dcgmRepo       = "NVIDIA/dcgm-exporter@4.5.3-4.8.2:"
	dcgmHostname   = dcgmRepo + "internal/pkg/hostname/hostname.go:52-60"
	dcgmServer     = dcgmRepo + "internal/pkg/server/server.go:105, 342-367"
	dcgmDockerfile = dcgmRepo + "docker/Dockerfile:357-386"
	dcgmEntrypoint = dcgmRepo + "docker/dcgm-exporter-entrypoint.sh:7"
	dcgmCaps       = dcgmRepo + "internal/pkg/capabilities/capabilities.go"
	dcgmFlags      = dcgmRepo + "pkg/cmd/app.go"
	dcgmOperator   = "NVIDIA/gpu-operator@v26.7.0:assets/state-dcgm-exporter/0800_daemonset.yaml"
	dcgmRuntime    = "NVIDIA/gpu-operator@v26.7.0:controllers/object_controls.go:1848, 2747-2753"
	dcgmTransform  = "NVIDIA/gpu-operator@v26.7.0:controllers/object_controls.go:1789-1941 (TransformDCGMExporter)"
)

const dcgm = "nvidia-dcgm-exporter"

var dcgmContract = []requirement{
	{source: dcgmHostname + " (NODE_NAME, else the pod's hostname); " + dcgmOperator + ":49-52",
		need: "labels metrics with the node's name", check: fieldEnv(dcgm, "NODE_NAME", "spec.nodeName")},
	{source: dcgmOperator + ":47-48; " + dcgmRepo + "etc/dcp-metrics-included.csv; " + dcgmFlags + ":122-129 (DCGM_EXPORTER_COLLECTORS)",
		need:  "collects DCGM's profiling metrics too",
		check: env(dcgm, "DCGM_EXPORTER_COLLECTORS", "/etc/dcgm-exporter/dcp-metrics-included.csv"),
		where: func(spec *gpuv1.ClusterPolicySpec) bool { return spec.DCGMExporter.Config.Named() == "" }},
	{source: dcgmTransform + " (config.name: ConfigMap key dcgm-metrics.csv at /etc/dcgm-exporter/dcgm-metrics.csv, " +
		"DCGM_EXPORTER_COLLECTORS naming it); " + dcgmFlags + ":122-129",
		need: "collects the metrics dcgmExporter.config's ConfigMap lists (from the operator's copy of its list, kept while the ConfigMap is broken or gone)",
		check: all(env(dcgm, "DCGM_EXPORTER_COLLECTORS", "/etc/dcgm-exporter/dcgm-metrics.csv"),
			configMapAt(dcgm, dcgmexporter.MetricsCopy, "/etc/dcgm-exporter/dcgm-metrics.csv")),
		where: func(spec *gpuv1.ClusterPolicySpec) bool { return spec.DCGMExporter.Config.Named() != "" }},
	{source: dcgmTransform + " (hpcJobMapping: DCGM_HPC_JOB_MAPPING_DIR, the directory from the host, DirectoryOrCreate); " +
		dcgmFlags + ":291 (DCGM_HPC_JOB_MAPPING_DIR)",
		need: "reads the job files the workload manager writes on the host",
		check: func(p *podCase) error {
			dir := p.spec.DCGMExporter.HPCJobMapping.Dir()
			return all(env(dcgm, "DCGM_HPC_JOB_MAPPING_DIR", dir), hostMount(dcgm, mount{host: dir, at: dir, readOnly: true}))(p)
		},
		where: func(spec *gpuv1.ClusterPolicySpec) bool { return spec.DCGMExporter.HPCJobMapping.Dir() != "" }},
	{source: dcgmTransform + " (hostPID)", need: "runs in the host's PID namespace where dcgmExporter.hostPID asks",
		check: func(p *podCase) error {
			if want := p.spec.DCGMExporter.HostPID != nil && *p.spec.DCGMExporter.HostPID; p.pod.HostPID != want {
				return fmt.Errorf("hostPID %v, want %v", p.pod.HostPID, want)
			}
			return nil
		}},
	{source: dcgmServer + " (/health on the metrics listener, 200 even while reloading); " + dcgmOperator + ":56-66",
		need:  "is live and ready once it serves",
		check: all(probe(dcgm, "readiness", httpProbe("/health", dcgmexporter.MetricsPort)), probe(dcgm, "liveness", httpProbe("/health", dcgmexporter.MetricsPort)))},
	{source: dcgmDockerfile + " (distroless image: profiling metrics need root with CAP_SYS_ADMIN); " + dcgmEntrypoint +
		" (execs the exporter, no setcap since 4.4.2-4.7.0); " + dcgmCaps + " (reads CapEff for CAP_SYS_ADMIN)",
		need: "runs as root with SYS_ADMIN added, and nothing else added", check: all(privileged(dcgm, false), sysAdmin)},
	{source: dcgmFlags + ":280-286 (-pod-resources-kubelet-socket defaults to /var/lib/kubelet/pod-resources/kubelet.sock); " + dcgmOperator + ":67-76",
		need: "maps GPUs to pods through the kubelet's pod-resources socket, under the kubelet's root (hostPaths.kubeletRootDir)",
		check: hostMountBy(dcgm, func(p *podCase) mount {
			return mount{host: p.spec.KubeletRoot() + "/pod-resources", at: "/var/lib/kubelet/pod-resources", readOnly: true}
		})},
	{source: dcgmRepo + "internal/pkg/transformation/dra.go:43, 67-71 (KUBERNETES_ENABLE_DRA starts a cluster-wide " +
		"resource.k8s.io/v1beta1 ResourceSlice informer and waits for its sync with a context never cancelled); " +
		"kubernetes@v1.37.2 pkg/controlplane/instance.go:501-505 (v1beta1 is not served by default)",
		need:  "starts on a cluster that serves DRA at v1 only: its DRA pod mapping is left off, on DRA nodes too",
		check: noEnv(dcgm, "KUBERNETES_ENABLE_DRA")},
	{source: dcgmRuntime + " (setRuntimeClassName: the RuntimeClass wherever the toolkit gave the runtime an NVIDIA handler)",
		need:  "gets the GPUs from the runtime: the RuntimeClass where the runtime has the NVIDIA handler (containerd here; on CRI-O this operator's toolkit installs the OCI hook)",
		check: runtimeClass},
}

func TestDCGMExporterContract(t *testing.T) { checkAll(t, state.DCGMExporter, dcgmContract) }

// sysAdmin checks the exporter adds SYS_ADMIN alone and runs as the
// image's user, root: the capability reaches no other user.
func sysAdmin(p *podCase) error {
	c, err := container(p, dcgm)
	if err != nil {
		return err
	}
	if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil || len(c.SecurityContext.Capabilities.Add) != 1 ||
		c.SecurityContext.Capabilities.Add[0] != "SYS_ADMIN" {
		return fmt.Errorf("capabilities %+v, want SYS_ADMIN alone", c.SecurityContext)
	}
	nonRoot := func(user *int64, nonRoot *bool) bool {
		return (user != nil && *user != 0) || (nonRoot != nil && *nonRoot)
	}
	if pc := p.pod.SecurityContext; pc != nil && nonRoot(pc.RunAsUser, pc.RunAsNonRoot) {
		return fmt.Errorf("the pod runs as a user other than root: %+v", pc)
	}
	if nonRoot(c.SecurityContext.RunAsUser, c.SecurityContext.RunAsNonRoot) {
		return fmt.Errorf("%s runs as a user other than root: %+v", dcgm, c.SecurityContext)
	}
	return nil
}
