package dcgmexporter

import (
	"maps"
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/dcgm"
)

// Names users know from the NVIDIA GPU Operator.
const (
	DaemonSetName      = "nvidia-dcgm-exporter"
	ServiceName        = "nvidia-dcgm-exporter"
	ServiceAccountName = "nvidia-dcgm-exporter"
	// PortName is the metrics port's name on the Service.
	PortName = "gpu-metrics"
)

// MetricsPort is where dcgm-exporter serves metrics.
const MetricsPort = 9400

// podResources is where the exporter looks for the kubelet's pod-resources
// socket, from which it learns which pod uses which GPU: the kubelet's
// root's pod-resources on the host.
const podResources = "/var/lib/kubelet/pod-resources"

// +kubebuilder:rbac:groups="",namespace=gpu-operator,resources=services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=monitoring.coreos.com,namespace=gpu-operator,resources=servicemonitors,verbs=get;list;watch;create;patch;delete

// Operand renders the dcgm-exporter state.
type Operand struct{}

// Enabled reports whether the policy deploys dcgm-exporter.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.DCGMExporter.IsEnabled() }

// Render returns the exporter's ServiceAccount, DaemonSet and Service, and
// a ServiceMonitor when one is asked for and the kind is served.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	spec := &in.Policy.Spec.DCGMExporter
	image := render.Image(string(spec.Repository), string(spec.Image), string(spec.Version))
	sets, err := in.DaemonSetsWith(DaemonSetName, state.DCGMExporter, &spec.ContainerSettings, image, dimensions, podSpec,
		func(w *render.Workload) {
			// NVIDIA's annotations and this operator's podAnnotations
			// and podLabels, on the pods only.
			w.PodLabels = spec.PodLabels
			if len(spec.Annotations)+len(spec.PodAnnotations) > 0 {
				w.PodAnnotations = make(map[string]string, len(spec.Annotations)+len(spec.PodAnnotations))
				maps.Copy(w.PodAnnotations, spec.Annotations)
				maps.Copy(w.PodAnnotations, spec.PodAnnotations)
			}
			if in.DCGMMetrics != "" {
				// The exporter reads its metrics list at start.
				if w.Inputs == nil {
					w.Inputs = map[string]string{}
				}
				w.Inputs[AnnotationMetricsDigest] = MetricsDigest(in.DCGMMetrics)
			}
		})
	if err != nil {
		return nil, err
	}
	objs := []client.Object{render.ServiceAccount(in.Policy, ServiceAccountName, in.Namespace, string(state.DCGMExporter))}
	if in.DCGMMetrics != "" {
		// Before the pods that mount it.
		objs = append(objs, metricsConfigMap(in))
	}
	objs = append(objs, sets...)
	objs = append(objs, service(in))
	if WantsServiceMonitor(&in.Policy.Spec) && in.ServiceMonitorAvailable {
		objs = append(objs, serviceMonitor(in))
	}
	return objs, nil
}

// WantsServiceMonitor reports whether the policy asks for a ServiceMonitor.
func WantsServiceMonitor(spec *gpuv1.ClusterPolicySpec) bool {
	sm := spec.DCGMExporter.ServiceMonitor
	return sm != nil && sm.Enabled != nil && *sm.Enabled
}

// dimensions: the exporter gets the GPUs as the runtime injects them,
// through the RuntimeClass where the runtime has the NVIDIA handler.
var dimensions = state.Dimensions{Runtime: true}

// collectors is the exporter's metrics list with DCGM's profiling
// metrics, as the NVIDIA GPU Operator sets it.
const collectors = "/etc/dcgm-exporter/dcp-metrics-included.csv"

// MetricsKey is the key of dcgmExporter.config's ConfigMap that lists the
// metrics, and metricsFile where the exporter reads it, NVIDIA's
// (gpu-operator v26.7.0 controllers/object_controls.go:
// TransformDCGMExporter).
const (
	MetricsKey  = "dcgm-metrics.csv"
	metricsFile = "/etc/dcgm-exporter/" + MetricsKey
)

// AnnotationMetricsDigest, on the exporter's pods, is a digest of the
// metrics list: a new content restarts them.
const AnnotationMetricsDigest = gpuv1.OperatorAnnotationPrefix + "metrics-digest"

// podSpec is the exporter's pod. It gets the GPUs through the runtime and
// needs SYS_ADMIN for DCGM's profiling metrics; nothing more.
func podSpec(cp *gpuv1.ClusterPolicy, v state.Variant) corev1.PodSpec {
	probe := func(delay int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/health", Port: intstr.FromInt32(MetricsPort),
			}},
			InitialDelaySeconds: delay, PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 6,
		}
	}
	spec := &cp.Spec.DCGMExporter
	env := []corev1.EnvVar{
		{Name: "DCGM_EXPORTER_LISTEN", Value: ":9400"},
		{Name: "DCGM_EXPORTER_KUBERNETES", Value: "true"},
		{Name: "DCGM_EXPORTER_COLLECTORS", Value: collectors},
		{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"},
		// Metrics carry the node's name as Hostname, not the pod's.
		render.FieldEnv("NODE_NAME", "spec.nodeName"),
	}
	if cp.Spec.DCGM.IsEnabled() {
		// The node's standalone host engine, not one of its own
		// (dcgm-exporter pkg/cmd/app.go: -r, DCGM_REMOTE_HOSTENGINE_INFO).
		env = append(env, corev1.EnvVar{Name: "DCGM_REMOTE_HOSTENGINE_INFO", Value: dcgm.RemoteHostEngine})
	}
	mounts := []corev1.VolumeMount{{Name: "pod-gpu-resources", MountPath: podResources, ReadOnly: true}}
	volumes := []corev1.Volume{render.HostPathVolume("pod-gpu-resources", path.Join(cp.Spec.KubeletRoot(), "pod-resources"), corev1.HostPathDirectory)}
	if spec.Config.Named() != "" {
		// The operator's copy of the named ConfigMap's list.
		env[2].Value = metricsFile
		mounts = append(mounts, corev1.VolumeMount{Name: "metrics-config", MountPath: metricsFile, SubPath: MetricsKey, ReadOnly: true})
		volumes = append(volumes, render.ConfigMapVolume("metrics-config", MetricsCopy))
	}
	if dir := spec.HPCJobMapping.Dir(); dir != "" {
		// dcgm-exporter 4.x reads the job files a workload manager
		// writes there (DCGM_HPC_JOB_MAPPING_DIR), as NVIDIA mounts it.
		env = append(env, corev1.EnvVar{Name: "DCGM_HPC_JOB_MAPPING_DIR", Value: dir})
		mounts = append(mounts, corev1.VolumeMount{Name: "hpc-job-mapping", MountPath: dir, ReadOnly: true})
		volumes = append(volumes, render.HostPathVolume("hpc-job-mapping", dir, corev1.HostPathDirectoryOrCreate))
	}
	return corev1.PodSpec{
		ServiceAccountName:           ServiceAccountName,
		AutomountServiceAccountToken: ptr.To(false),
		RuntimeClassName:             state.RuntimeClassName(&cp.Spec, v.Runtime),
		HostPID:                      spec.HostPID != nil && *spec.HostPID,
		Containers: []corev1.Container{{
			Name:  "nvidia-dcgm-exporter",
			Env:   env,
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: MetricsPort}},
			SecurityContext: &corev1.SecurityContext{
				Privileged:   ptr.To(false),
				Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}},
			},
			ReadinessProbe: probe(15),
			LivenessProbe:  probe(45),
			VolumeMounts:   mounts,
		}},
		Volumes: volumes,
	}
}

func service(in state.RenderInput) *corev1.Service {
	svc := &corev1.Service{
		TypeMeta:   render.TypeMeta("v1", "Service"),
		ObjectMeta: render.ObjectMeta(in.Policy, ServiceName, in.Namespace, string(state.DCGMExporter)),
		Spec: corev1.ServiceSpec{
			// Every exporter pod, of whichever of its DaemonSets.
			Selector: map[string]string{render.LabelState: string(state.DCGMExporter), render.LabelManagedBy: render.ManagedBy},
			Ports: []corev1.ServicePort{{
				Name: PortName, Port: MetricsPort, TargetPort: intstr.FromInt32(MetricsPort), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
	svc.Annotations = map[string]string{"prometheus.io/scrape": "true"}
	if c := in.Policy.Spec.DCGMExporter.Service; c != nil {
		svc.Spec.Type, svc.Spec.InternalTrafficPolicy = c.Type, c.InternalTrafficPolicy
	}
	return svc
}

// serviceMonitor is built unstructured: the Prometheus Operator's types are
// not worth a dependency for one object.
func serviceMonitor(in state.RenderInput) *unstructured.Unstructured {
	sm := in.Policy.Spec.DCGMExporter.ServiceMonitor
	meta := render.ObjectMeta(in.Policy, DaemonSetName, in.Namespace, string(state.DCGMExporter))
	for k, v := range sm.AdditionalLabels {
		if _, ours := meta.Labels[k]; !ours {
			meta.Labels[k] = string(v)
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"selector":          map[string]any{"matchLabels": toAny(render.StandardLabels(ServiceName, string(state.DCGMExporter)))},
			"namespaceSelector": map[string]any{"matchNames": []any{in.Namespace}},
			"endpoints":         []any{endpoint(sm)},
		},
	}}
	u.SetAPIVersion("monitoring.coreos.com/v1")
	u.SetKind("ServiceMonitor")
	u.SetName(meta.Name)
	u.SetNamespace(meta.Namespace)
	u.SetLabels(meta.Labels)
	u.SetOwnerReferences(meta.OwnerReferences)
	return u
}

// endpoint is the ServiceMonitor's endpoint, with what NVIDIA's
// applyServiceMonitorCustomEdits sets on it (gpu-operator v26.7.0
// controllers/object_controls.go): interval, scrapeTimeout, honorLabels
// and relabelings.
func endpoint(sm *gpuv1.ServiceMonitorSpec) map[string]any {
	e := map[string]any{"port": PortName, "path": "/metrics", "interval": sm.Interval}
	if sm.ScrapeTimeout != "" {
		e["scrapeTimeout"] = sm.ScrapeTimeout
	}
	if sm.HonorLabels != nil {
		e["honorLabels"] = *sm.HonorLabels
	}
	if len(sm.Relabelings) > 0 {
		relabelings := make([]any, 0, len(sm.Relabelings))
		for _, r := range sm.Relabelings {
			relabelings = append(relabelings, relabeling(r))
		}
		e["relabelings"] = relabelings
	}
	return e
}

func relabeling(r gpuv1.RelabelConfig) map[string]any {
	out := map[string]any{}
	if len(r.SourceLabels) > 0 {
		labels := make([]any, 0, len(r.SourceLabels))
		for _, l := range r.SourceLabels {
			labels = append(labels, l)
		}
		out["sourceLabels"] = labels
	}
	for k, v := range map[string]string{"targetLabel": r.TargetLabel, "regex": r.Regex, "action": r.Action} {
		if v != "" {
			out[k] = v
		}
	}
	if r.Separator != nil {
		out["separator"] = *r.Separator
	}
	if r.Replacement != nil {
		out["replacement"] = *r.Replacement
	}
	if r.Modulus != 0 {
		out["modulus"] = int64(r.Modulus)
	}
	return out
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Kinds lists the kinds Render returns.
func (Operand) Kinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{render.KindServiceAccount, render.KindConfigMap, render.KindDaemonSet, render.KindService, render.KindServiceMonitor}
}
