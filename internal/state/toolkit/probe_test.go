package toolkit

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const installDir = "/usr/local/nvidia"

// The readiness probe, run by this machine's sh against files whose
// modification times are whole seconds, as busybox's test (the toolkit
// image's sh from v1.20 on, coreutils/test.c) sees every file: a config
// written in the pid file's second is this run's. containerd's runtimes
// are in the drop-in; a version 1 config takes none, and has them itself.
func TestConfiguredProbeSeesWholeSeconds(t *testing.T) {
	start := time.Unix(1_767_225_600, 0)
	runtime := path.Join(installDir, "toolkit", "nvidia-container-runtime")
	for _, tt := range []struct {
		name       string
		file       string // which file the toolkit wrote: "drop-in" or "config"
		content    string // "" writes none
		writtenAt  time.Time
		pidFile    bool
		wantPasses bool
	}{
		{"drop-in written in the pid file's second", "drop-in", runtime, start, true, true},
		{"drop-in written a second later", "drop-in", runtime, start.Add(time.Second), true, true},
		{"version 1 config, no drop-in", "config", runtime, start.Add(time.Second), true, true},
		{"left by an earlier run", "drop-in", runtime, start.Add(-5 * time.Second), true, false},
		{"naming another runtime", "drop-in", "runc", start.Add(time.Second), true, false},
		{"nothing written yet", "drop-in", "", start, true, false},
		{"no pid file: the toolkit has not started", "drop-in", runtime, start, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{"drop-in": filepath.Join(dir, "99-nvidia.toml"), "config": filepath.Join(dir, "config.toml")}
			pid := filepath.Join(dir, "toolkit.pid")
			if tt.content != "" {
				write(t, files[tt.file], "BinaryName = "+tt.content, tt.writtenAt)
			}
			if tt.pidFile {
				write(t, pid, "1", start)
			}
			err := run(t, configuredProbe, "RUNTIME=containerd", "ROOT="+installDir, "RUNTIME_CONFIG="+files["config"],
				"RUNTIME_DROP_IN_CONFIG="+files["drop-in"], "TOOLKIT_PID_FILE="+pid)
			if passes := err == nil; passes != tt.wantPasses {
				t.Errorf("probe passes = %v (%v), want %v", passes, err, tt.wantPasses)
			}
		})
	}
}

// With its NRI plugin the toolkit writes no runtime config: it is ready
// once this run installed the runtime.
func TestConfiguredProbeWithNRI(t *testing.T) {
	start := time.Unix(1_767_225_600, 0)
	for _, tt := range []struct {
		name        string
		installedAt time.Time
		wantPasses  bool
	}{
		{"installed in the pid file's second", start, true},
		{"installed by an earlier run", start.Add(-5 * time.Second), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "toolkit"), 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, "toolkit", "nvidia-container-runtime"), "#!/bin/sh", tt.installedAt)
			pid := filepath.Join(dir, "toolkit.pid")
			write(t, pid, "1", start)
			socket := filepath.Join(dir, "nri.sock")
			l, err := net.Listen("unix", socket)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			err = run(t, configuredProbe, "ENABLE_NRI_PLUGIN=true", "RUNTIME=containerd", "ROOT="+dir, "TOOLKIT_PID_FILE="+pid,
				"NRI_SOCKET="+socket)
			if passes := err == nil; passes != tt.wantPasses {
				t.Errorf("probe passes = %v (%v), want %v", passes, err, tt.wantPasses)
			}
		})
	}
}

// The spec writer is ready while the management spec names the loaded
// driver once that driver's files are in its root; with no driver loaded,
// or one whose root is not mounted yet (a driver container loads its
// modules before it mounts its root), there is nothing to name.
func TestSpecNamesDriverProbe(t *testing.T) {
	for _, tt := range []struct {
		name, loaded, files, spec string // "" for none
		wantPasses                bool
	}{
		{"no driver loaded", "", "", "", true},
		{"spec of the loaded driver", "595.91.07", "595.91.07", specOf("595.91.07"), true},
		{"spec of the driver before", "595.91.07", "595.91.07", specOf("570.172.08"), false},
		{"no spec yet", "595.91.07", "595.91.07", "", false},
		{"new driver loaded, its root not mounted yet", "595.91.07", "570.172.08", specOf("570.172.08"), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			root, versionFile, spec := driverRoot(t, dir, tt.files), filepath.Join(dir, "version"), filepath.Join(dir, "spec.yaml")
			if tt.loaded != "" {
				write(t, versionFile, tt.loaded+"\n", time.Now())
			}
			if tt.spec != "" {
				write(t, spec, tt.spec, time.Now())
			}
			err := run(t, specNamesDriverProbe, "DRIVER_VERSION_FILE="+versionFile, "SPEC="+spec, "DRIVER_ROOT_CTR_PATH="+root)
			if passes := err == nil; passes != tt.wantPasses {
				t.Errorf("probe passes = %v (%v), want %v", passes, err, tt.wantPasses)
			}
		})
	}
}

// fakeCTK stands in for nvidia-ctk: generate prints a spec of the version
// its environment names under the driver root it is given; transform
// rewrites --from to --to, to --output or its output; system logs its
// arguments.
const fakeCTK = `#!/bin/sh
case "$1 $2" in
"cdi generate") for a; do case $a in --driver-root=*) r=${a#*=};; --dev-root=*) d=${a#*=};; esac; done
  echo "  path: $d/dev/nvidia-uvm"
  echo "  hostPath: $r/usr/lib/x86_64-linux-gnu/libcuda.so.$FAKE_VERSION" ;;
"cdi transform") o=; for a; do case $a in --from=*) f=${a#*=};; --to=*) to=${a#*=};; --output=*) o=${a#*=};; esac; done
  if [ -n "$o" ]; then sed "s|$f/|${to%/}/|" > "$o.tmp" && mv "$o.tmp" "$o"; else sed "s|$f/|${to%/}/|"; fi ;;
"system create-device-nodes") echo "$@" >> "$FAKE_LOG" ;;
*) exit 1 ;;
esac`

// The writer writes the spec again for a newly loaded driver once its
// files are there, through nvidia-ctk's generate and root transforms, from
// the roots the container sees to the host's; beside a host's driver it
// loads the modules and makes the control nodes first.
func TestCDISpecWriterWritesTheLoadedDriversSpec(t *testing.T) {
	for _, tt := range []struct {
		name           string
		devRoot        string // "" for the driver root
		hostDevRoot    string
		loadsModules   bool
		wantLibs, want string
	}{
		{name: "driver container", hostDevRoot: "/run/nvidia/driver",
			wantLibs: "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.595.91.07", want: "/run/nvidia/driver/dev/nvidia-uvm"},
		{name: "host driver at /", devRoot: "host", hostDevRoot: "/", loadsModules: true,
			wantLibs: "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.595.91.07", want: "  path: /dev/nvidia-uvm"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			install := filepath.Join(dir, "install")
			if err := os.MkdirAll(filepath.Join(install, "toolkit"), 0o755); err != nil {
				t.Fatal(err)
			}
			ctk := filepath.Join(install, "toolkit", "nvidia-ctk")
			write(t, ctk, fakeCTK, time.Now())
			if err := os.Chmod(ctk, 0o755); err != nil {
				t.Fatal(err)
			}
			root := driverRoot(t, dir, "595.91.07")
			devRoot := root
			if tt.devRoot != "" {
				devRoot = filepath.Join(dir, tt.devRoot)
			}
			versionFile, spec, log := filepath.Join(dir, "version"), filepath.Join(dir, "spec.yaml"), filepath.Join(dir, "log")
			write(t, versionFile, "595.91.07\n", time.Now())
			// A spec left by an earlier pod, naming the driver that runs:
			// written again once, for this pod's roots.
			write(t, spec, specOf("595.91.07"), time.Now().Add(-time.Hour))
			env := []string{"ROOT=" + install, "SPEC=" + spec, "DRIVER_VERSION_FILE=" + versionFile, "FAKE_VERSION=595.91.07",
				"FAKE_LOG=" + log, "DRIVER_ROOT_CTR_PATH=" + root, "NVIDIA_DRIVER_ROOT=/run/nvidia/driver",
				"DEV_ROOT_CTR_PATH=" + devRoot, "NVIDIA_DEV_ROOT=" + tt.hostDevRoot}
			if tt.loadsModules {
				env = append(env, "LOAD_MODULES_ROOT=/host")
			}

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "sh", "-c", cdiSpecScript)
			cmd.Env = append(os.Environ(), env...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			for {
				got, _ := os.ReadFile(spec)
				if strings.Contains(string(got), "nvidia-uvm") {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("the spec was never written again: %q", got)
				case <-time.After(50 * time.Millisecond):
				}
			}
			got, _ := os.ReadFile(spec)
			for _, want := range []string{tt.wantLibs, tt.want} {
				if !strings.Contains(string(got), want) {
					t.Errorf("spec %q does not name %s, the host's path", got, want)
				}
			}
			calls, _ := os.ReadFile(log)
			if !strings.Contains(string(calls), "system create-device-nodes --control-devices") {
				t.Errorf("no control device nodes made: %q", calls)
			}
			if loaded := strings.Contains(string(calls), "--load-kernel-modules --root=/host"); loaded != tt.loadsModules {
				t.Errorf("modules loaded: %v, want %v (%q)", loaded, tt.loadsModules, calls)
			}
			if err := run(t, specNamesDriverProbe, env...); err != nil {
				t.Errorf("not ready with the spec written: %v", err)
			}
		})
	}
}

// driverRoot makes a driver root holding the libraries of a version, "" for
// none.
func driverRoot(t *testing.T, dir, version string) string {
	t.Helper()
	root := filepath.Join(dir, "driver-root")
	lib := filepath.Join(root, "usr/lib/x86_64-linux-gnu")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	if version != "" {
		write(t, filepath.Join(lib, "libnvidia-ml.so."+version), "", time.Now())
	}
	return root
}

func specOf(version string) string {
	return "devices:\n- name: all\n  containerEdits:\n    mounts:\n    - hostPath: /run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so." + version + "\n"
}

func run(t *testing.T, script string, env ...string) error {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), env...)
	return cmd.Run()
}

func write(t *testing.T, path, content string, at time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}
