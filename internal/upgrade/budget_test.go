package upgrade

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

func waiting(n int) []Node {
	var nodes []Node
	for i := range n {
		nodes = append(nodes, Node{Name: fmt.Sprintf("n%02d", i), State: gpuv1.UpgradeRequired, Waiting: true})
	}
	return nodes
}

func TestAdmit(t *testing.T) {
	tests := map[string]struct {
		nodes          []Node
		maxParallel    int32
		maxUnavailable intstr.IntOrString
		want           []string
	}{
		"one at a time": {nodes: waiting(4), maxParallel: 1, maxUnavailable: intstr.FromString("100%"), want: []string{"n00"}},
		"25% of 4 rounds to 1": {nodes: waiting(4), maxUnavailable: intstr.FromString("25%"),
			want: []string{"n00"}},
		"25% of 5 rounds up to 2": {nodes: waiting(5), maxUnavailable: intstr.FromString("25%"),
			want: []string{"n00", "n01"}},
		"10% of 30 is 3":             {nodes: waiting(30), maxUnavailable: intstr.FromString("10%"), want: []string{"n00", "n01", "n02"}},
		"no parallel limit":          {nodes: waiting(3), maxUnavailable: intstr.FromInt32(10), want: []string{"n00", "n01", "n02"}},
		"parallel tighter than room": {nodes: waiting(6), maxParallel: 2, maxUnavailable: intstr.FromInt32(5), want: []string{"n00", "n01"}},
		"upgrading nodes use the budget": {
			nodes:       append(waiting(3), Node{Name: "busy", State: gpuv1.UpgradePodDeletion}),
			maxParallel: 2, maxUnavailable: intstr.FromInt32(4), want: []string{"n00"},
		},
		"cordoned nodes count against maxUnavailable": {
			nodes:          append(waiting(3), Node{Name: "cordoned", Unavailable: true}),
			maxUnavailable: intstr.FromInt32(2), want: []string{"n00"},
		},
		"a failed cordoned node holds only its own share": {
			nodes:          append(waiting(3), Node{Name: "failed", State: gpuv1.UpgradeFailed, Unavailable: true}),
			maxUnavailable: intstr.FromInt32(1), want: nil,
		},
		"an already unavailable node upgrades for free": {
			nodes:          []Node{{Name: "a", Waiting: true}, {Name: "b", Waiting: true, Unavailable: true}, {Name: "c", Unavailable: true}},
			maxUnavailable: intstr.FromInt32(2), want: []string{"b"},
		},
		"nodes under repair use the budget": {
			nodes:       append(waiting(3), Node{Name: "repairing", Remediating: true}),
			maxParallel: 2, maxUnavailable: intstr.FromInt32(4), want: []string{"n00"},
		},
		"budget full": {
			nodes:       append(waiting(2), Node{Name: "busy", State: gpuv1.UpgradeValidation}),
			maxParallel: 1, maxUnavailable: intstr.FromString("100%"), want: nil,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := Admit(tt.nodes, tt.maxParallel, tt.maxUnavailable)
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

func TestAdmitRejectsABadBudget(t *testing.T) {
	_, err := Admit(waiting(2), 1, intstr.FromString("0%"))
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("driver.upgradePolicy.maxUnavailable")))
}
