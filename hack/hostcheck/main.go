package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
	"github.com/gpu-operator/gpu-operator/internal/state/deviceplugin"
	"github.com/gpu-operator/gpu-operator/internal/state/driver"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

func main() {
	out := flag.String("out", "_output/hostcheck", "directory to write the scripts to")
	judge := flag.Bool("verdict", false, "read the CUDA sample's output on stdin, as the workload proof's pod's, and print the operator's verdict; "+
		"exits 1 when it did not pass")
	exit := flag.Int("exit", 0, "with -verdict: the sample's exit status")
	flag.Parse()
	if *judge {
		passed, err := printVerdict(os.Stdout, os.Stdin, *exit)
		if err != nil {
			fmt.Fprintln(os.Stderr, "hostcheck:", err)
		}
		if err != nil || !passed {
			os.Exit(1)
		}
		return
	}
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "hostcheck:", err)
		os.Exit(1)
	}
}

// piece is a script of a container: its init command or a probe.
type piece struct {
	file, state, container string
	pick                   func(*corev1.Container) []string
}

var pieces = []piece{
	{"host-driver-check.sh", string(state.Driver), driver.HostDriverCheckName, command},
	{"driver-startup-probe.sh", string(state.Driver), driver.ContainerName, func(c *corev1.Container) []string { return c.StartupProbe.Exec.Command }},
	{"toolkit-ready.sh", string(state.ContainerToolkit), toolkit.ContainerName, func(c *corev1.Container) []string { return c.ReadinessProbe.Exec.Command }},
	{"dev-char-links.sh", string(state.DevicePlugin), deviceplugin.DevCharContainerName, command},
	{"cdi-spec-writer.sh", string(state.ContainerToolkit), toolkit.CDISpecWriterName, command},
	{"cdi-spec-ready.sh", string(state.ContainerToolkit), toolkit.CDISpecWriterName, func(c *corev1.Container) []string { return c.ReadinessProbe.Exec.Command }},
	{"wait-for-cdi-spec.sh", string(state.DevicePlugin), toolkit.WaitForSpecName, command},
}

func command(c *corev1.Container) []string { return c.Command }

func run(out string) error {
	policies, err := fixture.Policies()
	if err != nil {
		return err
	}
	cp := policies["default"]
	graph, err := registry.Graph()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	proof := cudaworkload.Pod(cp, fixture.Namespace, "host", cudaworkload.Request{Generation: "host", Attempt: 1, Resource: "nvidia.com/gpu"})
	if err := os.WriteFile(filepath.Join(out, "cuda-workload.sh"), []byte(script(proof.Spec.Containers[0].Command)), 0o755); err != nil {
		return err
	}
	if err := copySelf(filepath.Join(out, "hostcheck")); err != nil {
		return err
	}
	for _, p := range pieces {
		s, _ := graph.Get(state.Name(p.state))
		objs, err := s.Operand.Render(state.RenderInput{Policy: cp, Namespace: fixture.Namespace, Gate: graph.Gate(s.Name),
			DriverPools: fixture.DriverPools(cp)})
		if err != nil {
			return err
		}
		c := find(objs, p.container)
		if c == nil {
			return fmt.Errorf("no container %s in %s", p.container, p.state)
		}
		if err := os.WriteFile(filepath.Join(out, p.file), []byte(script(p.pick(c))), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// copySelf copies this program to path: host-check.sh reads the CUDA
// sample's run with it (-verdict) as the operator reads the proof's pod.
func copySelf(path string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	b, err := os.ReadFile(self)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o755)
}

// script turns a command into a shell script: sh -c SCRIPT stays as it
// is, any other command is run as written.
func script(cmd []string) string {
	if len(cmd) >= 3 && cmd[0] == "sh" && cmd[1] == "-c" {
		return "#!/bin/sh\n" + cmd[2] + "\n"
	}
	return "#!/bin/sh\nexec " + strings.Join(cmd, " ") + "\n"
}

// find returns a container of the first DaemonSet that has it.
func find(objs []client.Object, name string) *corev1.Container {
	for _, o := range objs {
		ds, ok := o.(*appsv1.DaemonSet)
		if !ok {
			continue
		}
		spec := &ds.Spec.Template.Spec
		for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
			for i := range list {
				if list[i].Name == name {
					return &list[i]
				}
			}
		}
	}
	return nil
}
