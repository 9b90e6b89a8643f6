package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// clusterProcesses are the simulated cluster's processes whose CPU time a
// window reports, as hack/sim/up.sh names them in its pids file. On a
// machine with few cores they share it with the operator, so that where the
// rollout spends CPU beyond the floor says what the gates cost the
// cluster, not only the operator.
func clusterProcesses() []string {
	return []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "simagent", "pod-runner"}
}

// cpuByProcess is CPU seconds by process name.
type cpuByProcess map[string]float64

// clusterCPU reads the CPU time each process of the simulated cluster in
// dir has used so far, with its descendants' (pod-runner's kubectl calls,
// and the kubectl watch it keeps running, which no one reaps until its
// watch ends). A process that is gone (crashed, or stopped) is left out:
// its name then has no figure for the window, rather than failing the run.
func clusterCPU(dir string) (cpuByProcess, error) {
	f, err := os.Open(filepath.Join(dir, "pids"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tree, err := processTree()
	if err != nil {
		return nil, err
	}
	wanted := clusterProcesses()
	out := cpuByProcess{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, pidText, ok := strings.Cut(sc.Text(), " ")
		if !ok || !slices.Contains(wanted, name) {
			continue
		}
		pid, err := strconv.Atoi(pidText)
		if err != nil {
			return nil, fmt.Errorf("%s/pids: %q: %w", dir, sc.Text(), err)
		}
		if _, live := tree.stats[pid]; live {
			out[name] += tree.cpuWithDescendants(pid)
		}
	}
	return out, sc.Err()
}

// userHZ is the kernel's clock tick for /proc times, as procfs assumes.
const userHZ = 100

// procTree is every process's stat and children, read once.
type procTree struct {
	stats    map[int]procfs.ProcStat
	children map[int][]int
}

func processTree() (procTree, error) {
	procs, err := procfs.AllProcs()
	if err != nil {
		return procTree{}, err
	}
	t := procTree{stats: map[int]procfs.ProcStat{}, children: map[int][]int{}}
	for _, p := range procs {
		st, err := p.Stat()
		if errors.Is(err, fs.ErrNotExist) {
			continue // exited since the listing
		}
		if err != nil {
			return procTree{}, err
		}
		t.stats[p.PID] = st
		t.children[st.PPID] = append(t.children[st.PPID], p.PID)
	}
	return t, nil
}

// cpuWithDescendants is pid's CPU time and that of every descendant still
// running, each with its reaped children's: a child that exits moves its
// time into its parent's, so that the sum only grows.
func (t procTree) cpuWithDescendants(pid int) float64 {
	st := t.stats[pid]
	sum := st.CPUTime() + float64(st.CUTime+st.CSTime)/userHZ
	for _, child := range t.children[pid] {
		sum += t.cpuWithDescendants(child)
	}
	return sum
}

// since is the CPU each process used from an earlier reading to this one;
// a process missing from either reading has none.
func (c cpuByProcess) since(earlier cpuByProcess) cpuByProcess {
	out := cpuByProcess{}
	for name, v := range c {
		if before, ok := earlier[name]; ok {
			out[name] = v - before
		}
	}
	return out
}

// total is the CPU of every process together.
func (c cpuByProcess) total() float64 {
	var sum float64
	for _, v := range c {
		sum += v
	}
	return sum
}
