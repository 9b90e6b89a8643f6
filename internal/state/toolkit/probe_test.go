package toolkit

import (
	"context"
	"os"
	"os/exec"
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
	runtime := RuntimeBinary(installDir)
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

// The CDI refresh container is ready while the management spec names the
// loaded driver's files, or no driver is loaded.
func TestSpecNamesDriverProbe(t *testing.T) {
	for _, tt := range []struct {
		name, loaded, spec string // "" for none
		wantPasses         bool
	}{
		{"no driver loaded", "", "", true},
		{"spec of the loaded driver", "595.91.07", specOf("595.91.07"), true},
		{"spec of the driver before", "595.91.07", specOf("570.172.08"), false},
		{"no spec yet", "595.91.07", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			versionFile, spec := filepath.Join(dir, "version"), filepath.Join(dir, "spec.yaml")
			if tt.loaded != "" {
				write(t, versionFile, tt.loaded+"\n", time.Now())
			}
			if tt.spec != "" {
				write(t, spec, tt.spec, time.Now())
			}
			err := run(t, specNamesDriverProbe, "DRIVER_VERSION_FILE="+versionFile, "SPEC="+spec)
			if passes := err == nil; passes != tt.wantPasses {
				t.Errorf("probe passes = %v (%v), want %v", passes, err, tt.wantPasses)
			}
		})
	}
}

// The refresh writes the spec again for a newly loaded driver, through
// nvidia-ctk's generate and root transform, from the driver root the
// container sees to the host's.
func TestCDIRefreshWritesTheLoadedDriversSpec(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "install")
	if err := os.MkdirAll(filepath.Join(root, "toolkit"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A stand-in for nvidia-ctk: generate prints a spec of the version
	// its environment names under the driver root it is given; transform
	// writes its input to --output, rewriting --from to --to, and logs
	// its arguments.
	fake := `#!/bin/sh
case "$2" in
generate) for a; do case $a in --driver-root=*) r=${a#*=};; esac; done
  echo "  hostPath: $r/usr/lib/libcuda.so.$FAKE_VERSION" ;;
transform) for a; do case $a in --from=*) f=${a#*=};; --to=*) to=${a#*=};; --output=*) o=${a#*=};; esac; done
  echo "$@" >> "$FAKE_LOG"; sed "s|$f|$to|" > "$o.tmp" && mv "$o.tmp" "$o" ;;
esac`
	write(t, filepath.Join(root, "toolkit", "nvidia-ctk"), fake, time.Now())
	if err := os.Chmod(filepath.Join(root, "toolkit", "nvidia-ctk"), 0o755); err != nil {
		t.Fatal(err)
	}
	versionFile, spec, log := filepath.Join(dir, "version"), filepath.Join(dir, "spec.yaml"), filepath.Join(dir, "log")
	write(t, versionFile, "595.91.07\n", time.Now())
	write(t, spec, specOf("570.172.08"), time.Now())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", cdiRefreshScript)
	cmd.Env = append(os.Environ(), "ROOT="+root, "SPEC="+spec, "DRIVER_VERSION_FILE="+versionFile, "FAKE_VERSION=595.91.07",
		"FAKE_LOG="+log, "DRIVER_ROOT_CTR_PATH=/driver-root", "NVIDIA_DRIVER_ROOT=/run/nvidia/driver")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	for {
		if err := run(t, specNamesDriverProbe, "DRIVER_VERSION_FILE="+versionFile, "SPEC="+spec); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the spec never named the loaded driver")
		case <-time.After(50 * time.Millisecond):
		}
	}
	got, _ := os.ReadFile(spec)
	if want := "/run/nvidia/driver/usr/lib/libcuda.so.595.91.07"; !strings.Contains(string(got), want) {
		t.Errorf("spec %q does not name %s, the host's path", got, want)
	}
	args, _ := os.ReadFile(log)
	if !strings.Contains(string(args), "--input=-") {
		t.Errorf("transform read %q, not the generated spec from its input", args)
	}
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
