package contract

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/dradriver"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

func renderDRA(t *testing.T, cp *gpuv1.ClusterPolicy, inUse bool) []client.Object {
	t.Helper()
	objs, err := dradriver.Operand{}.Render(state.RenderInput{Policy: cp, Namespace: fixture.Namespace,
		Variants: fixture.Variants(cp), DRAInUse: inUse})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func controllerOf(objs []client.Object) *appsv1.Deployment {
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok && d.Name == dradriver.ControllerName {
			return d
		}
	}
	return nil
}

// The compute-domain controller, as NVIDIA's 0600 renders it: the
// controller binary at NVIDIA's verbosity, its own image for the IMEX
// daemons, its ServiceAccount, no leader election for its one replica, a
// control plane node preferred and its taints tolerated.
func TestDRAControllerContract(t *testing.T) {
	g := NewWithT(t)
	ps := draPolicies(t)
	d := controllerOf(renderDRA(t, ps["dra-full"], true))
	g.Expect(d).NotTo(BeNil(), "compute domains are on by default: %s (L1)", draController)
	g.Expect(*d.Spec.Replicas).To(Equal(int32(1)))
	// Its pods are no node's kubelet plugin: the operator reads a per-node
	// state's pods by their state label.
	g.Expect(d.Labels).To(HaveKeyWithValue(render.LabelState, string(state.DRADriver)), "the Deployment is the state's, for pruning")
	g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue(render.LabelState, dradriver.ControllerPodState))
	pod := d.Spec.Template.Spec
	g.Expect(pod.ServiceAccountName).To(Equal(dradriver.ControllerName), "%s L45", draController)
	g.Expect(ptr.Deref(pod.AutomountServiceAccountToken, false)).To(BeTrue(), "it watches ComputeDomains and writes DaemonSets")
	c := pod.Containers[0]
	g.Expect(c.Command).To(Equal([]string{"compute-domain-controller", "-v", "$(LOG_VERBOSITY)"}), "%s L81-89; %s", draController, draImage)
	values := map[string]string{}
	fields := map[string]string{}
	for _, e := range c.Env {
		values[e.Name] = e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			fields[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	// 0600 L90-132; draCtlMain: IMAGE_NAME renders the IMEX daemons.
	g.Expect(values).To(HaveKeyWithValue("IMAGE_NAME", c.Image))
	g.Expect(values).To(HaveKeyWithValue("LEADER_ELECTION_ENABLED", "false"))
	g.Expect(values).To(HaveKeyWithValue("LOG_VERBOSITY", "4"))
	g.Expect(values).To(HaveKeyWithValue("LOG_VERBOSITY_CD_DAEMON", "4"))
	g.Expect(values).To(HaveKeyWithValue("HTTP_ENDPOINT", ":8080"))
	g.Expect(values).To(HaveKeyWithValue("NVIDIA_VISIBLE_DEVICES", "void"))
	g.Expect(values).To(HaveKeyWithValue("FEATURE_GATES", "MPSSupport=true,PassthroughSupport=true,TimeSlicingSettings=false"))
	// draCtlMain: CD_DAEMON_IMAGE_PULL_SECRET_NAMES, which NVIDIA leaves
	// unset: the IMEX daemons pull the controller's private image too.
	g.Expect(values).To(HaveKeyWithValue("CD_DAEMON_IMAGE_PULL_SECRET_NAMES", "ngc,mirror"))
	g.Expect(fields).To(Equal(map[string]string{"POD_NAME": "metadata.name", "NAMESPACE": "metadata.namespace"}))
	g.Expect(c.ImagePullPolicy).To(Equal(corev1.PullAlways))
	g.Expect(pod.ImagePullSecrets).To(ConsistOf(corev1.LocalObjectReference{Name: "ngc"}, corev1.LocalObjectReference{Name: "mirror"}))
	g.Expect(pod.Tolerations).To(ContainElements(
		corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		corev1.Toleration{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}), "%s L68-79", draController)
	g.Expect(pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(BeNil(),
		"the controller gates no node: it runs wherever it fits")

	// The controller's own section, not a plugin's (0600 L129-135).
	g.Expect(values).To(HaveKeyWithValue("MAX_NODES_PER_IMEX_DOMAIN", "18"))
	g.Expect(c.Resources.Limits.Memory().String()).To(Equal("128Mi"))
	// One replica without leader election: never two at once.
	g.Expect(d.Spec.Strategy.Type).To(Equal(appsv1.RecreateDeploymentStrategyType))

	for name, cp := range ps {
		got := controllerOf(renderDRA(t, cp, true))
		if !cp.Spec.DRADriver.ComputeDomainsEnabled() {
			g.Expect(got).To(BeNil(), "%s: no controller without compute domains", name)
			continue
		}
		g.Expect(got).NotTo(BeNil(), name)
		g.Expect(got.Spec.Template.Spec.ServiceAccountName).To(Equal(dradriver.ControllerName), name)
		g.Expect(got.Spec.Template.Spec.Containers[0].Command[0]).To(Equal("compute-domain-controller"), name)
	}
	g.Expect(controllerOf(renderDRA(t, ps["dra-gpus-only"], true))).To(BeNil(), "no controller without compute domains")
}

// A cluster with no node in allocation mode dra holds none of the
// driver's objects; one with some gets them, rendered the same each time
// (the feature gates come from a map).
func TestDRARendersOnlyWhenInUseAndStably(t *testing.T) {
	g := NewWithT(t)
	cp := draPolicies(t)["dra-full"]
	g.Expect(renderDRA(t, cp, false)).To(BeEmpty())
	first, again := renderDRA(t, cp, true), renderDRA(t, cp, true)
	g.Expect(first).NotTo(BeEmpty())
	a, err := yaml.Marshal(first)
	g.Expect(err).NotTo(HaveOccurred())
	for range 20 {
		b, err := yaml.Marshal(again)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(b)).To(Equal(string(a)))
		again = renderDRA(t, cp, true)
	}
	kinds := map[string]bool{}
	for _, o := range first {
		kinds[o.GetObjectKind().GroupVersionKind().Kind] = true
	}
	for _, k := range (dradriver.Operand{}).Kinds() {
		delete(kinds, k.Kind)
	}
	g.Expect(kinds).To(BeEmpty(), "every kind rendered is listed in Kinds, so that it is pruned")
}
