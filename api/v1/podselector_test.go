package v1

import (
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// The XValidation rule on PodSelector spells out PodSelectorPattern.
func TestPodSelectorRuleIsThePattern(t *testing.T) {
	src, err := os.ReadFile("upgrade_types.go")
	if err != nil {
		t.Fatal(err)
	}
	want := "self.matches('" + PodSelectorPattern + "')"
	if !strings.Contains(string(src), want) {
		t.Fatalf("the PodSelector XValidation rule does not hold PodSelectorPattern: update the marker to\n%s", want)
	}
}

func TestPodSelectorPattern(t *testing.T) {
	for _, s := range []string{
		"", "app=training", "app==training", "app!=training", "app", "!app", "app=",
		"app in (a,b)", "app notin (a, b)", "app in(a)", "app=a,tier!=batch, !legacy",
		"example.com/team=ml", "feature.node.kubernetes.io/pci-10de.present=true", " app = a ", "in=notin",
	} {
		if !PodSelector(s).Valid() {
			t.Errorf("%q: refused, want accepted", s)
		}
		if _, err := labels.Parse(s); err != nil {
			t.Errorf("%q: labels.Parse refuses it: %v", s, err)
		}
	}
	for _, s := range []string{
		"app=(", "app in ()", "app in (a,)", "=a", "app=a,", ",app", "app=a b", "app>5", "Example.com/a=b",
		"a/b/c=d", "app=" + strings.Repeat("x", 64), "a=b;c=d",
	} {
		if PodSelector(s).Valid() {
			t.Errorf("%q: accepted, want refused", s)
		}
	}
}

// Whatever the pattern accepts, the operator can parse: an accepted
// selector never turns into "select nothing" or "select everything" at
// run time.
func FuzzPodSelectorPatternIsParsable(f *testing.F) {
	for _, s := range []string{"app=training", "a in (b,c)", "!x,y!=z", "example.com/a=b", "a.b.c.d/e=f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !PodSelector(s).Valid() {
			return
		}
		if _, err := labels.Parse(s); err != nil {
			t.Fatalf("%q matches PodSelectorPattern but labels.Parse refuses it: %v", s, err)
		}
	})
}
