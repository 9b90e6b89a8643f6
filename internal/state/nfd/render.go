package nfd

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/gfd"
)

// Names of the NFD objects.
const (
	WorkerName = "nfd-worker"
	MasterName = "nfd-master"
	GCName     = "nfd-gc"
	// configDir holds nfd-master.conf and nfd-worker.conf, the paths both
	// read by default, so neither needs a -config argument.
	configDir = "/etc/kubernetes/node-feature-discovery"
)

// Operand renders the node-feature-discovery state.
type Operand struct{}

// Enabled reports whether the policy deploys NFD.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.NFD.IsEnabled() }

// Render returns nfd-master, nfd-gc and the nfd-worker DaemonSet, with their
// configuration and access. The worker runs on every node, GPU or not: it
// is what finds the GPU nodes, so nothing gates it.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	spec := &in.Policy.Spec.NFD
	image := render.Image(string(spec.Repository), string(spec.Image), string(spec.Version))
	workload := func(name string, pod corev1.PodSpec) render.Workload {
		w := in.Workload(name, state.NodeFeatureDiscovery, &spec.ContainerSettings, image, pod)
		// NVIDIA's operator does not deploy NFD (its chart's subchart
		// does), so daemonsets.podSecurityContext never reached it there:
		// NFD keeps its own, non-root and seccomp'd.
		w.OwnPodSecurityContext = true
		return w
	}
	worker, err := render.DaemonSet(workload(WorkerName, workerPod()))
	if err != nil {
		return nil, err
	}
	master, err := render.Deployment(workload(MasterName, masterPod()))
	if err != nil {
		return nil, err
	}
	gc, err := render.Deployment(workload(GCName, gcPod()))
	if err != nil {
		return nil, err
	}
	var objs []client.Object
	objs = append(objs, configMaps(in)...)
	for _, a := range access(in) {
		objs = append(objs, a.Objects()...)
	}
	objs = append(objs, workerFeaturePolicy(in)...)
	return append(objs, master, gc, worker), nil
}

// masterPod labels nodes from the features workers report. It only talks
// to the API server.
func masterPod() corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName:           MasterName,
		AutomountServiceAccountToken: ptr.To(true), // it talks to the API server
		SecurityContext:              nonRootPod(),
		Containers: []corev1.Container{{
			Name:            "nfd-master",
			Command:         []string{"nfd-master"},
			Env:             []corev1.EnvVar{render.FieldEnv("NODE_NAME", "spec.nodeName")},
			Ports:           healthPorts(),
			SecurityContext: restricted(),
			// nfd-master serves /healthz once its NodeFeature caches
			// have synced.
			StartupProbe:   healthProbe(0, 30),
			LivenessProbe:  healthProbe(0, 3),
			ReadinessProbe: healthProbe(0, 10),
			VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: configDir, ReadOnly: true}},
		}},
		Volumes: []corev1.Volume{render.ConfigMapVolume("config", MasterName+"-conf")},
	}
}

// workerPod reads the node's PCI devices, OS and feature files through
// read-only host mounts and reports them as NodeFeature objects.
func workerPod() corev1.PodSpec {
	hostRO := func(name, hostPath, mountPath string) (corev1.Volume, corev1.VolumeMount) {
		return render.HostPathVolume(name, hostPath, ""), corev1.VolumeMount{Name: name, MountPath: mountPath, ReadOnly: true}
	}
	pod := corev1.PodSpec{
		ServiceAccountName:           WorkerName,
		AutomountServiceAccountToken: ptr.To(true), // it talks to the API server
		SecurityContext:              nonRootPod(),
		Containers: []corev1.Container{{
			Name:    "nfd-worker",
			Command: []string{"nfd-worker"},
			Env: []corev1.EnvVar{
				render.FieldEnv("NODE_NAME", "spec.nodeName"), render.FieldEnv("POD_NAME", "metadata.name"), render.FieldEnv("POD_UID", "metadata.uid"),
			},
			Ports:           healthPorts(),
			SecurityContext: restricted(),
			// nfd-worker starts serving /healthz only once its first
			// discovery succeeded.
			LivenessProbe:  healthProbe(10, 3),
			ReadinessProbe: healthProbe(5, 10),
			VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: configDir, ReadOnly: true}},
		}},
		Volumes: []corev1.Volume{render.ConfigMapVolume("config", WorkerName+"-conf")},
	}
	for _, m := range [][3]string{
		{"host-boot", "/boot", "/host-boot"},
		{"host-os-release", "/etc/os-release", "/host-etc/os-release"},
		{"host-sys", "/sys", "/host-sys"},
		{"host-usr-lib", "/usr/lib", "/host-usr/lib"},
		{"host-lib", "/lib", "/host-lib"},
		{"host-proc-swaps", "/proc/swaps", "/host-proc/swaps"},
		{"features-d", gfd.FeaturesDir, gfd.FeaturesDir},
	} {
		v, vm := hostRO(m[0], m[1], m[2])
		pod.Volumes = append(pod.Volumes, v)
		pod.Containers[0].VolumeMounts = append(pod.Containers[0].VolumeMounts, vm)
	}
	return pod
}

// gcPod removes the NodeFeature objects of deleted nodes.
func gcPod() corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName:           GCName,
		AutomountServiceAccountToken: ptr.To(true), // it talks to the API server
		SecurityContext:              nonRootPod(),
		Containers: []corev1.Container{{
			Name:            "nfd-gc",
			Command:         []string{"nfd-gc"},
			Env:             []corev1.EnvVar{render.FieldEnv("NODE_NAME", "spec.nodeName")},
			Ports:           healthPorts(),
			SecurityContext: restricted(),
			// nfd-gc serves /healthz from its start, before its node
			// informer has synced.
			LivenessProbe:  healthProbe(10, 3),
			ReadinessProbe: healthProbe(5, 3),
		}},
	}
}

// healthPort is where nfd-master, nfd-worker and nfd-gc serve /healthz
// and /metrics over HTTP: the -port default, which none of them is given.
// NFD v0.19.0 dropped the gRPC health service the probes used before.
const healthPort = 8080

// healthPorts declares the HTTP port, named as NFD's chart names it, so
// that a metrics scraper can find it.
func healthPorts() []corev1.ContainerPort {
	return []corev1.ContainerPort{{Name: "http", ContainerPort: healthPort}}
}

func healthProbe(delay, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/healthz", Port: intstr.FromInt32(healthPort),
		}},
		InitialDelaySeconds: delay, PeriodSeconds: 10, TimeoutSeconds: 1, FailureThreshold: failures,
	}
}

func nonRootPod() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// Kinds lists the kinds Render returns.
func (Operand) Kinds() []schema.GroupVersionKind {
	return append([]schema.GroupVersionKind{render.KindConfigMap, render.KindDaemonSet, render.KindDeployment,
		render.KindValidatingAdmissionPolicy, render.KindValidatingAdmissionPolicyBinding}, render.RBACKinds...)
}
