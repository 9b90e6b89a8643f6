package kubectlgpu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/explain"
	"github.com/gpu-operator/gpu-operator/internal/scheme"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
)

// defaultNamespace is where the chart installs the operator.
const defaultNamespace = "gpu-operator"

// options are the plugin's flags.
type options struct {
	config *genericclioptions.ConfigFlags
	output string
	out    io.Writer
}

// NewCommand returns kubectl gpu's root command, printing to out.
func NewCommand(out io.Writer) *cobra.Command {
	o := &options{config: genericclioptions.NewConfigFlags(true), out: out}
	root := &cobra.Command{
		Use:          "kubectl-gpu",
		Annotations:  map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl gpu"},
		Short:        "See and explain the GPU operator's fleet",
		SilenceUsage: true,
	}
	o.config.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVarP(&o.output, "output", "o", "", "output format: json; text when empty")
	root.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "The GPU nodes per driver pool and state, those an operation holds, and those that wait",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.status(cmd.Context()) },
	}, &cobra.Command{
		Use:   "why NODE",
		Short: "Why a node is not ready: its states in order with the operator's reasons, the operation holding it, what to do",
		Args:  cobra.ExactArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return o.why(cmd.Context(), args[0]) },
	}, o.mustGatherCommand(), o.planCommand())
	return root
}

// namespace is the operator's: -n where given, else the chart's.
func (o *options) namespace() string {
	if o.config.Namespace != nil && *o.config.Namespace != "" {
		return *o.config.Namespace
	}
	return defaultNamespace
}

func (o *options) restConfig() (*rest.Config, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	return cfg, nil
}

// client returns a client of the kubeconfig's cluster, and its config.
func (o *options) client() (client.Client, *rest.Config, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	return c, cfg, err
}

func (o *options) status(ctx context.Context) error {
	c, _, err := o.client()
	if err != nil {
		return err
	}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	graph, err := registry.Graph()
	if err != nil {
		return err
	}
	return o.print(explain.ForFleet(nodes.Items, graph))
}

func (o *options) why(ctx context.Context, name string) error {
	return o.judged(ctx, func(ctx context.Context, j *judge) (printable, error) { return j.explain(ctx, name) })
}

// judged prints what report makes of the operator's judgement, made
// again read-only; the informers it reads stop with the command.
func (o *options) judged(ctx context.Context, report func(context.Context, *judge) (printable, error)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	j, err := newJudge(ctx, cfg, o.namespace())
	if err != nil {
		return err
	}
	r, err := report(ctx, j)
	if err != nil {
		return err
	}
	return o.print(r)
}

func (o *options) planCommand() *cobra.Command {
	detail := 0
	cmd := &cobra.Command{
		Use: "plan",
		Short: "What the queued driver upgrades, repairs, MIG and mode changes will do: the order per pool, " +
			"the budgets, the pods each node's evictions would ask to leave or are blocked by",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.plan(cmd.Context(), detail) },
	}
	cmd.Flags().IntVar(&detail, "pods-of", 10, "list the pods of the first this many starts (one live list of a node's pods each)")
	return cmd
}

func (o *options) plan(ctx context.Context, detail int) error {
	return o.judged(ctx, func(ctx context.Context, j *judge) (printable, error) {
		p, err := j.m.Plan(ctx, detail)
		if err != nil {
			return nil, fmt.Errorf("judging the fleet's maintenance: %w", err)
		}
		return explain.Plan{Plan: p}, nil
	})
}

// printable is what the commands print: as JSON with -o json, else as
// text.
type printable interface {
	WriteText(io.Writer, time.Time) error
}

func (o *options) print(v printable) error {
	switch o.output {
	case "":
		return v.WriteText(o.out, time.Now())
	case "json":
		enc := json.NewEncoder(o.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return errors.New("--output: want json, or nothing for text, not " + o.output)
}
