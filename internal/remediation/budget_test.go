package remediation

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestAdmit(t *testing.T) {
	nodes := func(busy, waiting, idle int) []Node {
		var out []Node
		for i := range busy {
			out = append(out, Node{Name: "busy" + string(rune('a'+i)), Busy: true})
		}
		for i := range waiting {
			out = append(out, Node{Name: "wait" + string(rune('a'+i)), Waiting: true})
		}
		for i := range idle {
			out = append(out, Node{Name: "idle" + string(rune('a'+i))})
		}
		return out
	}
	tests := map[string]struct {
		nodes []Node
		max   intstr.IntOrString
		want  []string
	}{
		"one at a time":                    {nodes: nodes(0, 3, 0), max: intstr.FromInt32(1), want: []string{"waita"}},
		"busy nodes take places":           {nodes: nodes(1, 3, 0), max: intstr.FromInt32(2), want: []string{"waita"}},
		"budget full":                      {nodes: nodes(2, 3, 0), max: intstr.FromInt32(2), want: nil},
		"percent of the fleet, rounded up": {nodes: nodes(0, 3, 7), max: intstr.FromString("25%"), want: []string{"waita", "waitb", "waitc"}},
		"room for all":                     {nodes: nodes(0, 2, 0), max: intstr.FromString("100%"), want: []string{"waita", "waitb"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := Admit(tt.nodes, tt.max)
			g.Expect(err).NotTo(HaveOccurred())
			var names []string
			for _, n := range tt.nodes {
				if got[n.Name] {
					names = append(names, n.Name)
				}
			}
			g.Expect(names).To(Equal(tt.want))
		})
	}
}

func TestAdmitNamesABadBudget(t *testing.T) {
	_, err := Admit(nil, intstr.FromString("0%"))
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("operator.remediation.maxParallel")))
}
