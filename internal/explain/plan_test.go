package explain

import (
	"bytes"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/gpu-operator/gpu-operator/internal/controller/maintenance"
)

// The plan prints each pool's starts numbered in the order they will be
// served, what the next look does with each, and the pods of those it
// looked at.
func TestPlanText(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	p := Plan{maintenance.Plan{Budgets: []string{"driver.upgradePolicy.maxParallelUpgrades=1"}, Starts: []maintenance.PlannedStart{
		{Node: "a1", Operation: "driver upgrade", Since: now.Add(-time.Minute), Next: true, Detailed: true, Evicts: []string{"ml/train-0"}},
		{Node: "h1", Pool: "h100", Operation: "driver upgrade", Next: true},
		{Node: "a2", Operation: "driver upgrade", Waiting: "the driver upgrade waits for driver.upgradePolicy.maxParallelUpgrades",
			Detailed: true, Blocked: []string{"ml/serve-0: PodDisruptionBudget serve allows no disruption now"}},
	}}}
	var out bytes.Buffer
	g.Expect(p.WriteText(&out, now)).To(Succeed())
	g.Expect(out.String()).To(MatchRegexp(`(?s)Budgets: driver.upgradePolicy.maxParallelUpgrades=1\n\n` +
		`POOL +# +NODE +OPERATION +QUEUED +NEXT LOOK\n` +
		`default +1 +a1 +driver upgrade +for 1m0s +starts\n` +
		`default +2 +a2 +driver upgrade +- +waits: the driver upgrade waits for driver.upgradePolicy.maxParallelUpgrades\n` +
		`h100 +1 +h1 +driver upgrade +- +starts\n` +
		`\na1, driver upgrade:\n  evicts ml/train-0\n` +
		`\na2, driver upgrade:\n  blocked by ml/serve-0: PodDisruptionBudget serve allows no disruption now\n$`))

	out.Reset()
	g.Expect(Plan{}.WriteText(&out, now)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("No driver upgrade"))
}
