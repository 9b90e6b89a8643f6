package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// cpuProfiles lets one CPU profile run at a time, as the operator's pprof
// endpoint does: a second one would fail there.
type cpuProfiles struct{ running sync.Mutex }

// save takes a CPU profile over the next seconds, in the background, unless
// one still runs (a phase shorter than the rollout's profile): then it says
// so and takes none.
func (c *cpuProfiles) save(ctx context.Context, log io.Writer, pprof, dir, name string, seconds int) {
	if !c.running.TryLock() {
		progress(log, "profile %s: not taken, an earlier CPU profile still runs", name)
		return
	}
	go func() {
		defer c.running.Unlock()
		saveProfileOver(ctx, log, pprof, dir, name, fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds),
			time.Duration(seconds)*time.Second)
	}()
}

// saveProfile fetches one pprof profile from the operator into dir/name.
// Failing to profile does not fail the benchmark: it is logged.
func saveProfile(ctx context.Context, log io.Writer, pprof, dir, name, path string) {
	saveProfileOver(ctx, log, pprof, dir, name, path, 0)
}

// saveProfileOver is saveProfile of a profile that covers the next span
// (a CPU profile's seconds): it is given that long and 5 minutes more.
func saveProfileOver(ctx context.Context, log io.Writer, pprof, dir, name, path string, span time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, span+5*time.Minute)
	defer cancel()
	err := func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pprof+path, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		// Written aside and renamed once whole: a profile cut short (the
		// operator killed, the run stopped) leaves the last one in place.
		path := filepath.Join(dir, name)
		f, err := os.CreateTemp(dir, name+".*")
		if err != nil {
			return err
		}
		defer os.Remove(f.Name())
		if _, err := io.Copy(f, resp.Body); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		return os.Rename(f.Name(), path)
	}()
	if err != nil {
		progress(log, "profile %s: %v", name, err)
	}
}

// saveAPIServerProfile takes a CPU profile of the simulated API server over
// the next seconds, in the background, through its own /debug/pprof: on a
// small machine it is the busiest process of a rollout, and what the
// operator asks of it shows there. Failing to profile is logged.
func saveAPIServerProfile(ctx context.Context, log io.Writer, rc rest.Interface, dir, name string, seconds int) {
	go func() {
		ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second+time.Minute)
		defer cancel()
		err := func() error {
			body, err := rc.Get().AbsPath("/debug/pprof/profile").Param("seconds", fmt.Sprint(seconds)).
				Timeout(time.Duration(seconds)*time.Second + 30*time.Second).DoRaw(ctx)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, name), body, 0o644)
		}()
		if err != nil {
			progress(log, "profile %s: %v", name, err)
		}
	}()
}
