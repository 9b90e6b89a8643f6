package main

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestRSSPeakKeepsTheLargestReadingWhole(t *testing.T) {
	r := &rssPeak{}
	for _, s := range []rssSplit{{Anon: 10, File: 30}, {Anon: 35, File: 10}, {Anon: 30, File: 12}, {Anon: 5, File: 5}} {
		r.see(s)
	}
	// 35+10 is the largest total: its own split, not the largest of each.
	if got := r.get(); got != (rssSplit{Anon: 35, File: 10}) {
		t.Errorf("peak = %+v, want {Anon:35 File:10}", got)
	}
}

func TestWatchRSSReadsALiveProcess(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := watchRSS(ctx, os.Getpid(), 10*time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for r.get().total() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no reading of this process's RSS in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := r.get(); got.Anon == 0 || got.File == 0 {
		t.Errorf("this process's RSS read as %+v: a Go test binary has both", got)
	}
}
