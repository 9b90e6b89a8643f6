package driverversion

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gpu-operator/gpu-operator/internal/test/crdschema"
)

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParse(t *testing.T) {
	tests := map[string]struct {
		in      string
		wantErr bool
		branch  string
		digest  bool
	}{
		"three components":       {in: "535.154.05", branch: "535"},
		"two components":         {in: "470.82", branch: "470"},
		"digest":                 {in: digest, digest: true},
		"empty":                  {in: "", wantErr: true},
		"a branch (precompiled)": {in: "580", branch: "580"},
		"four components":        {in: "535.154.05.1", wantErr: true},
		"os suffix":              {in: "535.154.05-ubuntu22.04", wantErr: true},
		"latest":                 {in: "latest", wantErr: true},
		"leading v":              {in: "v535.154.05", wantErr: true},
		"short digest":           {in: "sha256:abc", wantErr: true},
		"upper case digest":      {in: strings.ToUpper(digest), wantErr: true},
		"digest of wrong algo":   {in: "sha512:" + digest[7:], wantErr: true},
		"trailing dot":           {in: "535.154.", wantErr: true},
		"whitespace":             {in: " 535.154.05", wantErr: true},
		"huge component parses":  {in: "99999999999999999999999.1", branch: "99999999999999999999999"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			v, err := Parse(tt.in)
			if tt.wantErr {
				g.Expect(err).To(MatchError(ContainSubstring(tt.in)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v.String()).To(Equal(tt.in))
			g.Expect(v.IsDigest()).To(Equal(tt.digest))
			g.Expect(v.Branch()).To(Equal(tt.branch))
		})
	}
}

func TestCompare(t *testing.T) {
	tests := map[string]struct {
		a, b string
		want int
	}{
		"equal":                  {a: "535.154.05", b: "535.154.05", want: 0},
		"leading zeros ignored":  {a: "535.154.5", b: "535.154.05", want: 0},
		"missing patch is zero":  {a: "470.82", b: "470.82.0", want: 0},
		"newer branch":           {a: "550.54.15", b: "535.154.05", want: 1},
		"numeric, not lexical":   {a: "535.54.15", b: "535.154.05", want: -1},
		"patch":                  {a: "535.154.05", b: "535.154.10", want: -1},
		"longer number is later": {a: "1000.1", b: "999.99.99", want: 1},
		"digest after versions":  {a: digest, b: "999.1", want: 1},
		"version before digest":  {a: "1.1", b: digest, want: -1},
		"same digest":            {a: digest, b: digest, want: 0},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			a, b := mustParse(t, tt.a), mustParse(t, tt.b)
			g.Expect(a.Compare(b)).To(Equal(tt.want))
			g.Expect(b.Compare(a)).To(Equal(-tt.want), "Compare must be antisymmetric")
		})
	}
}

// The CRD rejects what Parse rejects and nothing else: the rule on
// spec.driver.version must use exactly Pattern.
func TestPatternMatchesCRD(t *testing.T) {
	g := NewWithT(t)
	rules, err := crdschema.Rules("spec.driver.version")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rules).To(ContainElement(ContainSubstring("'" + Pattern + "'")))
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"535.154.05", "470.82", digest, "535", "1.2.3.4", "0.0", "00.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err != nil {
			if pattern.MatchString(s) {
				t.Fatalf("Parse(%q) failed for input the CRD accepts: %v", s, err)
			}
			return
		}
		if v.String() != s {
			t.Fatalf("Parse(%q).String() = %q", s, v.String())
		}
		if v.Compare(v) != 0 {
			t.Fatalf("%q does not compare equal to itself", s)
		}
		if !v.IsDigest() && v.Branch() == "" {
			t.Fatalf("%q has no branch", s)
		}
	})
}

func FuzzCompare(f *testing.F) {
	f.Add("535.154.05", "535.154.5")
	f.Add("1.2", digest)
	f.Fuzz(func(t *testing.T, a, b string) {
		va, errA := Parse(a)
		vb, errB := Parse(b)
		if errA != nil || errB != nil {
			return
		}
		if va.Compare(vb) != -vb.Compare(va) {
			t.Fatalf("Compare(%q, %q) is not antisymmetric", a, b)
		}
	})
}

func mustParse(t *testing.T, s string) Version {
	t.Helper()
	v, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
