package kubectlgpu

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpu-operator/gpu-operator/internal/state/registry"
)

// mustGatherOptions are must-gather's own flags.
type mustGatherOptions struct {
	file     string
	nodes    []string
	maxNodes int
	tail     int64
}

func (o *options) mustGatherCommand() *cobra.Command {
	mg := &mustGatherOptions{}
	cmd := &cobra.Command{
		Use:   "must-gather [-o FILE] [--node NODE]...",
		Short: "One archive for support: policies, GPU nodes, operand DaemonSets, events, ResourceSlices and logs; no Secrets",
		Long: `must-gather writes a tar.gz with the ClusterPolicies, NVIDIADrivers and GPUClusters,
the GPU nodes' labels, annotations, taints and conditions, the operator's
DaemonSets, Deployments and ConfigMaps (only the operator's and the
chart's: of the others, the names), the namespace's and the nodes' events,
NVIDIA's ResourceSlices, the operator's logs, and the logs of the operand
pods on the nodes named with --node (by default, the first GPU nodes not
ready on every state). It reads no Secret. Its manifest.json lists every
file and what it left out, and why.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.mustGather(cmd.Context(), mg) },
	}
	// -o names the archive here, as the users expect of
	// must-gather; it shadows the root's -o (output format).
	cmd.Flags().StringVarP(&mg.file, "output", "o", "", "the archive to write; - for stdout (default gpu-must-gather-TIME.tar.gz)")
	cmd.Flags().StringSliceVar(&mg.nodes, "node", nil, "a node whose operand pods' logs to take; repeatable")
	cmd.Flags().IntVar(&mg.maxNodes, "max-nodes", 3, "without --node, how many GPU nodes not ready to take logs from")
	cmd.Flags().Int64Var(&mg.tail, "tail", 5000, "the last lines of each container's log to take")
	return cmd
}

func (o *options) mustGather(ctx context.Context, mg *mustGatherOptions) error {
	c, cfg, err := o.client()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	served, err := slicesServed(cfg)
	if err != nil {
		return err
	}
	graph, err := registry.Graph()
	if err != nil {
		return err
	}
	g := &gatherer{c: c, graph: graph, namespace: o.namespace(), nodes: mg.nodes, maxNodes: mg.maxNodes,
		tail: mg.tail, slicesServed: served, logs: clientsetLogs(cs)}

	now := time.Now().UTC()
	dir := "gpu-must-gather-" + now.Format("20060102-150405")
	var w io.Writer = o.out
	report := o.out
	if mg.file != "-" {
		if mg.file == "" {
			mg.file = dir + ".tar.gz"
		}
		f, err := os.OpenFile(mg.file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("--output: %w (must-gather never overwrites a file)", err)
		}
		defer f.Close()
		w = f
	} else {
		report = os.Stderr
	}
	m, err := g.gather(ctx, w, dir, now)
	if err != nil {
		if f, ok := w.(*os.File); ok {
			// No half archive left behind to be mistaken for a whole one.
			_ = f.Close()
			_ = os.Remove(mg.file)
		}
		return err
	}
	if f, ok := w.(*os.File); ok {
		if err := f.Close(); err != nil {
			return err
		}
	}
	return m.writeText(report, mg.file)
}

// writeText tells the person what the archive holds and left out.
func (m manifest) writeText(w io.Writer, file string) error {
	fmt.Fprintf(w, "Wrote %s: %d files, %d bytes before compression, from namespace %s.\n", file, len(m.Files), m.bytesTotal, m.Namespace)
	if len(m.Nodes) > 0 {
		fmt.Fprintf(w, "Operand pods' logs of %s (%s).\n", strings.Join(m.Nodes, ", "), m.NodesWhy)
	} else {
		fmt.Fprintf(w, "No operand pods' logs: %s.\n", m.NodesWhy)
	}
	fmt.Fprintln(w, "Left out:")
	for _, l := range m.LeftOut {
		fmt.Fprintf(w, "  - %s\n", l)
	}
	return nil
}

// maxLineBytes bounds the bytes taken per log line asked for.
const maxLineBytes = 1024

// clientsetLogs reads logs through the API server.
func clientsetLogs(cs kubernetes.Interface) logFetcher {
	return func(ctx context.Context, namespace, pod, container string, previous bool, tail int64) ([]byte, error) {
		// A bound on the bytes too: a few lines can be long.
		limit := tail * maxLineBytes
		return cs.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: previous,
			TailLines: &tail, LimitBytes: &limit}).DoRaw(ctx)
	}
}
