package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// report is scale.json.
type report struct {
	Started time.Time `json:"started"`
	Runs    []*Result `json:"runs"`
}

func main() {
	var cfg config
	var runs int
	var out string
	var maxRolloutRSS float64
	flag.IntVar(&cfg.nodes, "nodes", 1000, "Fake GPU nodes.")
	flag.IntVar(&runs, "runs", 1, "Runs, each on fresh clusters: timing changes the counts.")
	flag.IntVar(&cfg.unrelated, "unrelated-pods", 20, "Pods per node that have nothing to do with the operator.")
	flag.IntVar(&cfg.rebooted, "reboot", 0, "Nodes to reboot; 0 means 5% of the nodes.")
	flag.DurationVar(&cfg.quiet, "quiet", 5*time.Minute, "Quiet period after the rollout, for idle figures.")
	flag.DurationVar(&cfg.churn, "churn", 2*time.Minute, "Kubelet churn after the quiet period, for idle figures under status reports; 0 skips it.")
	flag.DurationVar(&cfg.churnEvery, "churn-every", 5*time.Minute,
		"How often each node reports its status during the churn: a kubelet's nodeStatusReportFrequency (5m by default).")
	flag.DurationVar(&cfg.stall, "stall", defaultStall, "End a phase with an error, naming the nodes left and why, once no node has made progress for this long.")
	var skip string
	flag.StringVar(&skip, "skip", "", "Phases to leave out, comma-separated: floor, reboot, upgrade (-churn 0 leaves out the churn); for runs that must fit in an hour, such as 5000 nodes.")
	flag.StringVar(&out, "out", "_output/bench/scale.json", "Where to write the figures.")
	flag.Float64Var(&maxRolloutRSS, "max-rollout-rss-mib", 0,
		"Fail when a run's operator peak RSS in the rollout exceeds this many MiB (0: no bound): a guard against a leak or a regression by a multiple, not a target.")
	flag.StringVar(&cfg.ws.dir, "work", "_output/bench", "Where the clusters keep their state (sim/) and the profiles go (profiles/).")
	flag.IntVar(&cfg.ws.portOffset, "port-offset", 0,
		"Shift the clusters' ports (SIM_PORT_OFFSET) and the operator's (18280-18282) by this much, to run beside another run.")
	flag.Parse()
	// Quiet and churn phases shorter than a minute give per-minute figures
	// too noisy to compare; the smoke run (make bench-smoke) checks only
	// that every phase runs to its end.
	if cfg.nodes < 1 || runs < 1 || cfg.unrelated < 0 || cfg.quiet < 10*time.Second || (cfg.churn != 0 && cfg.churn < 10*time.Second) ||
		cfg.churnEvery < time.Second || cfg.stall <= 0 || cfg.ws.portOffset < 0 || cfg.ws.portOffset > 40000 {
		fmt.Fprintln(os.Stderr, "bench-scale: -nodes and -runs must be at least 1, -unrelated-pods at least 0, -quiet at least 10s, -churn 0 or at least 10s, -churn-every at least 1s, -stall above 0, -port-offset 0 to 40000")
		os.Exit(2)
	}
	for _, phase := range strings.Split(skip, ",") {
		switch strings.TrimSpace(phase) {
		case "":
		case "floor":
			cfg.skipFloor = true
		case "reboot":
			cfg.skipReboot = true
		case "upgrade":
			cfg.skipUpgrade = true
		default:
			fmt.Fprintf(os.Stderr, "bench-scale: -skip %q: phases are floor, reboot and upgrade\n", phase)
			os.Exit(2)
		}
	}
	if cfg.rebooted <= 0 {
		cfg.rebooted = max(1, cfg.nodes/20)
	}
	cfg.rebooted = min(cfg.rebooted, cfg.nodes)
	root, err := os.Getwd()
	if err == nil {
		_, err = os.Stat(filepath.Join(root, "bin", "gpu-operator"))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench-scale: run from the repository root after make build tools-sim (make bench-scale does): %v\n", err)
		os.Exit(2)
	}
	cfg.root, cfg.log, cfg.cpuProfiles = root, os.Stderr, &cpuProfiles{}
	if !filepath.IsAbs(cfg.ws.dir) {
		cfg.ws.dir = filepath.Join(root, cfg.ws.dir)
	}
	// The benchmark's own clients log nothing worth reading; client-go's
	// errors still reach stderr through klog.
	ctrllog.SetLogger(logr.Discard())

	// Ctrl-C stops the run and still tears the clusters down.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep := report{Started: time.Now()}
	failed := false
	for i := range runs {
		progress(cfg.log, "run %d of %d", i+1, runs)
		res, err := runOnce(ctx, cfg)
		if err != nil {
			res.Error = err.Error()
			failed = true
		}
		rep.Runs = append(rep.Runs, res)
		if err := writeJSON(out, rep); err != nil {
			fmt.Fprintln(os.Stderr, "bench-scale:", err)
			os.Exit(1)
		}
		if ctx.Err() != nil {
			break
		}
	}
	printTable(os.Stdout, rep.Runs)
	fmt.Printf("figures: %s\n", out)
	if err := rolloutRSSWithin(rep.Runs, maxRolloutRSS); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		failed = true
	}
	if failed {
		os.Exit(1)
	}
}

func writeJSON(path string, rep any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
