//go:build chaos

package chaos

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gpu-operator/gpu-operator/internal/test/crdschema"
)

// The run's options, set after -args: make test-chaos passes
// -nodes=$(NODES) and CHAOS_ARGS.
var (
	nodesFlag     = flag.Int("nodes", 100, "Fake GPU nodes; at least 6: the churn phase replaces two, the maintenance phase makes four unhealthy.")
	killsFlag     = flag.Int("kills", 10, "Operator SIGKILLs during the rollout, and again during an upgrade.")
	unrelatedFlag = flag.Int("unrelated-pods", 20, "Pods per node that have nothing to do with the operator.")
	outFlag       = flag.String("out", "_output/bench/chaos.json", "Where to write the figures; a relative path is from the repository root.")
)

// TestChaos builds a simulated cluster, runs every fault in turn while
// the operator rolls out and upgrades the fleet, and fails if any
// invariant was breached or the run could not finish. The table goes to
// standard output and the figures to -out, pass or fail.
func TestChaos(t *testing.T) {
	if *nodesFlag < 6 || *killsFlag < 0 || *unrelatedFlag < 0 {
		t.Fatal("-nodes must be at least 6, -kills and -unrelated-pods at least 0")
	}
	root := crdschema.RepoRoot()
	if _, err := os.Stat(filepath.Join(root, "bin", "gpu-operator")); err != nil {
		t.Fatalf("run through make test-chaos, which builds the operator and the simulated cluster's tools first: %v", err)
	}
	out := *outFlag
	if !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	// The run's own clients log nothing worth reading; client-go's errors
	// still reach stderr through klog.
	ctrllog.SetLogger(logr.Discard())

	// Ctrl-C stops the run and still tears the cluster down; so does the
	// test's -timeout, a minute before go test would kill the process
	// with the cluster still running.
	ctx, stop := signal.NotifyContext(t.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-time.Minute))
		defer cancel()
	}

	res, err := runChaos(ctx, root, os.Stderr, options{nodes: *nodesFlag, unrelated: *unrelatedFlag, kills: *killsFlag})
	if err != nil {
		res.Error = err.Error()
	}
	if werr := writeJSON(out, res); werr != nil {
		t.Errorf("writing the figures: %v", werr)
	}
	printChaos(os.Stdout, res)
	fmt.Printf("figures: %s\n", *outFlag)
	if err != nil {
		t.Fatal(err)
	}
}
