package pluginconfig

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func configMap(uid, version string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: types.UID("uid-" + uid), ResourceVersion: version}, Data: data}
}

// Judge judges the files again only when a ConfigMap's version or the
// policy's MIG rule changes; otherwise both controllers read one
// judgement.
func TestJudgeRejudgesOnlyOnChange(t *testing.T) {
	g := NewWithT(t)
	mps := "version: v1\nsharing:\n  mps:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 2}\n"
	user := configMap("a", "1", map[string]string{"ts-4": timeSlicing("4"), "mps-2": mps})
	copies := configMap("b", "1", map[string]string{"ts-4": timeSlicing("4")})
	var j Judge

	first := j.Judge(user, copies, false)
	g.Expect(first.MPSNames).To(Equal(map[string]bool{"mps-2": true}))
	g.Expect(first.Copied).To(Equal(map[string]bool{"ts-4": true}))
	g.Expect(first.KeptNames).To(BeEmpty())
	g.Expect(j.Judge(user, copies, false)).To(BeIdenticalTo(first), "same versions: the last judgement")

	mixed := j.Judge(user, copies, true)
	g.Expect(mixed).NotTo(BeIdenticalTo(first), "the MIG rule changed")
	g.Expect(mixed.Problems["mps-2"]).To(ContainSubstring("mig.strategy mixed"))

	broken := configMap("a", "2", map[string]string{"ts-4": timeSlicing("-4")})
	kept := j.Judge(broken, copies, true)
	g.Expect(kept.KeptNames).To(Equal(map[string]bool{"ts-4": true}), "a new version is judged again")
	g.Expect(kept.Run["ts-4"].Data).To(Equal(timeSlicing("4")))

	g.Expect(j.Judge(nil, nil, true).Run).To(BeEmpty(), "neither ConfigMap exists")
}
