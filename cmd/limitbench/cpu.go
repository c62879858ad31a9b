package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// serverProcess is a process that serves a target: a limitnode node, the
// reference's service or its redis-server, or limitbench itself when the
// nodes run inside it. measure reads its CPU time over the measured window.
type serverProcess struct {
	// Name says what the process is, with its role when it has one
	// ("n1 (leader)", "ratelimit", "redis-server").
	Name string
	PID  int
}

// serving is a target that knows the processes serving it.
type serving interface{ servers() []serverProcess }

// processCPU is what one process spent over a measured window.
type processCPU struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// CPUSeconds is user plus system time.
	CPUSeconds float64 `json:"cpu_seconds"`
	// Cores is CPUSeconds over the window's length: how many cores it kept busy.
	Cores float64 `json:"cores"`
	// MicrosPerDecision is CPUSeconds over the window's decisions, in µs.
	MicrosPerDecision float64 `json:"us_per_decision"`
}

// userHZ is the unit of /proc/PID/stat's times: Linux reports them in
// USER_HZ ticks, 100 a second on every architecture Go supports (the
// kernel's own tick rate is hidden behind it).
const userHZ = 100

// cpuTime is a process's user plus system CPU time so far, from
// /proc/PID/stat (Linux only).
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read the CPU time of process %d: %w", pid, err)
	}
	return parseCPUTime(string(data))
}

// parseCPUTime reads utime and stime (fields 14 and 15) from the text of
// /proc/PID/stat. The command name (field 2) is in parentheses and may hold
// spaces and parentheses itself, so fields are counted from the last ')'.
func parseCPUTime(stat string) (time.Duration, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc stat %q: no command name", stat)
	}
	// After the name: field 3 (state) is index 0, so field n is index n-3.
	fields := strings.Fields(stat[end+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("/proc stat %q: %d fields after the name", stat, len(fields))
	}
	var ticks int64
	for _, i := range []int{utime, stime} {
		n, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat field %d %q: %w", i+3, fields[i], err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// cpuWatch is a reading of several processes' CPU times, to subtract from
// a later one.
type cpuWatch struct {
	procs []serverProcess
	start []time.Duration
	err   error
}

// watchCPU reads the CPU time of procs now.
func watchCPU(procs []serverProcess) *cpuWatch {
	w := &cpuWatch{procs: procs}
	for _, p := range procs {
		t, err := cpuTime(p.PID)
		if err != nil && w.err == nil {
			w.err = err
		}
		w.start = append(w.start, t)
	}
	return w
}

// since returns what each process spent since watchCPU over a window of
// seconds in which decisions were made.
func (w *cpuWatch) since(seconds float64, decisions int64) ([]processCPU, error) {
	if w.err != nil {
		return nil, w.err
	}
	out := make([]processCPU, 0, len(w.procs))
	for i, p := range w.procs {
		t, err := cpuTime(p.PID)
		if err != nil {
			return nil, err
		}
		spent := (t - w.start[i]).Seconds()
		c := processCPU{Name: p.Name, PID: p.PID, CPUSeconds: spent}
		if seconds > 0 {
			c.Cores = spent / seconds
		}
		if decisions > 0 {
			c.MicrosPerDecision = spent * 1e6 / float64(decisions)
		}
		out = append(out, c)
	}
	return out, nil
}

// selfProcess is limitbench's own process: the load, and with -in-process
// the nodes too.
func selfProcess(name string) serverProcess {
	return serverProcess{Name: name, PID: os.Getpid()}
}
