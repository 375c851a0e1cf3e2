package kernel

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseHeader(t *testing.T) {
	for _, tt := range []struct {
		line string
		want frameHeader
		err  string
	}{
		{"TERP 0af3 out 5", frameHeader{"0af3", kindOut, 5}, ""},
		{"TERP 0af3 err 0", frameHeader{"0af3", kindErr, 0}, ""},
		{"TERP 0af3 out 65536", frameHeader{"0af3", kindOut, 65536}, ""},
		{"TERP 0af3 done 1048576", frameHeader{"0af3", kindDone, 1 << 20}, ""},
		{"TERP 0af3 ready 12", frameHeader{"0af3", kindReady, 12}, ""},
		{"TERP 0af3 out 65537", frameHeader{}, "out frames are at most 65536 bytes"},
		{"TERP 0af3 done 1048577", frameHeader{}, "at most"},
		{"TERP 0af3 out 99999999999", frameHeader{}, "not a decimal"},
		{"TERP 0af3 out -1", frameHeader{}, "not a decimal"},
		{"TERP 0af3 out +1", frameHeader{}, "not a decimal"},
		{"TERP 0af3 out 01", frameHeader{}, "not a decimal"},
		{"TERP 0af3 out ", frameHeader{}, "not a decimal"},
		{"TERP 0af3 out 1 ", frameHeader{}, "want"},
		{"TERP 0af3  out 1", frameHeader{}, "want"},
		{"TERP 0AF3 out 1", frameHeader{}, "nonce"},
		{"TERP  out 1", frameHeader{}, "nonce"},
		{"TERP " + strings.Repeat("a", 65) + " out 1", frameHeader{}, "nonce"},
		{"TERP 0af3 log 1", frameHeader{}, "unknown kind"},
		{"terp 0af3 out 1", frameHeader{}, "want"},
		{"garbage", frameHeader{}, "want"},
		{"", frameHeader{}, "want"},
	} {
		h, err := parseHeader(tt.line)
		if tt.err == "" {
			if err != nil || h != tt.want {
				t.Errorf("parseHeader(%q) = %+v, %v; want %+v", tt.line, h, err, tt.want)
			}
			continue
		}
		if err == nil || !errors.Is(err, errProtocol) || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("parseHeader(%q) = %+v, %v; want a protocol error saying %q", tt.line, h, err, tt.err)
		}
	}
}

func TestFrameReader(t *testing.T) {
	t.Run("frames", func(t *testing.T) {
		fr := newFrameReader(strings.NewReader("TERP ab out 5\nhelloTERP ab done 2\n{}"))
		h, err := fr.header()
		if err != nil || h != (frameHeader{"ab", kindOut, 5}) {
			t.Fatalf("header = %+v, %v", h, err)
		}
		var out bytes.Buffer
		if err := fr.copyPayload(&out, h.size); err != nil || out.String() != "hello" {
			t.Fatalf("payload = %q, %v", out.String(), err)
		}
		h, err = fr.header()
		if err != nil || h.kind != kindDone {
			t.Fatalf("header = %+v, %v", h, err)
		}
		if p, err := fr.payload(h.size); err != nil || string(p) != "{}" {
			t.Fatalf("payload = %q, %v", p, err)
		}
		if _, err := fr.header(); err != io.EOF {
			t.Errorf("at the end: %v, want io.EOF", err)
		}
	})
	for _, tt := range []struct{ name, stream string }{
		{"no newline", "TERP ab out 5"},
		{"endless header", strings.Repeat("T", 10<<20)},
		{"short payload", "TERP ab out 5\nhel"},
		{"short control", "TERP ab done 5\n{}"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fr := newFrameReader(strings.NewReader(tt.stream))
			h, err := fr.header()
			if err == nil {
				if h.kind == kindOut {
					err = fr.copyPayload(io.Discard, h.size)
				} else {
					_, err = fr.payload(h.size)
				}
			}
			if !errors.Is(err, errProtocol) {
				t.Errorf("error %v, want a protocol error", err)
			}
		})
	}
}

// TestFrameStall feeds frames that stop halfway, as when the code writes
// part of one into the channel: the watch must call them broken, and must
// leave alone frames that arrive whole, however long the gaps between them.
func TestFrameStall(t *testing.T) {
	const limit = 50 * time.Millisecond
	for _, tt := range []struct {
		name  string
		parts []string // written with a pause of 10*limit before each but the first
		want  string   // in the error; "" for none
	}{
		{"whole frames with gaps", []string{"TERP ab out 5\nhello", "TERP ab out 2\nhi", "TERP ab done 2\n{}"}, ""},
		{"header cut off", []string{"TERP ab ou", "t 5\nhello"}, "stopped inside a frame header"},
		{"payload cut off", []string{"TERP ab out 5\nhel", "lo"}, "stopped inside a frame's payload"},
		{"control payload cut off", []string{"TERP ab done 2\n{", "}"}, "stopped inside a frame's payload"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			broken := make(chan error, 1)
			fr := newFrameReader(pr)
			fr.watchStalls(limit, func(err error) {
				broken <- err
				pw.CloseWithError(err)
			})
			go func() {
				for i, p := range tt.parts {
					if i > 0 {
						time.Sleep(10 * limit)
					}
					if _, err := pw.Write([]byte(p)); err != nil {
						return
					}
				}
				pw.Close()
			}()
			var err error
			for err == nil {
				var h frameHeader
				if h, err = fr.header(); err == nil {
					err = fr.copyPayload(io.Discard, h.size)
				}
			}
			select {
			case err := <-broken:
				if tt.want == "" || !errors.Is(err, errProtocol) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("broken(%v), want %q", err, tt.want)
				}
			default:
				if tt.want != "" {
					t.Errorf("the stream ended (%v) without a stall, want %q", err, tt.want)
				} else if err != io.EOF {
					t.Errorf("error %v, want io.EOF", err)
				}
			}
		})
	}
}

// TestStrictFrames checks that only the open run's frames are taken: any
// other frame is one the code wrote, and its size, if honoured, would make
// the worker's real frames its payload.
func TestStrictFrames(t *testing.T) {
	for _, tt := range []struct {
		name, stream string
		want         string // in the protocol error; "" when the stream is fine
	}{
		{"a run", "TERP cc ready 2\n{}TERP aa out 2\nhiTERP aa err 1\nxTERP aa done 2\n{}", ""},
		{"another nonce", "TERP cc ready 2\n{}TERP bb out 2\nhi", "kind out with nonce bb belongs to no run in progress"},
		{"another nonce's done", "TERP cc ready 2\n{}TERP bb done 2\n{}", "kind done with nonce bb belongs to no run"},
		{"after done", "TERP cc ready 2\n{}TERP aa done 2\n{}TERP aa out 1\nx", "kind out with nonce aa belongs to no run"},
		{"two dones", "TERP cc ready 2\n{}TERP aa done 2\n{}TERP aa done 2\n{}", "kind done with nonce aa belongs to no run"},
		{"second ready", "TERP cc ready 2\n{}TERP cc ready 2\n{}", "a second ready frame"},
		{"ready of another worker", "TERP dd ready 2\n{}", "a ready frame with nonce dd, not the worker's"},
		{"warm during a run", "TERP cc ready 2\n{}TERP aa out 1\nxTERP cc warm 2\n{}TERP aa done 2\n{}", ""},
		{"warm before ready", "TERP cc warm 2\n{}", "a warm frame before the ready frame"},
		{"second warm", "TERP cc ready 2\n{}TERP cc warm 2\n{}TERP cc warm 2\n{}", "a second warm frame"},
		{"warm with a run's nonce", "TERP cc ready 2\n{}TERP aa warm 2\n{}", "a warm frame with nonce aa, not the worker's"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &worker{readyNonce: "cc", ready: make(chan struct{}), warm: make(chan struct{}), prewarming: true,
				gone: make(chan struct{})}
			s := newRunSink(Options{MaxStdout: 100, MaxStderr: 100}, nil)
			s.nonce = "aa"
			w.begin(s)
			err := w.dispatch(newFrameReader(strings.NewReader(tt.stream)))
			if tt.want == "" {
				if err != io.EOF {
					t.Errorf("dispatch = %v, want io.EOF", err)
				}
				return
			}
			if !errors.Is(err, errProtocol) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("dispatch = %v, want a protocol error saying %q", err, tt.want)
			}
		})
	}
}
