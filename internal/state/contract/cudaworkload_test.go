package contract

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// Sources of the CUDA workload pod: NVIDIA's plugin workload validation,
// which runs the validator image's CUDA sample through the device plugin.
const (
	workloadManifest  = "NVIDIA/gpu-operator@v26.7.0:validator/manifests/plugin-workload-validation.yaml"
	cudaManifest      = "NVIDIA/gpu-operator@v26.7.0:validator/manifests/cuda-workload-validation.yaml"
	validatorMain     = "NVIDIA/gpu-operator@v26.7.0:cmd/nvidia-validator/main.go"
	validatorImageSrc = "NVIDIA/gpu-operator@v26.7.0:docker/Dockerfile"
)

// cudaWorkloadContract holds on every node, whichever plugin gives the
// GPU.
var cudaWorkloadContract = []requirement{
	{source: validatorImageSrc + " (COPY vectorAdd to /usr/bin/vectorAdd; PATH holds /usr/bin); " + workloadManifest + " (args vectorAdd)",
		need: "runs the image's CUDA sample",
		check: func(p *podCase) error {
			c, err := container(p, cudaworkload.ContainerName)
			if err != nil {
				return err
			}
			if !slices.Equal(c.Command, []string{"vectorAdd"}) || len(c.Args) > 0 {
				return fmt.Errorf("runs %v %v, not vectorAdd", c.Command, c.Args)
			}
			return nil
		}},
	{source: workloadManifest + " (allowPrivilegeEscalation: false, no privileged)",
		need:  "runs unprivileged: the GPU comes from the plugin, not from privilege",
		check: all(privileged(cudaworkload.ContainerName, false), noEscalation(cudaworkload.ContainerName))},
	{source: cudaManifest + " (app: nvidia-cuda-validator, container cuda-validation)",
		need: "carries the app label and container name NVIDIA users select and read logs by",
		check: func(p *podCase) error {
			if p.annotations[render.LabelApp] != cudaworkload.App {
				return fmt.Errorf("app label %q", p.annotations[render.LabelApp])
			}
			_, err := container(p, "cuda-validation")
			return err
		}},
	{source: validatorMain + " (runWorkload: VALIDATOR_IMAGE, VALIDATOR_IMAGE_PULL_POLICY, VALIDATOR_IMAGE_PULL_SECRETS); " +
		"NVIDIA/gpu-operator@v26.7.0:api/nvidia/v1/clusterpolicy_types.go (ValidatorSpec: env, resources, hostNetwork)",
		need: "takes the validator's image, pull policy and secrets, env, resources and hostNetwork",
		check: func(p *podCase) error {
			v := &p.spec.Validator
			c, err := container(p, cudaworkload.ContainerName)
			if err != nil {
				return err
			}
			if want := render.Image(v.ImageParts()); c.Image != want {
				return fmt.Errorf("image %s, want %s", c.Image, want)
			}
			if c.ImagePullPolicy != v.ImagePullPolicy {
				return fmt.Errorf("pull policy %q, want %q", c.ImagePullPolicy, v.ImagePullPolicy)
			}
			if len(p.pod.ImagePullSecrets) != len(v.ImagePullSecrets) {
				return fmt.Errorf("pull secrets %v, want %v", p.pod.ImagePullSecrets, v.ImagePullSecrets)
			}
			for _, e := range v.Env {
				if !slices.ContainsFunc(c.Env, func(got corev1.EnvVar) bool { return got.Name == e.Name && got.Value == e.Value }) {
					return fmt.Errorf("no env %s=%s", e.Name, e.Value)
				}
			}
			if r := v.Resources; r != nil {
				for name, q := range r.Limits {
					if got := c.Resources.Limits[name]; got.Cmp(q) != 0 {
						return fmt.Errorf("limit %s %s, want %s", name, got.String(), q.String())
					}
				}
				for name, q := range r.Requests {
					if got := c.Resources.Requests[name]; got.Cmp(q) != 0 {
						return fmt.Errorf("request %s %s, want %s", name, got.String(), q.String())
					}
				}
			}
			if p.pod.HostNetwork != v.Container().UsesHostNetwork() {
				return fmt.Errorf("hostNetwork %v", p.pod.HostNetwork)
			}
			return nil
		}},
	{source: validatorMain + " (waitForPod: Succeeded is the verdict)",
		need: "ends, so that its end is the verdict and it holds no GPU after: restartPolicy Never, the output kept as the message",
		check: func(p *podCase) error {
			c, err := container(p, cudaworkload.ContainerName)
			if err != nil {
				return err
			}
			if p.pod.RestartPolicy != corev1.RestartPolicyNever || c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
				return errors.New("restartPolicy Never and terminationMessagePolicy FallbackToLogsOnError wanted")
			}
			return nil
		}}}

// cudaWorkloadPluginContract holds where the device plugin gives the GPU.
var cudaWorkloadPluginContract = []requirement{
	{source: validatorMain + " (runWorkload: limits and requests of one GPU resource, getGPUResourceName)",
		need: "asks the device plugin for one GPU, as workloads do, and nothing else of the node",
		check: func(p *podCase) error {
			c, err := container(p, cudaworkload.ContainerName)
			if err != nil {
				return err
			}
			if q := c.Resources.Limits["nvidia.com/gpu"]; q.Value() != 1 {
				return fmt.Errorf("limits nvidia.com/gpu %s, want 1", q.String())
			}
			return nil
		}},
	{source: validatorMain + " (runWorkload: RuntimeClassName from the validator's runtime class, the operator's runtimeClass)",
		need: "starts under the RuntimeClass GPU workloads name on the node, none where the runtime has no NVIDIA handler (NRI)",
		check: func(p *podCase) error {
			want, got := state.RuntimeClassName(p.spec, p.variant.Runtime), p.pod.RuntimeClassName
			if !ptr.Equal(want, got) {
				return fmt.Errorf("runtimeClassName %v, want %v", ptr.Deref(got, "<none>"), ptr.Deref(want, "<none>"))
			}
			return nil
		}},
	{source: validatorMain + " (runWorkload: pod.Spec.NodeName = the node validated)",
		need: "runs on the node it proves: bound by name",
		check: func(p *podCase) error {
			if p.pod.NodeName != "gpu-node-0" {
				return fmt.Errorf("nodeName %q", p.pod.NodeName)
			}
			return nil
		}},
}

// noEscalation checks allowPrivilegeEscalation: false.
func noEscalation(ctr string) func(*podCase) error {
	return func(p *podCase) error {
		c, err := container(p, ctr)
		if err != nil {
			return err
		}
		if c.SecurityContext == nil || !ptr.Deref(c.SecurityContext.AllowPrivilegeEscalation, true) {
			return nil
		}
		return fmt.Errorf("%s may escalate privileges", ctr)
	}
}

// The CUDA workload pod, as the node controller makes it for each node
// variant of every policy that runs the proof.
func TestCUDAWorkloadContract(t *testing.T) {
	cases := workloadCases(t, func(cp *gpuv1.ClusterPolicy, v state.Variant) cudaworkload.Request {
		return cudaworkload.Request{Generation: cudaworkload.Generation("boot", "d", "p", ""), Attempt: 1, Resource: "nvidia.com/gpu",
			RuntimeClass: state.RuntimeClassName(&cp.Spec, v.Runtime)}
	})
	checkCases(t, cases, append(slices.Clone(cudaWorkloadContract), cudaWorkloadPluginContract...))
}

// workloadCases are the CUDA workload pods the node controller makes on
// gpu-node-0 for each node variant of every policy that runs the proof,
// as req asks.
func workloadCases(t *testing.T, req func(*gpuv1.ClusterPolicy, state.Variant) cudaworkload.Request) []*podCase {
	var cases []*podCase
	for pname, cp := range policies(t) {
		if !(cudaworkload.Operand{}).Enabled(&cp.Spec) {
			continue
		}
		for _, v := range fixture.Variants(cp) {
			pod := cudaworkload.Pod(cp, fixture.Namespace, "gpu-node-0", req(cp, v))
			// The labels stand for the template annotations: the checks
			// read what the pod carries.
			cases = append(cases, &podCase{policy: pname, variant: v, workload: pod.Name, pod: &pod.Spec, annotations: pod.Labels,
				spec: &cp.Spec})
		}
	}
	return cases
}

// draQuickstart is the DRA driver's example of a pod given one GPU: a
// ResourceClaimTemplate asking for exactly one device of class
// gpu.nvidia.com, the pod's resourceClaims naming it, the container's
// resources.claims naming the claim, and no runtimeClassName.
const draQuickstart = "NVIDIA/k8s-dra-driver-gpu@22407113:demo/specs/quickstart/v1/gpu-test1.yaml"

// cudaWorkloadDRAContract holds where the DRA driver gives the GPU.
var cudaWorkloadDRAContract = []requirement{
	{source: draQuickstart + " (resourceClaims: [{name: gpu, resourceClaimTemplateName}], resources.claims: [{name: gpu}])",
		need: "claims its GPU through a ResourceClaimTemplate, as DRA workloads do, and asks for no extended resource",
		check: func(p *podCase) error {
			c, err := container(p, cudaworkload.ContainerName)
			if err != nil {
				return err
			}
			if len(p.pod.ResourceClaims) != 1 || ptr.Deref(p.pod.ResourceClaims[0].ResourceClaimTemplateName, "") !=
				cudaworkload.ClaimTemplateName(cudaworkload.GPUDeviceClass) {
				return fmt.Errorf("resourceClaims %+v", p.pod.ResourceClaims)
			}
			if len(c.Resources.Claims) != 1 || c.Resources.Claims[0].Name != p.pod.ResourceClaims[0].Name {
				return fmt.Errorf("container claims %+v", c.Resources.Claims)
			}
			for name := range c.Resources.Limits {
				if strings.HasPrefix(string(name), "nvidia.com/") {
					return fmt.Errorf("limits %s: the DRA node advertises none", name)
				}
			}
			return nil
		}},
	{source: draQuickstart + " (the pods name no runtimeClassName: the runtime's CDI support injects the claimed devices)",
		need: "names no RuntimeClass",
		check: func(p *podCase) error {
			if p.pod.RuntimeClassName != nil {
				return fmt.Errorf("runtimeClassName %s", *p.pod.RuntimeClassName)
			}
			return nil
		}},
	{source: "kubernetes/kubernetes@v1.37.2:pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go " +
		"(claims are allocated in the scheduler's Reserve; a pod bound by nodeName skips it)",
		need: "goes through the scheduler, pinned to the node it proves by a required node affinity on metadata.name",
		check: func(p *podCase) error {
			if p.pod.NodeName != "" {
				return fmt.Errorf("nodeName %q: its claim would never be allocated", p.pod.NodeName)
			}
			a := p.pod.Affinity
			if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
				return errors.New("no required node affinity")
			}
			terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			want := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"gpu-node-0"}}
			if len(terms) != 1 || len(terms[0].MatchFields) != 1 || !equality.Semantic.DeepEqual(terms[0].MatchFields[0], want) {
				return fmt.Errorf("node affinity %+v", terms)
			}
			return nil
		}},
	{source: "kubernetes/kubernetes@v1.37.2:plugin/pkg/admission/priority/admission.go " +
		"(a pod's preemptionPolicy comes from its PriorityClass; one that differs is refused)",
		need: "never preempts a workload: its PriorityClass has preemptionPolicy Never, and the pod says so too, so that a " +
			"class of that name that says otherwise refuses it",
		check: func(p *podCase) error {
			if p.pod.PriorityClassName != cudaworkload.PriorityClassName {
				return fmt.Errorf("priorityClassName %q", p.pod.PriorityClassName)
			}
			if ptr.Deref(p.pod.PreemptionPolicy, "") != corev1.PreemptNever || ptr.Deref(p.pod.Priority, -1) != 0 {
				return fmt.Errorf("priority %v, preemptionPolicy %v", p.pod.Priority, p.pod.PreemptionPolicy)
			}
			return nil
		}},
	{source: "kubernetes/kubernetes@v1.37.2:pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go " +
		"(a pod is placed only where it tolerates every NoSchedule and NoExecute taint)",
		need: "is placed on no node cordoned or held for maintenance, where it would take a device an eviction freed, " +
			"but on one not ready yet",
		check: func(p *podCase) error {
			for _, key := range []string{corev1.TaintNodeUnschedulable, gpuv1.TaintMIGReconfiguring, gpuv1.TaintModeSwitching,
				gpuv1.TaintGPUUnhealthy} {
				taint := &corev1.Taint{Key: key, Value: gpuv1.TaintGPUNotReadyValue, Effect: corev1.TaintEffectNoSchedule}
				if slices.ContainsFunc(p.pod.Tolerations, func(t corev1.Toleration) bool { return t.ToleratesTaint(klog.Background(), taint, false) }) {
					return fmt.Errorf("tolerates %s", key)
				}
			}
			ready := &corev1.Taint{Key: gpuv1.TaintGPUNotReady, Value: gpuv1.TaintGPUNotReadyValue, Effect: corev1.TaintEffectNoSchedule}
			if !slices.ContainsFunc(p.pod.Tolerations, func(t corev1.Toleration) bool { return t.ToleratesTaint(klog.Background(), ready, false) }) {
				return errors.New("does not tolerate the readiness taint")
			}
			return nil
		}},
}

// The CUDA workload pod on a DRA node, for each node variant of every
// policy that runs the proof, and the objects it names.
func TestCUDAWorkloadDRAContract(t *testing.T) {
	cases := workloadCases(t, func(*gpuv1.ClusterPolicy, state.Variant) cudaworkload.Request {
		return cudaworkload.Request{Generation: cudaworkload.Generation("boot", "d", "r", ""), Attempt: 1,
			DeviceClass: cudaworkload.GPUDeviceClass}
	})
	for pname, cp := range policies(t) {
		if !(cudaworkload.Operand{}).Enabled(&cp.Spec) {
			continue
		}
		objs, err := cudaworkload.Operand{}.Render(state.RenderInput{Policy: cp, Namespace: fixture.Namespace, DRAInUse: true})
		if err != nil {
			t.Fatal(err)
		}
		checkDRAObjects(t, pname, objs)
	}
	checkCases(t, cases, append(slices.Clone(cudaWorkloadContract), cudaWorkloadDRAContract...))
}

// checkDRAObjects checks what the DRA pods name: a PriorityClass that
// never preempts, and claim templates of exactly one device of the
// DRA driver's classes (draQuickstart's request).
func checkDRAObjects(t *testing.T, policy string, objs []client.Object) {
	t.Helper()
	templates := 0
	for _, o := range objs {
		switch o := o.(type) {
		case *schedulingv1.PriorityClass:
			if o.Name != cudaworkload.PriorityClassName || ptr.Deref(o.PreemptionPolicy, "") != corev1.PreemptNever || o.GlobalDefault {
				t.Errorf("%s policy: PriorityClass %s preempts (%v) or is the default (%v)", policy, o.Name, o.PreemptionPolicy, o.GlobalDefault)
			}
		case *resourcev1.ResourceClaimTemplate:
			templates++
			reqs := o.Spec.Spec.Devices.Requests
			if len(reqs) != 1 || reqs[0].Exactly == nil || reqs[0].Exactly.Count != 1 ||
				reqs[0].Exactly.AllocationMode != resourcev1.DeviceAllocationModeExactCount ||
				o.Name != cudaworkload.ClaimTemplateName(reqs[0].Exactly.DeviceClassName) {
				t.Errorf("%s policy: ResourceClaimTemplate %s asks for %+v, want exactly one device of its class (%s)", policy, o.Name, reqs, draQuickstart)
			}
		default:
			t.Errorf("%s policy: renders %T", policy, o)
		}
	}
	if templates != 2 {
		t.Errorf("%s policy: %d claim templates, want one for %s and one for %s", policy, templates,
			cudaworkload.GPUDeviceClass, cudaworkload.MIGDeviceClass)
	}
}
