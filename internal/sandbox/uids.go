package sandbox

import (
	"fmt"
	"strconv"
	"strings"
)

// UIDRange is a block of host user ids, First to First+Count-1, that a
// backend gives its sandboxes when terp runs as root: each sandbox runs as an
// unprivileged host uid of its own, so its code is never host root and two
// sandboxes never share a uid.
type UIDRange struct {
	First uint32
	Count uint32
}

// DefaultUIDs starts at 0x70000000, just above the block systemd-nspawn
// picks container ranges from (0x00080000 to 0x6FFF0000) and in the range
// systemd leaves unassigned, far from /etc/subuid's usual 100000 and up and
// below 2^31, where some tools misread uids as negative.
var DefaultUIDs = UIDRange{First: 0x70000000, Count: 65536}

// Last is the range's highest uid.
func (r UIDRange) Last() uint32 { return r.First + r.Count - 1 }

// Contains reports whether uid is in the range.
func (r UIDRange) Contains(uid uint32) bool { return uid >= r.First && uid-r.First < r.Count }

// String is the FIRST-LAST form ParseUIDRange reads.
func (r UIDRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last()) }

// ParseUIDRange reads "FIRST-LAST", both inclusive. The range must hold at
// least two uids (the backend keeps one for its own checks) and stay clear
// of the uids a system gives its users and services (below 65536).
func ParseUIDRange(s string) (UIDRange, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return UIDRange{}, fmt.Errorf("%q is not FIRST-LAST, e.g. %s", s, DefaultUIDs)
	}
	first, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	last, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	switch {
	case err1 != nil || err2 != nil:
		return UIDRange{}, fmt.Errorf("%q is not FIRST-LAST with two numbers, e.g. %s", s, DefaultUIDs)
	case first < 65536:
		return UIDRange{}, fmt.Errorf("%q starts below 65536, among the uids of the system's own users", s)
	case last <= first:
		return UIDRange{}, fmt.Errorf("%q must hold at least two uids, FIRST below LAST", s)
	case last >= 1<<32-1:
		return UIDRange{}, fmt.Errorf("%q ends at %d, which is no valid uid", s, last)
	}
	return UIDRange{First: uint32(first), Count: uint32(last - first + 1)}, nil
}
