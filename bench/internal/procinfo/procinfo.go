// Package procinfo reads the machine and process facts the benchmarks report, from
// Linux's /proc: CPU model, memory size and a process's peak RSS (VmHWM).
package procinfo

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// field returns the value after "key:" on the first line of a /proc file that has it.
func field(path, key string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// kib parses a "/proc" size such as "123456 kB" into KiB.
func kib(v string) float64 {
	var n float64
	fmt.Sscanf(v, "%f", &n)
	return n
}

// CPUModel is the first "model name" of /proc/cpuinfo, or "" when unknown.
func CPUModel() string {
	v, _ := field("/proc/cpuinfo", "model name")
	return v
}

// MemTotal is the machine's memory as "23.5 GiB", or "" when unknown.
func MemTotal() string {
	v, ok := field("/proc/meminfo", "MemTotal")
	if !ok {
		return ""
	}
	return fmt.Sprintf("%.1f GiB", kib(v)/1024/1024)
}

// PeakRSSMB is the process's peak resident set size (VmHWM) in MiB, or −1 when the
// process is gone.
func PeakRSSMB(pid int) float64 {
	v, ok := field(fmt.Sprintf("/proc/%d/status", pid), "VmHWM")
	if !ok {
		return -1
	}
	return kib(v) / 1024
}
