package toolkit

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// k3s, RKE2 and microk8s keep containerd's config and socket elsewhere; the
// user names them with the toolkit's own variables, and the host mounts
// follow, while the container sees them at its fixed paths.
func TestRuntimePathsFollowTheUsersEnv(t *testing.T) {
	g := NewWithT(t)
	ps, err := fixture.Policies()
	g.Expect(err).NotTo(HaveOccurred())
	cp := ps["default"]
	cp.Spec.Toolkit.Env = []gpuv1.EnvVar{
		{Name: "CONTAINERD_CONFIG", Value: "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl"},
		{Name: "CONTAINERD_SOCKET", Value: "/run/k3s/containerd/containerd.sock"},
		{Name: "RUNTIME_SOCKET", Value: "/run/k3s/containerd/containerd.sock"},
		{Name: "CONTAINERD_SET_AS_DEFAULT", Value: "false"},
	}
	objs, err := Operand{}.Render(state.RenderInput{Policy: cp, Namespace: fixture.Namespace})
	g.Expect(err).NotTo(HaveOccurred())
	pod := objs[1].(*appsv1.DaemonSet).Spec.Template.Spec

	hostPaths := map[string]string{}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	g.Expect(hostPaths).To(HaveKeyWithValue("runtime-config", "/var/lib/rancher/k3s/agent/etc/containerd"))
	g.Expect(hostPaths).To(HaveKeyWithValue("runtime-socket", "/run/k3s/containerd"))

	env := map[string]string{}
	for _, e := range pod.Containers[0].Env {
		env[e.Name] = e.Value
	}
	g.Expect(env).To(HaveKeyWithValue("CONTAINERD_CONFIG", "/runtime/config-dir/config.toml.tmpl"))
	g.Expect(env).To(HaveKeyWithValue("RUNTIME_CONFIG", "/runtime/config-dir/config.toml.tmpl"))
	g.Expect(env).To(HaveKeyWithValue("CONTAINERD_SOCKET", "/runtime/sock-dir/containerd.sock"))
	g.Expect(env).To(HaveKeyWithValue("RUNTIME_SOCKET", "/runtime/sock-dir/containerd.sock"))
	g.Expect(env).To(HaveKeyWithValue("CONTAINERD_SET_AS_DEFAULT", "false"), "other variables pass as they are")
}

// The first variable the toolkit reads wins, as it reads them.
func TestFirstSetWins(t *testing.T) {
	g := NewWithT(t)
	user := []gpuv1.EnvVar{{Name: "CONTAINERD_CONFIG", Value: "/b/config.toml"}, {Name: "RUNTIME_CONFIG", Value: "/a/config.toml"}}
	g.Expect(firstSet(user, []string{"RUNTIME_CONFIG", "CONTAINERD_CONFIG"}, "/etc/containerd/config.toml")).To(Equal("/a/config.toml"))
	g.Expect(firstSet(nil, []string{"RUNTIME_CONFIG"}, "/etc/containerd/config.toml")).To(Equal("/etc/containerd/config.toml"))
}

// A CRI-O node's toolkit writes its hook into the hooks directory the user
// names, mounted from the host.
func TestCRIOHooksDirFollowsTheUsersEnv(t *testing.T) {
	g := NewWithT(t)
	_, mounts, volumes := runtimeSettings(gpuv1.RuntimeCRIO, false, "nvidia", []gpuv1.EnvVar{{Name: "CRIO_HOOKS_DIR", Value: "/etc/containers/oci/hooks.d"}})
	g.Expect(volumes).To(ContainElement(HaveField("VolumeSource.HostPath.Path", "/etc/containers/oci/hooks.d")))
	g.Expect(mounts).To(ContainElement(corev1.VolumeMount{Name: "runtime-hooks", MountPath: hooksDir}))
}
