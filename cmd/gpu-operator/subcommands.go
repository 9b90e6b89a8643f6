package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/install"
	"github.com/gpu-operator/gpu-operator/internal/scheme"
)

// subcommands run once around an install, from helm hooks; without one
// the binary runs the operator.
var subcommands = map[string]func(ctx context.Context, args []string) error{
	"setup":   runSetup,
	"cleanup": runCleanup,
}

// runSetup applies the CRDs and, if asked, labels the namespace: the
// chart's pre-install and pre-upgrade hook, since helm never upgrades
// crds/.
func runSetup(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("gpu-operator setup", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 2*time.Minute, "How long to wait for the CRDs to be established.")
	nfdCRDs := fs.Bool("nfd-crds", false, "Apply NFD's CRDs too (for the NFD the operator deploys); CRDs another installer created are left alone.")
	podSecurity := fs.Bool("pod-security", false, "Label the namespace pod-security.kubernetes.io/enforce=privileged (audit, warn too).")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ns := os.Getenv(namespaceEnv)
	if ns == "" {
		return fmt.Errorf("%s is not set: set it to the namespace the operator runs in", namespaceEnv)
	}
	c, err := newClient()
	if err != nil {
		return err
	}
	rep, err := install.Setup(ctx, c, install.Options{Namespace: ns, NFDCRDs: *nfdCRDs, PodSecurity: *podSecurity, Timeout: *timeout})
	if err != nil {
		return err
	}
	fmt.Printf("CRDs applied: %s\n", strings.Join(rep.Applied, ", "))
	if len(rep.LeftAlone) > 0 {
		fmt.Printf("CRDs another installer created, left as they are: %s\n", strings.Join(rep.LeftAlone, ", "))
	}
	if rep.Labelled {
		fmt.Printf("namespace %s labelled pod-security.kubernetes.io/enforce=privileged\n", ns)
	}
	return nil
}

// runCleanup deletes the ClusterPolicies and waits for the operator to clean
// up after them: the chart's pre-delete hook.
func runCleanup(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("gpu-operator cleanup", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 5*time.Minute, "How long to wait for the operator to remove its labels and objects.")
	deleteCRDs := fs.Bool("delete-crds", false, "Delete the ClusterPolicy CRD, and NFD's where setup created them, with every custom resource of their kinds.")
	skipIfExists := fs.String("skip-if-configmap-exists", "", "Do nothing if this ConfigMap exists in the namespace: "+
		"the chart creates it after this hook under helm uninstall, and alongside it when the chart is applied without helm.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := newClient()
	if err != nil {
		return err
	}
	ran, err := install.Cleanup(ctx, c, install.CleanupOptions{DeleteCRDs: *deleteCRDs, Timeout: *timeout,
		Namespace: os.Getenv(namespaceEnv), SkipIfExists: *skipIfExists, Recheck: 5 * time.Second})
	if err != nil {
		return err
	}
	if !ran {
		fmt.Printf("ConfigMap %s exists: not run by helm uninstall (the chart was applied without helm?); nothing deleted\n", *skipIfExists)
		return nil
	}
	fmt.Println("ClusterPolicies deleted and cleaned up")
	return nil
}

func newClient() (client.Client, error) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	return c, nil
}

// runSubcommand runs args[0] if it names a subcommand, and reports whether
// it did.
func runSubcommand(args []string) (bool, error) {
	if len(args) == 0 {
		return false, nil
	}
	run, ok := subcommands[args[0]]
	if !ok {
		return false, nil
	}
	err := run(ctrl.SetupSignalHandler(), args[1:])
	if errors.Is(err, flag.ErrHelp) {
		err = nil
	}
	return true, err
}
