package toolkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The readiness probe, run by this machine's sh against files whose
// modification times are whole seconds, as busybox's test (the toolkit
// image's sh from v1.20 on, coreutils/test.c) sees every file: a config
// written in the pid file's second is this run's.
func TestConfiguredProbeSeesWholeSeconds(t *testing.T) {
	start := time.Unix(1_767_225_600, 0)
	for _, tt := range []struct {
		name       string
		config     string // the config's content; "" writes none
		configAt   time.Time
		pidFile    bool
		wantPasses bool
	}{
		{"written in the pid file's second", RuntimeBinary, start, true, true},
		{"written a second later", RuntimeBinary, start.Add(time.Second), true, true},
		{"left by an earlier run", RuntimeBinary, start.Add(-5 * time.Second), true, false},
		{"naming another runtime", "runc", start.Add(time.Second), true, false},
		{"no config yet", "", start, true, false},
		{"no pid file: the toolkit has not started", RuntimeBinary, start, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			config, pid := filepath.Join(dir, "config.toml"), filepath.Join(dir, "toolkit.pid")
			if tt.config != "" {
				write(t, config, "runtime = "+tt.config, tt.configAt)
			}
			if tt.pidFile {
				write(t, pid, "1", start)
			}
			cmd := exec.Command("sh", "-c", configuredProbe)
			cmd.Env = append(os.Environ(), "RUNTIME=containerd", "RUNTIME_CONFIG="+config, "TOOLKIT_PID_FILE="+pid)
			err := cmd.Run()
			if passes := err == nil; passes != tt.wantPasses {
				t.Errorf("probe passes = %v (%v), want %v", passes, err, tt.wantPasses)
			}
		})
	}
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
