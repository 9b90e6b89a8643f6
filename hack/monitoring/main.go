// Command promnames prints, one per line and sorted, the metric names that
// the PromQL expressions of Prometheus rule files and Grafana dashboards
// select. The chart's packaging test compares them with the metrics the
// operator registers and those dcgm-exporter exports, so that no alert or
// panel reads a series nobody exports.
//
// Usage: promnames [-rules FILE]... [-dashboard FILE]...
//
// It lives in a module of its own, with promtool's version pinned beside
// it (tools.go), so that Prometheus's dependencies stay out of the
// operator's go.mod.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(v string) error { *f = append(*f, v); return nil }

func main() {
	var rules, dashboards files
	flag.Var(&rules, "rules", "a Prometheus rule file (groups:), repeatable")
	flag.Var(&dashboards, "dashboard", "a Grafana dashboard's JSON, repeatable")
	flag.Parse()
	names, err := collect(rules, dashboards)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promnames:", err)
		os.Exit(1)
	}
	for _, n := range names {
		fmt.Println(n)
	}
}

func collect(rules, dashboards []string) ([]string, error) {
	seen := map[string]bool{}
	for _, f := range rules {
		groups, errs := rulefmt.ParseFile(f, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.Default())
		if len(errs) > 0 {
			return nil, fmt.Errorf("%s: %v", f, errs[0])
		}
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				if err := names(r.Expr, seen); err != nil {
					return nil, fmt.Errorf("%s: rule %s%s: %w", f, r.Alert, r.Record, err)
				}
			}
		}
	}
	for _, f := range dashboards {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		var exprs []string
		walk(doc, &exprs)
		if len(exprs) == 0 {
			return nil, fmt.Errorf("%s: no expr in the dashboard", f)
		}
		for _, e := range exprs {
			if err := names(grafanaVariable.ReplaceAllString(e, "5m"), seen); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// grafanaVariable is Grafana's interval variables, which stand where
// PromQL wants a duration; a label value like "$job" parses as it is.
var grafanaVariable = regexp.MustCompile(`\$__(rate_)?interval`)

// walk gathers the value of every "expr" key in a dashboard.
func walk(v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if s, ok := child.(string); ok && k == "expr" {
				*out = append(*out, s)
				continue
			}
			walk(child, out)
		}
	case []any:
		for _, child := range v {
			walk(child, out)
		}
	}
}

// names adds the metric names expr selects to seen; a selector without a
// name is an error, since nothing could check it.
func names(expr string, seen map[string]bool) error {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return fmt.Errorf("%q: %w", expr, err)
	}
	var missing error
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name == "" {
			missing = fmt.Errorf("%q: a selector without a metric name", expr)
		}
		seen[name] = true
		return nil
	})
	return missing
}
