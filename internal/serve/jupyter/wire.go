package jupyter

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The messaging protocol's version terp's kernels speak.
const protocolVersion = "5.3"

// subprotocolV1 is the websocket subprotocol of Jupyter Server's binary
// message format, which JupyterLab offers; a client that offers none gets
// the legacy JSON format.
const subprotocolV1 = "v1.kernel.websocket.jupyter.org"

// header is a message's header.
type header struct {
	MsgID    string `json:"msg_id"`
	MsgType  string `json:"msg_type"`
	Username string `json:"username"`
	Session  string `json:"session"`
	Date     string `json:"date"`
	Version  string `json:"version"`
}

// message is one Jupyter message, as both websocket formats carry it.
// ParentHeader and Metadata stay raw: a reply gives the request's header
// back exactly as it came.
type message struct {
	Channel      string          `json:"channel"`
	Header       header          `json:"header"`
	ParentHeader json.RawMessage `json:"parent_header"`
	Metadata     json.RawMessage `json:"metadata"`
	Content      json.RawMessage `json:"content"`
}

// legacy is a message in the legacy JSON format, where msg_id and msg_type
// also stand at the top level (as Jupyter Server's Session writes them, and
// as Open WebUI reads them).
type legacy struct {
	MsgID        string          `json:"msg_id"`
	MsgType      string          `json:"msg_type"`
	Channel      string          `json:"channel"`
	Header       header          `json:"header"`
	ParentHeader json.RawMessage `json:"parent_header"`
	Metadata     json.RawMessage `json:"metadata"`
	Content      json.RawMessage `json:"content"`
	Buffers      []any           `json:"buffers"`
}

// encodeLegacy is m in the legacy JSON format.
func encodeLegacy(m message) ([]byte, error) {
	return json.Marshal(legacy{MsgID: m.Header.MsgID, MsgType: m.Header.MsgType, Channel: m.Channel, Header: m.Header,
		ParentHeader: orEmpty(m.ParentHeader), Metadata: orEmpty(m.Metadata), Content: orEmpty(m.Content), Buffers: []any{}})
}

// decodeLegacy reads a message in the legacy JSON format. A message that
// names no channel is the shell's, as Jupyter Server takes it.
func decodeLegacy(b []byte) (message, error) {
	var l legacy
	if err := json.Unmarshal(b, &l); err != nil {
		return message{}, fmt.Errorf("a message that is not JSON: %w", err)
	}
	m := message{Channel: l.Channel, Header: l.Header, ParentHeader: l.ParentHeader, Metadata: l.Metadata, Content: l.Content}
	if m.Channel == "" {
		m.Channel = "shell"
	}
	return m, nil
}

// encodeV1 is m in Jupyter Server's binary v1 format: the number of
// offsets, the offsets (little-endian uint64s, from the frame's start),
// then the channel and the header, parent header, metadata and content as
// JSON.
func encodeV1(m message) ([]byte, error) {
	h, err := json.Marshal(m.Header)
	if err != nil {
		return nil, err
	}
	parts := [][]byte{[]byte(m.Channel), h, orEmpty(m.ParentHeader), orEmpty(m.Metadata), orEmpty(m.Content)}
	offsets := make([]uint64, 0, len(parts)+1)
	at := uint64(8 * (1 + len(parts) + 1))
	offsets = append(offsets, at)
	for _, p := range parts {
		at += uint64(len(p))
		offsets = append(offsets, at)
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(offsets)))
	for _, o := range offsets {
		out = binary.LittleEndian.AppendUint64(out, o)
	}
	for _, p := range parts {
		out = append(out, p...)
	}
	return out, nil
}

// decodeV1 reads a message in the binary v1 format, refusing a frame
// whose offsets do not fit it.
func decodeV1(b []byte) (message, error) {
	bad := errors.New("a binary message whose offsets do not fit it")
	if len(b) < 8 {
		return message{}, bad
	}
	n := binary.LittleEndian.Uint64(b)
	if n < 6 || n > 1<<10 || uint64(len(b)) < 8*(n+1) {
		return message{}, bad
	}
	offsets := make([]uint64, n)
	for i := range offsets {
		offsets[i] = binary.LittleEndian.Uint64(b[8*(i+1):])
		if offsets[i] > uint64(len(b)) || (i > 0 && offsets[i] < offsets[i-1]) || offsets[0] < 8*(n+1) {
			return message{}, bad
		}
	}
	part := func(i int) []byte { return b[offsets[i]:offsets[i+1]] }
	m := message{Channel: string(part(0)), ParentHeader: part(2), Metadata: part(3), Content: part(4)}
	if err := json.Unmarshal(part(1), &m.Header); err != nil {
		return message{}, fmt.Errorf("a binary message whose header is not JSON: %w", err)
	}
	return m, nil
}

func orEmpty(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || string(b) == "null" {
		return json.RawMessage("{}")
	}
	return b
}

// newUUID is a random (version 4) UUID, the form Jupyter's clients expect
// of kernel, session and message ids.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// isUUID reports whether s has a UUID's form, as kernel ids do.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// now is a message's or model's time, as Jupyter writes it.
func now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000000Z") }
