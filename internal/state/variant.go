package state

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
)

// Variant is what differs between GPU nodes in a way that changes an
// operand's pod: where the driver lives and which container runtime runs.
// The operator labels each GPU node with its variant, and an operand whose
// pod depends on it runs one DaemonSet per variant in use, each selecting
// its nodes by those labels, as the driver runs one per pool and OS.
type Variant struct {
	DriverRoot gpuv1.DriverRoot
	Runtime    gpuv1.Runtime
	// DevicePluginConfig is the device plugin configuration the node runs
	// when it is not the policy's default; "" for the default.
	DevicePluginConfig string
}

// DefaultVariant is the variant a policy expects of its nodes: the driver
// container (or the host's driver when the driver is disabled) and the
// policy's default runtime. Its DaemonSets keep the names users know from
// the NVIDIA GPU Operator; the others add a suffix.
func DefaultVariant(spec *gpuv1.ClusterPolicySpec) Variant {
	v := Variant{DriverRoot: gpuv1.DriverRootContainer, Runtime: spec.Operator.DefaultRuntime}
	if !spec.Driver.IsEnabled() {
		v.DriverRoot = gpuv1.DriverRootHost
	}
	if !SupportedRuntime(v.Runtime) {
		// docker is the NVIDIA chart's default, kept for compatibility;
		// containerd is what such clusters run today.
		v.Runtime = gpuv1.RuntimeContainerd
	}
	return v
}

// SupportedRuntime reports whether the toolkit can make a runtime start
// GPU containers here. docker nodes run cri-dockerd, which this operator
// does not support.
func SupportedRuntime(r gpuv1.Runtime) bool {
	return r == gpuv1.RuntimeContainerd || r == gpuv1.RuntimeCRIO
}

// HasRuntimeHandler reports whether the toolkit registers NVIDIA runtime
// handlers with a node's runtime, which GPU pods then select with the
// RuntimeClasses: always on containerd, and on CRI-O where the device
// plugin hands GPUs out by CDI name, as NVIDIA's operator does with CDI on
// (gpu-operator v26.7.0 controllers/object_controls.go:1257-1275,
// CRIO_CONFIG_MODE=config, the handlers not the default). Otherwise CRI-O
// gets the toolkit's OCI hook, which injects GPUs into every container and
// needs no RuntimeClass: NVIDIA's choice too without CDI (1317-1329), for
// config mode without CDI would make the NVIDIA runtime CRI-O's default,
// and a device plugin passing GPU lists by env needs that hook. With the
// NRI plugin the toolkit configures no runtime at all.
func HasRuntimeHandler(spec *gpuv1.ClusterPolicySpec, r gpuv1.Runtime) bool {
	if spec.CDI.UsesNRI() {
		return false
	}
	return r == gpuv1.RuntimeContainerd || (r == gpuv1.RuntimeCRIO && HandsOutByCDI(spec))
}

// RuntimeOf returns the runtime a kubelet reports in
// status.nodeInfo.containerRuntimeVersion (containerd://1.7.27,
// cri-o://1.31.0, docker://27.3.1), or false for none it names.
func RuntimeOf(version string) (gpuv1.Runtime, bool) {
	scheme, _, ok := strings.Cut(version, "://")
	if !ok {
		return "", false
	}
	switch scheme {
	case "containerd":
		return gpuv1.RuntimeContainerd, true
	case "cri-o":
		return gpuv1.RuntimeCRIO, true
	case "docker":
		return gpuv1.RuntimeDocker, true
	}
	return "", false
}

// VariantOfLabels reads a node's variant from the labels the operator set,
// and false when the driver root or the runtime is missing (no label of
// the device plugin configuration is the default).
func VariantOfLabels(labels map[string]string) (Variant, bool) {
	v := Variant{DriverRoot: gpuv1.DriverRoot(labels[gpuv1.LabelDriverRoot]), Runtime: gpuv1.Runtime(labels[gpuv1.LabelContainerRuntime]),
		DevicePluginConfig: labels[gpuv1.LabelDevicePluginConfigInUse]}
	return v, v.DriverRoot != "" && v.Runtime != ""
}

// Variants returns the distinct variants in a list, the default first, then
// in a stable order, leaving out those the operator does not support.
func Variants(def Variant, seen []Variant) []Variant {
	out := []Variant{def}
	for _, v := range seen {
		if SupportedRuntime(v.Runtime) && slices.Contains(driverRoots, string(v.DriverRoot)) && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.SortStableFunc(out[1:], func(a, b Variant) int {
		return cmp.Or(cmp.Compare(a.DriverRoot, b.DriverRoot), cmp.Compare(a.Runtime, b.Runtime),
			cmp.Compare(a.DevicePluginConfig, b.DevicePluginConfig))
	})
	return out
}

// Dimensions says which parts of the variant an operand's pod depends on.
type Dimensions struct {
	DriverRoot, Runtime, DevicePluginConfig bool
}

// Project keeps the parts of a variant that the dimensions name.
func (d Dimensions) Project(v Variant) Variant {
	if !d.DriverRoot {
		v.DriverRoot = ""
	}
	if !d.Runtime {
		v.Runtime = ""
	}
	if !d.DevicePluginConfig {
		v.DevicePluginConfig = ""
	}
	return v
}

// VariantsFor returns the distinct projections of the input's variants, the
// default's first: the DaemonSets an operand with those dimensions renders.
func (in RenderInput) VariantsFor(d Dimensions) []Variant {
	variants := in.Variants
	if len(variants) == 0 {
		variants = []Variant{DefaultVariant(&in.Policy.Spec)}
	}
	var out []Variant
	for _, v := range variants {
		if p := d.Project(v); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// Suffix is what a DaemonSet name gains for a projected variant: nothing
// for a driver container on containerd, whose DaemonSets keep the names
// users know from the NVIDIA GPU Operator, -host-driver for a host driver,
// -crio for CRI-O. The names do not depend on the policy, so that changing
// its defaults moves no node between DaemonSets by name alone.
func (v Variant) Suffix() string {
	var s string
	if v.DriverRoot == gpuv1.DriverRootHost {
		s += "-host-driver"
	}
	if v.Runtime != "" && v.Runtime != gpuv1.RuntimeContainerd {
		s += "-" + string(v.Runtime)
	}
	if v.DevicePluginConfig != "" {
		s += configSuffix(v.DevicePluginConfig)
	}
	return s
}

// shortConfigName is a configuration name that can stand in a DaemonSet's
// name as it is. The longest name, the device plugin's on a host driver
// and docker (49 characters before the configuration's), must stay a
// label value (63): the DaemonSet's name is its pods' name label.
var shortConfigName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?$`)

// configSuffix names a device plugin configuration in a DaemonSet name,
// after "-c-", so that no configuration's name (crio, host-driver) reads
// as another dimension's suffix: the name itself when short and lower
// case, a hash of it otherwise (configuration names are ConfigMap keys:
// upper case, '_' and '.' are allowed there, not in object names).
func configSuffix(name string) string {
	if shortConfigName.MatchString(name) {
		return "-c-" + name
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return fmt.Sprintf("-c-%08x", h.Sum32())
}

// RuntimeClassName is the RuntimeClass a GPU operand's pod names on nodes
// of a runtime: the policy's where the toolkit registers a handler, none
// where the runtime injects GPUs by hook, or the toolkit's NRI plugin does
// (ManagementDevices).
func RuntimeClassName(spec *gpuv1.ClusterPolicySpec, r gpuv1.Runtime) *string {
	if !HasRuntimeHandler(spec, r) {
		return nil
	}
	name := string(spec.Operator.RuntimeClass)
	return &name
}

// The values the variant labels take.
var (
	driverRoots = []string{string(gpuv1.DriverRootContainer), string(gpuv1.DriverRootHost)}
	runtimeKeys = []string{string(gpuv1.RuntimeContainerd), string(gpuv1.RuntimeCRIO), string(gpuv1.RuntimeDocker)}
)

// Requirements are the node affinity terms that select the nodes of a
// projected variant. The default variant's DaemonSets also take nodes the
// operator has not labelled yet, as every node was before variants
// existed: they exclude the other values rather than require their own,
// so that an operator upgrade takes no operand pod, a driver least of all,
// off a node before its labels are written.
func (v Variant) Requirements(def Variant, d Dimensions) []corev1.NodeSelectorRequirement {
	var reqs []corev1.NodeSelectorRequirement
	add := func(key, value, defValue string, all []string) {
		if value == "" {
			return
		}
		if value != defValue {
			reqs = append(reqs, corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}})
			return
		}
		others := slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == value })
		reqs = append(reqs, corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpNotIn, Values: others})
	}
	add(gpuv1.LabelDriverRoot, string(v.DriverRoot), string(def.DriverRoot), driverRoots)
	add(gpuv1.LabelContainerRuntime, string(v.Runtime), string(def.Runtime), runtimeKeys)
	if d.DevicePluginConfig {
		// The default's nodes carry no label: a configuration coming into
		// use changes no other DaemonSet.
		req := corev1.NodeSelectorRequirement{Key: gpuv1.LabelDevicePluginConfigInUse, Operator: corev1.NodeSelectorOpDoesNotExist}
		if v.DevicePluginConfig != "" {
			req = corev1.NodeSelectorRequirement{Key: gpuv1.LabelDevicePluginConfigInUse, Operator: corev1.NodeSelectorOpIn,
				Values: []string{v.DevicePluginConfig}}
		}
		reqs = append(reqs, req)
	}
	return reqs
}

// Effective drops the device plugin configuration from dimensions while
// the policy names no ConfigMap of configurations: then every node runs
// the defaults, and its DaemonSets are gated on nothing more than before
// configurations existed.
func (in RenderInput) Effective(d Dimensions) Dimensions {
	if cfg := in.Policy.Spec.DevicePlugin.Config; cfg == nil || cfg.Name == "" {
		d.DevicePluginConfig = false
	}
	return d
}

// AnnotationConfigDigest, on the pods of a DaemonSet that reads a device
// plugin configuration, is a digest of the file: k8s-device-plugin v0.20.0
// reads it at start (or on SIGHUP, which nothing sends here), so a new
// content must restart the pods. It counts in the template hash.
const AnnotationConfigDigest = "nvidia.com/gpu-operator.config-digest"

// configInputs is what the pods of a variant read of the device plugin's
// configuration: the digest of its file, when there is one.
func (in RenderInput) configInputs(v Variant) map[string]string {
	name := in.DevicePluginConfigFile(v)
	if name == "" {
		return nil
	}
	return map[string]string{AnnotationConfigDigest: in.DevicePluginConfigDigests[name]}
}

// Gated returns the gate with a projected variant's requirements added.
func (in RenderInput) Gated(v Variant, d Dimensions) []corev1.NodeSelectorRequirement {
	return append(slices.Clone(in.Gate), v.Requirements(DefaultVariant(&in.Policy.Spec), d)...)
}

// DaemonSets renders an operand's DaemonSets: one per projection of the
// variants in use onto the dimensions its pod depends on, each named with
// the variant's suffix and gated on the variant's labels.
func (in RenderInput) DaemonSets(name string, st Name, c *gpuv1.ContainerSettings, image string, d Dimensions,
	pod func(*gpuv1.ClusterPolicy, Variant) corev1.PodSpec) ([]client.Object, error) {
	return in.DaemonSetsWhere(name, st, c, image, d, pod, nil)
}

// DaemonSetsWhere renders the DaemonSets of the variants keep keeps (every
// one when nil), as DaemonSets does.
func (in RenderInput) DaemonSetsWhere(name string, st Name, c *gpuv1.ContainerSettings, image string, d Dimensions,
	pod func(*gpuv1.ClusterPolicy, Variant) corev1.PodSpec, keep func(Variant) bool) ([]client.Object, error) {
	return in.daemonSets(name, st, c, image, d, pod, keep, nil)
}

// DaemonSetsWith renders the DaemonSets as DaemonSets does, each workload
// completed by with (pod labels and annotations of the operand's own).
func (in RenderInput) DaemonSetsWith(name string, st Name, c *gpuv1.ContainerSettings, image string, d Dimensions,
	pod func(*gpuv1.ClusterPolicy, Variant) corev1.PodSpec, with func(*render.Workload)) ([]client.Object, error) {
	return in.daemonSets(name, st, c, image, d, pod, nil, with)
}

func (in RenderInput) daemonSets(name string, st Name, c *gpuv1.ContainerSettings, image string, d Dimensions,
	pod func(*gpuv1.ClusterPolicy, Variant) corev1.PodSpec, keep func(Variant) bool, with func(*render.Workload)) ([]client.Object, error) {
	var objs []client.Object
	d = in.Effective(d)
	for _, v := range in.VariantsFor(d) {
		if keep != nil && !keep(v) {
			continue
		}
		w := in.Workload(name+v.Suffix(), st, c, image, pod(in.Policy, v))
		// NVIDIA's app label is its DaemonSet's name: every variant's
		// pods are found by it.
		w.App = name
		w.Gate = in.Gated(v, d)
		if d.DevicePluginConfig {
			w.Inputs = in.configInputs(v)
		}
		// The NRI plugin's annotation is what gives the pod its GPUs: a
		// change of it is a new spec, as the hash says.
		w.PodAnnotations = ManagementDevices(&in.Policy.Spec, st, &w.Pod)
		for k, val := range w.PodAnnotations {
			if w.Inputs == nil {
				w.Inputs = map[string]string{}
			}
			w.Inputs[k] = val
		}
		if with != nil {
			with(&w)
		}
		ds, err := render.DaemonSet(w)
		if err != nil {
			return nil, err
		}
		objs = append(objs, ds)
	}
	return objs, nil
}

// The states whose pods see every GPU, through the NVIDIA runtime (the
// RuntimeClass) or the toolkit's NRI plugin: they manage the GPUs rather
// than being handed some by the device plugin.
var managementGPUClients = []Name{DevicePlugin, GPUFeatureDiscovery, DCGM, DCGMExporter, MPSControlDaemon, MIGManager}

// NRIDevicesAnnotation is the pod annotation the toolkit's NRI plugin reads
// the CDI devices of a container from (nvidia-container-toolkit v1.20.0,
// cmd/nvidia-ctk-installer/container/runtime/nri/plugin.go: the domain
// nvidia.cdi.k8s.io, container.<name>).
func NRIDevicesAnnotation(container string) string {
	return NRIDevicesAnnotationPrefix + "container." + container
}

// NRIDevicesAnnotationPrefix starts every annotation the NRI plugin reads
// devices from, for a container or the whole pod.
const NRIDevicesAnnotationPrefix = "nvidia.cdi.k8s.io/"

// ManagementDevices is the pod annotation that has the toolkit's NRI plugin
// give a management state's main container every GPU (the management CDI
// spec's device); nil without NRI, or for another state.
func ManagementDevices(spec *gpuv1.ClusterPolicySpec, st Name, pod *corev1.PodSpec) map[string]string {
	if !spec.CDI.UsesNRI() || !slices.Contains(managementGPUClients, st) || len(pod.Containers) == 0 {
		return nil
	}
	return map[string]string{NRIDevicesAnnotation(pod.Containers[0].Name): "management.nvidia.com/gpu=all"}
}
