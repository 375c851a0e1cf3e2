package kernel

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
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
