package dradriver

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// ControllerContainer is the compute-domain controller's container.
const ControllerContainer = "compute-domain"

// controllerDeployment is the compute-domain controller: one replica for
// the cluster, which turns each ComputeDomain into a DaemonSet of IMEX
// daemons (run from IMAGE_NAME) on the domain's nodes. It gates no node
// and has no probe, as in NVIDIA's 0600_controller-deployment.yaml. It
// prefers a control-plane node and tolerates its taints (L52-79).
func controllerDeployment(in state.RenderInput, d *gpuv1.DRADriverSpec, image string) (client.Object, error) {
	env := []corev1.EnvVar{
		{Name: "HTTP_ENDPOINT", Value: ":8080"},
		{Name: "METRICS_PATH", Value: "/metrics"},
		{Name: "LOG_VERBOSITY", Value: "4"},
		{Name: "LOG_VERBOSITY_CD_DAEMON", Value: "4"},
		render.FieldEnv("POD_NAME", "metadata.name"),
		render.FieldEnv("NAMESPACE", "metadata.namespace"),
		{Name: "IMAGE_NAME", Value: image},
		{Name: "NVIDIA_VISIBLE_DEVICES", Value: "void"},
		// One replica: NVIDIA runs it without leader election.
		{Name: "LEADER_ELECTION_ENABLED", Value: "false"},
	}
	if gates := featureGates(d); gates != "" {
		env = append(env, corev1.EnvVar{Name: "FEATURE_GATES", Value: gates})
	}
	if len(d.ImagePullSecrets) > 0 {
		// The IMEX daemons pull the same image
		// (cmd/compute-domain-controller/main.go:
		// CD_DAEMON_IMAGE_PULL_SECRET_NAMES; NVIDIA's manifest leaves it
		// unset, so a private registry fails there).
		env = append(env, corev1.EnvVar{Name: "CD_DAEMON_IMAGE_PULL_SECRET_NAMES", Value: secretNames(d)})
	}
	pod := corev1.PodSpec{
		ServiceAccountName:           ControllerName,
		AutomountServiceAccountToken: ptr.To(true),
		Affinity: &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 100,
				Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.NodeSelectorOpExists},
				}},
			}}},
		},
		Tolerations: []corev1.Toleration{
			{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
		},
		Containers: []corev1.Container{{
			Name:    ControllerContainer,
			Command: []string{"compute-domain-controller", "-v", "$(LOG_VERBOSITY)"},
			Env:     env,
		}},
	}
	settings := containerSettings(d, d.ComputeDomains.Controller)
	// The controller gates nothing: no node affinity from the graph.
	w := render.Workload{Policy: in.Policy, Namespace: in.Namespace, Name: ControllerName, State: string(state.DRADriver), App: ControllerName,
		Component: &settings, Image: image, Pod: pod}
	deployment, err := render.Deployment(w)
	if err != nil {
		return nil, err
	}
	// One controller at a time: without leader election a rolling update
	// would run two for a while, both writing the IMEX DaemonSets.
	deployment.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	// Its pods serve no node, wherever they land: labelled as the
	// dra-driver state's, they would be taken for the kubelet plugin of
	// their node (its state judged from them, a MIG change waiting for
	// them to leave it, a repair restarting them). The Deployment itself
	// stays the state's, for pruning.
	deployment.Spec.Template.Labels[render.LabelState] = ControllerPodState
	return deployment, nil
}
