package serve

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A body a handler read in part, or whole, is forwarded whole, as often
// as it is asked for (a forward, then the run here when the replica did
// not answer).
func TestReplayableBodyIsWholeAgain(t *testing.T) {
	srv := &Server{mux: http.NewServeMux()}
	r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"model": "m"}`))
	head := make([]byte, 5)
	srv.replayable(r, &route{})
	if _, err := io.ReadFull(r.Body, head); err != nil || string(head) != `{"mod` {
		t.Fatalf("read %q, %v", head, err)
	}
	for range 2 {
		again, _ := r.GetBody()
		if b, err := io.ReadAll(again); err != nil || string(b) != `{"model": "m"}` {
			t.Errorf("GetBody gave %q, %v", b, err)
		}
	}
	if rest, _ := io.ReadAll(r.Body); string(rest) != `el": "m"}` {
		t.Errorf("the handler's body went on with %q", rest)
	}
}
