package benchenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on
// every Linux architecture Go supports).
const clockTicks = 100

// TreeCPU returns the CPU time (user and system) used so far by the
// processes rooted at roots and all their descendants still alive, read
// from /proc. A load driver calls it before and after a phase to know what
// the phase cost the machine, independent of what else ran on it.
func TreeCPU(roots ...int) time.Duration {
	type proc struct{ ppid, ticks int }
	procs := map[int]proc{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name may hold spaces: fields start after its ')'.
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		utime, _ := strconv.Atoi(f[11])
		stime, _ := strconv.Atoi(f[12])
		procs[pid] = proc{ppid: ppid, ticks: utime + stime}
	}
	in := map[int]bool{}
	for _, r := range roots {
		if r > 0 {
			in[r] = true
		}
	}
	var inTree func(pid int, depth int) bool
	inTree = func(pid, depth int) bool {
		if in[pid] {
			return true
		}
		p, ok := procs[pid]
		if !ok || p.ppid <= 1 || depth > 64 {
			return false
		}
		return inTree(p.ppid, depth+1)
	}
	ticks := 0
	for pid, p := range procs {
		if inTree(pid, 0) {
			ticks += p.ticks
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// RSS returns a process's resident set size and its peak (VmRSS, VmHWM)
// in bytes.
func RSS(pid int) (rss, peak int64) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		kb, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = kb << 10
		case "VmHWM":
			peak = kb << 10
		}
	}
	return rss, peak
}
