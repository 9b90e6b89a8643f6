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
// 22407113 (the newest commit the mirror has):
//   - the compute-domain controller creates one IMEX daemon DaemonSet per
//     domain, computedomain-daemon-<uid>, from
//     templates/compute-domain-daemon.tmpl.yaml: serviceAccountName
//     compute-domain-daemon-service-account (L20), image IMAGE_NAME (L32),
//     nothing privileged, no host path or namespace
//     (cmd/compute-domain-controller/daemonset.go:42, 208-243);
//   - with MPSSupport, the GPU kubelet plugin creates one MPS control
//     daemon Deployment per shared claim, mps-control-daemon-<claim>-<hash>,
//     from templates/mps-control-daemon.tmpl.yaml: pinned to its own node
//     (L19), image IMAGE_NAME (L23), privileged with the host's PID
//     namespace, and no serviceAccountName: the namespace's default
//     (cmd/gpu-kubelet-plugin/sharing.go:55-311).
//
// Their Roles let them create and patch any DaemonSet or Deployment of
// the operator's namespace, where Pod Security is privileged and the
// operator's ServiceAccount is: a token taken from a GPU node could run
// any image there as the operator. The policy holds each to its own kind
// and names, the driver's image, the ServiceAccount its template names,
// and for the IMEX daemons no privilege; the MPS daemons to the plugin's
// own node. Deletes keep to the names.
const (
	imexDaemonSetPrefix   = "computedomain-daemon-"
	mpsDeploymentPrefix   = "mps-control-daemon-"
	defaultServiceAccount = "default"
)

func workloadPolicy(policy *gpuv1.ClusterPolicy, namespace, image string) []client.Object {
	user := func(sa string) string { return `"system:serviceaccount:` + namespace + ":" + sa + `"` }
	meta := render.ObjectMeta(policy, workloadPolicyName, "", string(state.DRADriver))
	// What a template makes is checked where a write makes a template: a
	// create, or an update that changes it. The controller's own update
	// only removes its finalizer (daemonset.go:338-348), and must pass on
	// a DaemonSet made from the image before the driver's last change.
	writes := `variables.templateWritten`
	return render.AdmissionPolicy(meta, admissionv1.ValidatingAdmissionPolicySpec{
		FailurePolicy: ptr.To(admissionv1.Fail),
		MatchConstraints: &admissionv1.MatchResources{
			ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete},
					Rule: admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"},
						Resources: []string{"daemonsets", "deployments", "daemonsets/*", "deployments/*"}},
				},
			}},
		},
		MatchConditions: []admissionv1.MatchCondition{{
			Name:       "isDriverComponent",
			Expression: `request.userInfo.username in [` + user(ControllerName) + `, ` + user(KubeletPluginServiceAccount) + `]`,
		}},
		Variables: []admissionv1.Variable{
			{Name: "userNodeName", Expression: `request.userInfo.extra[?'authentication.kubernetes.io/node-name'][0].orValue('')`},
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
				Expression:        writes + ` ? variables.containers.all(c, c.image == "` + image + `") : true`,
				MessageExpression: `"the DRA driver's workloads run its image ` + image + ` only, not " + variables.containers.filter(c, c.image != "` + image + `").map(c, c.image).join(", ")`,
			},
			{
				Expression: writes + ` ? (variables.isController ? variables.pod.?serviceAccountName.orValue("") == "` + ComputeDomainDaemonServiceAccount + `" : ` +
					`variables.pod.?serviceAccountName.orValue("") in ["", "` + defaultServiceAccount + `"]) : true`,
				MessageExpression: `"the DRA driver's workloads run as the ServiceAccount their template names (" + ` +
					`(variables.isController ? "` + ComputeDomainDaemonServiceAccount + `" : "the namespace's default") + "), not " + ` +
					`variables.pod.?serviceAccountName.orValue("")`,
			},
			{
				Expression: `!(` + writes + `) || !variables.isController || (!variables.pod.?hostPID.orValue(false) && ` +
					`!variables.pod.?hostNetwork.orValue(false) && !variables.pod.?hostIPC.orValue(false) && ` +
					`!variables.pod.?volumes.orValue([]).exists(v, has(v.hostPath)) && ` +
					`!variables.containers.exists(c, c.?securityContext.?privileged.orValue(false)))`,
				Message: "the IMEX daemons run unprivileged, without host paths or host namespaces",
			},
			{
				Expression:        `!(` + writes + `) || variables.isController || variables.pod.?nodeName.orValue("") == variables.userNodeName`,
				MessageExpression: `"the DRA kubelet plugin's MPS daemons run on its own node '" + variables.userNodeName + "' only"`,
			},
		},
	}, nil)
}
