package escalation

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/state/dradriver"
)

const draImage = "nvcr.io/nvidia/dra-driver-nvidia-gpu:v0.5.0"

func podTemplate(sa, image string, mutate func(*corev1.PodSpec)) corev1.PodTemplateSpec {
	t := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{Name: "main", Image: image}}}}
	mutate(&t.Spec)
	return t
}

func imexDaemonSet(name, sa, image string, mutate func(*corev1.PodSpec)) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, Template: podTemplate(sa, image, mutate)}}
}

func mpsDeployment(name, sa, image string, mutate func(*corev1.PodSpec)) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, Template: podTemplate(sa, image, mutate)}}
}

func none(*corev1.PodSpec) {}

// The compute-domain controller's and the kubelet plugin's tokens may
// create the workloads their templates make, and no other (issue 56): their
// Roles let them create any DaemonSet or Deployment of the operator's
// namespace, where Pod Security is privileged and the operator's
// ServiceAccount is.
func TestDRATokensCreateTheirOwnWorkloadsOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	applyDRAAccess(t, ctx)
	controller := impersonate(t, namespace, dradriver.ControllerName, "controller-x", "control-plane-1")
	plugin := impersonate(t, namespace, dradriver.KubeletPluginServiceAccount, "plugin-x", "imex-node")
	imex := func(mutate func(*corev1.PodSpec)) *appsv1.DaemonSet {
		return imexDaemonSet("computedomain-daemon-abc", dradriver.ComputeDomainDaemonServiceAccount, draImage, mutate)
	}

	g.Eventually(func() error {
		return controller.Create(ctx, imexDaemonSet("computedomain-daemon-abc", "gpu-operator", draImage, none), client.DryRunAll)
	}, 30*time.Second, 200*time.Millisecond).Should(MatchError(ContainSubstring("run as the ServiceAccount their template names (compute-domain-daemon-service-account), not gpu-operator")))
	g.Expect(controller.Create(ctx, imexDaemonSet("computedomain-daemon-abc", dradriver.ComputeDomainDaemonServiceAccount, "evil.example/x:1", none), client.DryRunAll)).
		To(MatchError(ContainSubstring("run its image nvcr.io/nvidia/dra-driver-nvidia-gpu only, not evil.example/x:1")))
	g.Expect(controller.Create(ctx, imex(func(p *corev1.PodSpec) {
		p.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}), client.DryRunAll)).To(MatchError(ContainSubstring("the IMEX daemons run unprivileged")))
	g.Expect(controller.Create(ctx, imex(func(p *corev1.PodSpec) {
		p.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		p.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "root", MountPath: "/host"}}
	}), client.DryRunAll)).To(MatchError(ContainSubstring("the IMEX daemons run unprivileged: no volume")))
	g.Expect(controller.Create(ctx, imexDaemonSet("nvidia-driver-daemonset", dradriver.ComputeDomainDaemonServiceAccount, draImage, none), client.DryRunAll)).
		To(MatchError(ContainSubstring("may write DaemonSets computedomain-daemon-* only")))
	for what, mutate := range map[string]func(*corev1.PodSpec){
		"a capability": func(p *corev1.PodSpec) {
			p.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
		},
		"a Secret's volume": func(p *corev1.PodSpec) {
			p.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "proxy"}}}}
		},
		"a Secret's env": func(p *corev1.PodSpec) {
			p.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "proxy"}}}}
		},
		"a host port": func(p *corev1.PodSpec) {
			p.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 22, HostPort: 22}}
		},
	} {
		g.Expect(controller.Create(ctx, imex(mutate), client.DryRunAll)).To(MatchError(ContainSubstring("read no Secret")), what)
	}
	g.Expect(controller.Create(ctx, imex(func(p *corev1.PodSpec) {
		p.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
	}), client.DryRunAll)).To(MatchError(ContainSubstring("no volume, host namespace, privilege escalation or unconfined profile")))
	older := imexDaemonSet("computedomain-daemon-abc", dradriver.ComputeDomainDaemonServiceAccount, "nvcr.io/nvidia/dra-driver-nvidia-gpu:v0.4.0", none)
	g.Expect(controller.Create(ctx, older, client.DryRunAll)).To(Succeed(), "a controller not yet rolled to the new version creates from the old")
	g.Expect(controller.Create(ctx, imex(none), client.DryRunAll)).To(Succeed(), "an IMEX daemon DaemonSet as its template makes it")

	// One made before the driver's image changed keeps its old image: the
	// controller removes its finalizer with an update of the rest, which
	// passes; a change of its template does not.
	old := imexDaemonSet("computedomain-daemon-old", dradriver.ComputeDomainDaemonServiceAccount, "nvcr.io/nvidia/dra-driver-nvidia-gpu:v0.4.0", none)
	old.Finalizers = []string{"resource.nvidia.com/computeDomain"}
	g.Expect(admin.Create(ctx, old)).To(Succeed())
	old.Finalizers = nil
	g.Expect(controller.Update(ctx, old)).To(Succeed(), "its finalizer removed")
	old.Spec.Template.Spec.Containers[0].Image = "evil.example/x:1"
	g.Expect(controller.Update(ctx, old)).To(MatchError(ContainSubstring("only, not evil.example/x:1")))
	g.Expect(controller.Delete(ctx, old)).To(Succeed(), "one of its own names")

	mps := func(node string) func(*corev1.PodSpec) {
		return func(p *corev1.PodSpec) {
			p.NodeName, p.HostPID = node, true
			p.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}
	}
	g.Expect(plugin.Create(ctx, mpsDeployment("mps-control-daemon-1-ab", "gpu-operator", draImage, mps("imex-node")), client.DryRunAll)).
		To(MatchError(ContainSubstring("not gpu-operator")))
	g.Expect(plugin.Create(ctx, mpsDeployment("mps-control-daemon-1-ab", "", draImage, mps("imex-node-2")), client.DryRunAll)).
		To(MatchError(ContainSubstring("are on its own node 'imex-node' only")))
	g.Expect(plugin.Create(ctx, mpsDeployment("gpu-operator", "", draImage, mps("imex-node")), client.DryRunAll)).
		To(MatchError(ContainSubstring("may write Deployments mps-control-daemon-* only")))
	mpsOwn := mpsDeployment("mps-control-daemon-1-ab", dradriver.KubeletPluginServiceAccount, draImage, func(p *corev1.PodSpec) {
		mps("imex-node")(p)
		for _, d := range []string{"/", "/var/lib/kubelet/plugins/gpu.nvidia.com/mps/1/shm"} {
			p.Volumes = append(p.Volumes, corev1.Volume{Name: fmt.Sprintf("v%d", len(p.Volumes)),
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: d}}})
		}
	})
	g.Expect(plugin.Create(ctx, mpsOwn, client.DryRunAll)).
		To(Succeed(), "an MPS control daemon as its template makes it: as SERVICE_ACCOUNT_NAME, privileged, host paths, on its own node")
	g.Expect(plugin.Create(ctx, mpsDeployment("mps-control-daemon-1-ab", "", draImage, mps("imex-node")), client.DryRunAll)).
		To(Succeed(), "or as the namespace's default, without SERVICE_ACCOUNT_NAME")
	otherNodes := mpsDeployment("mps-control-daemon-2-cd", "", draImage, mps("imex-node-2"))
	g.Expect(admin.Create(ctx, otherNodes)).To(Succeed())
	g.Expect(plugin.Delete(ctx, otherNodes)).To(MatchError(ContainSubstring("on its own node 'imex-node' only")), "another node's MPS daemon")
}
