package dradriver

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// workloadPolicyName names the policy and binding that hold the workloads
// the driver's components create to what their templates make.
const workloadPolicyName = "workloads-nvidia-dra-driver"

// The workloads the components create, read at dra-driver-nvidia-gpu
// 95932046 (the pinned commit):
//   - the compute-domain controller creates one IMEX daemon DaemonSet per
//     domain, computedomain-daemon-<uid>, from
//     templates/compute-domain-daemon.tmpl.yaml: serviceAccountName
//     compute-domain-daemon-service-account, image IMAGE_NAME, env from
//     the downward API, no volume, nothing privileged
//     (cmd/compute-domain-controller/daemonset.go:243), and later removes
//     its finalizer with an update of the whole object (daemonset.go:348);
//   - with MPSSupport, the GPU kubelet plugin creates one MPS control
//     daemon Deployment per shared claim, mps-control-daemon-<claim>-<hash>,
//     from templates/mps-control-daemon.tmpl.yaml: pinned to its own node,
//     image IMAGE_NAME, privileged with the host's PID namespace and four
//     host paths, as SERVICE_ACCOUNT_NAME (the plugin's own, which the
//     operator sets) or the namespace's default
//     (cmd/gpu-kubelet-plugin/sharing.go:247, 312, 441).
//
// Their Roles let them create and patch any DaemonSet or Deployment of
// the operator's namespace, where Pod Security is privileged and the
// operator's ServiceAccount is: a token taken from a GPU node could run
// any image there as the operator, or mount the namespace's Secrets. The
// policy holds each to its own kind and names, the driver's repository
// and image (any tag: pods not yet rolled to a new version still create
// from the old), the ServiceAccount its template names, no Secret in a
// volume or env, no added capability or host port; the IMEX daemons to
// no privilege, volume or unconfined profile; the MPS daemons, created and
// deleted, to the plugin's own node.
const (
	imexDaemonSetPrefix   = "computedomain-daemon-"
	mpsDeploymentPrefix   = "mps-control-daemon-"
	defaultServiceAccount = "default"
)

func workloadPolicy(policy *gpuv1.ClusterPolicy, namespace, repositoryImage string) []client.Object {
	user := func(sa string) string { return render.ServiceAccountUser(namespace, sa) }
	meta := render.ObjectMeta(policy, workloadPolicyName, "", string(state.DRADriver))
	// What a template makes is checked where a write makes a template: a
	// create, or an update that changes it; the controller's finalizer
	// update passes on a DaemonSet made from an older image.
	writes := `variables.templateWritten`
	ours := `(c.image.startsWith("` + repositoryImage + `:") || c.image.startsWith("` + repositoryImage + `@"))`
	return render.AdmissionPolicy(meta, admissionv1.ValidatingAdmissionPolicySpec{
		FailurePolicy:    ptr.To(admissionv1.Fail),
		MatchConstraints: render.Writes("apps", []string{"v1"}, "daemonsets", "deployments", "daemonsets/*", "deployments/*"),
		MatchConditions: []admissionv1.MatchCondition{{
			Name:       "isDriverComponent",
			Expression: `request.userInfo.username in [` + user(ControllerName) + `, ` + user(KubeletPluginServiceAccount) + `]`,
		}},
		Variables: []admissionv1.Variable{
			render.UserNodeName,
			{Name: "isController", Expression: `request.userInfo.username == ` + user(ControllerName)},
			{Name: "pod", Expression: `(request.operation == "DELETE" ? oldObject : object).spec.template.spec`},
			{Name: "containers", Expression: `variables.pod.containers + variables.pod.?initContainers.orValue([])`},
			{Name: "templateWritten", Expression: `request.operation == "CREATE" || ` +
				`(request.operation == "UPDATE" && object.spec.template != oldObject.spec.template)`},
		},
		Validations: []admissionv1.Validation{
			{
				Expression: `request.?subResource.orValue("") == "" && (variables.isController ? ` +
					`request.kind.kind == "DaemonSet" && request.name.startsWith("` + imexDaemonSetPrefix + `") : ` +
					`request.kind.kind == "Deployment" && request.name.startsWith("` + mpsDeploymentPrefix + `"))`,
				MessageExpression: `(variables.isController ? "the compute-domain controller may write DaemonSets ` + imexDaemonSetPrefix + `* only" : ` +
					`"the DRA kubelet plugin may write Deployments ` + mpsDeploymentPrefix + `* only") + ", not " + request.kind.kind + " " + request.name`,
			},
			{
				Expression:        `!(` + writes + `) || variables.containers.all(c, ` + ours + `)`,
				MessageExpression: `"the DRA driver's workloads run its image ` + repositoryImage + ` only, not " + variables.containers.filter(c, !` + ours + `).map(c, c.image).join(", ")`,
			},
			{
				Expression: `!(` + writes + `) || (variables.isController ? variables.pod.?serviceAccountName.orValue("") == "` + ComputeDomainDaemonServiceAccount + `" : ` +
					`variables.pod.?serviceAccountName.orValue("") in ["", "` + defaultServiceAccount + `", "` + KubeletPluginServiceAccount + `"])`,
				MessageExpression: `"the DRA driver's workloads run as the ServiceAccount their template names (" + ` +
					`(variables.isController ? "` + ComputeDomainDaemonServiceAccount + `" : "the plugin's own, or the namespace's default") + "), not " + ` +
					`variables.pod.?serviceAccountName.orValue("")`,
			},
			{
				Expression: `!(` + writes + `) || (variables.containers.all(c, !has(c.envFrom) && ` +
					`c.?env.orValue([]).all(e, !has(e.valueFrom) || !has(e.valueFrom.secretKeyRef)) && ` +
					`c.?securityContext.?capabilities.?add.orValue([]).size() == 0 && ` +
					`c.?ports.orValue([]).all(p, !has(p.hostPort))) && ` +
					`variables.pod.?volumes.orValue([]).all(v, !has(v.secret) && !has(v.projected) && !has(v.csi)))`,
				Message: "the DRA driver's workloads read no Secret (volume or env), add no capability and open no host port",
			},
			{
				Expression: `!(` + writes + `) || !variables.isController || (!variables.pod.?hostPID.orValue(false) && ` +
					`!variables.pod.?hostNetwork.orValue(false) && !variables.pod.?hostIPC.orValue(false) && ` +
					`variables.pod.?volumes.orValue([]).size() == 0 && ` +
					`variables.pod.?securityContext.?seccompProfile.?type.orValue("") != "Unconfined" && ` +
					`!variables.containers.exists(c, c.?securityContext.?privileged.orValue(false) || ` +
					`c.?securityContext.?allowPrivilegeEscalation.orValue(false) || ` +
					`c.?securityContext.?seccompProfile.?type.orValue("") == "Unconfined" || ` +
					`c.?securityContext.?appArmorProfile.?type.orValue("") == "Unconfined"))`,
				Message: "the IMEX daemons run unprivileged: no volume, host namespace, privilege escalation or unconfined profile",
			},
			{
				Expression:        `variables.isController || !(` + writes + ` || request.operation == "DELETE") || variables.pod.?nodeName.orValue("") == variables.userNodeName`,
				MessageExpression: `"the DRA kubelet plugin's MPS daemons are on its own node '" + variables.userNodeName + "' only"`,
			},
		},
	}, nil)
}
