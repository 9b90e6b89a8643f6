package maintenance

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
)

// Issue 52, finding 6: the NVLink domain cap counts over the fleet (a
// rack split across two driver pools is one rack, not one per pool), and
// a node cordoned by a person or not Ready puts its domain out of service
// as a node an operation holds does. Before, the cap counted per pool and
// only the nodes operations held: both queued nodes below started, and a
// rack with a node down took none of the starts.
func TestNVLinkDomainCapOverTheFleet(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{}
	cp.Spec.Driver.UpgradePolicy.MaxParallelUpgrades = ptr.To[int32](0)
	cp.Spec.Driver.UpgradePolicy.MaxUnavailable = ptr.To(intstr.FromString("100%"))
	cp.Spec.Operator.Maintenance.MaxUnavailableNVLinkDomains = ptr.To(intstr.FromInt32(1))
	budgets := budgetsOf(cp, driverpool.FromPolicy(cp))
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	queued := func(name, pool, domain string, since time.Time) arbiter.Node {
		n := arbiter.Node{Name: name, Pool: pool, Domain: domain}
		n.Ops[arbiter.DriverUpgrade] = arbiter.Position{Phase: arbiter.Queued, Since: since}
		return n
	}
	admitted := func(nodes ...arbiter.Node) []string {
		a, errs := arbiter.Admit(nodes, budgets)
		g.Expect(errs).To(BeEmpty())
		var out []string
		for n := range a.Admitted {
			out = append(out, n)
		}
		return out
	}

	g.Expect(admitted(queued("a-0", "a100", "rack-1", t0), queued("b-0", "h100", "rack-2", t0.Add(time.Second)))).
		To(ConsistOf("a-0"), "one rack over both pools")

	down := arbiter.Node{Name: "c-0", Pool: "a100", Domain: "rack-3", Unavailable: true}
	g.Expect(admitted(down, queued("d-0", "a100", "rack-4", t0), queued("c-1", "h100", "rack-3", t0.Add(time.Second)))).
		To(ConsistOf("c-1"), "rack 3 is out of service with c-0 cordoned: its other node starts, rack 4 waits")
}
