package packaging

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	computedomainv1beta1 "github.com/gpu-operator/gpu-operator/api/computedomain/v1beta1"
	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/crds"
)

// Every rendered document parses strictly: a key written twice (a label
// set by a helper and again by the template) is an error, not a silent
// "last one wins" (issue 13, item 13). And no hook pod carries the labels
// the operator's Deployment and metrics Service select on.
func TestRenderedDocumentsHaveNoDuplicateKeysAndHooksStayOutOfSelectors(t *testing.T) {
	g := NewWithT(t)
	out, err := helm(append([]string{"template", "gpu-operator", chartPath, "-n", "gpu-operator", "-f", fullValues}, serviceMonitorAPI...)...)
	g.Expect(err).NotTo(HaveOccurred())
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(out, "\n---") {
		m := map[string]any{}
		g.Expect(yaml.UnmarshalStrict([]byte(doc), &m)).To(Succeed(), "document:\n%s", doc)
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	deployment := find(objs, "Deployment", "gpu-operator")
	g.Expect(deployment).NotTo(BeNil())
	sel, found, err := unstructured.NestedStringMap(deployment.Object, "spec", "selector", "matchLabels")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	operator := labels.SelectorFromSet(sel)
	jobs := 0
	for _, o := range objs {
		if o.GetKind() != "Job" {
			continue
		}
		jobs++
		podLabels, _, err := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(operator.Matches(labels.Set(podLabels))).To(BeFalse(), "hook Job %s's pods match the operator's selector %v", o.GetName(), sel)
	}
	g.Expect(jobs).To(Equal(2), "the setup and cleanup hooks")
}

// The cleanup hook gives up before helm does (helm uninstall waits 5
// minutes by default), so that its own error, which says what to check,
// is what the user sees.
func TestCleanupHookTimesOutBeforeHelm(t *testing.T) {
	g := NewWithT(t)
	job := find(template(t), "Job", "gpu-operator-cleanup")
	g.Expect(job).NotTo(BeNil())
	containers, _, err := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
	g.Expect(err).NotTo(HaveOccurred())
	args, _, err := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	g.Expect(err).NotTo(HaveOccurred())
	var timeout time.Duration
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--timeout="); ok {
			timeout, err = time.ParseDuration(v)
			g.Expect(err).NotTo(HaveOccurred())
		}
	}
	g.Expect(timeout).To(BeNumerically(">", 0))
	g.Expect(timeout).To(BeNumerically("<", 5*time.Minute))
}

// jobArgs returns the arguments of a rendered hook Job's container.
func jobArgs(t *testing.T, objs []*unstructured.Unstructured, name string) []string {
	t.Helper()
	job := find(objs, "Job", name)
	if job == nil {
		t.Fatalf("no Job %s", name)
	}
	containers, _, err := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
	if err != nil || len(containers) == 0 {
		t.Fatalf("Job %s: no containers (%v)", name, err)
	}
	args, _, err := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	if err != nil {
		t.Fatal(err)
	}
	return args
}

// The setup hook applies NFD's CRDs only for the NFD the operator deploys,
// and labels the namespace only with psa.enabled (issue 13, items 1, 2).
func TestSetupHookTouchesOnlyWhatIsAskedFor(t *testing.T) {
	g := NewWithT(t)
	g.Expect(jobArgs(t, template(t), "gpu-operator-setup")).To(Equal([]string{"setup", "--nfd-crds"}))
	g.Expect(jobArgs(t, template(t, "--set", "nfd.enabled=false"), "gpu-operator-setup")).To(Equal([]string{"setup"}))
	g.Expect(jobArgs(t, template(t, "--set", "psa.enabled=true"), "gpu-operator-setup")).To(Equal([]string{"setup", "--nfd-crds", "--pod-security"}))
}

// The cleanup Job looks for a ConfigMap helm creates only after it, at a
// later hook weight, and deletes right after: applied without helm, the
// ConfigMap comes along and the Job deletes nothing (issue 13, item 3).
func TestCleanupHookKnowsWhenHelmDidNotRunIt(t *testing.T) {
	g := NewWithT(t)
	objs := template(t)
	g.Expect(jobArgs(t, objs, "gpu-operator-cleanup")).To(ContainElement("--skip-if-configmap-exists=gpu-operator-cleanup-done"))
	done := find(objs, "ConfigMap", "gpu-operator-cleanup-done")
	g.Expect(done).NotTo(BeNil())
	job := find(objs, "Job", "gpu-operator-cleanup")
	g.Expect(done.GetAnnotations()).To(HaveKeyWithValue("helm.sh/hook", "pre-delete"))
	g.Expect(done.GetAnnotations()["helm.sh/hook-delete-policy"]).To(ContainSubstring("hook-succeeded"))
	doneWeight, err := strconv.Atoi(done.GetAnnotations()["helm.sh/hook-weight"])
	g.Expect(err).NotTo(HaveOccurred())
	jobWeight, err := strconv.Atoi(job.GetAnnotations()["helm.sh/hook-weight"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(doneWeight).To(BeNumerically(">", jobWeight), "helm creates it only after the Job finished")
	role := find(objs, "Role", "gpu-operator-cleanup")
	g.Expect(role).NotTo(BeNil())
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	g.Expect(rules).To(HaveLen(1))
	g.Expect(rules[0]).To(HaveKeyWithValue("resourceNames", ConsistOf("gpu-operator-cleanup-done")))
}

// The hooks may read, change and delete every CRD of the operator's group
// that the binary applies: a CRD added without its name in the hooks'
// roles fails the setup Job, and so every install.
func TestHooksMayTouchEveryOwnCRD(t *testing.T) {
	g := NewWithT(t)
	all, err := crds.All()
	g.Expect(err).NotTo(HaveOccurred())
	objs := template(t, "--set", "crds.deleteOnUninstall=true")
	for role, verb := range map[string]string{"gpu-operator-setup": "patch", "gpu-operator-cleanup": "delete"} {
		var names []string
		for _, r := range rulesOf(g, objs, "ClusterRole", role) {
			if slices.Contains(r.Resources, "customresourcedefinitions") && slices.Contains(r.Verbs, verb) {
				names = append(names, r.ResourceNames...)
			}
		}
		for _, crd := range all {
			// Setup applies the DRA driver's CRDs; cleanup never deletes
			// them (install.deleteCRDs).
			dra := crd.Spec.Group == computedomainv1beta1.GroupVersion.Group
			if crd.Spec.Group == gpuv1.GroupVersion.Group || (dra && verb == "patch") {
				g.Expect(names).To(ContainElement(crd.Name), "%s may not %s CRD %s", role, verb, crd.Name)
			}
		}
	}
}
