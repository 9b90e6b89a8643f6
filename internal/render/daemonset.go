package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/budget"
)

// GPUTaintToleration tolerates the taint admins commonly put on GPU nodes
// (kubectl taint nodes <node> nvidia.com/gpu=present:NoSchedule).
var gpuTaintToleration = corev1.Toleration{
	Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
}

// readinessTaintToleration tolerates the operator's readiness taint: the
// operands are what make the node ready. Every operand tolerates it, the
// option on or off, so that turning it on or off changes no pod template
// and restarts nothing.
var readinessTaintToleration = corev1.Toleration{
	Key: gpuv1.TaintGPUNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
}

// unhealthyTaintToleration tolerates the taint a node keeps while its GPUs
// are repaired: the repair restarts the device plugin and reloads the
// driver there. Like the readiness taint's, it is on every operand and
// left out of the template hash.
var unhealthyTaintToleration = corev1.Toleration{
	Key: gpuv1.TaintGPUUnhealthy, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
}

// migReconfiguringToleration tolerates the taint a node keeps while its
// MIG devices are reconfigured: mig-manager runs there then, and the
// device plugin, GFD and dcgm-exporter come back before it goes. Like the
// others, it is on every operand and left out of the template hash.
var migReconfiguringToleration = corev1.Toleration{
	Key: gpuv1.TaintMIGReconfiguring, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
}

// modeSwitchingToleration tolerates the taint a node keeps while its
// allocation mode is switched: the new mode's plugin starts there then,
// and every other operand stays. Like the others, it is on every operand
// and left out of the template hash.
var modeSwitchingToleration = corev1.Toleration{
	Key: gpuv1.TaintModeSwitching, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
}

// NotReadyTolerations are what a pod the scheduler places on a GPU node
// that is not ready yet tolerates: the common GPU taint, the operator's
// readiness taint and the policy's daemonsets.tolerations, as the
// operands do; not the operator's maintenance taints nor a cordon, which
// keep it off a node being upgraded, repaired, reconfigured or switched.
func NotReadyTolerations(cp *gpuv1.ClusterPolicy) []corev1.Toleration {
	out := []corev1.Toleration{gpuTaintToleration, readinessTaintToleration}
	for _, t := range cp.Spec.Daemonsets.Tolerations {
		out = append(out, t.Core())
	}
	return out
}

// NoExecuteTolerations are the policy's daemonsets.tolerations that
// tolerate NoExecute taints (their effect NoExecute, or any): a pod the
// operator binds to a node by name stays there only under a quarantine
// its operands run under.
func NoExecuteTolerations(cp *gpuv1.ClusterPolicy) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range cp.Spec.Daemonsets.Tolerations {
		if t.Effect == corev1.TaintEffectNoExecute || t.Effect == "" {
			out = append(out, t.Core())
		}
	}
	return out
}

// ownTaintTolerations are the tolerations of the operator's own taints.
var ownTaintTolerations = []corev1.Toleration{readinessTaintToleration, unhealthyTaintToleration, migReconfiguringToleration,
	modeSwitchingToleration}

// Workload describes one operand DaemonSet.
type Workload struct {
	Policy    *gpuv1.ClusterPolicy
	Namespace string
	Name      string
	State     string
	// Component is the operand's shared settings: pull policy and secrets,
	// env, args and resources for the main container.
	Component *gpuv1.ContainerSettings
	// Image is the main container's image reference.
	Image string
	// Gate is the node affinity from the state graph; empty selects every
	// node.
	Gate []corev1.NodeSelectorRequirement
	// GateEither are alternatives, one of which must hold beside Gate:
	// one node selector term each. Empty when Gate alone decides.
	GateEither [][]corev1.NodeSelectorRequirement
	// Pod is the operand's own pod spec. Its first container is the main
	// one, to which the policy's image, env, args and resources are added.
	Pod corev1.PodSpec
	// OnDelete keeps the DaemonSet controller from replacing pods, whatever
	// daemonsets.updateStrategy says: the operator replaces them itself.
	OnDelete bool
	// PodAnnotations are added to the pod template, after the user's.
	PodAnnotations map[string]string
	// OwnPodSecurityContext keeps the pod's security context whatever
	// daemonsets.podSecurityContext says: for an operand NVIDIA's operator
	// does not deploy, which the setting never reached there.
	OwnPodSecurityContext bool
	// PodLabels are added to the pod template over the daemonsets labels;
	// the operator's own labels win over them.
	PodLabels gpuv1.Labels
	// ObjectLabels go on the workload object only, not on its pods.
	ObjectLabels map[string]string
	// App is the app label NVIDIA's operator gives the operand's workload
	// and pods (nvidia-driver-daemonset, nvidia-device-plugin-daemonset,
	// ...), which NVIDIA users' runbooks, alerts and log queries select
	// pods by; empty for none. It is not in the selector, which never
	// changes for the life of a workload.
	App string
	// AppComponent, when set, is the app.kubernetes.io/component of the
	// workload and its pods in place of the state's name: the driver's
	// is nvidia-driver, as at NVIDIA.
	AppComponent string
	// Daemonsets overrides the policy's daemonsets settings (labels,
	// annotations, tolerations, priority class) for this workload: an
	// NVIDIADriver's pool has its own. Nil means the policy's.
	Daemonsets *gpuv1.DaemonsetsSpec
	// Inputs are what the pods read besides their spec, such as a digest
	// of a configuration file: they go on the pod template as annotations
	// and count in its hash, so that a new content makes the running pods
	// outdated (and rolls them).
	Inputs map[string]string
	// HashEnv, when set, names an env variable of the main container that
	// carries the template's hash. The variable is left out of the hash,
	// which it is a function of: adding it to a running workload makes
	// no pod outdated.
	HashEnv string
}

// DaemonSet builds the operand's DaemonSet with the policy's daemonsets
// settings, the gate, and a hash of the pod spec on the pod template.
func DaemonSet(w Workload) (*appsv1.DaemonSet, error) {
	ds := &appsv1.DaemonSet{TypeMeta: TypeMeta("apps/v1", "DaemonSet"), ObjectMeta: workloadMeta(w)}
	template, err := podTemplate(w)
	if err != nil {
		return nil, err
	}
	strategy, err := updateStrategy(w.common(), w.OnDelete)
	if err != nil {
		return nil, err
	}
	if strategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
		// Only here: a rolling DaemonSet's pods are made again on any
		// template change, and an annotation they did not need would
		// roll every one of them once.
		template.Annotations[AnnotationMetadataHash] = metadataHash(template.Labels, template.Annotations)
	}
	ds.Spec = appsv1.DaemonSetSpec{
		Selector:       &metav1.LabelSelector{MatchLabels: SelectorLabels(w.Name)},
		UpdateStrategy: strategy,
		Template:       template,
	}
	return ds, nil
}

// Deployment builds a single-replica operand Deployment, such as
// nfd-master, with the same pod settings as the DaemonSets.
func Deployment(w Workload) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{TypeMeta: TypeMeta("apps/v1", "Deployment"), ObjectMeta: workloadMeta(w)}
	template, err := podTemplate(w)
	if err != nil {
		return nil, err
	}
	d.Spec = appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1),
		Selector: &metav1.LabelSelector{MatchLabels: SelectorLabels(w.Name)},
		Template: template,
	}
	return d, nil
}

// common is the daemonsets settings the workload renders with.
func (w Workload) common() *gpuv1.DaemonsetsSpec {
	if w.Daemonsets != nil {
		return w.Daemonsets
	}
	return &w.Policy.Spec.Daemonsets
}

func workloadMeta(w Workload) metav1.ObjectMeta {
	common := w.common()
	meta := ObjectMeta(w.Policy, w.Name, w.Namespace, w.State)
	meta.Labels = merge(stringMap(common.Labels), meta.Labels)
	for k, v := range w.nvidiaLabels() {
		meta.Labels[k] = v
	}
	for k, v := range w.ObjectLabels {
		meta.Labels[k] = v
	}
	meta.Annotations = merge(map[string]string(common.Annotations), nil)
	return meta
}

// podTemplate completes the operand's pod spec: the policy's image, pull
// settings, env, args and resources on the main container, tolerations,
// priority, the gate, and the hash of the resulting spec.
func podTemplate(w Workload) (corev1.PodTemplateSpec, error) {
	common := w.common()
	pod := *w.Pod.DeepCopy()
	if len(pod.Containers) == 0 {
		return corev1.PodTemplateSpec{}, fmt.Errorf("%s: the pod spec has no container", w.Name)
	}
	main := &pod.Containers[0]
	main.Image = w.Image
	main.ImagePullPolicy = w.Component.ImagePullPolicy
	main.Env = Env(main.Env, w.Component.Env)
	if len(w.Component.Args) > 0 {
		// As in the NVIDIA GPU Operator: the policy's args replace the
		// container's own.
		main.Args = slices.Clone(w.Component.Args)
	}
	for _, list := range [][]corev1.Container{pod.InitContainers, pod.Containers[1:]} {
		for i := range list {
			// Init containers and sidecars run the main image unless
			// they name their own, and pull as the main one does.
			if list[i].Image == "" {
				list[i].Image = w.Image
			}
			if list[i].ImagePullPolicy == "" {
				list[i].ImagePullPolicy = w.Component.ImagePullPolicy
			}
		}
	}
	if r := w.Component.Resources; r != nil {
		main.Resources = corev1.ResourceRequirements{Limits: r.Limits, Requests: r.Requests}
	}
	for _, s := range w.Component.ImagePullSecrets {
		ref := corev1.LocalObjectReference{Name: string(s)}
		if !slices.Contains(pod.ImagePullSecrets, ref) {
			pod.ImagePullSecrets = append(pod.ImagePullSecrets, ref)
		}
	}
	pod.Tolerations = append(append(pod.Tolerations, gpuTaintToleration), ownTaintTolerations...)
	for _, t := range common.Tolerations {
		pod.Tolerations = append(pod.Tolerations, t.Core())
	}
	pod.PriorityClassName = string(common.PriorityClassName)
	if common.PodSecurityContext != nil && !w.OwnPodSecurityContext {
		pod.SecurityContext = common.PodSecurityContext.DeepCopy()
	}
	if w.Component.UsesHostNetwork() {
		pod.HostNetwork, pod.DNSPolicy = true, corev1.DNSClusterFirstWithHostNet
	}
	if len(w.Gate) > 0 {
		if pod.Affinity == nil {
			pod.Affinity = &corev1.Affinity{}
		}
		// The gate is the node affinity; an operand's own pod
		// (anti-)affinity stays.
		pod.Affinity.NodeAffinity = &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: gateTerms(w.Gate, w.GateEither),
			},
		}
	}
	sortVolumes(&pod)
	hash, err := specHash(&pod, w.Inputs)
	if err != nil {
		return corev1.PodTemplateSpec{}, fmt.Errorf("%s: %w", w.Name, err)
	}
	meta := podMeta(withPodLabels(common, w.PodLabels), SelectorLabels(w.Name), w.State, hash)
	if w.HashEnv != "" {
		pod.Containers[0].Env = append(pod.Containers[0].Env, corev1.EnvVar{Name: w.HashEnv, Value: hash})
	}
	for k, v := range w.nvidiaLabels() {
		meta.Labels[k] = v
	}
	for k, v := range w.PodAnnotations {
		meta.Annotations[k] = v
	}
	for k, v := range w.Inputs {
		meta.Annotations[k] = v
	}
	return corev1.PodTemplateSpec{ObjectMeta: meta, Spec: pod}, nil
}

// withPodLabels returns the daemonsets settings with extra pod labels over
// their labels.
func withPodLabels(common *gpuv1.DaemonsetsSpec, extra gpuv1.Labels) *gpuv1.DaemonsetsSpec {
	if len(extra) == 0 {
		return common
	}
	out := *common
	out.Labels = make(gpuv1.Labels, len(common.Labels)+len(extra))
	maps.Copy(out.Labels, common.Labels)
	maps.Copy(out.Labels, extra)
	return &out
}

// nvidiaLabels are the labels NVIDIA's operator gives the workload and its
// pods, over the user's daemonsets.labels as NVIDIA's are (gpu-operator
// v26.7.0 controllers/object_controls.go: applyCommonDaemonsetMetadata
// skips app on pods).
func (w Workload) nvidiaLabels() map[string]string {
	out := map[string]string{}
	if w.App != "" {
		out[LabelApp] = w.App
	}
	if w.AppComponent != "" {
		out[LabelComponent] = w.AppComponent
	}
	return out
}

func updateStrategy(common *gpuv1.DaemonsetsSpec, onDelete bool) (appsv1.DaemonSetUpdateStrategy, error) {
	if onDelete || common.UpdateStrategy == string(appsv1.OnDeleteDaemonSetStrategyType) {
		return appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}, nil
	}
	s := appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType}
	if ru := common.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		v := *ru.MaxUnavailable
		// The NVIDIA chart writes counts as strings ("1"); the DaemonSet
		// API wants an integer for a count.
		if v.Type == intstr.String && v.StrVal != "" && v.StrVal[len(v.StrVal)-1] != '%' {
			n, err := budget.Nodes("spec.daemonsets.rollingUpdate.maxUnavailable", v, 0)
			if err != nil {
				return s, err
			}
			v = intstr.FromInt32(int32(n))
		}
		s.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &v}
	}
	return s, nil
}

// podMeta returns the pod template's metadata. Only the selector, state
// and user labels go on pods, and never the operator's version: a template
// label change restarts every pod of a rolling DaemonSet.
func podMeta(common *gpuv1.DaemonsetsSpec, selector map[string]string, state, hash string) metav1.ObjectMeta {
	labels := merge(stringMap(common.Labels), selector)
	labels[LabelState] = state
	labels[LabelComponent] = state
	annotations := merge(map[string]string(common.Annotations), map[string]string{AnnotationTemplateHash: hash})
	return metav1.ObjectMeta{Labels: labels, Annotations: annotations}
}

// specHash hashes the pod spec. Labels and annotations are left out on
// purpose: changing them must never make a pod count as outdated. So are
// the tolerations of the operator's own taints: a toleration changes
// nothing in a running pod, and with them left out the hash stays what it
// was before operands tolerated the taints, so adding one replaces no
// driver (a driver whose hash changes goes through a fleet upgrade).
func specHash(spec *corev1.PodSpec, inputs map[string]string) (string, error) {
	hashed := *spec
	hashed.Tolerations = slices.DeleteFunc(slices.Clone(spec.Tolerations), func(t corev1.Toleration) bool {
		return slices.Contains(ownTaintTolerations, t)
	})
	if len(hashed.Tolerations) == 0 {
		hashed.Tolerations = nil
	}
	data, err := json.Marshal(&hashed)
	if err != nil {
		return "", fmt.Errorf("hashing the pod spec: %w", err)
	}
	if len(inputs) > 0 {
		// Without inputs the hash is the spec's alone, as it always was.
		more, err := json.Marshal(inputs) // map keys marshal sorted
		if err != nil {
			return "", fmt.Errorf("hashing the pod inputs: %w", err)
		}
		data = append(data, more...)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8]), nil
}

func stringMap(l gpuv1.Labels) map[string]string {
	out := make(map[string]string, len(l))
	for k, v := range l {
		out[k] = string(v)
	}
	return out
}

// sortVolumes orders volumes by name and mounts by path, which also mounts
// a directory before anything mounted inside it.
func sortVolumes(pod *corev1.PodSpec) {
	slices.SortFunc(pod.Volumes, func(a, b corev1.Volume) int { return strings.Compare(a.Name, b.Name) })
	for _, containers := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
		for i := range containers {
			slices.SortFunc(containers[i].VolumeMounts, func(a, b corev1.VolumeMount) int {
				return strings.Compare(a.MountPath, b.MountPath)
			})
		}
	}
}

// gateTerms returns the node selector terms of a gate: the gate alone, or
// the gate and each alternative, any of which selects a node.
func gateTerms(gate []corev1.NodeSelectorRequirement, either [][]corev1.NodeSelectorRequirement) []corev1.NodeSelectorTerm {
	if len(either) == 0 {
		return []corev1.NodeSelectorTerm{{MatchExpressions: gate}}
	}
	terms := make([]corev1.NodeSelectorTerm, 0, len(either))
	for _, alt := range either {
		terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: append(slices.Clone(gate), alt...)})
	}
	return terms
}
