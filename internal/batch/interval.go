package batch

import (
	"fmt"
	"math"
)

// z95 is the normal quantile of a two-sided 95% interval.
const z95 = 1.959964

// Wilson returns the 95% Wilson score interval of a pass rate of passed out
// of n runs: unlike the normal approximation it stays within 0 and 1 and
// holds for small n and rates near 0 or 100%, which is where models and
// skills with a handful of cases are. With repeats the runs of one case are
// counted as independent, which they are not quite, so the interval is a
// little narrower than the truth.
func Wilson(passed, n int) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	p, nf, z2 := float64(passed)/float64(n), float64(n), z95*z95
	centre := (p + z2/(2*nf)) / (1 + z2/nf)
	half := z95 * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf)) / (1 + z2/nf)
	return max(0, centre-half), min(1, centre+half)
}

// interval writes a Stats' 95% interval, "52.1–71.0%"; "-" with no
// finished runs.
func interval(s Stats) string {
	if s.Finished() == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f–%.1f%%", 100*s.Lo, 100*s.Hi)
}

// Separation says, for each pair of models with finished runs, whether
// their 95% intervals overlap: when they do, the run cannot tell which of
// the two is better, whatever their pass rates say.
func Separation(stats []Stats) []string {
	var out []string
	for i := range stats {
		for _, b := range stats[i+1:] {
			a := stats[i]
			if a.Finished() == 0 || b.Finished() == 0 {
				continue
			}
			if a.PassAt1 < b.PassAt1 {
				a, b = b, a
			}
			if a.Lo <= b.Hi && b.Lo <= a.Hi {
				out = append(out, fmt.Sprintf("%s (%s) and %s (%s): the 95%% intervals overlap, so this run cannot tell them apart; more cases or repeats can.",
					a.Model, interval(a), b.Model, interval(b)))
			} else {
				out = append(out, fmt.Sprintf("%s (%s) is ahead of %s (%s): the 95%% intervals do not overlap.",
					a.Model, interval(a), b.Model, interval(b)))
			}
		}
	}
	return out
}
