package packaging

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// Every rendered document parses strictly: a key written twice (a label
// set by a helper and again by the template) is an error, not a silent
// "last one wins" (issue 13, item 13). And no hook pod carries the labels
// the operator's Deployment and metrics Service select on.
func TestRenderedDocumentsHaveNoDuplicateKeysAndHooksStayOutOfSelectors(t *testing.T) {
	g := NewWithT(t)
	out, err := helm("template", "gpu-operator", chartPath, "-n", "gpu-operator", "-f", fullValues)
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
