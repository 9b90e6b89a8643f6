package main

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"
)

func TestRSSPeakKeepsTheLargestReadingWhole(t *testing.T) {
	const mib = 1 << 20
	r := &rssPeak{}
	var told []uint64
	for _, s := range []rssSplit{{Anon: 10 * mib, File: 30 * mib}, {Anon: 35 * mib, File: 10 * mib}, {Anon: 30 * mib, File: 12 * mib},
		{Anon: 5 * mib, File: 5 * mib}, {Anon: 36 * mib, File: 10 * mib}, {Anon: 37 * mib, File: 10 * mib}} {
		if r.see(s) {
			told = append(told, s.total()/mib)
		}
	}
	// 46 MiB is a peak, but within peakStep of the 45 reported before it.
	if want := []uint64{40, 45, 47}; !slices.Equal(told, want) {
		t.Errorf("peaks reported at %v MiB, want %v", told, want)
	}
	// 37+10 is the largest total: its own split, not the largest of each.
	if got := r.get(); got != (rssSplit{Anon: 37 * mib, File: 10 * mib}) {
		t.Errorf("peak = %+v, want {Anon:37 MiB File:10 MiB}", got)
	}
}

func TestWatchRSSReadsALiveProcess(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	peaks := make(chan rssSplit, 1)
	r := watchRSS(ctx, os.Getpid(), 10*time.Millisecond, func(s rssSplit) {
		select {
		case peaks <- s:
		default:
		}
	})
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
	// The first reading is a peak of a Go process's whole size, far past
	// peakStep over nothing.
	select {
	case s := <-peaks:
		if s.total() < peakStep {
			t.Errorf("told of a peak of %+v", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not told of the first peak in 10 s")
	}
}
