package main

import "fmt"

// rolloutRSSWithin fails a run whose operator peak RSS in the rollout
// exceeds bound MiB; bound 0 sets none. The smoke run in make test sets
// twice its own figure: a leak, or a regression by a multiple, stops a
// submission there, while the figure itself is judged against its target
// in a bench-scale run's table.
func rolloutRSSWithin(runs []*Result, bound float64) error {
	if bound <= 0 {
		return nil
	}
	for i, r := range runs {
		if r.RolloutPeakRSSMiB > bound {
			return fmt.Errorf("run %d: the operator's peak RSS in the rollout, %.1f MiB, exceeds -max-rollout-rss-mib %.1f: "+
				"a leak, or a regression by a multiple (profiles under the work directory's profiles/)", i+1, r.RolloutPeakRSSMiB, bound)
		}
	}
	return nil
}
