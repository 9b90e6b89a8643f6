package driverpool

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

const (
	oldKernel = "5.15.0-1040-azure"
	newKernel = "5.15.0-1041-azure"
	oldImage  = "nvcr.io/nvidia/driver:580-" + oldKernel + "-ubuntu22.04"
	newImage  = "nvcr.io/nvidia/driver:580-" + newKernel + "-ubuntu22.04"
)

func precompiledSet(images map[string]ImageVerdict) *Set {
	s := Resolve(byNVIDIADrivers(), []gpuv1alpha1.NVIDIADriver{nvidiaDriver("secure", func(s *gpuv1alpha1.NVIDIADriverSpec) {
		s.Default, s.UsePrecompiled, s.Version = true, ptr.To(true), "580"
		s.RepoConfig = &gpuv1alpha1.ConfigMapRef{Name: "mirror"}
	})})
	s.Images = images
	return s
}

// bootsKernel is a node of the pool that boots kernel, its driver running
// for runs ("" for none).
func bootsKernel(kernel, runs string) map[string]string {
	l := map[string]string{state.LabelOSReleaseID: "ubuntu", state.LabelOSVersionID: "22.04", gpuv1.LabelDriverPool: "secure"}
	if kernel != "" {
		l[state.LabelKernelVersion] = kernel
	}
	if runs != "" {
		l[gpuv1.LabelDriverKernel] = runs
	}
	return l
}

func TestPrecompiledNodeWaitsForItsKernelsImage(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		name   string
		kernel string
		images map[string]ImageVerdict
		why    string
	}{
		{"kernel unknown", "", nil, "its kernel is unknown"},
		{"image not checked", newKernel, nil, "checking that the precompiled driver image " + newImage},
		{"image being checked", newKernel, map[string]ImageVerdict{newImage: {State: ImageChecking}}, "checking"},
		{"image missing", newKernel, map[string]ImageVerdict{newImage: {State: ImageMissing, Message: "ErrImagePull: not found"}},
			"cannot be pulled (ErrImagePull: not found)"},
	} {
		s := precompiledSet(tc.images)
		labels := bootsKernel(tc.kernel, oldKernel)
		a := s.Assign("n", labels)
		g.Expect(a.AwaitsImage).To(ContainSubstring(tc.why), tc.name)
		g.Expect(a.Held()).To(BeTrue(), "%s: the node keeps the driver it runs", tc.name)
		g.Expect(a.ImageMissing).To(Equal(tc.images[newImage].State == ImageMissing), tc.name)
		g.Expect(a.WantedKernel(labels)).To(Equal(oldKernel), "%s: the kernel label stays", tc.name)
		g.Expect(s.Moves("n", labels)).To(BeFalse(), tc.name)
		_, ok := s.DaemonSetFor("n", labels)
		g.Expect(ok).To(BeFalse(), "%s: no DaemonSet is the node's until its image is found", tc.name)
		g.Expect(s.Assign("n", bootsKernel(tc.kernel, "")).WantedKernel(bootsKernel(tc.kernel, ""))).To(BeEmpty(),
			"%s: a node with no driver gets no kernel label", tc.name)
	}
}

func TestPrecompiledNodeMovesToItsKernelsImageOnceFound(t *testing.T) {
	g := NewWithT(t)
	s := precompiledSet(map[string]ImageVerdict{newImage: {State: ImageAvailable}, oldImage: {State: ImageAvailable}})
	labels := bootsKernel(newKernel, oldKernel)
	a := s.Assign("n", labels)
	g.Expect(a).To(Equal(Assignment{Pool: "secure", Kernel: newKernel, Image: newImage, Mode: gpuv1.AllocationDevicePlugin}))
	g.Expect(a.WantedKernel(labels)).To(Equal(newKernel))
	g.Expect(s.Moves("n", labels)).To(BeTrue(), "the old kernel's DaemonSet deletes the driver once the label moves")
	ds, ok := s.DaemonSetFor("n", labels)
	g.Expect(ok).To(BeTrue())
	g.Expect(ds).To(Equal("nvidia-driver-daemonset-secure-" + newKernel + "-ubuntu22.04"))
	g.Expect(s.NeedsOS("n", labels)).To(BeTrue())
	g.Expect(s.Pool("secure").Driver.RepoConfig).To(BeNil(), "a precompiled image installs nothing from a repository")

	nodes := []corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: labels}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: bootsKernel(oldKernel, oldKernel)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: bootsKernel("6.8.0-1009-aws", "")}},
	}
	groups := s.Groups(nodes)
	g.Expect(groups).To(HaveLen(1))
	g.Expect(groups[0].Precompiled).To(BeTrue())
	os := state.OSRelease{ID: "ubuntu", VersionID: "22.04"}
	g.Expect(groups[0].Kernels).To(Equal([]state.Kernel{{Version: oldKernel, OS: os}, {Version: newKernel, OS: os}}),
		"the kernel each node runs, and the one found for the node that boots another; none for a kernel not checked")
}

func TestPrecompiledDaemonSetNamesStayApartAndFit(t *testing.T) {
	g := NewWithT(t)
	s := precompiledSet(nil)
	os := state.OSRelease{ID: "rhel", VersionID: "9.4"}
	a := s.Pool("secure").PrecompiledImage(state.Kernel{Version: "5.14.0-427.37.1.el9_4.x86_64", OS: os})
	g.Expect(a).To(Equal("nvcr.io/nvidia/driver:580-5.14.0-427.37.1.el9_4.x86_64-rhel9.4"), "the tag holds NFD's value as it is")
	kernels := []string{"5.14.0-427.37.1.el9_4.x86_64", "5.14.0-427.37.1.el9.4.x86.64", "6.8.0-1009-" + strings.Repeat("x", 50)}
	s.Images = map[string]ImageVerdict{}
	for _, kernel := range kernels {
		s.Images[s.Pool("secure").PrecompiledImage(state.Kernel{Version: kernel, OS: os})] = ImageVerdict{State: ImageAvailable}
	}
	names := map[string]bool{}
	for _, kernel := range kernels {
		l := bootsKernel(kernel, "")
		l[state.LabelOSReleaseID], l[state.LabelOSVersionID] = "rhel", "9.4"
		name, ok := s.DaemonSetFor("n", l)
		g.Expect(ok).To(BeTrue())
		g.Expect(len(name)).To(BeNumerically("<=", 63), name)
		g.Expect(name).To(MatchRegexp(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`), "a DaemonSet name and a label value")
		g.Expect(names).NotTo(HaveKey(name), "two kernels, one name")
		names[name] = true
	}
}

func TestImageCheckVerdicts(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		name  string
		pod   operandpods.Pod
		want  ImageState
		retry bool
	}{
		{"pulled and exited", operandpods.Pod{Phase: corev1.PodSucceeded, Pulled: true}, ImageAvailable, false},
		{"pulled, its command failed", operandpods.Pod{Phase: corev1.PodFailed, Pulled: true}, ImageAvailable, false},
		{"refused by the kubelet", operandpods.Pod{Phase: corev1.PodFailed, Reason: "OutOfcpu"}, ImageChecking, true},
		{"failed by the pod garbage collector, its node gone", operandpods.Pod{Phase: corev1.PodFailed}, ImageChecking, true},
		{"pulling", operandpods.Pod{Phase: corev1.PodPending,
			Waiting: []operandpods.Waiting{{Reason: "ContainerCreating"}}}, ImageChecking, false},
		{"no such tag", operandpods.Pod{Phase: corev1.PodPending,
			Waiting: []operandpods.Waiting{{Reason: "ImagePullBackOff", Message: "not found"}}}, ImageMissing, false},
		{"bad reference", operandpods.Pod{Phase: corev1.PodPending,
			Waiting: []operandpods.Waiting{{Reason: "InvalidImageName"}}}, ImageMissing, false},
	} {
		v, retry := Verdict(&tc.pod)
		g.Expect(v.State).To(Equal(tc.want), tc.name)
		g.Expect(retry).To(Equal(tc.retry), tc.name)
	}
}

func TestCheckPodPullsAndExitsUnprivileged(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cluster-policy", UID: "uid"}}
	p := CheckPod(cp, "gpu-operator", newImage, "gpu-1", []string{"ngc"})
	g.Expect(p.Name).To(Equal(CheckPodName(newImage)))
	g.Expect(CheckPodName(newImage)).NotTo(Equal(CheckPodName(oldImage)))
	g.Expect(p.Spec.NodeName).To(Equal("gpu-1"))
	g.Expect(p.Spec.RestartPolicy).To(Equal(corev1.RestartPolicyNever), "the kubelet retries a pull, never a run")
	g.Expect(p.Spec.Containers[0].Image).To(Equal(newImage))
	res := p.Spec.Containers[0].Resources
	g.Expect(res.Limits.Cpu().MilliValue()).To(BeNumerically("<=", 100), "an image not yet trusted gets a few millicores")
	g.Expect(res.Limits.Memory().Value()).To(BeNumerically("<=", 64<<20), "and a few megabytes")
	g.Expect(res.Requests).To(HaveKey(corev1.ResourceCPU), "requests set, so that they do not default to the limits")
	g.Expect(res.Requests.Cpu().IsZero() && res.Requests.Memory().IsZero()).To(BeTrue(), "admitted on a node whose requests are full")
	g.Expect(*p.Spec.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(p.Spec.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "ngc"}}))
	g.Expect(p.OwnerReferences[0].UID).To(BeEquivalentTo("uid"), "deleting the policy deletes it")
	g.Expect(p.Annotations[AnnotationImage]).To(Equal(newImage))
}

// No DaemonSet is rendered for a kernel label whose image is not found
// on the node's OS (an OS upgraded under the label, or a label a person
// wrote): one there stays as it is. A kernel label outside a precompiled
// pool moves nothing.
func TestKernelLabelsOnlyCountWhereTheyCan(t *testing.T) {
	g := NewWithT(t)
	s := precompiledSet(map[string]ImageVerdict{oldImage: {State: ImageAvailable}, newImage: {State: ImageAvailable}})
	upgradedOS := bootsKernel(newKernel, oldKernel)
	upgradedOS[state.LabelOSVersionID] = "24.04"
	s.Images["nvcr.io/nvidia/driver:580-"+oldKernel+"-ubuntu24.04"] = ImageVerdict{State: ImageMissing, Message: "not found"}
	s.Images["nvcr.io/nvidia/driver:580-"+newKernel+"-ubuntu24.04"] = ImageVerdict{State: ImageAvailable}
	image, ok := s.RunningImage(upgradedOS)
	g.Expect(ok).To(BeTrue())
	g.Expect(image).To(Equal("nvcr.io/nvidia/driver:580-"+oldKernel+"-ubuntu24.04"), "checked, so that its verdict is known")
	groups := s.Groups([]corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: upgradedOS}}})
	os := state.OSRelease{ID: "ubuntu", VersionID: "24.04"}
	g.Expect(groups[0].Kernels).To(Equal([]state.Kernel{{Version: newKernel, OS: os}}), "no DaemonSet rendered for an image known missing")
	g.Expect(groups[0].KeptKernels).To(Equal([]state.Kernel{{Version: oldKernel, OS: os}}), "one there stays as it is")

	compiled := Resolve(byNVIDIADrivers(), []gpuv1alpha1.NVIDIADriver{nvidiaDriver("plain", func(s *gpuv1alpha1.NVIDIADriverSpec) { s.Default = true })})
	labels := map[string]string{gpuv1.LabelDriverPool: "plain", gpuv1.LabelDriverKernel: "written-by-a-person",
		state.LabelOSReleaseID: "ubuntu", state.LabelOSVersionID: "22.04"}
	g.Expect(compiled.Moves("n", labels)).To(BeFalse())
	_, ok = compiled.RunningImage(labels)
	g.Expect(ok).To(BeFalse())
}

// A kernel a node runs is rendered only once its image under the pool's
// settings was pulled; until then its DaemonSet is kept as it is. Nodes on
// their host's driver, or opted out, count for nothing.
func TestUnpulledKernelsAreKept(t *testing.T) {
	g := NewWithT(t)
	os := state.OSRelease{ID: "ubuntu", VersionID: "22.04"}
	runs := []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: bootsKernel(oldKernel, oldKernel)}}}
	for name, images := range map[string]map[string]ImageVerdict{
		"not checked":   nil,
		"being checked": {oldImage: {State: ImageChecking}},
		"missing":       {oldImage: {State: ImageMissing}},
	} {
		groups := precompiledSet(images).Groups(runs)
		g.Expect(groups[0].Kernels).To(BeEmpty(), name)
		g.Expect(groups[0].KeptKernels).To(Equal([]state.Kernel{{Version: oldKernel, OS: os}}), name)
	}
	groups := precompiledSet(map[string]ImageVerdict{oldImage: {State: ImageAvailable}}).Groups(runs)
	g.Expect(groups[0].Kernels).To(Equal([]state.Kernel{{Version: oldKernel, OS: os}}))
	g.Expect(groups[0].KeptKernels).To(BeEmpty())

	host := bootsKernel(oldKernel, oldKernel)
	host[gpuv1.LabelDriverRoot] = string(gpuv1.DriverRootHost)
	optedOut := bootsKernel(newKernel, "")
	optedOut[gpuv1.DeployLabel("driver")] = "false"
	groups = precompiledSet(map[string]ImageVerdict{oldImage: {State: ImageAvailable}, newImage: {State: ImageAvailable}}).Groups(
		[]corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "host", Labels: host}}, {ObjectMeta: metav1.ObjectMeta{Name: "out", Labels: optedOut}}})
	g.Expect(groups[0].Kernels).To(BeEmpty())
	g.Expect(groups[0].KeptKernels).To(BeEmpty())
}

// The check pod pulls on cordoned and maintained nodes (NoSchedule), but
// not on a quarantined one (NoExecute) unless the policy lets operands run
// under that taint.
func TestCheckPodStaysOffQuarantinedNodes(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{}
	node := func(taints ...corev1.Taint) *corev1.Node {
		n := &corev1.Node{}
		n.Spec.Taints = taints
		return n
	}
	cordoned := corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	gpu := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	quarantine := corev1.Taint{Key: "security.example.com/quarantine", Effect: corev1.TaintEffectNoExecute}
	dedicated := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoExecute}

	tolerations := CheckTolerations(cp)
	g.Expect(CheckMayRunOn(node(), tolerations)).To(BeTrue())
	g.Expect(CheckMayRunOn(node(cordoned, gpu), tolerations)).To(BeTrue(), "NoSchedule taints are tolerated")
	g.Expect(CheckMayRunOn(node(gpu, quarantine), tolerations)).To(BeFalse(), "a NoExecute taint is a quarantine")
	g.Expect(CheckMayRunOn(node(dedicated), tolerations)).To(BeFalse())
	for _, tol := range tolerations {
		g.Expect(tol.Effect).NotTo(Equal(corev1.TaintEffectNoExecute), "none of its own")
	}

	cp.Spec.Daemonsets.Tolerations = []gpuv1.Toleration{
		{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: "other", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	tolerations = CheckTolerations(cp)
	g.Expect(CheckMayRunOn(node(dedicated), tolerations)).To(BeTrue(), "operands run under it, so does the check")
	g.Expect(CheckMayRunOn(node(dedicated, quarantine), tolerations)).To(BeFalse())
	g.Expect(CheckPod(cp, "gpu-operator", newImage, "gpu-1", nil).Spec.Tolerations).To(Equal(tolerations))
}
