package budget

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpu-operator/gpu-operator/internal/test/crdschema"
)

func TestNodes(t *testing.T) {
	tests := map[string]struct {
		value   intstr.IntOrString
		total   int
		want    int
		wantErr string
	}{
		"count":                       {value: intstr.FromInt32(3), total: 10, want: 3},
		"count above total is kept":   {value: intstr.FromInt32(30), total: 10, want: 30},
		"percent rounds up":           {value: intstr.FromString("25%"), total: 3, want: 1},
		"percent exact":               {value: intstr.FromString("25%"), total: 40, want: 10},
		"percent of 1001 rounds up":   {value: intstr.FromString("10%"), total: 1001, want: 101},
		"100 percent":                 {value: intstr.FromString("100%"), total: 7, want: 7},
		"percent of no nodes":         {value: intstr.FromString("50%"), total: 0, want: 0},
		"zero count":                  {value: intstr.FromInt32(0), total: 10, wantErr: "not a count of at least 1"},
		"negative count":              {value: intstr.FromInt32(-1), total: 10, wantErr: "not a count of at least 1"},
		"zero percent":                {value: intstr.FromString("0%"), total: 10, wantErr: "nor a percentage"},
		"over 100 percent":            {value: intstr.FromString("101%"), total: 10, wantErr: "nor a percentage"},
		"count as string":             {value: intstr.FromString("5"), total: 10, want: 5},
		"zero as string":              {value: intstr.FromString("0"), total: 10, wantErr: "not a count"},
		"negative as string":          {value: intstr.FromString("-1"), total: 10, wantErr: "not a count"},
		"fraction":                    {value: intstr.FromString("2.5%"), total: 10, wantErr: "nor a percentage"},
		"negative total":              {value: intstr.FromInt32(1), total: -1, wantErr: "negative"},
		"field named in error":        {value: intstr.FromString("x"), total: 1, wantErr: "spec.x.maxUnavailable"},
		"leading zero is not allowed": {value: intstr.FromString("05%"), total: 10, wantErr: "nor a percentage"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := Nodes("spec.x.maxUnavailable", tt.value, tt.total)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

// Nodes must accept exactly the percentages the CRD accepts.
func TestPatternMatchesCRD(t *testing.T) {
	for _, path := range []string{
		"spec.driver.upgradePolicy.maxUnavailable",
		"spec.daemonsets.rollingUpdate.maxUnavailable",
		"spec.operator.remediation.maxParallel",
	} {
		t.Run(path, func(t *testing.T) {
			g := NewWithT(t)
			rules, err := crdschema.Rules(path)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rules).To(ContainElement(ContainSubstring("'" + Pattern + "'")))
		})
	}
}

func FuzzNodes(f *testing.F) {
	for _, s := range []string{"25%", "100%", "0%", "5", "1%", "%", "99%", "999999999", "0"} {
		f.Add(s, 10)
	}
	f.Fuzz(func(t *testing.T, s string, total int) {
		if total < 0 || total > 1_000_000 {
			return
		}
		n, err := Nodes("f", intstr.FromString(s), total)
		if err != nil {
			if pattern.MatchString(s) {
				t.Fatalf("Nodes(%q) failed for input the CRD accepts: %v", s, err)
			}
			return
		}
		if strings.HasSuffix(s, "%") && n > total {
			t.Fatalf("Nodes(%q, %d) = %d, more than all nodes", s, total, n)
		}
		if n < 0 || (total > 0 && n == 0) {
			t.Fatalf("Nodes(%q, %d) = %d: a valid value must allow at least one node", s, total, n)
		}
	})
}
