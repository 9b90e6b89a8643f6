package v1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The exporter, the standalone host engine it may read from, and the
// ServiceMonitor that scrapes it: the image coordinates and their defaults
// are declared per operand, as in operand_types.go.

// DCGMExporterSpec is the DCGM exporter, which serves GPU metrics.
// +kubebuilder:validation:XValidation:rule=`(has(self.enabled) && !self.enabled) || ((!has(self.image) || size(self.image) > 0) && (!has(self.version) || size(self.version) > 0))`,message="image and version must be set while enabled is true"
type DCGMExporterSpec struct {
	ComponentSpec `json:",inline"`

	// Repository is the registry path of the dcgm-exporter image.
	// +kubebuilder:default="nvcr.io/nvidia/k8s"
	// +optional
	Repository Repository `json:"repository,omitempty"`
	// Image is the dcgm-exporter image name.
	// +kubebuilder:default=dcgm-exporter
	// +optional
	Image ImageName `json:"image,omitempty"`
	// Version is the dcgm-exporter image tag or digest. The default is
	// pinned by NVIDIA's digest of the tag (gpu-operator v26.7.0's bundle).
	// +kubebuilder:default="4.6.0-4.8.3-distroless@sha256:613ab03c11d442fd960ff515f547e9921537454a712d08160bc8f677f89f1c35"
	// +optional
	Version ImageVersion `json:"version,omitempty"`

	// ServiceMonitor makes Prometheus Operator scrape the exporter.
	// +optional
	ServiceMonitor *ServiceMonitorSpec `json:"serviceMonitor,omitempty"`

	// Config names a ConfigMap in the operator namespace whose key
	// dcgm-metrics.csv lists the metrics to collect, in dcgm-exporter's
	// format, in place of the image's default list (as NVIDIA's does:
	// mounted at /etc/dcgm-exporter/dcgm-metrics.csv, named by
	// DCGM_EXPORTER_COLLECTORS). A new content restarts the exporters, which
	// read it at start. The exporters mount the operator's copy of the list
	// (ConfigMap nvidia-dcgm-exporter-metrics), taken while the list is one
	// dcgm-exporter can read: a ConfigMap deleted, without the key, or with
	// a list the exporter would refuse is reported in the status, and the
	// exporters keep running the last good list.
	// +optional
	Config *DCGMExporterMetricsConfig `json:"config,omitempty"`

	// Service tunes the exporter's Service, nvidia-dcgm-exporter.
	// +optional
	Service *DCGMExporterServiceConfig `json:"service,omitempty"`

	// HostPID runs the exporter in the host's PID namespace, which
	// per-process metrics need.
	// +optional
	HostPID *bool `json:"hostPID,omitempty"`

	// HPCJobMapping labels metrics with the HPC job (Slurm, ...) using
	// each GPU, from the files a workload manager writes in directory on
	// the host (dcgm-exporter's DCGM_HPC_JOB_MAPPING_DIR).
	// +optional
	HPCJobMapping *DCGMExporterHPCJobMappingConfig `json:"hpcJobMapping,omitempty"`

	// Annotations are added to the exporter's pods, NVIDIA's field.
	// +optional
	Annotations Annotations `json:"annotations,omitempty"`

	// PodLabels are added to the exporter's pods, over
	// daemonsets.labels; the operator's own labels win.
	// +optional
	PodLabels Labels `json:"podLabels,omitempty"`

	// PodAnnotations are added to the exporter's pods, as annotations
	// (NVIDIA's field) are.
	// +optional
	PodAnnotations Annotations `json:"podAnnotations,omitempty"`

	UnsupportedDCGMExporterFields `json:",inline"`
}

// DCGMExporterMetricsConfig names the exporter's metrics list.
type DCGMExporterMetricsConfig struct {
	// Name of a ConfigMap with key dcgm-metrics.csv; empty for the image's
	// default list.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="must be empty or the name of a ConfigMap: a lower case DNS subdomain"
	// +optional
	Name string `json:"name,omitempty"`
}

// Named returns the ConfigMap's name, "" for none.
func (c *DCGMExporterMetricsConfig) Named() string {
	if c == nil {
		return ""
	}
	return c.Name
}

// DCGMExporterServiceConfig tunes the exporter's Service.
type DCGMExporterServiceConfig struct {
	// Type of the Service; empty for ClusterIP.
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`
	// InternalTrafficPolicy of the Service: Local sends a node's own
	// scrapes to its own exporter.
	// +kubebuilder:validation:Enum=Cluster;Local
	// +optional
	InternalTrafficPolicy *corev1.ServiceInternalTrafficPolicy `json:"internalTrafficPolicy,omitempty"`
}

// DefaultHPCJobMappingDir is where dcgm-exporter reads job files by
// default, NVIDIA's (gpu-operator v26.7.0 api/nvidia/v1).
const DefaultHPCJobMappingDir = "/var/lib/dcgm-exporter/job-mapping"

// DCGMExporterHPCJobMappingConfig is where a workload manager writes
// which job uses which GPU.
type DCGMExporterHPCJobMappingConfig struct {
	// Enabled mounts the directory and labels metrics with jobs.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Directory on the host; empty for /var/lib/dcgm-exporter/job-mapping.
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.startsWith('/')`,message="must be an absolute path on the host"
	// +kubebuilder:validation:XValidation:rule=`!self.matches('(^|/)[.][.](/|$)')`,message="must not hold a '..' segment: name the directory itself"
	// +kubebuilder:validation:XValidation:rule=`!self.matches('^/+$')`,message="must not be / alone: the operands would write to the host's root; name a directory"
	// +optional
	Directory string `json:"directory,omitempty"`
}

// Dir returns the directory, or "" when job mapping is off.
func (h *DCGMExporterHPCJobMappingConfig) Dir() string {
	if h == nil || h.Enabled == nil || !*h.Enabled {
		return ""
	}
	if h.Directory == "" {
		return DefaultHPCJobMappingDir
	}
	return h.Directory
}

// UnsupportedDCGMExporterFields are dcgmExporter fields of the NVIDIA GPU
// Operator that this operator accepts, keeps and does not act on, each for
// the reason its refused tag gives.
type UnsupportedDCGMExporterFields struct {
	// +optional
	EnablePodLabels *apiextensionsv1.JSON `json:"enablePodLabels,omitempty" refused:"labelling metrics with the workload pods' labels gives every exporter, on every GPU node, a token that reads every pod in the cluster: not offered"`
	// +optional
	EnablePodUID *apiextensionsv1.JSON `json:"enablePodUID,omitempty" refused:"labelling metrics with the workload pods' UIDs gives every exporter, on every GPU node, a token that reads every pod in the cluster: not offered"`
	// +optional
	PodLabelAllowlistRegex *apiextensionsv1.JSON `json:"podLabelAllowlistRegex,omitempty" refused:"pod labels on metrics (enablePodLabels) are not offered"`
}

// ServiceMonitorSpec configures the dcgm-exporter ServiceMonitor.
type ServiceMonitorSpec struct {
	// Enabled creates a ServiceMonitor; it needs the Prometheus Operator's
	// CRDs in the cluster.
	// +kubebuilder:default=false
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Interval between scrapes, a Prometheus duration such as 15s or 1m.
	// +kubebuilder:default="15s"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule=`self.matches('^([0-9]+(ms|s|m|h))+$')`,message="must be a Prometheus duration such as 15s, 1m or 1m30s"
	// +optional
	Interval string `json:"interval,omitempty"`
	// ScrapeTimeout bounds a scrape, a Prometheus duration no longer than
	// interval; empty for Prometheus's global timeout.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^([0-9]+(ms|s|m|h))+$')`,message="must be a Prometheus duration such as 10s"
	// +optional
	ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
	// HonorLabels keeps the metrics' own labels where they collide with
	// the target's.
	// +optional
	HonorLabels *bool `json:"honorLabels,omitempty"`
	// AdditionalLabels are added to the ServiceMonitor, typically to match a
	// Prometheus serviceMonitorSelector.
	// +optional
	AdditionalLabels Labels `json:"additionalLabels,omitempty"`
	// Relabelings rewrite the targets' labels before the scrape, the
	// endpoint's relabelings.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Relabelings []RelabelConfig `json:"relabelings,omitempty"`
}

// RelabelConfig is a Prometheus relabeling, the Prometheus Operator's
// fields.
type RelabelConfig struct {
	// SourceLabels select values from existing labels.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=atomic
	// +optional
	SourceLabels []string `json:"sourceLabels,omitempty"`
	// Separator between the concatenated source label values.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Separator *string `json:"separator,omitempty"`
	// TargetLabel is the label the result goes to.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	TargetLabel string `json:"targetLabel,omitempty"`
	// Regex the concatenated values are matched against.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Regex string `json:"regex,omitempty"`
	// Modulus of the hash of the source label values.
	// +optional
	Modulus uint64 `json:"modulus,omitempty"`
	// Replacement value, with regex capture groups.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Replacement *string `json:"replacement,omitempty"`
	// Action to perform.
	// +kubebuilder:validation:Enum=replace;Replace;keep;Keep;drop;Drop;hashmod;HashMod;labelmap;LabelMap;labeldrop;LabelDrop;labelkeep;LabelKeep;lowercase;Lowercase;uppercase;Uppercase;keepequal;KeepEqual;dropequal;DropEqual
	// +optional
	Action string `json:"action,omitempty"`
}

// DCGMSpec is NVIDIA's standalone DCGM host engine.
// +kubebuilder:validation:XValidation:rule=`(has(self.enabled) && !self.enabled) || ((!has(self.image) || size(self.image) > 0) && (!has(self.version) || size(self.version) > 0))`,message="image and version must be set while enabled is true"
type DCGMSpec struct {
	// Enabled runs the host engine. A dcgm section without it enables it,
	// as NVIDIA's operator does (gpu-operator v26.7.0 DCGMSpec.IsEnabled);
	// NVIDIA's chart writes enabled: false.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	ContainerSettings `json:",inline"`

	// Repository is the registry path of the DCGM image.
	// +kubebuilder:default="nvcr.io/nvidia/cloud-native"
	// +optional
	Repository Repository `json:"repository,omitempty"`
	// Image is the DCGM image name.
	// +kubebuilder:default=dcgm
	// +optional
	Image ImageName `json:"image,omitempty"`
	// Version is the DCGM image tag or digest.
	// +kubebuilder:default="4.6.0-1-ubuntu24.04"
	// +optional
	Version ImageVersion `json:"version,omitempty"`

	UnsupportedDCGMFields `json:",inline"`
}

// UnsupportedDCGMFields are dcgm fields of the NVIDIA GPU Operator that
// this operator accepts, keeps and does not act on.
type UnsupportedDCGMFields struct {
	// +optional
	HostPort *apiextensionsv1.JSON `json:"hostPort,omitempty" refused:"NVIDIA deprecated it and reads it nowhere (v26.7.0): the host engine listens on 5555 behind Service nvidia-dcgm"`
}

// IsEnabled reports whether the standalone host engine runs: a dcgm
// section is there and does not turn it off.
func (d *DCGMSpec) IsEnabled() bool { return d != nil && (d.Enabled == nil || *d.Enabled) }
