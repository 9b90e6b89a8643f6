package render

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

func TestImage(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := map[string]struct{ repo, image, version, want string }{
		"tag":               {"nvcr.io/nvidia", "driver", "570.172.08", "nvcr.io/nvidia/driver:570.172.08"},
		"digest":            {"nvcr.io/nvidia", "driver", digest, "nvcr.io/nvidia/driver@" + digest},
		"tag and digest":    {"nvcr.io/nvidia", "k8s-device-plugin", "v0.20.0@" + digest, "nvcr.io/nvidia/k8s-device-plugin:v0.20.0@" + digest},
		"no repository":     {"", "busybox", "1.36", "busybox:1.36"},
		"trailing slash":    {"registry.local:5000/nvidia/", "driver", "1.0", "registry.local:5000/nvidia/driver:1.0"},
		"nested image name": {"nvcr.io", "nvidia/k8s/dcgm-exporter", "4.2.3", "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(Image(tt.repo, tt.image, tt.version)).To(Equal(tt.want))
		})
	}
}

func TestEnv(t *testing.T) {
	tests := map[string]struct {
		ours []corev1.EnvVar
		user []gpuv1.EnvVar
		want []corev1.EnvVar
	}{
		"sorted by name": {
			ours: []corev1.EnvVar{{Name: "B", Value: "2"}, {Name: "A", Value: "1"}},
			want: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}},
		},
		"user overrides ours by name": {
			ours: []corev1.EnvVar{{Name: "FAIL_ON_INIT_ERROR", Value: "true"}},
			user: []gpuv1.EnvVar{{Name: "FAIL_ON_INIT_ERROR", Value: "false"}, {Name: "EXTRA", Value: "x"}},
			want: []corev1.EnvVar{{Name: "EXTRA", Value: "x"}, {Name: "FAIL_ON_INIT_ERROR", Value: "false"}},
		},
		"empty": {want: []corev1.EnvVar{}},
		"a Secret's key, for the kubelet to read": {
			ours: []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: ""}},
			user: []gpuv1.EnvVar{{Name: "HTTPS_PROXY", ValueFrom: &gpuv1.EnvVarSource{SecretKeyRef: gpuv1.SecretKeySelector{
				Name: "proxy", Key: "url", Optional: ptr.To(true)}}}},
			want: []corev1.EnvVar{{Name: "HTTPS_PROXY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "proxy"}, Key: "url", Optional: ptr.To(true)}}}},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(Env(tt.ours, tt.user)).To(Equal(tt.want))
		})
	}
}

func TestDaemonSetHashIgnoresLabelsAndAnnotations(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{}
	w := Workload{Policy: cp, Namespace: "ns", Name: "ds", State: "driver", Component: &gpuv1.ContainerSettings{},
		Image: "i:1", Pod: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	before, err := DaemonSet(w)
	g.Expect(err).NotTo(HaveOccurred())

	cp.Spec.Daemonsets.Labels = gpuv1.Labels{"team": "gpu"}
	cp.Spec.Daemonsets.Annotations = gpuv1.Annotations{"note": "x"}
	relabelled, err := DaemonSet(w)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(relabelled.Spec.Template.Labels).To(HaveKeyWithValue("team", "gpu"))
	g.Expect(relabelled.Spec.Template.Annotations[AnnotationTemplateHash]).To(Equal(before.Spec.Template.Annotations[AnnotationTemplateHash]))

	w.Image = "i:2"
	changed, err := DaemonSet(w)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed.Spec.Template.Annotations[AnnotationTemplateHash]).NotTo(Equal(before.Spec.Template.Annotations[AnnotationTemplateHash]))
}

// The hash carried in an env variable (the driver's configuration digest)
// is the template's hash without it: a workload that gains the variable
// keeps its hash, and with it every running pod stays current.
func TestHashEnvCarriesTheHashItIsLeftOutOf(t *testing.T) {
	g := NewWithT(t)
	w := Workload{Policy: &gpuv1.ClusterPolicy{}, Namespace: "ns", Name: "ds", State: "driver", Component: &gpuv1.ContainerSettings{},
		Image: "i:1", Pod: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "A", Value: "a"}}}}}}
	without, err := DaemonSet(w)
	g.Expect(err).NotTo(HaveOccurred())
	w.HashEnv = "DIGEST"
	with, err := DaemonSet(w)
	g.Expect(err).NotTo(HaveOccurred())
	hash := without.Spec.Template.Annotations[AnnotationTemplateHash]
	g.Expect(with.Spec.Template.Annotations[AnnotationTemplateHash]).To(Equal(hash))
	g.Expect(with.Spec.Template.Spec.Containers[0].Env).To(Equal([]corev1.EnvVar{{Name: "A", Value: "a"}, {Name: "DIGEST", Value: hash}}))
	g.Expect(w.Pod.Containers[0].Env).To(HaveLen(1), "the workload's own pod is left as it was")

	w.Image = "i:2"
	changed, err := DaemonSet(w)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed.Spec.Template.Spec.Containers[0].Env[1].Value).To(Equal(changed.Spec.Template.Annotations[AnnotationTemplateHash]))
	g.Expect(changed.Spec.Template.Spec.Containers[0].Env[1].Value).NotTo(Equal(hash))
}

func TestDaemonSetUserLabelsCannotOverrideSelectors(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{}
	cp.Spec.Daemonsets.Labels = gpuv1.Labels{LabelName: "hijack", LabelState: "other"}
	ds, err := DaemonSet(Workload{Policy: cp, Name: "ds", State: "driver", Component: &gpuv1.ContainerSettings{},
		Pod: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ds.Spec.Template.Labels).To(HaveKeyWithValue(LabelName, "ds"))
	g.Expect(ds.Spec.Template.Labels).To(HaveKeyWithValue(LabelState, "driver"))
	g.Expect(ds.Labels).To(HaveKeyWithValue(LabelState, "driver"))
}

func TestUpdateStrategy(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{}
	w := Workload{Policy: cp, Name: "ds", State: "x", Component: &gpuv1.ContainerSettings{},
		Pod: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	ds, _ := DaemonSet(w)
	g.Expect(string(ds.Spec.UpdateStrategy.Type)).To(Equal("RollingUpdate"))

	w.OnDelete = true
	ds, _ = DaemonSet(w)
	g.Expect(string(ds.Spec.UpdateStrategy.Type)).To(Equal("OnDelete"), "the driver is always OnDelete")

	w.OnDelete = false
	cp.Spec.Daemonsets.UpdateStrategy = "OnDelete"
	ds, _ = DaemonSet(w)
	g.Expect(string(ds.Spec.UpdateStrategy.Type)).To(Equal("OnDelete"))
}

// The daemonsets settings NVIDIA applies to every operand reach the pod
// as NVIDIA's applyCommonDaemonsetConfig and applyHostNetworkConfig set
// them (gpu-operator v26.7.0 controllers/object_controls.go): the pod
// security context replaced, host networking with its DNS policy, the
// user's labels and annotations on the workload and its pods, NVIDIA's
// app label over a user's, and labels for the pods alone under ours.
func TestDaemonsetsSettingsReachThePods(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{}
	cp.Spec.Daemonsets = gpuv1.DaemonsetsSpec{Labels: gpuv1.Labels{"team": "gpu", "app": "mine"}, Annotations: gpuv1.Annotations{"owner": "infra"},
		PodSecurityContext: &corev1.PodSecurityContext{SupplementalGroups: []int64{3000}}}
	w := Workload{Policy: cp, Namespace: "ns", Name: "ds", State: "gfd", App: "gpu-feature-discovery",
		Component: &gpuv1.ContainerSettings{HostNetwork: ptr.To(true)}, PodLabels: gpuv1.Labels{"metrics": "gpu", LabelState: "not-ours"},
		Image: "i:1", Pod: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)},
			Containers: []corev1.Container{{Name: "c"}}}}
	ds, err := DaemonSet(w)
	g.Expect(err).NotTo(HaveOccurred())
	pod := ds.Spec.Template
	g.Expect(pod.Spec.SecurityContext).To(Equal(&corev1.PodSecurityContext{SupplementalGroups: []int64{3000}}))
	g.Expect(pod.Spec.HostNetwork).To(BeTrue())
	g.Expect(pod.Spec.DNSPolicy).To(Equal(corev1.DNSClusterFirstWithHostNet))
	g.Expect(pod.Labels).To(And(HaveKeyWithValue("team", "gpu"), HaveKeyWithValue("metrics", "gpu"),
		HaveKeyWithValue("app", "gpu-feature-discovery"), HaveKeyWithValue(LabelState, "gfd")))
	g.Expect(pod.Annotations).To(HaveKeyWithValue("owner", "infra"))
	g.Expect(ds.Labels).To(And(HaveKeyWithValue("team", "gpu"), HaveKeyWithValue("app", "gpu-feature-discovery")))
	g.Expect(ds.Labels).NotTo(HaveKey("metrics"), "pod labels go on the pods alone")
	g.Expect(ds.Annotations).To(HaveKeyWithValue("owner", "infra"))

	w.Component = &gpuv1.ContainerSettings{}
	cp.Spec.Daemonsets.PodSecurityContext = nil
	ds, err = DaemonSet(w)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ds.Spec.Template.Spec.SecurityContext).To(Equal(&corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)}), "the operand's own")
	g.Expect(ds.Spec.Template.Spec.HostNetwork).To(BeFalse())
	g.Expect(ds.Spec.Template.Spec.DNSPolicy).To(BeEmpty())
}
