package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
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
// dir has used so far, its waited-for children's included (pod-runner's
// kubectl calls).
func clusterCPU(dir string) (cpuByProcess, error) {
	f, err := os.Open(filepath.Join(dir, "pids"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := cpuByProcess{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, pidText, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidText)
		if err != nil {
			return nil, fmt.Errorf("%s/pids: %q: %w", dir, sc.Text(), err)
		}
		p, err := procfs.NewProc(pid)
		if err != nil {
			return nil, fmt.Errorf("%s (pid %d): %w", name, pid, err)
		}
		st, err := p.Stat()
		if err != nil {
			return nil, fmt.Errorf("%s (pid %d): %w", name, pid, err)
		}
		children := float64(st.CUTime+st.CSTime) / userHZ
		out[name] += st.CPUTime() + children
	}
	return out, sc.Err()
}

// userHZ is the kernel's clock tick for /proc times, as procfs assumes.
const userHZ = 100

// since is the CPU each process used from an earlier reading to this one.
func (c cpuByProcess) since(earlier cpuByProcess) cpuByProcess {
	out := cpuByProcess{}
	for name, v := range c {
		out[name] = v - earlier[name]
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
