package contract

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// requirement is one thing an operand's image needs from its pod, as read
// in the image's source at the version the operator ships.
type requirement struct {
	// source names the upstream repository, version and file it was read
	// from.
	source string
	// need says what the image needs, in our words.
	need string
	// check returns what is wrong with the pod, or nil.
	check func(p *podCase) error
	// only limits the requirement to some variants; nil means all.
	only func(v state.Variant) bool
	// where limits the requirement to some policies; nil means all.
	where func(spec *gpuv1.ClusterPolicySpec) bool
}

// podCase is one rendered pod: a policy, a node variant and the pod the
// operand runs there.
type podCase struct {
	policy  string
	variant state.Variant
	// workload names the DaemonSet or Deployment the pod is of.
	workload string
	pod      *corev1.PodSpec
	// annotations are the pod template's.
	annotations map[string]string
	spec        *gpuv1.ClusterPolicySpec
}

func (p *podCase) String() string {
	return fmt.Sprintf("%s policy, %s driver on %s (%s)", p.policy, p.variant.DriverRoot, p.variant.Runtime, p.workload)
}

// policies are the rendering cases: the defaults (containerd, driver
// container), every field set (CRI-O by default), and the driver disabled
// (host drivers).
func policies(t *testing.T) map[string]*gpuv1.ClusterPolicy {
	t.Helper()
	ps, err := fixture.Policies()
	if err != nil {
		t.Fatal(err)
	}
	host := ps["default"].DeepCopy()
	host.Spec.Driver.Enabled = new(bool)
	ps["driver-disabled"] = host
	// The full policy sets repositories, certificates and CRI-O at once:
	// each alone on the default policy too.
	mirror := ps["default"].DeepCopy()
	mirror.Spec.Driver.RepoConfig = &gpuv1.DriverRepoConfig{ConfigMapName: "mirror-repos"}
	ps["repo-mirror"] = mirror
	certs := ps["default"].DeepCopy()
	certs.Spec.Driver.CertConfig = &gpuv1.DriverCertConfig{Name: "mirror-ca"}
	ps["cert-only"] = certs
	// CDI off, as NVIDIA's chart before v25.10.
	legacy := ps["default"].DeepCopy()
	legacy.Spec.CDI.Enabled = new(bool)
	legacy.Spec.MIGManager.Enabled = ptr.To(true)
	ps["cdi-off"] = legacy
	// GKE's Container-Optimized OS, as NVIDIA documents it: Google's
	// driver under /home/kubernetes/bin/nvidia, the toolkit installed
	// there too, and a kubelet root elsewhere.
	cos := host.DeepCopy()
	cos.Spec.HostPaths.DriverInstallDir = "/home/kubernetes/bin/nvidia"
	cos.Spec.Toolkit.InstallDir = "/home/kubernetes/bin/nvidia"
	cos.Spec.HostPaths.KubeletRootDir = "/var/lib/kubelet-custom"
	ps["gke-cos"] = cos
	// CDI on, and the device plugin set to pass GPU lists through the
	// variable, as NVIDIA's values before v25.10 did.
	envvar := ps["default"].DeepCopy()
	envvar.Spec.DevicePlugin.Env = []gpuv1.EnvVar{{Name: "DEVICE_LIST_STRATEGY", Value: "envvar"}}
	ps["cdi-envvar"] = envvar
	// The toolkit's NRI plugin injects the operands' GPUs.
	nri := ps["default"].DeepCopy()
	nri.Spec.CDI.NRIPluginEnabled = ptr.To(true)
	nri.Spec.MIGManager.Enabled = ptr.To(true)
	ps["nri"] = nri
	// Open kernel modules chosen.
	open := ps["default"].DeepCopy()
	open.Spec.Driver.KernelModuleType = "open"
	ps["open-modules"] = open
	// Kernel module parameters, GB200's coherent memory mode for one.
	params := ps["default"].DeepCopy()
	params.Spec.Driver.KernelModuleConfig = &gpuv1.DriverKernelModuleConfig{Name: "gb200-params"}
	ps["module-params"] = params
	// GPUDirect RDMA, with the network operator's MOFED and with the
	// host's.
	rdma := ps["default"].DeepCopy()
	rdma.Spec.Driver.RDMA = &gpuv1.GPUDirectRDMASpec{Enabled: ptr.To(true)}
	ps["rdma"] = rdma
	hostMOFED := ps["default"].DeepCopy()
	hostMOFED.Spec.Driver.RDMA = &gpuv1.GPUDirectRDMASpec{Enabled: ptr.To(true), UseHostMOFED: ptr.To(true)}
	hostMOFED.Spec.Driver.Resources = driverResources
	ps["rdma-host-mofed"] = hostMOFED
	// NVIDIA's precompiled images, a branch as the version.
	precompiled := ps["default"].DeepCopy()
	precompiled.Spec.Driver.UsePrecompiled = ptr.To(true)
	precompiled.Spec.Driver.Version = "580"
	ps["precompiled"] = precompiled
	// GPUDirect Storage and GDRCopy, NVIDIA's default images.
	gpuDirect := ps["default"].DeepCopy()
	gpuDirect.Spec.GDS = &gpuv1.GPUDirectStorageSpec{Enabled: ptr.To(true), Repository: "nvcr.io/nvidia/cloud-native",
		Image: "nvidia-fs", Version: "2.29.4"}
	gpuDirect.Spec.GDRCopy = &gpuv1.GDRCopySpec{Enabled: ptr.To(true), Repository: "nvcr.io/nvidia/cloud-native",
		Image: "gdrdrv", Version: "v2.6", SidecarSettings: gpuv1.SidecarSettings{ImagePullSecrets: []gpuv1.ObjectName{"ngc"}}}
	ps["gds-gdrcopy"] = gpuDirect
	gdrcopyOnly := ps["default"].DeepCopy()
	gdrcopyOnly.Spec.GDRCopy = gpuDirect.Spec.GDRCopy.DeepCopy()
	ps["gdrcopy-only"] = gdrcopyOnly
	// GPUDirect built behind a mirror, with its certificates and a proxy.
	mirrored := gpuDirect.DeepCopy()
	mirrored.Spec.Driver.RepoConfig = &gpuv1.DriverRepoConfig{ConfigMapName: "mirror-repos"}
	mirrored.Spec.Driver.CertConfig = &gpuv1.DriverCertConfig{Name: "mirror-ca"}
	mirrored.Spec.Driver.SecretEnv = "proxy"
	mirrored.Spec.Driver.Resources = driverResources
	ps["gds-gdrcopy-mirror"] = mirrored
	return ps
}

// driverResources are driver.resources where a policy sets them: NVIDIA's
// operator gives them to the module containers too.
var driverResources = &gpuv1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
	Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")},
}

// pods renders a state under every policy and returns its pod for every
// node variant the operator supports: containerd and CRI-O, a driver
// container and a host driver.
func pods(t *testing.T, name state.Name) []*podCase {
	t.Helper()
	graph, err := registry.Graph()
	if err != nil {
		t.Fatal(err)
	}
	s, _ := graph.Get(name)
	var out []*podCase
	for pname, cp := range policies(t) {
		if !s.Operand.Enabled(&cp.Spec) {
			continue
		}
		variants := fixture.Variants(cp)
		in := state.RenderInput{Policy: cp, Namespace: fixture.Namespace, Gate: graph.Gate(name),
			DriverPools: fixture.DriverPools(cp), Variants: variants, ServiceMonitorAvailable: true,
			MPSConfigs: map[string]bool{"H200_MPS.x2": true}, DevicePluginConfigDigests: fixture.DevicePluginConfigDigests}
		objs, err := s.Operand.Render(in)
		if err != nil {
			t.Fatalf("rendering %s for the %s policy: %v", name, pname, err)
		}
		for _, v := range variants {
			var taking []string
			for _, o := range objs {
				ds, ok := o.(*appsv1.DaemonSet)
				if ok && selects(ds, v) {
					taking = append(taking, ds.Name)
					out = append(out, &podCase{policy: pname, variant: v, workload: ds.Name, pod: &ds.Spec.Template.Spec,
						annotations: ds.Spec.Template.Annotations, spec: &cp.Spec})
				}
			}
			// Every node of every variant gets the operand from one
			// DaemonSet; the driver runs one per OS, and none on a host
			// driver.
			switch {
			case name == state.Driver && v.DriverRoot == gpuv1.DriverRootHost:
				if len(taking) > 0 {
					t.Errorf("%s policy: the driver DaemonSets %v take nodes whose driver is the host's", pname, taking)
				}
			case name == state.MPSControlDaemon && !in.RunsMPS(v):
				if len(taking) > 0 {
					t.Errorf("%s policy: the MPS control daemon DaemonSets %v take nodes that do not share GPUs with MPS", pname, taking)
				}
			case len(taking) == 0:
				t.Errorf("%s policy: no %s DaemonSet takes the nodes of %+v", pname, name, v)
			case len(taking) > 1 && name != state.Driver:
				t.Errorf("%s policy: %s DaemonSets %v all take the nodes of %+v", pname, name, taking, v)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no pod of %s was rendered", name)
	}
	return out
}

// selects reports whether a DaemonSet's node affinity takes the nodes of a
// variant.
// modeTakesUnlabelled reports whether a DaemonSet's allocation mode
// requirement, if any, holds on a node without the allocation-mode label.
func modeTakesUnlabelled(ds *appsv1.DaemonSet) bool {
	aff := ds.Spec.Template.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, r := range term.MatchExpressions {
			if r.Key == gpuv1.LabelAllocationMode && (r.Operator == corev1.NodeSelectorOpIn || r.Operator == corev1.NodeSelectorOpExists) {
				return false
			}
		}
	}
	return true
}

func selects(ds *appsv1.DaemonSet, v state.Variant) bool {
	aff := ds.Spec.Template.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	want := map[string]string{gpuv1.LabelDriverRoot: string(v.DriverRoot), gpuv1.LabelContainerRuntime: string(v.Runtime)}
	if v.DevicePluginConfig != "" {
		want[gpuv1.LabelDevicePluginConfigInUse] = v.DevicePluginConfig
	}
	for _, term := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, r := range term.MatchExpressions {
			value, ok := want[r.Key]
			switch {
			case r.Key == gpuv1.LabelDevicePluginConfigInUse && (ok == (r.Operator == corev1.NodeSelectorOpDoesNotExist)):
				return false // the default's DaemonSet for another's node, or the reverse
			case !ok:
			case r.Operator == corev1.NodeSelectorOpIn && !slices.Contains(r.Values, value),
				r.Operator == corev1.NodeSelectorOpNotIn && slices.Contains(r.Values, value):
				return false
			}
		}
	}
	return true
}

// checkAll checks every requirement against every rendered pod of a state;
// pods checks that every variant's nodes get one.
func checkAll(t *testing.T, name state.Name, reqs []requirement) {
	t.Helper()
	checkCases(t, pods(t, name), reqs)
}

// checkCases checks requirements against rendered pods: each must hold
// for every pod it applies to, and apply to at least one.
func checkCases(t *testing.T, cases []*podCase, reqs []requirement) {
	t.Helper()
	for _, r := range reqs {
		if !strings.Contains(r.source, "@") || !strings.Contains(r.source, ":") {
			t.Errorf("requirement %q must name its upstream source as repo@version:path, not %q", r.need, r.source)
		}
		checked := 0
		for _, c := range cases {
			if (r.only != nil && !r.only(c.variant)) || (r.where != nil && !r.where(c.spec)) {
				continue
			}
			checked++
			if err := r.check(c); err != nil {
				t.Errorf("%s: %s\n  needed by %s\n  %v", c, r.need, r.source, err)
			}
		}
		if checked == 0 {
			t.Errorf("requirement %q holds for no pod rendered: it checks nothing", r.need)
		}
	}
}

// The checks a requirement is built from.

func container(p *podCase, name string) (*corev1.Container, error) {
	for _, list := range [][]corev1.Container{p.pod.InitContainers, p.pod.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i], nil
			}
		}
	}
	return nil, fmt.Errorf("no container %s", name)
}

// env checks a variable's value; want "" asks only that it is set.
func env(ctr, name, want string) func(*podCase) error {
	return func(p *podCase) error { return envIs(p, ctr, name, func(string) string { return want }) }
}

// envBy checks a variable against a value that depends on the case.
func envBy(ctr, name string, want func(*podCase) string) func(*podCase) error {
	return func(p *podCase) error { return envIs(p, ctr, name, func(string) string { return want(p) }) }
}

func envIs(p *podCase, ctr, name string, want func(string) string) error {
	c, err := container(p, ctr)
	if err != nil {
		return err
	}
	for _, e := range c.Env {
		if e.Name != name {
			continue
		}
		if w := want(e.Value); w != "" && e.Value != w {
			return fmt.Errorf("%s=%q, want %q", name, e.Value, w)
		}
		return nil
	}
	return fmt.Errorf("%s is not set in %s", name, ctr)
}

// fieldEnv checks a variable set from a pod field.
func fieldEnv(ctr, name, field string) func(*podCase) error {
	return func(p *podCase) error {
		c, err := container(p, ctr)
		if err != nil {
			return err
		}
		for _, e := range c.Env {
			if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == field {
				return nil
			}
		}
		return fmt.Errorf("%s is not set from %s", name, field)
	}
}

// mount describes a host path mounted into a container.
type mount struct {
	host, at    string
	readOnly    bool
	propagation corev1.MountPropagationMode // "" for none
}

// hostMount checks that a host path is mounted where the image reads it,
// with the access and propagation it needs.
func hostMount(ctr string, m mount) func(*podCase) error {
	return hostMountBy(ctr, func(*podCase) mount { return m })
}

func hostMountBy(ctr string, want func(*podCase) mount) func(*podCase) error {
	return func(p *podCase) error {
		m := want(p)
		c, err := container(p, ctr)
		if err != nil {
			return err
		}
		for _, vm := range c.VolumeMounts {
			if vm.MountPath != m.at {
				continue
			}
			v := volume(p, vm.Name)
			switch {
			case v == nil || v.HostPath == nil || v.HostPath.Path != m.host:
				return fmt.Errorf("%s is not the host's %s", m.at, m.host)
			case vm.ReadOnly != m.readOnly:
				return fmt.Errorf("%s: readOnly=%v, want %v", m.at, vm.ReadOnly, m.readOnly)
			case propagation(vm) != m.propagation:
				return fmt.Errorf("%s: propagation %q, want %q", m.at, propagation(vm), m.propagation)
			}
			return nil
		}
		return fmt.Errorf("nothing is mounted at %s in %s", m.at, ctr)
	}
}

func propagation(vm corev1.VolumeMount) corev1.MountPropagationMode {
	if vm.MountPropagation == nil {
		return ""
	}
	return *vm.MountPropagation
}

func volume(p *podCase, name string) *corev1.Volume {
	for i := range p.pod.Volumes {
		if p.pod.Volumes[i].Name == name {
			return &p.pod.Volumes[i]
		}
	}
	return nil
}

// configMapAt checks a ConfigMap is mounted read-only at a path.
func configMapAt(ctr, name, at string) func(*podCase) error {
	return func(p *podCase) error {
		c, err := container(p, ctr)
		if err != nil {
			return err
		}
		for _, vm := range c.VolumeMounts {
			if v := volume(p, vm.Name); vm.MountPath == at && vm.ReadOnly && v != nil && v.ConfigMap != nil && v.ConfigMap.Name == name {
				return nil
			}
		}
		return fmt.Errorf("ConfigMap %s is not mounted read-only at %s", name, at)
	}
}

// hostMountless checks nothing is mounted at a path in any container.
func hostMountless(p *podCase, at string) error {
	for _, list := range [][]corev1.Container{p.pod.InitContainers, p.pod.Containers} {
		for _, c := range list {
			for _, vm := range c.VolumeMounts {
				if vm.MountPath == at {
					return fmt.Errorf("%s mounts something at %s", c.Name, at)
				}
			}
		}
	}
	return nil
}

// noHostPath checks that no volume mounts a host path: one the image does
// not need, or whose type would fail a node that lacks it.
func noHostPath(path string) func(*podCase) error {
	return func(p *podCase) error {
		for _, v := range p.pod.Volumes {
			if v.HostPath != nil && v.HostPath.Path == path {
				return fmt.Errorf("volume %s mounts the host's %s", v.Name, path)
			}
		}
		return nil
	}
}

// noMountAt checks that a container mounts nothing at path.
func noMountAt(ctr, path string) func(*podCase) error {
	return func(p *podCase) error {
		c, err := container(p, ctr)
		if err != nil {
			return err
		}
		for _, m := range c.VolumeMounts {
			if m.MountPath == path {
				return fmt.Errorf("%s mounts %s at %s", ctr, m.Name, path)
			}
		}
		return nil
	}
}

// noVolume checks that the pod has no volume of that name.
func noVolume(name string) func(*podCase) error {
	return func(p *podCase) error {
		for _, v := range p.pod.Volumes {
			if v.Name == name {
				return fmt.Errorf("volume %s is there", name)
			}
		}
		return nil
	}
}

func privileged(ctr string, want bool) func(*podCase) error {
	return func(p *podCase) error {
		c, err := container(p, ctr)
		if err != nil {
			return err
		}
		got := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
		if got != want {
			return fmt.Errorf("%s privileged=%v, want %v", ctr, got, want)
		}
		return nil
	}
}

func hostPID(want bool) func(*podCase) error {
	return func(p *podCase) error {
		if p.pod.HostPID != want {
			return fmt.Errorf("hostPID=%v, want %v", p.pod.HostPID, want)
		}
		return nil
	}
}

// runtimeClass checks the pod names the policy's RuntimeClass exactly where
// the node's runtime has the NVIDIA handler, and none elsewhere.
func runtimeClass(p *podCase) error {
	got := p.pod.RuntimeClassName
	if p.spec.CDI.UsesNRI() {
		// The toolkit's NRI plugin injects every GPU into the main
		// container instead (nvidia-container-toolkit v1.20.0,
		// cmd/nvidia-ctk-installer/container/runtime/nri/plugin.go).
		if got != nil {
			return fmt.Errorf("runtimeClassName %s with the NRI plugin, which registers no handler", *got)
		}
		key := state.NRIDevicesAnnotation(p.pod.Containers[0].Name)
		if v := p.annotations[key]; v != "management.nvidia.com/gpu=all" {
			return fmt.Errorf("pod annotation %s=%q, want management.nvidia.com/gpu=all", key, v)
		}
		return nil
	}
	// NVIDIA names it everywhere but on CRI-O without CDI, where the
	// toolkit writes the OCI hook (gpu-operator v26.7.0
	// controllers/object_controls.go:2747-2753); here also where the
	// device plugin passes GPU lists by env, which needs that hook.
	if p.variant.Runtime == gpuv1.RuntimeContainerd || state.HandsOutByCDI(p.spec) {
		if got == nil || *got != string(p.spec.Operator.RuntimeClass) {
			return fmt.Errorf("runtimeClassName %v, want %s", got, p.spec.Operator.RuntimeClass)
		}
		return nil
	}
	if got != nil {
		return fmt.Errorf("runtimeClassName %s on %s, which has no such handler", *got, p.variant.Runtime)
	}
	return nil
}

// commandPrefix checks how a container's command and args begin.
func commandPrefix(ctr, want string) func(*podCase) error {
	return func(p *podCase) error {
		c, err := container(p, ctr)
		if err != nil {
			return err
		}
		if got := strings.Join(append(slices.Clone(c.Command), c.Args...), " "); !strings.HasPrefix(got, want) {
			return fmt.Errorf("runs %q, want %q first", got, want)
		}
		return nil
	}
}

// scriptHas checks that a container's shell script contains a line.
func scriptHas(ctr, line string) func(*podCase) error {
	return func(p *podCase) error {
		c, err := container(p, ctr)
		if err != nil {
			return err
		}
		if len(c.Command) < 3 || c.Command[0] != "sh" || !strings.Contains(c.Command[2], line) {
			return fmt.Errorf("%s's script has no %q", ctr, line)
		}
		return nil
	}
}

// probe checks one of a container's probes with a test of its handler;
// a nil test asks that there is no such probe.
func probe(ctr, kind string, test func(*corev1.Probe) error) func(*podCase) error {
	return func(p *podCase) error {
		c, err := container(p, ctr)
		if err != nil {
			return err
		}
		pr := map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe}[kind]
		switch {
		case test == nil && pr != nil:
			return fmt.Errorf("%s has a %s probe", ctr, kind)
		case test == nil:
			return nil
		case pr == nil:
			return fmt.Errorf("%s has no %s probe", ctr, kind)
		}
		return test(pr)
	}
}

func execProbe(want ...string) func(*corev1.Probe) error {
	return func(pr *corev1.Probe) error {
		if pr.Exec == nil || !slices.Equal(pr.Exec.Command, want) {
			return fmt.Errorf("probe runs %v, want %v", pr.Exec, want)
		}
		return nil
	}
}

func execProbeHas(part string) func(*corev1.Probe) error {
	return func(pr *corev1.Probe) error {
		if pr.Exec == nil || !strings.Contains(strings.Join(pr.Exec.Command, " "), part) {
			return fmt.Errorf("probe %v does not run %q", pr.Exec, part)
		}
		return nil
	}
}

func httpProbe(path string, port int) func(*corev1.Probe) error {
	return func(pr *corev1.Probe) error {
		if pr.HTTPGet == nil || pr.HTTPGet.Path != path || pr.HTTPGet.Port.IntValue() != port {
			return fmt.Errorf("probe %+v is not GET %s on %d", pr.ProbeHandler, path, port)
		}
		return nil
	}
}

// all combines checks.
func all(checks ...func(*podCase) error) func(*podCase) error {
	return func(p *podCase) error {
		for _, c := range checks {
			if err := c(p); err != nil {
				return err
			}
		}
		return nil
	}
}

func onRuntime(r gpuv1.Runtime) func(state.Variant) bool {
	return func(v state.Variant) bool { return v.Runtime == r }
}

// A node the operator has not labelled with its variant yet (every node,
// right after an operator upgrade that brings variants) stays with one
// DaemonSet of each per-node state, the default variant's: no operand pod,
// a driver pod least of all, leaves a node because the labels are not
// written yet. The allocation mode is a label too: an unlabelled node
// keeps its device plugin and gets no DRA driver.
func TestUnlabelledNodesKeepTheirPods(t *testing.T) {
	graph, err := registry.Graph()
	if err != nil {
		t.Fatal(err)
	}
	for pname, cp := range policies(t) {
		for _, name := range graph.PerNode() {
			s, _ := graph.Get(name)
			if !s.Operand.Enabled(&cp.Spec) || name == state.CUDAWorkload {
				// The CUDA workload has no DaemonSet: the node controller
				// makes its pod on each node.
				continue
			}
			objs, err := s.Operand.Render(state.RenderInput{Policy: cp, Namespace: fixture.Namespace, Gate: graph.Gate(name),
				DriverPools: fixture.DriverPools(cp), Variants: fixture.Variants(cp), DRAInUse: true})
			if err != nil {
				t.Fatal(err)
			}
			var taking []string
			for _, o := range objs {
				ds, ok := o.(*appsv1.DaemonSet)
				if !ok || !selects(ds, state.Variant{}) {
					continue
				}
				if modeTakesUnlabelled(ds) != (s.Mode != gpuv1.AllocationDRA) {
					t.Errorf("%s policy, %s: DaemonSet %s in allocation mode %q: taking a node without %s is %t",
						pname, name, ds.Name, s.Mode, gpuv1.LabelAllocationMode, modeTakesUnlabelled(ds))
				}
				taking = append(taking, ds.Name)
			}
			// The MPS control daemon runs only on nodes labelled with an MPS
			// configuration: an unlabelled node has none.
			if name == state.MPSControlDaemon && len(taking) == 0 {
				continue
			}
			if len(taking) == 0 || (len(taking) > 1 && name != state.Driver) {
				t.Errorf("%s policy, %s: DaemonSets %v take an unlabelled node; want the default variant's alone", pname, name, taking)
			}
		}
	}
}
