package policy

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

func TestOldest(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cp := func(name string, created time.Time, deleting bool) gpuv1.ClusterPolicy {
		p := gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: created}
		}
		return p
	}
	tests := map[string]struct {
		items []gpuv1.ClusterPolicy
		want  string
	}{
		"none":                   {},
		"one":                    {items: []gpuv1.ClusterPolicy{cp("a", t0, false)}, want: "a"},
		"oldest wins":            {items: []gpuv1.ClusterPolicy{cp("new", t0.Add(time.Hour), false), cp("old", t0, false)}, want: "old"},
		"same second: by name":   {items: []gpuv1.ClusterPolicy{cp("b", t0, false), cp("a", t0, false)}, want: "a"},
		"deleting one is passed": {items: []gpuv1.ClusterPolicy{cp("old", t0, true), cp("new", t0.Add(time.Hour), false)}, want: "new"},
		"only deleting ones":     {items: []gpuv1.ClusterPolicy{cp("old", t0, true)}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got := Oldest(tt.items)
			if tt.want == "" {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Name).To(Equal(tt.want))
		})
	}
}
