package loadtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// What the harness reads from /proc about a process and its descendants.
// Memory is summed as PSS (smaps_rollup), which splits each shared page
// among the processes that map it: the sandboxes' Pythons share their
// libraries, and summing RSS would count those once per sandbox.

// procMem is the memory of one process or a sum of several, in bytes.
type procMem struct {
	RSS, PSS int64
}

func (m procMem) add(o procMem) procMem { return procMem{m.RSS + o.RSS, m.PSS + o.PSS} }

// memOf reads the RSS and PSS of pid from smaps_rollup; ok is false for a
// process that is gone.
func memOf(pid int) (procMem, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return procMem{}, false
	}
	var m procMem
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "Rss:":
			m.RSS = kb << 10
		case "Pss:":
			m.PSS = kb << 10
		}
	}
	return m, true
}

// stat is what /proc/PID/stat says: the parent, and the CPU time of the
// process with that of its children it has waited for.
type stat struct {
	ppid int
	cpu  time.Duration
}

// clockTick is USER_HZ, the unit of /proc's CPU times: 100 on every Linux
// the harness runs on.
const clockTick = 100

func statOf(pid int) (stat, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, false
	}
	// The command name, in parentheses, may hold spaces: the fields
	// start after its last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state): ppid is field 4, utime..cstime 14..17.
	if len(f) < 15 {
		return stat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	var ticks int64
	for _, s := range f[11:15] {
		n, _ := strconv.ParseInt(s, 10, 64)
		ticks += n
	}
	return stat{ppid: ppid, cpu: time.Duration(ticks) * time.Second / clockTick}, true
}

// descendants lists every process below pid, at one moment.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := statOf(p); ok {
			children[st.ppid] = append(children[st.ppid], p)
		}
	}
	var out []int
	queue := children[pid]
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, p)
		queue = append(queue, children[p]...)
	}
	return out
}

// threadsOf is the Threads line of /proc/PID/status.
func threadsOf(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}

// fdsOf counts the open file descriptors of pid.
func fdsOf(pid int) int {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(entries)
}

// dirsIn counts the directories in dir: the local backend keeps one per
// sandbox there, live or paused. A dir not made yet holds none.
func dirsIn(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			n++
		}
	}
	return n
}

// commsOf lists the command names of pids with how many of each, for the
// log: which processes a container is made of.
func commsOf(pids []int) string {
	count := map[string]int{}
	var order []string
	for _, p := range pids {
		data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "comm"))
		if err != nil {
			continue
		}
		c := strings.TrimSpace(string(data))
		if count[c] == 0 {
			order = append(order, c)
		}
		count[c]++
	}
	var parts []string
	for _, c := range order {
		parts = append(parts, fmt.Sprintf("%d %s", count[c], c))
	}
	return strings.Join(parts, ", ")
}
